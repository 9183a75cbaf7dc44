"""What real machines do to a mailbox: hostile settings, other users, read-only and full disks, dead writers.
Every case ends in "nothing lost, delivery goes on, one clear line"."""

from __future__ import annotations

import fcntl
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import gitmail
from gitmail import mailbox
from gitmail.actions.reading import HOOK_WAIT
from gitmail.store.repository import Store
from gitmail.store.writer import writing
from tests.conftest import mailbox_snapshot, run_gitmail

IS_ROOT = os.geteuid() == 0
NOBODY = 65534


def one_error_line(done: subprocess.CompletedProcess[str], text: str, code: int = 1) -> None:
    assert done.returncode == code, done
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("gitmail: error: "), done.stderr
    assert text in done.stderr, done.stderr


def hook_context(cwd: Path, env: dict[str, str] | None = None) -> str | None:
    payload = json.dumps({"session_id": "s1", "cwd": str(cwd), "hook_event_name": "SessionStart"})
    done = run_gitmail("hook", "session-start", cwd=cwd, stdin=payload, env=env)
    assert done.returncode == 0, done.stderr
    if not done.stdout:
        return None
    text: str = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    return text


# -- settings that must be refused or neutralised ---------------------------------------------------------------


def test_git_hooks_and_user_config_never_run_on_gitmails_behalf(web: Path, box: Store, home: Path) -> None:
    mailbox.send(box, sender="api", to="web", subject="create the mailbox")
    ran = home / "hook-ran"
    script = f'#!/bin/sh\necho "$0" >> {ran}\n'
    for folder in (box.path / "hooks", home / "global-hooks"):
        folder.mkdir(exist_ok=True)
        for name in ("reference-transaction", "post-index-change", "pre-auto-gc"):
            (folder / name).write_text(script)
            (folder / name).chmod(0o700)
    (home / ".gitconfig").write_text(
        f"[core]\n\thooksPath = {home / 'global-hooks'}\n\tfsmonitor = {home / 'global-hooks' / 'reference-transaction'}\n"
    )
    with (box.path / "config").open("a") as config:
        config.write(f"[core]\n\tfsmonitor = {box.path / 'hooks' / 'reference-transaction'}\n")
    sent = run_gitmail("send", "--from", "api", "--to", "web", "-s", "hi", cwd=web)
    assert sent.returncode == 0, sent.stderr
    assert run_gitmail("done", sent.stdout.strip(), cwd=web).returncode == 0
    assert hook_context(web) is not None
    assert not ran.exists()


def test_a_relative_mailbox_path_is_refused(web: Path) -> None:
    for args in (["send", "--to", "api", "-s", "x"], ["inbox"], ["log"]):
        one_error_line(
            run_gitmail(*args, cwd=web, env={"GITMAIL_DIR": "mail.git"}), "GITMAIL_DIR must be an absolute path", 2
        )
    assert not (web / "mail.git").exists()


def test_a_mailbox_others_can_change_is_refused_for_reads_and_writes(web: Path, box: Store) -> None:
    mailbox.send(box, sender="api", to="web", subject="hello")
    box.path.chmod(0o777)
    before = mailbox_snapshot(box.path)
    for args in (["send", "--to", "web", "-s", "x"], ["inbox"], ["log"]):
        one_error_line(run_gitmail(*args, cwd=web), f"chmod -R go-rwx {box.path}")
    assert mailbox_snapshot(box.path) == before
    note = hook_context(web)
    assert note is not None and "can be changed by other users" in note and "hello" not in note


