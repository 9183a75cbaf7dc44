"""gitmail/hook.sh, the shell in front of the hook: it starts Python only when something may have changed, and
answers a session start that would repeat the last one from what that one kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import gitmail
from gitmail import mailbox
from gitmail.store import hookfiles
from gitmail.store.claims import claim
from gitmail.store.repository import Store
from gitmail.values.names import RepoName

SCRIPT = Path(gitmail.__file__).parent / "hook.sh"


@pytest.fixture
def no_python(tmp_path: Path) -> Recorder:
    return Recorder(tmp_path / "python-was-started")


class Recorder(str):
    """Stands in for the interpreter: a program that only notes it was started (and prints nothing)."""

    def __new__(cls, marker: Path) -> Recorder:
        program = marker.with_name("recorder")
        program.write_text(f"#!/bin/sh\necho \"$@\" >> '{marker}'\ncat >/dev/null\n")
        program.chmod(0o755)
        made = super().__new__(cls, str(program))
        made.marker = marker
        return made

    marker: Path

    def started(self) -> bool:
        found = self.marker.exists()
        self.marker.unlink(missing_ok=True)
        return found


def hook(moment: str, cwd: Path, *, host: str = "claude", python: str = sys.executable, session: str = "s-1") -> str:
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    if host == "claude":
        env["CLAUDE_CODE_SESSION_ID"] = session
    event = {"session-start": "SessionStart", "tool": "PostToolUse"}[moment]
    payload = json.dumps({"session_id": session, "cwd": str(cwd), "transcript_path": "/t", "hook_event_name": event})
    args = ["sh", str(SCRIPT), moment, host, python, *(["--watch"] if moment == "session-start" else [])]
    done = subprocess.run(args, cwd=cwd, input=payload, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("host", ["claude", "codex"])
def test_a_tool_call_with_nothing_new_starts_no_python(web: Path, box: Store, host: str, no_python: Recorder) -> None:
    sent = mailbox.send(box, sender="api", to="web", subject="hello")
    assert sent.message.id in hook("session-start", web, host=host)
    assert hook("tool", web, host=host, python=no_python) == "" and not no_python.started()
    news = mailbox.send(box, sender="api", to="web", subject="news")
    hook("tool", web, host=host, python=no_python)
    assert no_python.started()
    assert news.message.id in hook("tool", web, host=host)
    assert hook("tool", web, host=host, python=no_python) == "" and not no_python.started()


def test_a_session_start_that_repeats_the_last_is_answered_without_python(
    web: Path, box: Store, no_python: Recorder
) -> None:
    sent = mailbox.send(box, sender="api", to="web", subject="hello")
    first = hook("session-start", web, session="one")
    assert sent.message.id in first
    assert hook("session-start", web, session="two", python=no_python) == first and not no_python.started()
    hook("tool", web, session="two", python=no_python)  # the kept answer left the session's record
    assert not no_python.started()
    record = json.loads((box.own_dir / "sessions" / "claude-two.json").read_text())
    assert record["known"] == record["shown"] == [sent.message.id]


@pytest.mark.parametrize(
    "change",
    [
        lambda box: mailbox.send(box, sender="api", to="web", subject="another"),
        lambda box: mailbox.done(box, repo="web", ids=[mailbox.pending(box, repo="web").directed[0].message.id]),
        lambda box: mailbox.broadcast(box, sender="db", subject="everyone"),
        lambda box: claim(box, repo=RepoName("api"), path=box.path.parent.parent),
    ],
)
def test_any_change_to_what_a_start_shows_makes_python_answer_again(
    web: Path, box: Store, change: object, no_python: Recorder
) -> None:
    mailbox.send(box, sender="api", to="web", subject="hello")
    hook("session-start", web, session="one")
    hook("session-start", web, session="two", python=no_python)
    assert not no_python.started()
    change(box)  # type: ignore[operator]
    hook("session-start", web, session="three", python=no_python)
    assert no_python.started()


def test_a_repository_that_chooses_another_name_is_answered_under_it_by_the_next_start(
    web: Path, box: Store, no_python: Recorder
) -> None:
    mailbox.send(box, sender="api", to="web", subject="for web")
    hook("session-start", web, session="one")
    hook("session-start", web, session="two", python=no_python)
    assert not no_python.started()  # the answer is kept
    time.sleep(0.01)  # the config's modification time comes after the kept key's
    subprocess.run(["git", "config", "gitmail.name", "frontend"], cwd=web, check=True)
    renamed = mailbox.send(box, sender="api", to="frontend", subject="for frontend")
    assert renamed.message.id in hook("session-start", web, session="three")
    assert renamed.message.id in hook("session-start", web, session="four")  # kept again, under the new name


def test_a_start_that_hands_over_a_broadcast_is_not_kept(web: Path, box: Store, no_python: Recorder) -> None:
    cast = mailbox.broadcast(box, sender="api", subject="everyone")
    assert cast.message.id in hook("session-start", web, session="one")
    hook("session-start", web, session="two", python=no_python)
    assert no_python.started()
    assert cast.message.id not in hook("session-start", web, session="three")  # handed over once


def synced(box: Store) -> None:
    """Wait until the background sync a session start began has finished (its lock is free and it succeeded)."""
    import fcntl

    from gitmail.sync import quick as synccheck

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if synccheck.Record.load(box.path, "origin").last_success is not None:
            fd = os.open(box.own_dir / "sync" / "lock", os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            finally:
                os.close(fd)
        time.sleep(0.05)
    raise AssertionError("the background sync did not finish")


def test_with_a_remote_that_syncs_by_itself_a_kept_start_holds_until_a_sync_is_due(
    web: Path, box: Store, no_python: Recorder, tmp_path: Path
) -> None:
    from gitmail.sync import remotes

    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    sent = mailbox.send(box, sender="api", to="web", subject="hello")
    first = hook("session-start", web, session="one")
    hook("session-start", web, session="two", python=no_python)
    assert not no_python.started()
    remotes.add_remote(box, name="origin", url=str(remote), auto=True, interval=3600)
    hook("session-start", web, session="three", python=no_python)
    assert no_python.started()  # a remote was added: a session start may have a sync to start
    assert hook("session-start", web, session="four") == first  # Python: starts the due sync, keeps the answer
    synced(box)
    attempt = box.own_dir / "sync" / "last-attempt"
    started = attempt.stat().st_mtime
    assert hook("session-start", web, session="five", python=no_python) == first and not no_python.started()
    os.utime(attempt, (started - 3601, started - 3601))  # an hour later, as far as the sync is concerned
    assert time.time() + 3500 < (kept_due(web)).stat().st_mtime <= started + 3600
    os.utime(kept_due(web), (started - 1, started - 1))
    hook("session-start", web, session="six", python=no_python)
    assert no_python.started()  # the sync is due: Python starts it
    assert sent.message.id in hook("session-start", web, session="seven")
    synced(box)
    assert attempt.stat().st_mtime > started - 3601  # and it did
    remotes.change_remote(box, "origin", auto=False)
    hook("session-start", web, session="eight")
    assert not (kept_due(web)).exists()
    hook("session-start", web, session="nine", python=no_python)
    assert not no_python.started()


def test_a_repository_with_no_mail_starts_without_python_after_the_first_start(
    web: Path, box: Store, no_python: Recorder
) -> None:
    mailbox.send(box, sender="api", to="docs", subject="not for web")
    assert hook("session-start", web, session="one") != ""  # only the watched paths
    watched = json.loads(hook("session-start", web, session="two", python=no_python))
    assert set(watched["hookSpecificOutput"]) == {"hookEventName", "watchPaths"} and not no_python.started()


def test_a_repository_holding_a_gitmail_package_of_its_own_cannot_take_over_the_hook(web: Path, box: Store) -> None:
    sent = mailbox.send(box, sender="api", to="web", subject="hello")
    planted = web / "gitmail"
    planted.mkdir()
    (planted / "__init__.py").write_text(f"open({str(web / 'taken-over')!r}, 'w').close()\n")
    (planted / "hooks.py").write_text("def main(argv): return 0\n")
    assert sent.message.id in hook("session-start", web)
    assert hook("tool", web) == "" and not (web / "taken-over").exists()


def kept_due(web: Path) -> Path:
    """Where a kept session-start answer of this work tree says when a sync is next due."""
    tree = hookfiles.tree_name(str(web))
    assert tree is not None
    return hookfiles.kept(Store().path, "claude", tree).due
