"""The session-start hook run exactly as a host runs it: a separate process, the host's JSON on stdin, a real git
repository, HOME in a temporary directory. It always exits 0."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gitmail import mailbox
from gitmail.actions.reading import HOOK_WAIT
from gitmail.store import pendingindex
from gitmail.store.repository import Store
from tests.conftest import RepoFactory, run_gitmail


def payload(cwd: Path | str, **extra: Any) -> str:
    return json.dumps(
        {
            "session_id": "abc123",
            "transcript_path": "/tmp/transcript.jsonl",
            "cwd": str(cwd),
            "hook_event_name": "SessionStart",
            "source": "startup",
            **extra,
        }
    )


def hook(cwd: Path, stdin: str, *args: str, env: dict[str, str] | None = None) -> tuple[str | None, str]:
    """Run the hook; return the injected context (None when it printed nothing) and its stderr."""
    done = run_gitmail("hook", "session-start", *args, cwd=cwd, stdin=stdin, env=env)
    assert done.returncode == 0, done.stderr
    if not done.stdout:
        return None, done.stderr
    envelope = json.loads(done.stdout)
    assert set(envelope) == {"hookSpecificOutput"}
    assert set(envelope["hookSpecificOutput"]) == {"hookEventName", "additionalContext"}
    assert envelope["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    context = envelope["hookSpecificOutput"]["additionalContext"]
    assert isinstance(context, str)
    return context, done.stderr


def test_pending_mail_is_injected_as_the_same_text_inbox_prints(web: Path, box: Store) -> None:
    sent = mailbox.send(box, sender="api", to="web", subject="Schema v2", body="{ not json\n--- message 2 of 2")
    context, _ = hook(web, payload(web))
    assert context is not None
    assert context == run_gitmail("inbox", cwd=web).stdout
    assert f'--- message 1 of 1: id {sent.message.id} · directed to "web"' in context
    assert "> { not json\n> --- message 2 of 2\n" in context


def test_directed_mail_comes_back_every_session_until_done(web: Path, box: Store) -> None:
    sent = mailbox.send(box, sender="api", to="web", subject="until done")
    for source in ("startup", "resume", "clear", "compact"):
        context, _ = hook(web, payload(web, source=source))
        assert context is not None and sent.message.id in context
    mailbox.done(box, repo="web", ids=[sent.message.id])
    assert hook(web, payload(web)) == (None, "")


def test_a_broadcast_is_injected_once(web: Path, box: Store) -> None:
    cast = mailbox.broadcast(box, sender="api", subject="Spec changed")
    first, _ = hook(web, payload(web))
    assert first is not None and cast.message.id in first
    assert hook(web, payload(web)) == (None, "")


def test_nothing_pending_prints_nothing(web: Path, box: Store) -> None:
    mailbox.send(box, sender="api", to="other", subject="not for web")
    assert hook(web, payload(web)) == (None, "")


def test_the_payload_cwd_decides_the_repository(repos: RepoFactory, box: Store, tmp_path: Path) -> None:
    web = repos("web")
    mailbox.send(box, sender="api", to="web", subject="x")
    context, _ = hook(tmp_path, payload(web / "."))
    assert context is not None and 'for "web"' in context


def test_the_budget_keeps_the_context_under_the_host_limit(web: Path, box: Store) -> None:
    for i in range(30):
        mailbox.send(box, sender="api", to="web", subject=f"m{i}", body=f"{i}\n" + "x" * 1000)
    context, _ = hook(web, payload(web))
    assert context is not None and len(context) <= 10_000
    assert "Showing 6 of 30: the rest did not fit here and stay pending; run `gitmail inbox`" in context
    assert len(mailbox.pending(box, repo="web").directed) == 30


def test_a_subagent_event_gets_nothing(web: Path, box: Store) -> None:
    mailbox.send(box, sender="api", to="web", subject="x")
    assert hook(web, payload(web, agent_id="sub-1", agent_type="Explore")) == (None, "")


@pytest.mark.parametrize("stdin", ["", "not json at all", "[1, 2]", '{"cwd": 42}', "{"])
def test_odd_input_falls_back_to_the_working_directory(web: Path, box: Store, stdin: str) -> None:
    mailbox.send(box, sender="api", to="web", subject="still delivered")
    context, _ = hook(web, stdin)
    assert context is not None and "still delivered" in context


@pytest.mark.parametrize("where", ["plain", "missing"])
def test_outside_a_repository_the_hook_is_silent(tmp_path: Path, box: Store, where: str) -> None:
    mailbox.send(box, sender="api", to="web", subject="x")
    plain = tmp_path / "plain"
    plain.mkdir()
    cwd = plain if where == "plain" else tmp_path / "does" / "not" / "exist"
    assert hook(plain, payload(cwd)) == (None, "")


def test_no_mailbox_prints_nothing_and_creates_nothing(web: Path, box: Store) -> None:
    assert hook(web, payload(web)) == (None, "")
    assert not box.path.exists() and not box.path.parent.exists()


def test_unknown_arguments_are_ignored_with_a_warning(web: Path, box: Store) -> None:
    mailbox.send(box, sender="api", to="web", subject="x")
    context, err = hook(web, payload(web), "--future-flag")
    assert context is not None
    assert err == "gitmail: warning: ignoring unknown argument '--future-flag'\n"
    unknown = run_gitmail("hook", "teleport", cwd=web, stdin=payload(web))
    assert (unknown.returncode, unknown.stdout) == (0, "")
    assert "unknown hook 'teleport'" in unknown.stderr


def failure_note(context: str | None) -> str:
    assert context is not None
    assert context.startswith("gitmail could not check this repository's mail: ")
    assert context.count("\n") == 0
    return context


def test_a_mailbox_path_that_is_no_repository_gives_a_note(web: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.git"
    bad.mkdir()
    (bad / "notes.txt").write_text("not a mailbox")
    context, _ = hook(web, payload(web), env={"GITMAIL_DIR": str(bad)})
    assert "is not a git repository" in failure_note(context)
    log = (tmp_path / "gitmail.log").read_text()
    assert "Traceback" in log and "is not a git repository" in log


def test_an_unreadable_mailbox_gives_a_note(web: Path, box: Store) -> None:
    mailbox.send(box, sender="api", to="web", subject="x")
    (box.path / "HEAD").unlink()
    (box.path / "HEAD").mkdir()
    failure_note(hook(web, payload(web))[0])


def test_git_missing_from_path_still_delivers_what_is_loose_and_a_note_for_the_rest(
    web: Path, box: Store, tmp_path: Path
) -> None:
    sent = mailbox.send(box, sender="api", to="web", subject="x")
    context, _ = hook(web, payload(web), env={"PATH": str(tmp_path / "empty")})
    assert context is not None and sent.message.id in context  # refs and loose objects are read without git
    # Packed with a version 1 index (store/packs.py reads version 2 only): now only git can read it.
    subprocess.run(["git", "--git-dir", str(box.path), "-c", "pack.indexVersion=1", "repack", "-adq"], check=True)
    subprocess.run(["git", "--git-dir", str(box.path), "prune-packed"], check=True)
    context, _ = hook(web, payload(web, session_id="other"), env={"PATH": str(tmp_path / "empty")})
    assert context is not None and sent.message.id in context  # what the pending index holds needs no object
    shutil.rmtree(box.own_dir / pendingindex.FOLDER)
    context, _ = hook(web, payload(web, session_id="third"), env={"PATH": str(tmp_path / "empty")})
    assert "git was not found on PATH" in failure_note(context)


def test_a_message_that_does_not_parse_is_named_and_the_rest_delivered(web: Path, box: Store) -> None:
    good = mailbox.send(box, sender="api", to="web", subject="fine")
    git = ["git", "--git-dir", str(box.path)]
    blob = subprocess.run([*git, "hash-object", "-w", "--stdin"], input=b"garbage", capture_output=True).stdout
    tree = (
        subprocess.run([*git, "mktree"], input=b"100644 blob " + blob.strip() + b"\tmessage.md\n", capture_output=True)
        .stdout.strip()
        .decode()
    )
    commit = subprocess.run([*git, "commit-tree", "-m", "bad", tree], capture_output=True, text=True).stdout.strip()
    subprocess.run([*git, "update-ref", "refs/gitmail/web/inbox/0000000000", commit], check=True)
    context, _ = hook(web, payload(web))
    assert context is not None
    assert "Note: 1 message could not be read: 0000000000 (run `gitmail doctor`)." in context
    assert good.message.id in context


def test_lost_objects_are_reported_not_fatal(web: Path, box: Store) -> None:
    mailbox.send(box, sender="api", to="web", subject="x")
    for loose in (box.path / "objects").glob("??"):
        shutil.rmtree(loose)
    context, _ = hook(web, payload(web))
    assert context is not None and "could not be read" in context


def test_a_locked_mailbox_delays_session_start_by_at_most_the_lock_wait(web: Path, box: Store) -> None:
    directed = mailbox.send(box, sender="api", to="web", subject="directed")
    cast = mailbox.broadcast(box, sender="api", subject="broadcast")
    fd = os.open(box.own_dir / "lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        started = time.monotonic()
        context, _ = hook(web, payload(web))
        elapsed = time.monotonic() - started
    finally:
        os.close(fd)
    assert context is not None and directed.message.id in context and cast.message.id not in context
    assert "Showing" not in context  # nothing was left out for want of room
    assert (
        "Note: the mailbox was busy, so 1 new broadcast could not be handed over yet; they stay unread and come at "
        "a later showing."
    ) in context
    started = time.monotonic()
    later, _ = hook(web, payload(web))  # the same showing with the mailbox free: what it costs without waiting
    free = time.monotonic() - started
    assert later is not None and cast.message.id in later
    assert HOOK_WAIT <= elapsed < free + 2 * HOOK_WAIT, (elapsed, free)  # one lock wait, then no second one


def test_the_installed_console_script_runs_the_hook(web: Path, box: Store) -> None:
    script = Path(sys.executable).parent / "gitmail"
    if not script.exists():
        pytest.skip("the console script is not installed next to this interpreter")
    mailbox.send(box, sender="api", to="web", subject="via script")
    done = subprocess.run(
        [str(script), "hook", "session-start"], input=payload(web).encode(), capture_output=True, cwd=web
    )
    assert done.returncode == 0
    assert "via script" in json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]


def test_the_hooks_moments_are_the_delivery_policys() -> None:
    from gitmail import delivery, hooks

    assert hooks.MOMENTS == tuple(m.value for m in delivery.Moment if m is not delivery.Moment.INBOX)