@pytest.mark.parametrize("opened", ["packed-refs", "refs/gitmail/web/inbox", "objects/pack", "gitmail/cache"])
def test_a_mailbox_others_can_enter_is_refused_whatever_it_holds(web: Path, box: Store, opened: str) -> None:
    """A neighbour who can enter the mailbox could rewrite anything inside that is theirs to write: a
    world-writable packed-refs, ref folder, pack folder or cache. Only a private mailbox (0700) is used."""
    mailbox.send(box, sender="api", to="web", subject="hello")
    if opened == "packed-refs":
        subprocess.run(["git", "--git-dir", str(box.path), "pack-refs", "--all"], check=True)
    subprocess.run(["git", "--git-dir", str(box.path), "repack", "-a", "-d", "-q"], check=True)
    assert run_gitmail("inbox", cwd=web).returncode == 0  # its receipt: the hook below has none left to write
    assert hook_context(web) is not None  # and the kept answer's folder exists
    (box.path / opened).chmod(0o777 if (box.path / opened).is_dir() else 0o666)
    box.path.chmod(0o755)
    before = mailbox_snapshot(box.path)
    for args in (["send", "--to", "web", "-s", "x"], ["inbox"], ["log"], ["show", "x"]):
        one_error_line(run_gitmail(*args, cwd=web), f"{box.path} is open to other users (mode 755)")
    note = hook_context(web)
    assert note is not None and f"chmod -R go-rwx {box.path}" in note and "hello" not in note
    assert mailbox_snapshot(box.path) == before
    box.path.chmod(0o700)  # private again: nobody else can reach what is inside, whatever its modes
    assert "hello" in run_gitmail("inbox", cwd=web).stdout


@pytest.mark.skipif(not IS_ROOT, reason="giving a mailbox to another user needs root")
def test_a_mailbox_another_user_owns_is_refused(web: Path, box: Store) -> None:
    mailbox.send(box, sender="api", to="web", subject="hello")
    os.chown(box.path, NOBODY, NOBODY)
    one_error_line(run_gitmail("inbox", cwd=web), f"belongs to another user (uid {NOBODY})")
    refused = run_gitmail("send", "--to", "web", "-s", "x", cwd=web)
    one_error_line(refused, f"fix: move it aside, `mv {box.path} {box.path}.uid-{NOBODY}`, and gitmail makes one")
    assert "chown" not in refused.stderr  # never a hint to take over another user's mailbox


# -- another user's read-only view, full disks, size limits -----------------------------------------------------


@pytest.fixture
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A directory another user can reach (pytest's own temporary directories are private to root)."""
    place = Path("/tmp") / f"gitmail-shared-{os.getpid()}-{time.monotonic_ns()}"
    place.mkdir(mode=0o755)
    try:
        yield place
    finally:
        shutil.rmtree(place, ignore_errors=True)


@pytest.mark.skipif(not IS_ROOT, reason="a truly read-only view for a test needs another user (root ignores modes)")
def test_a_mailbox_its_user_can_read_but_not_write_is_read(shared: Path) -> None:
    """The mailbox's owner has lost write access (a read-only mount, a backup copy): reads, peeks and the hook
    still work; writes say so in one line and change nothing."""
    home = shared / "home"
    web = shared / "work" / "web"
    subprocess.run(["git", "init", "-q", str(web)], check=True)
    home.mkdir()
    box = Store(home / ".gitmail" / "mail.git")
    sent = mailbox.send(box, sender="api", to="web", subject="read me")
    cast = mailbox.broadcast(box, sender="api", subject="everyone")
    (box.own_dir / "journal").write_text("[]")  # even an unfinished change must not stop a reader
    subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(shared)], check=True)
    subprocess.run(["chmod", "-R", "a-w", str(home / ".gitmail")], check=True)
    before = mailbox_snapshot(box.path)
    as_nobody = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", sys.executable, "-m", "gitmail"]
    env = {**os.environ, "HOME": str(home), "PATH": os.path.dirname(sys.executable) + ":" + os.environ["PATH"]}

    def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run([*as_nobody, *args], cwd=web, env=env, input=stdin, capture_output=True, text=True)

    for args in (("inbox", "--peek"), ("inbox",), ("log",), ("show", sent.message.id)):
        done = run(*args)
        assert done.returncode == 0 and sent.message.id in done.stdout, (args, done.stderr)
    payload = json.dumps({"session_id": "s1", "cwd": str(web), "hook_event_name": "SessionStart"})
    hooked = run("hook", "session-start", stdin=payload)
    assert hooked.returncode == 0 and sent.message.id in hooked.stdout, hooked.stderr
    assert cast.message.id not in hooked.stdout and "read-only" in hooked.stdout
    for command in (["send", "--to", "api", "-s", "x"], ["done", sent.message.id]):
        done = run(*command)
        assert done.returncode == 1 and done.stderr.startswith("gitmail: error: cannot write the mailbox"), done
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert mailbox_snapshot(box.path) == before


