"""A remote that attacks whoever syncs with it (tests/hostile.py builds it): nothing of it runs here, whatever it
plants, through every way gitmail talks to it."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from gitmail import mailbox
from gitmail.store import gitcmd
from gitmail.store.repository import Store
from gitmail.sync import engine as sync
from gitmail.sync import quick as synccheck
from tests.conftest import CliRunner, run_gitmail
from tests.hostile import KINDS, HostileRemote
from tests.syncing import bare_remote, git_daemon, machine, refs_and_files

URL_FORMS = ("path", "file", "symlink", "file-symlink")


@pytest.fixture(autouse=True)
def no_racy_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(synccheck, "RACY_SECONDS", 0.0)


def victim(tmp_path: Path, url: str | None = None, *, auto: bool = False) -> Store:
    """The machine that syncs with the hostile remote, holding one message of its own."""
    from gitmail.sync import remotes

    store = machine(tmp_path / "machines", "laptop")
    if url is not None:
        remotes.add_remote(store, name="origin", url=url, auto=auto)
    mailbox.send(store, sender="api", to="web", subject="from the victim")
    return store


# -- no code of the remote's runs here -------------------------------------------------------------------------


@pytest.mark.parametrize("form", URL_FORMS)
def test_sync_runs_no_hook_or_command_of_a_local_remote(
    tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    remote = HostileRemote.build(tmp_path / "remote")
    box = victim(tmp_path, remote.urls()[form])
    monkeypatch.setenv("GITMAIL_DIR", str(box.path))
    result = cli("sync")
    assert (result.code, result.err) == (0, "gitmail: synced with origin: 1 message new here, 1 message new there\n")
    assert cli("sync").err == "gitmail: origin: up to date\n"  # the quick check's ls-remote
    assert remote.markers() == []
    assert len(remote.listing()) == 3  # the honest message, the victim's, the format file: sync still works


@pytest.mark.parametrize("form", URL_FORMS)
def test_remote_add_and_the_first_sync_run_nothing_of_a_local_remote(
    tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    remote = HostileRemote.build(tmp_path / "remote")
    box = victim(tmp_path)
    monkeypatch.setenv("GITMAIL_DIR", str(box.path))
    assert cli("remote", "add", "origin", remote.urls()[form]).code == 0
    result = cli("sync")
    assert (result.code, result.err) == (0, "gitmail: synced with origin: 1 message new here, 1 message new there\n")
    assert remote.markers() == []


@pytest.mark.parametrize("form", URL_FORMS)
def test_the_background_sync_runs_nothing_of_a_local_remote(tmp_path: Path, form: str) -> None:
    remote = HostileRemote.build(tmp_path / "remote")
    box = victim(tmp_path, remote.urls()[form], auto=True)
    api = tmp_path / "api"
    subprocess.run(["git", "init", "-q", str(api)], check=True)
    done = run_gitmail("send", "--to", "web", "-s", "pushed by itself", cwd=api, env={"GITMAIL_DIR": str(box.path)})
    assert done.returncode == 0, done.stderr
    message_id = done.stdout.strip()
    deadline = time.monotonic() + 60
    while not any(path.endswith(message_id) for path in remote.listing()):
        assert time.monotonic() < deadline, "the background sync did not push"
        time.sleep(0.05)
    with sync.sync_lock(box, wait=60) as fd:  # the background sync is over
        assert fd is not None
    assert remote.markers() == []


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "sink"])
@pytest.mark.parametrize("form", ["path", "file"])
def test_no_kind_of_remote_runs_anything_here(
    tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch, kind: str, form: str
) -> None:
    """A core.hooksPath of the remote's own, a checkout that a push would update, a proc-receive hook: what it
    plants never runs; where the push needs it, the remote refuses the push, in one line, changing nothing here."""
    remote = HostileRemote.build(tmp_path / "remote", kind)
    box = victim(tmp_path, remote.urls()[form])
    monkeypatch.setenv("GITMAIL_DIR", str(box.path))
    result = cli("sync")
    if kind == "hookspath":
        assert (result.code, result.err) == (
            0,
            "gitmail: synced with origin: 1 message new here, 1 message new there\n",
        )
    else:
        assert result.code == 1 and result.err.count("\n") == 1, result
        assert result.err.startswith(f"gitmail: error: origin: {remote.urls()[form]} refused the push: "), result
    assert remote.markers() == []


def test_a_url_that_the_users_config_turns_into_a_local_path_or_a_command_is_refused(
    tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch, home: Path
) -> None:
    """`url.<base>.insteadOf` in the user's own git config (which sync reads, for authentication) must not turn a
    URL gitmail took for a network one into a local path, or into a transport that runs a command."""
    remote = HostileRemote.build(tmp_path / "remote")
    ran = tmp_path / "ran"
    (home / ".gitconfig").write_text(
        f'[url "{remote.path.parent}/"]\n\tinsteadOf = shared:\n'
        f'[url "ext::sh -c touch% {ran}% #"]\n\tinsteadOf = evil:\n'
        "[protocol]\n\tallow = always\n"
    )
    for url in ("shared:sink.git", "evil:mail.git"):
        box = victim(tmp_path / url.partition(":")[0], url)
        monkeypatch.setenv("GITMAIL_DIR", str(box.path))
        before = refs_and_files(box)
        result = cli("sync")
        assert result.code == 1 and result.err.startswith(f"gitmail: error: origin: cannot reach {url}: "), result
        assert "not allowed" in result.err and result.err.count("\n") == 1, result
        assert refs_and_files(box) == before
    assert remote.markers() == [] and not ran.exists()


def test_git_2_54_is_refused_for_a_local_remote(
    tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git 2.54 runs hooks a repository's config defines and has no switch to stop them: a path remote is refused
    (before anything is asked of it), a remote over the network is not."""
    remote = HostileRemote.build(tmp_path / "remote")
    box = victim(tmp_path, remote.urls()["file"])
    monkeypatch.setitem(gitcmd._found, "version", (2, 54, 1))
    monkeypatch.setenv("GITMAIL_DIR", str(box.path))
    before = refs_and_files(box)
    result = cli("sync")
    assert (result.code, result.err) == (
        1,
        f"gitmail: error: origin: refusing to sync with file://{remote.path}: git 2.54 would run hooks that the "
        "remote repository's config defines, and cannot be told not to; sync with a path or file:// remote needs "
        "another git version (or reach the remote over ssh)\n",
    )
    assert refs_and_files(box) == before
    assert gitcmd.run_network(box.path, "ls-remote", url=str(remote.path)).returncode == 128
    served = tmp_path / "served"
    served.mkdir()
    bare_remote(served / "mail.git")
    with git_daemon(served) as base:
        other = victim(tmp_path / "other", f"{base}/mail.git")
        monkeypatch.setenv("GITMAIL_DIR", str(other.path))
        assert cli("sync").err == "gitmail: synced with origin: 1 message new there\n"


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("/srv/mail.git", True),
        ("../mail.git", True),
        ("mail.git", True),
        ("./a:b", True),
        ("file:///srv/mail.git", True),
        ("FILE:///srv/mail.git", True),
        ("host:mail.git", False),
        ("git@host:mail.git", False),
        ("ssh://host/mail.git", False),
        ("https://host/mail.git", False),
        ("git://host/mail.git", False),
        ("ext::sh", False),
        ("persistent-https::host/mail.git", False),
    ],
)
def test_which_urls_git_reaches_through_its_local_transport(url: str, local: bool) -> None:
    assert gitcmd.is_local(url) is local
    program = " ".join(gitcmd.remote_args("push", url))
    assert ("--receive-pack=" in program) is local
    assert ("protocol.file.allow=never" in program) is not local
    assert "protocol.ext.allow=never" in program and "protocol.fd.allow=never" in program
