"""A remote that attacks whoever syncs with it (tests/hostile.py builds it): nothing of it runs here, whatever it
plants, through every way gitmail talks to it."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from gitmail import mailbox, render
from gitmail.store import gitcmd
from gitmail.store.repository import Store
from gitmail.sync import engine, quick
from gitmail.values.mail import status
from gitmail.values.message import MAX_BODY_BYTES, MAX_SUBJECT_CHARS, Message
from tests.conftest import CliRunner, at, run_gitmail
from tests.hostile import KINDS, HostileRemote
from tests.syncing import bare_remote, fsck, git, git_daemon, machine, refs_and_files, sync_now

URL_FORMS = ("path", "file", "symlink", "file-symlink")


@pytest.fixture(autouse=True)
def no_racy_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quick, "RACY_SECONDS", 0.0)
    monkeypatch.setattr(quick, "FINE_RACY_SECONDS", 0.0)


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
    with engine.sync_lock(box, wait=60) as fd:  # the background sync is over
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
    assert gitcmd.run_network(box.path, "push", url=str(remote.path), refs=["HEAD:refs/x"]).returncode == 128
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


# -- refs a remote plants ------------------------------------------------------------------------------------------


def test_junk_refs_on_a_remote_never_come_here(tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sync lists and fetches only the refs gitmail uses: 3,000 refs planted beside them stay on the remote, their
    objects too; so do notes refs of names gitmail does not use, and refs below the notes refs it does."""
    remote = HostileRemote.build(tmp_path / "remote", planted=False)
    remote.junk_refs(3000)
    junk = remote.git("rev-parse", "refs/gitmail-sync/junk/0").strip()
    box = victim(tmp_path, str(remote.path))
    monkeypatch.setenv("GITMAIL_DIR", str(box.path))
    result = cli("sync")
    assert (result.code, result.err) == (0, "gitmail: synced with origin: 1 message new here, 1 message new there\n")
    network = box.own_dir / "sync" / "fetch.git"
    for repository in (box.path, network):
        tracking = git(repository, "for-each-ref", "--format=%(refname)", "refs/gitmail-remotes/").split()
        assert tracking == ["refs/gitmail-remotes/origin/notes/gitmail-keys", "refs/gitmail-remotes/origin/state"]
    assert subprocess.run(["git", "--git-dir", str(box.path), "cat-file", "-e", junk]).returncode != 0  # nor objects
    assert cli("sync").err == "gitmail: origin: up to date\n"
    for ref in ("notes/gitmail-evil", "notes/gitmail-seen/x", "notes/gitmail-receipts/y/z"):
        remote.git("update-ref", f"refs/gitmail-sync/{ref}", remote.state())  # commits, as notes refs are
    assert cli("sync").err == "gitmail: origin: up to date\n"
    mailbox.send(box, sender="api", to="web", subject="later")
    assert cli("sync").err == "gitmail: synced with origin: 1 message new there\n"
    for repository, own in ((box.path, ["refs/notes/gitmail-keys"]), (network, [])):
        assert git(
            repository, "for-each-ref", "--format=%(refname)", "refs/gitmail-remotes/", "refs/notes/"
        ).split() == ["refs/gitmail-remotes/origin/notes/gitmail-keys", "refs/gitmail-remotes/origin/state", *own]
    assert "outside gitmail's layout" not in cli("doctor").out