@pytest.mark.skipif(not IS_ROOT, reason="a truly read-only view for a test needs another user (root ignores modes)")
def test_naming_a_session_in_a_mailbox_its_user_cannot_write_fails_in_one_line(shared: Path) -> None:
    """`gitmail session --name` (or --card) that cannot record what it sets says so and fails; it never answers as
    if it had set it."""
    home = shared / "home"
    web = shared / "work" / "web"
    subprocess.run(["git", "init", "-q", str(web)], check=True)
    home.mkdir()
    box = Store(home / ".gitmail" / "mail.git")
    mailbox.send(box, sender="api", to="web", subject="hello")
    env = {**os.environ, "HOME": str(home), "PATH": os.path.dirname(sys.executable) + ":" + os.environ["PATH"]}
    in_session = {**env, "CLAUDE_CODE_SESSION_ID": "s1"}
    started = subprocess.run([sys.executable, "-m", "gitmail", "session"], cwd=web, env=in_session, capture_output=True)
    assert started.returncode == 0, started  # its record is made while the mailbox can still be written
    subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(shared)], check=True)
    subprocess.run(["chmod", "-R", "a-w", str(home / ".gitmail")], check=True)
    before = mailbox_snapshot(box.path)
    as_nobody = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", sys.executable, "-m", "gitmail"]
    for setting in (["--name", "builder"], ["--card", "on the parser"]):
        done = subprocess.run(
            [*as_nobody, "session", *setting], cwd=web, env=in_session, capture_output=True, text=True
        )
        one_error_line(done, f"cannot write the mailbox at {box.path}: permission denied")
    shown = subprocess.run([*as_nobody, "session"], cwd=web, env=in_session, capture_output=True, text=True)
    assert shown.returncode == 0 and "name (none)" in shown.stderr and "card (none)" in shown.stderr, shown
    assert mailbox_snapshot(box.path) == before


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    place = tmp_path / "small"
    place.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(place)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small file system here: {mounted.stderr.decode().strip()}")
    try:
        yield place
    finally:
        subprocess.run(["umount", "-l", str(place)], check=False)


def test_a_full_disk_is_one_line_and_loses_nothing(web: Path, small_disk: Path) -> None:
    env = {"GITMAIL_DIR": str(small_disk / "mail.git")}
    first = run_gitmail("send", "--from", "api", "--to", "web", "-s", "fits", cwd=web, env=env)
    assert first.returncode == 0, first.stderr
    filler = small_disk / "filler"
    with open(filler, "wb") as handle:  # fill what is left
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError:
            pass
    big = "x" * 60_000
    for args in (["send", "--from", "api", "--to", "web", "-s", "no room", "-m", big], ["done", first.stdout.strip()]):
        done = run_gitmail(*args, cwd=web, env=env)
        if done.returncode == 0:
            continue  # a done moves refs only and may still fit
        assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith("gitmail: error: ") and "Traceback" not in done.stderr
    filler.unlink()
    box = Store(small_disk / "mail.git")
    listed = mailbox.log(box, repo="web")
    assert first.stdout.strip() in [e.message.id for e in listed]
    fsck = subprocess.run(["git", "--git-dir", str(box.path), "fsck", "--no-dangling"], capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stderr


def test_a_file_size_limit_is_one_line_and_loses_nothing(web: Path, box: Store) -> None:
    mailbox.send(box, sender="api", to="web", subject="before")

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gitmail",
            "send",
            "--from",
            "api",
            "--to",
            "web",
            "-s",
            "big",
            "-m",
            os.urandom(24_000).hex(),
        ],
        cwd=web,
        capture_output=True,
        text=True,
        preexec_fn=limited,
    )
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("gitmail: error: ") and "Traceback" not in done.stderr
    assert [e.message.subject for e in mailbox.pending(box, repo="web").directed] == ["before"]


