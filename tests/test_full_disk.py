"""A full disk. The history index, the session records, the claims and the receipts are caches and records: when
they cannot be written, mail is still shown (log, inbox, the session hook), with one line saying what was not
recorded. The disk is a real one that is full (a small tmpfs the test mounts and fills, which needs root), or a
file size limit of 0 bytes (RLIMIT_FSIZE: every write that would grow a file is refused, as on a full disk)."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import gitmail
from gitmail import mailbox
from gitmail.store.repository import Store
from tests.conftest import RepoFactory


class Disk:
    """Where the mailbox lives, and how commands meet a full disk there."""

    def __init__(self, mailbox: Path, reason: str, limit: bool) -> None:
        self.mailbox, self.reason, self.limit = mailbox, reason, limit

    def fill(self) -> None:
        if self.limit:
            return  # the size limit applies to the commands run below
        try:
            with open(self.mailbox.parent / "filler", "wb") as filler:
                while True:
                    filler.write(b"\0" * 65536)
                    filler.flush()
        except OSError:  # full (a full tmpfs may refuse even the file's creation)
            pass
        try:
            with open(self.mailbox.parent / "filler", "ab") as filler:  # the last bytes a buffer could not take
                while True:
                    filler.write(b"\0")
                    filler.flush()
        except OSError:
            pass

    def free(self) -> None:
        (self.mailbox.parent / "filler").unlink(missing_ok=True)
        self.limit = False

    def run(self, *args: str, cwd: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return self.start([sys.executable, "-m", "gitmail", *args], cwd=cwd, stdin=stdin)

    def start(self, argv: list[str], *, cwd: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
        def limited() -> None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
            resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))

        return subprocess.run(
            argv,
            cwd=cwd,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")},
            preexec_fn=limited if self.limit else None,
        )


def _mount_tool(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin:/bin")


@pytest.fixture(params=["tmpfs", "size limit"])
def disk(request: pytest.FixtureRequest, tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Disk]:
    if request.param == "size limit":
        monkeypatch.setenv("GITMAIL_DIR", str(tmp_path / "box" / "mail.git"))
        yield Disk(tmp_path / "box" / "mail.git", "a file size limit was reached", limit=True)
        return
    mount, umount = _mount_tool("mount"), _mount_tool("umount")
    if os.geteuid() != 0 or mount is None or umount is None:
        pytest.skip("mounting a small tmpfs needs root")
    where = tmp_path / "small"
    where.mkdir()
    mounted = subprocess.run(
        [mount, "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", str(where)], capture_output=True
    )
    if mounted.returncode:
        pytest.skip(f"mounting a tmpfs failed: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        monkeypatch.setenv("GITMAIL_DIR", str(where / "mail.git"))
        yield Disk(where / "mail.git", "the disk is full", limit=False)
    finally:
        if subprocess.run([umount, str(where)], capture_output=True).returncode:
            subprocess.run([umount, "-l", str(where)], capture_output=True)


def test_a_full_disk_leaves_mail_readable_and_says_what_was_not_recorded(disk: Disk, repos: RepoFactory) -> None:
    api, web = repos("api"), repos("web")
    box = Store(disk.mailbox)
    sent = [mailbox.send(box, sender="api", to="web", subject=f"message {n}").message.id for n in range(3)]
    disk.fill()
    log = disk.run("log", cwd=web)
    assert log.returncode == 0, log
    assert [line.split()[0] for line in log.stdout.splitlines()] == sent[::-1]
    assert log.stderr == (
        f"gitmail: note: the history index was not written ({disk.reason}); this log was read without it\n"
    )
    inbox = disk.run("inbox", cwd=web)
    assert inbox.returncode == 0 and inbox.stderr == "", inbox
    assert all(f"id {i}" in inbox.stdout for i in sent)
    note = (
        f"Note: gitmail could not record which repository uses this name and that this mail was shown ({disk.reason}); "
        "the mail is shown all the same, and that is recorded later.\n"
    )
    assert inbox.stdout.endswith(f"\n{note}")
    assert json.loads(disk.run("inbox", "--json", cwd=web).stdout)["unrecorded"] == note[6:-2]
    payload = json.dumps({"session_id": "s1", "cwd": str(web), "hook_event_name": "SessionStart"})
    hook = disk.run("hook", "session-start", cwd=web, stdin=payload)
    assert hook.returncode == 0 and hook.stderr == "", hook
    context = json.loads(hook.stdout)["hookSpecificOutput"]["additionalContext"]
    assert all(f"id {i}" in context for i in sent)
    assert context.endswith(
        "\nNote: gitmail could not record which repository uses this name and what this session was shown "
        f"({disk.reason}); the mail is shown all the same, and that is recorded later.\n"
    )
    # Once there is room again, what was not recorded is recorded at the next showing.
    disk.free()
    assert disk.run("inbox", cwd=web).stdout.count("Note: gitmail could not record") == 0
    assert mailbox.pending(box, repo="web").receipted.among(sent) == frozenset(sent)
    again = disk.run("log", cwd=api)
    assert again.returncode == 0 and again.stderr == "" and len(again.stdout.splitlines()) == 3


def test_a_session_start_the_shell_would_repeat_goes_to_python_without_a_word_on_a_full_disk(
    disk: Disk, repos: RepoFactory
) -> None:
    web = repos("web")
    box = Store(disk.mailbox)
    sent = mailbox.send(box, sender="api", to="web", subject="hello").message.id
    script = str(Path(gitmail.__file__).parent / "hook.sh")

    def start(session: str) -> subprocess.CompletedProcess[str]:
        payload = json.dumps({"session_id": session, "cwd": str(web), "hook_event_name": "SessionStart"})
        return disk.start(["sh", script, "session-start", "claude", sys.executable], cwd=web, stdin=payload)

    limit, disk.limit = disk.limit, False
    first = start("s-1")  # Python answers, and keeps the answer for the shell to repeat
    assert first.returncode == 0 and f"id {sent}" in first.stdout
    assert list((box.own_dir / "cache").glob("*.key"))
    disk.limit = limit
    disk.fill()
    again = start("s-2")  # the shell cannot write the new session's record: Python answers, saying so
    assert again.returncode == 0 and again.stderr == "", again
    context = json.loads(again.stdout)["hookSpecificOutput"]["additionalContext"]
    assert f"id {sent}" in context and "gitmail could not record what this session was shown" in context


def test_keys_lists_the_keys_on_a_full_disk(disk: Disk, repos: RepoFactory) -> None:
    """`gitmail keys` only lists: a full disk, which keeps it from taking in keys published since, does not stop it."""
    web = repos("web")
    box = Store(disk.mailbox)
    mailbox.send(box, sender="api", to="web", subject="hello")  # this machine's key, made and published
    disk.fill()
    listed = disk.run("keys", cwd=web)
    assert listed.returncode == 0, listed
    [line] = listed.stdout.splitlines()
    assert line.endswith("\tthis machine: gitmail's own key, published") and listed.stderr == "", listed