def test_doctor_reports_refs_outside_the_layout_and_sync_drops_those_a_remote_left(
    tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Junk an earlier sync imported (when sync fetched all of refs/gitmail-sync/*) is named by doctor, and the
    next sync drops it; a ref of another program's is named with what to do about it."""
    remote = HostileRemote.build(tmp_path / "remote", planted=False)
    box = victim(tmp_path, str(remote.path))
    monkeypatch.setenv("GITMAIL_DIR", str(box.path))
    assert cli("sync").code == 0
    network = box.own_dir / "sync" / "fetch.git"
    state = git(box.path, "rev-parse", "refs/gitmail-remotes/origin/state").strip()
    for repository in (box.path, network):
        for number in range(12):
            git(repository, "update-ref", f"refs/gitmail-remotes/origin/junk/{number}", state)
    report = cli("doctor")
    assert report.code == 0, report
    [line] = [line for line in report.out.splitlines() if "outside gitmail's layout" in line]
    assert line == (
        "note      refs: 24 refs outside gitmail's layout, which gitmail never reads: refs/gitmail-remotes/origin/"
        "junk/0, refs/gitmail-remotes/origin/junk/1, refs/gitmail-remotes/origin/junk/10, refs/gitmail-remotes/"
        "origin/junk/11, refs/gitmail-remotes/origin/junk/2, refs/gitmail-remotes/origin/junk/3, refs/gitmail-"
        "remotes/origin/junk/4, refs/gitmail-remotes/origin/junk/5, refs/gitmail-remotes/origin/junk/6, refs/"
        "gitmail-remotes/origin/junk/7 and 14 more -- the next `gitmail sync` drops them"
    )
    [finding] = [f for f in json.loads(cli("doctor", "--json").out)["findings"] if f["topic"] == "refs"]
    assert finding["items"][12] == f"refs/gitmail-remotes/origin/junk/0 (in {network})"
    mailbox.send(box, sender="api", to="web", subject="later")
    assert cli("sync").code == 0
    for repository in (box.path, network):
        assert not git(repository, "for-each-ref", "refs/gitmail-remotes/origin/junk/")
    git(box.path, "update-ref", "refs/heads/stray", state)
    [line] = [line for line in cli("doctor").out.splitlines() if "outside gitmail's layout" in line]
    assert line == (
        "note      refs: 1 ref outside gitmail's layout, which gitmail never reads: refs/heads/stray -- git --git-dir "
        f"{box.path} update-ref -d REF, for each, once you know what it is"
    )


# -- mail larger than gitmail sends --------------------------------------------------------------------------------

HUGE = 8 * 1024 * 1024  # bytes: far over every limit, small enough to build quickly


def test_mail_larger_than_gitmail_sends_is_set_aside_unread_when_it_arrives(
    tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch, web: Path
) -> None:
    """A body over 64 KiB, a subject over 200 characters, a document or a commit far over any message's size: each
    is set aside under refs/gitmail/_oversized/ (nothing deleted, nothing read whole), with a line in the log; the
    mail within the limits arrives beside it, and what was set aside stays so whatever the remote does next."""
    remote = HostileRemote.build(tmp_path / "remote", planted=False)
    fits = remote.message("0f1ts0f1ts", body="y" * MAX_BODY_BYTES, subject="s" * MAX_SUBJECT_CHARS)
    too_large = {
        "0b0dy00000": remote.message("0b0dy00000", body="x" * (MAX_BODY_BYTES + 1)),
        "0sbjct0000": remote.message("0sbjct0000", subject="s" * (MAX_SUBJECT_CHARS + 1)),
        "0d0c000000": remote.message("0d0c000000", body="x" * HUGE, commit_text="forged\n"),
        "0c0mm1t000": remote.message("0c0mm1t000", commit_text="x" * HUGE),
    }
    for message_id, commit in {"0f1ts0f1ts": fits, **too_large}.items():
        remote.deliver(message_id, commit)
    box = victim(tmp_path, str(remote.path))
    monkeypatch.setenv("GITMAIL_DIR", str(box.path))
    result = cli("sync")
    assert (result.code, result.err) == (
        0,
        "gitmail: synced with origin: 2 messages new here, 1 message new there, 4 messages larger than gitmail "
        "sends set aside unread (see gitmail doctor)\n",
    )
    set_aside = git(box.path, "for-each-ref", "--format=%(refname) %(objectname)", "refs/gitmail/_oversized/")
    assert sorted(set_aside.splitlines()) == sorted(
        f"refs/gitmail/_oversized/web/inbox/{i} {commit}" for i, commit in too_large.items()
    )
    pending = {e.message.id for e in mailbox.pending(box, repo="web").directed}
    assert "0f1ts0f1ts" in pending and remote.honest_id in pending and not pending & set(too_large)
    log = (box.path.parent / "gitmail.log").read_text()
    assert "set aside message 0d0c000000 (refs/gitmail/web/inbox/0d0c000000) unread as refs/gitmail/_oversized/" in log
    assert "0d0c000000: its document is 8,388," in log and "0c0mm1t000: its commit is 8,388," in log
    assert "its subject is 201 characters; gitmail sends at most 200" in log
    assert f"its body is {MAX_BODY_BYTES + 1:,} bytes; gitmail sends at most {MAX_BODY_BYTES:,}" in log
    # what the remote does with them later changes nothing here
    remote.move("0d0c000000", "archive")
    mailbox.send(box, sender="api", to="web", subject="later")
    assert cli("sync").err == "gitmail: synced with origin: 1 message new there\n"
    assert git(box.path, "for-each-ref", "--format=%(refname) %(objectname)", "refs/gitmail/_oversized/") == set_aside
    report = cli("doctor", cwd=web)
    assert (
        "note      messages: 4 messages that arrived by sync larger than gitmail sends were set aside unread: "
        in report.out
    ), report
    assert "outside gitmail's layout" not in report.out
    fsck(box.path)


def test_mail_carrying_more_than_a_message_sent_here_may_attach_is_set_aside_when_it_arrives(
    tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attachments over gitmail.attachmentLimit (sends here stop there), or files beside the document a remote put in
    a message's tree, or folders deeper than gitmail reads: set aside unread as oversized mail is, with a line in the
    log saying why; what fits arrives."""
    remote = HostileRemote.build(tmp_path / "remote", planted=False)
    kib = 1024
    fits = remote.message("0fatt4ch00", attached={"small.bin": b"s" * 60 * kib, "also.bin": b"a" * 39 * kib})
    too_large = {
        "0b1gatt4ch": remote.message("0b1gatt4ch", attached={"a.bin": b"x" * 60 * kib, "b.bin": b"y" * 41 * kib}),
        "0h1dden000": remote.message("0h1dden000", beside={"junk": b"z" * 101 * kib}),
        "0deep00000": remote.message("0deep00000", beside={"a/b/c/d/e/tiny": b"t"}),
    }
    for message_id, commit in {"0fatt4ch00": fits, **too_large}.items():
        remote.deliver(message_id, commit)
    box = victim(tmp_path, str(remote.path))
    box.git("config", "gitmail.attachmentLimit", "100k")
    monkeypatch.setenv("GITMAIL_DIR", str(box.path))
    result = cli("sync")
    assert (result.code, result.err) == (
        0,
        "gitmail: synced with origin: 2 messages new here, 1 message new there, 3 messages larger than gitmail "
        "sends set aside unread (see gitmail doctor)\n",
    )
    set_aside = git(box.path, "for-each-ref", "--format=%(refname) %(objectname)", "refs/gitmail/_oversized/")
    assert sorted(set_aside.splitlines()) == sorted(
        f"refs/gitmail/_oversized/web/inbox/{i} {commit}" for i, commit in too_large.items()
    )
    pending = {e.message.id for e in mailbox.pending(box, repo="web").directed}
    assert "0fatt4ch00" in pending and not pending & set(too_large)
    log = (box.path.parent / "gitmail.log").read_text()
    assert (
        "0b1gatt4ch: the files beside its document (attachments) take 101.0 KiB; a message sent here may carry at most 100.0 KiB"
        in log
    )
    assert (
        "0h1dden000: the files beside its document (attachments) take 101.0 KiB; a message sent here may carry at most 100.0 KiB"
        in log
    )
    assert "0deep00000: its tree holds folders more than 4 deep; a message sent here may carry at most" in log
    fsck(box.path)


@pytest.mark.parametrize("stored", ["loose", "packed"])
def test_no_read_reads_more_of_a_message_than_it_shows(
    tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch, stored: str, web: Path
) -> None:
    """A message far larger than gitmail sends that is in an inbox all the same (it arrived before sync set such
    mail aside) is named as unreadable by every read, and none of them reads it: the session hook, inbox, log,
    show and doctor keep well under its size in memory."""
    import tracemalloc

    from gitmail.store.writer import writing
    from gitmail.values.layout import Change
    from gitmail.values.names import RepoName

    box = victim(tmp_path)
    huge = Message("0hvge00000", RepoName("api"), "web", "huge", "x" * HUGE, at(0))
    with writing(box, actor=RepoName("api")) as writer:
        oid = writer.objects.commit(huge)
        writer.apply([Change("refs/gitmail/web/inbox/0hvge00000", oid, None)], "as an older gitmail let it in")
    if stored == "packed":
        git(box.path, "repack", "-a", "-d", "-q")
    monkeypatch.setenv("GITMAIL_DIR", str(box.path))

    def every_read() -> None:
        mail = mailbox.pending(box, repo="web")
        assert mail.unreadable == ["0hvge00000"] and len(mail.directed) == 1
        for args in (["inbox", "--peek"], ["log"], ["show", "0hvge00000"], ["doctor"]):
            cli(*args, cwd=web)
        hook = cli("hook", "session-start", cwd=web, stdin=json.dumps({"cwd": str(web)}).encode())
        assert hook.code == 0 and "from the victim" in hook.out and "0hvge00000" in hook.out

    every_read()  # once before measuring: what the commands import is not what is measured
    tracemalloc.start()
    try:
        every_read()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < HUGE // 4, f"{peak:,} bytes held at once reading a {HUGE:,}-byte message"


@pytest.mark.parametrize("kept", [False, True])
def test_a_bounded_read_answers_every_request_and_reads_none_too_large(tmp_path: Path, kept: bool) -> None:
    """Objects around ones far too large, missing ones among them, packed (what git cat-file answers): each small
    one is read whole, in order, and each too large or missing reads as None, whether the read starts its own git
    or keeps one running."""
    from tests.hostile import plain_git

    box = victim(tmp_path)
    contents = [b"a" * 10, b"b" * 70_000, b"c" * HUGE, b"d" * 5, b"", b"f" * 65_000, b"g" * HUGE, b"h"]
    blobs = [plain_git("--git-dir", str(box.path), "hash-object", "-w", "--stdin", stdin=c).strip() for c in contents]
    git(box.path, "repack", "-a", "-d", "-q")
    git(box.path, "prune-packed")
    specs = [blobs[0], "1" * 40, *blobs[1:], "refs/heads/none:x", blobs[0]]
    if kept:
        box.keep_reading()
    try:
        found = box.read(specs, limit=68_000)
    finally:
        box.close()
    small = [c if len(c) <= 68_000 else None for c in contents]
    assert found == [small[0], None, *small[1:], None, small[0]]
    assert box.read(specs[2:4]) == contents[1:3]  # with no limit, read whole


def test_a_message_the_remote_holds_otherwise_is_left_alone_and_sync_says_so_plainly(
    tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same id with another commit there: neither copy changes, and the summary and the log say that."""
    from tests.hostile import place

    remote = HostileRemote.build(tmp_path / "remote", planted=False)
    box = victim(tmp_path, str(remote.path))
    monkeypatch.setenv("GITMAIL_DIR", str(box.path))
    assert cli("sync").code == 0
    [mine] = [e for e in mailbox.pending(box, repo="web").directed if e.message.subject == "from the victim"]
    other = remote.message(mine.message.id, subject="another text under the same id")
    remote.publish({place("web", "inbox", mine.message.id): other}, parents=[other])
    result = cli("sync")
    assert (result.code, result.err) == (
        0,
        "gitmail: synced with origin: 1 message differs here and there: sync changed neither copy (see the log)\n",
    )
    assert (
        mailbox.show(box, mine.message.id).oid == mine.oid
        and remote.listing()[place("web", "inbox", mine.message.id)] == other
    )
    log = (box.path.parent / "gitmail.log").read_text()
    assert f"message {mine.message.id} is refs/gitmail/web/inbox/{mine.message.id} {mine.oid} here and " in log
    assert log.rstrip().endswith("there; sync changed neither copy")


# -- what a remote archives or retracts ----------------------------------------------------------------------------


def test_mail_a_remote_archives_or_retracts_is_named_by_sync_and_marked_in_log_and_show(
    tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch, web: Path
) -> None:
    """Archived beats pending wherever a remote says so, so anyone who can push can make mail leave every inbox.
    It still does, but never unseen: sync names each message and the machine the remote says did it, and log and
    show mark it for good, saying whether a session here had been shown it."""
    from gitmail import render

    remote = HostileRemote.build(tmp_path / "remote", planted=False)
    cast = mailbox.broadcast(remote.honest, sender="api", subject="Freeze")
    shown_first = mailbox.send(remote.honest, sender="api", to="web", subject="read here first")
    sync_now(remote.honest)
    box = victim(tmp_path, str(remote.path))
    monkeypatch.setenv("GITMAIL_DIR", str(box.path))
    assert cli("sync").code == 0
    assert cli("inbox", cwd=web).code == 0  # every message is shown to web here once...
    honest = remote.honest_id
    remote.deliver("0nseen0000", remote.message("0nseen0000", subject="arrived, never shown"))
    assert cli("sync").code == 0  # ...but this one, which arrives after
    remote.move(honest, "archive")
    remote.move("0nseen0000", "archive")
    remote.move(shown_first.message.id, "archive")
    remote.move(cast.message.id, "retracted")
    result = cli("sync")
    lines = result.err.splitlines()
    assert (result.code, lines[0]) == (0, "gitmail: synced with origin: 4 messages archived or retracted here")
    elsewhere = 'on machine "elsewhere" (as origin says)'
    assert sorted(lines[1:]) == sorted(
        [
            f'gitmail: origin: archived {honest} (to web, "from an honest machine"): done {elsewhere}',
            f'gitmail: origin: archived 0nseen0000 (to web, "arrived, never shown"): done {elsewhere}, never shown here',
            f'gitmail: origin: archived {shown_first.message.id} (to web, "read here first"): done {elsewhere}',
            f'gitmail: origin: retracted {cast.message.id} (a broadcast, "Freeze"): retracted {elsewhere}',
        ]
    )
    assert [e.message.subject for e in mailbox.pending(box, repo="web").directed] == ["from the victim"]
    log = cli("log", cwd=web).out
    [line] = [line for line in log.splitlines() if line.startswith("0nseen0000")]
    assert line.endswith(f"  arrived, never shown  [done {elsewhere}, never shown here]"), line
    shown = cli("show", "0nseen0000").out
    assert f"\nNote: archived here by sync: done {elsewhere}, never shown here.\n" in shown
    as_json = json.loads(cli("show", "0nseen0000", "--json").out)["moved_by_sync"]
    assert as_json["remote"] == "origin" and as_json["machine"] == {"name": "elsewhere", "id": "9zz9zz9zz9"}
    assert as_json["shown_here"] is False
    assert "Note:" not in render.card(mailbox.show(box, shown_first.message.id), claims={}, state=False)
    assert "elsewhere" in (box.path.parent / "gitmail.log").read_text()
    # mail archived here by this machine's own hand is not marked
    mine = mailbox.send(box, sender="api", to="web", subject="mine")
    mailbox.done(box, repo="web", ids=[mine.message.id])
    assert "[" not in [line for line in cli("log", cwd=web).out.splitlines() if line.startswith(mine.message.id)][0]


# -- receipts a remote makes up ------------------------------------------------------------------------------------


def test_a_showing_on_this_machine_that_a_remote_made_up_counts_for_nothing(
    tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch, web: Path
) -> None:
    """A "delivered" receipt that names this machine, or no machine, and arrives by sync was not written here: log,
    show, --json and the view do not call the message delivered, this machine still writes its own receipt when it
    shows the message, and a remote's archiving of it says "never shown here". One naming another machine is what
    that machine did, as the remote says, and still reads as delivered elsewhere."""
    from datetime import datetime

    from gitmail.store import machines
    from gitmail.web import pages, snapshot

    remote = HostileRemote.build(tmp_path / "remote", planted=False)
    box = victim(tmp_path, str(remote.path))
    monkeypatch.setenv("GITMAIL_DIR", str(box.path))
    archived = mailbox.send(box, sender="api", to="web", subject="archived by the remote")
    other = mailbox.send(box, sender="api", to="web", subject="shown on another machine")
    assert cli("sync").code == 0
    [mine] = [e for e in mailbox.pending(box, repo="web").directed if e.message.subject == "from the victim"]
    forged = datetime.fromisoformat("2026-11-29T09:31:02+00:00")
    for oid in (mine.oid, archived.oid):
        for naming in (f',"machine":"{machines.current(box).id}"', ""):  # this machine, or none
            remote.receipt(
                oid,
                f'{{"at":"{forged.isoformat()}","event":"delivered","host":"claude"{naming},'
                '"moment":"session-start","repo":"web"}',
            )
    remote.receipt(
        other.oid, f'{{"at":"{forged.isoformat()}","event":"delivered","machine":"9zz9zz9zz9","repo":"web"}}'
    )
    assert cli("sync").code == 0
    remote.move(archived.message.id, "archive")
    moved = cli("sync").err.splitlines()
    assert moved[1].endswith(
        '(to web, "archived by the remote"): done on machine "elsewhere" (as origin says), never shown here'
    ), moved
    shown = mailbox.show(box, mine.message.id)
    assert status(shown).name == "pending" and render.as_json(shown)["delivered"] == []
    assert json.loads(cli("show", mine.message.id, "--json").out)["delivered"] == []
    assert cli("show", mine.message.id).out.splitlines()[0].endswith("· pending")
    item, _ = pages.message(snapshot.load(box), mine.message.id)
    assert status(item.entry).name == "pending"
    assert mine.message.id not in mailbox.pending(box, repo="web").receipted
    elsewhere = status(mailbox.show(box, other.message.id))
    assert [r.machine for r in elsewhere.reached] == ["9zz9zz9zz9"]  # another machine's, as the remote says
    assert cli("inbox", cwd=web).code == 0  # shown here for real: this machine writes its own receipt
    reached = status(mailbox.show(box, mine.message.id))
    assert reached.name == "delivered" and [(r.machine, r.at == forged) for r in reached.reached] == [(None, False)]