# -- dead writers and the hook's one deadline -------------------------------------------------------------------


def test_a_dead_writers_journal_whose_objects_were_pruned_is_set_aside(web: Path, box: Store) -> None:
    original = mailbox.send(box, sender="api", to="web", subject="question")
    # A reply killed after its journal was written: its commit exists only as an unreferenced object...
    from gitmail.values.message import Message
    from gitmail.values.names import RepoName

    with writing(box, actor=RepoName("web")) as writer:
        reply = Message("r000000000", RepoName("web"), "api", "Re: question", "answer", original.message.date)
        orphan = writer.commit(reply, parents=[original.oid])
    journal = [
        ["refs/gitmail/api/inbox/r000000000", orphan, None],
        [f"refs/gitmail/web/archive/{original.message.id}", original.oid, None],
        [f"refs/gitmail/web/inbox/{original.message.id}", None, original.oid],
    ]
    (box.own_dir / "journal").write_text(json.dumps(journal))
    # ...which the user's `git gc --prune=now` then removes.
    subprocess.run(["git", "--git-dir", str(box.path), "gc", "--prune=now", "--quiet"], check=True)
    assert box.missing([orphan]) == {orphan}
    assert hook_context(web) is not None
    later = run_gitmail("send", "--from", "api", "--to", "web", "-s", "later", cwd=web)
    assert later.returncode == 0, later.stderr
    assert {e.message.subject for e in mailbox.pending(box, repo="web").directed} == {"question", "later"}
    kept = list(box.own_dir.glob("journal.set-aside-*"))
    assert len(kept) == 1 and json.loads(kept[0].read_text()) == journal
    assert "set aside an unfinished change whose objects are gone" in (box.path.parent / "gitmail.log").read_text()


def test_one_deadline_bounds_the_whole_hook(web: Path, box: Store) -> None:
    mailbox.send(box, sender="api", to="web", subject="hello")
    mailbox.broadcast(box, sender="api", subject="everyone")
    (box.own_dir / "journal").write_text("[]")  # a dead writer's change to finish, and a live writer holding on
    fd = os.open(box.own_dir / "lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        started = time.monotonic()
        context = hook_context(web)
        elapsed = time.monotonic() - started
    finally:
        os.close(fd)
    assert context is not None and "hello" in context
    started = time.monotonic()
    hook_context(web)  # the same hook with the mailbox free: what the process costs without waiting
    free = time.monotonic() - started
    assert HOOK_WAIT <= elapsed < free + 2 * HOOK_WAIT, (elapsed, free)  # one wait in all, not one per step


INJECT = """
import sys, importlib
target = importlib.import_module(sys.argv[1])
def boom(*args, **kwargs):
    raise RuntimeError("an injected failure")
setattr(target, sys.argv[2], boom)
from gitmail.__main__ import main
sys.argv = ["gitmail", *sys.argv[3:]]
sys.exit(main())
"""


def injected(cwd: Path, module: str, name: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """gitmail run as its users run it, with `module.name` failing as nobody foresaw."""
    return subprocess.run(
        [sys.executable, "-c", INJECT, module, name, *args], cwd=cwd, input=stdin, capture_output=True, text=True
    )


@pytest.mark.parametrize(
    ("module", "name", "args"),
    [
        ("gitmail.actions", "log", ["log"]),  # the command line
        ("gitmail.actions", "send", ["send", "--to", "web", "-s", "x", "-m", "y"]),
        ("gitmail.sync.quick", "up_to_date", ["sync"]),  # the quick sync path
        ("gitmail.sync.engine", "sync_all", ["sync", "origin"]),  # the whole way
        ("gitmail.mcp.server", "Mailroom", ["mcp"]),  # the MCP server itself
    ],
)
def test_an_unexpected_failure_is_one_line_with_its_own_exit_code(
    web: Path, box: Store, module: str, name: str, args: list[str]
) -> None:
    mailbox.send(box, sender="api", to="web", subject="hello")
    assert run_gitmail("log", "-n", "0x", cwd=web).returncode == 2  # a usage mistake stays a usage mistake
    crash = injected(web, module, name, *args)
    assert crash.returncode == 3, crash
    assert crash.stderr.startswith("gitmail: internal error: an injected failure (details: "), crash.stderr
    assert crash.stderr.count("\n") == 1 and "Traceback" not in crash.stderr, crash.stderr
    assert "RuntimeError: an injected failure" in (box.path.parent / "gitmail.log").read_text()


def test_an_unexpected_failure_in_a_hook_never_fails_the_session(web: Path, box: Store) -> None:
    mailbox.send(box, sender="api", to="web", subject="hello")
    payload = json.dumps({"session_id": "s1", "cwd": str(web), "hook_event_name": "SessionStart"})
    start = injected(web, "gitmail.actions", "at_moment", "hook", "session-start", stdin=payload)
    assert (start.returncode, start.stderr) == (0, "")
    said = json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]
    assert said.startswith("gitmail could not check this repository's mail: an injected failure (details: ")
    tool = injected(web, "gitmail.actions", "at_moment", "hook", "tool", stdin=payload.replace("SessionStart", "x"))
    assert (tool.returncode, tool.stdout, tool.stderr) == (0, "", "")  # mid-turn: silent
    log = (box.path.parent / "gitmail.log").read_text()
    assert log.count("RuntimeError: an injected failure") == 2
    git = subprocess.run(["git", "--version"], capture_output=True, text=True, check=True).stdout.split()[2]
    named = f"gitmail {gitmail.__version__}, Python {platform.python_version()}, git {git}"
    assert f"hook session-start of claude: {named}\n" in log and f"hook tool of claude: {named}\n" in log


def test_the_log_is_bounded_however_long_hooks_append_to_it(box: Store) -> None:
    from gitmail.store import log

    box.create()
    path = box.path.parent / "gitmail.log"
    line = "x" * 1000
    for _ in range(3 * log.LIMIT // len(line)):
        log.problem(box.path, line)
    kept = path.with_name("gitmail.log.1")
    assert path.stat().st_size < log.LIMIT and log.LIMIT <= kept.stat().st_size < log.LIMIT + 2 * len(line)
    assert sorted(p.name for p in path.parent.iterdir() if p.name.startswith("gitmail.log")) == [
        "gitmail.log",
        "gitmail.log.1",
    ]


def test_a_stale_time_without_timezone_is_refused(box: Store) -> None:
    from datetime import datetime

    from gitmail.errors import UsageError

    with pytest.raises(UsageError, match="timezone"):
        mailbox.send(box, sender="api", to="web", subject="x", when=datetime(2026, 1, 1))
    assert not box.exists()


def test_a_write_that_git_maintenance_pulled_objects_from_under_is_done_again(
    box: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gitmail.errors import Transient
    from gitmail.store.objects import Objects

    mailbox.send(box, sender="api", to="web", subject="before")
    real = Objects.commit
    failures = iter([Transient("an object directory vanished")])

    def flaky(self: Objects, *args: object, **kwargs: object) -> str:
        for failure in failures:
            raise failure
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Objects, "commit", flaky)
    sent = mailbox.send(box, sender="api", to="web", subject="after")
    assert [e.message.subject for e in mailbox.pending(box, repo="web").directed] == ["before", "after"]
    assert sent.message.subject == "after"


def test_only_unreadable_mail_is_said_as_such(web: Path, box: Store) -> None:
    from tests.damage import lose

    gone = mailbox.send(box, sender="api", to="web", subject="lost")
    lose(box, f"refs/gitmail/web/inbox/{gone.message.id}")
    context = hook_context(web)
    assert context is not None and context.startswith('gitmail: no readable mail for "web".\n\nNote: 1 message could')
    assert "read these messages" not in context
