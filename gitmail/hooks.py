"""Hook entry points for host programs (Claude Code, Codex): read the host's JSON on stdin, answer in its format.

Runs at every session start, so it imports no command-line library, and it never fails a session: whatever goes
wrong, it exits 0, says at most one short factual line to the session, and logs the details next to the mailbox.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

LOCK_WAIT = 1.5  # seconds a session start may wait for another gitmail writer
EVENTS = {"session-start": "SessionStart"}


def main(argv: list[str]) -> int:
    event = argv[0] if argv else ""
    for extra in argv[1:]:
        _warn(f"ignoring unknown argument {extra!r}")
    if event not in EVENTS:
        _warn(f"unknown hook {event!r}; known: {', '.join(EVENTS)}")
        return 0
    try:
        text = session_start(_stdin())
    except Exception as error:  # a hook must never break the session it serves
        text = _report(error)
    if text:
        envelope = {"hookSpecificOutput": {"hookEventName": EVENTS[event], "additionalContext": text}}
        try:
            sys.stdout.write(json.dumps(envelope, ensure_ascii=False) + "\n")
            sys.stdout.flush()
        except OSError:
            pass  # the host stopped listening
    return 0


def session_start(raw: str) -> str | None:
    """The framed pending mail for the session's repository, or None when there is nothing to say."""
    from gitmail import mailbox, render
    from gitmail.errors import MailboxBusy
    from gitmail.identity import RepoName, name_problem, toplevel
    from gitmail.store import Store
    from gitmail.sync import start_if_due

    payload = _payload(raw)
    if payload.get("agent_id"):  # a subagent's event: the main session's mail is not for it
        return None
    cwd = payload.get("cwd")
    top = toplevel(cwd if isinstance(cwd, str) and cwd else os.getcwd())
    if top is None or name_problem(top.name):
        return None
    repo = RepoName(top.name)
    store = Store()
    if not store.exists():
        return None
    start_if_due(store)  # a background sync when one is due: spawned, never waited for
    claimed_by = None
    busy = False  # once the lock has been waited for in vain, this session start waits no more
    try:
        claimed_by = mailbox.claim(store, repo=repo, path=top, timeout=LOCK_WAIT)
    except MailboxBusy:
        busy = True  # recording who uses the name can wait for the next session
    mail = mailbox.pending(store, repo=repo, timeout=0 if busy else LOCK_WAIT)._replace(claimed_by=claimed_by)
    if not (mail.directed or mail.broadcasts or mail.unreadable):
        return None
    claims = store.claims()
    chosen = render.select(mail, claims=claims, here=str(top))
    handed: list[mailbox.Entry] = []
    failed = None  # why the chosen broadcasts were not handed over; they come next session
    if chosen.broadcasts and not busy:
        try:
            handed = mailbox.hand_over(store, repo=repo, broadcasts=chosen.broadcasts, timeout=LOCK_WAIT)
        except MailboxBusy:
            busy = True
        except Exception as error:  # no pygit2 to write with, say: directed mail is still delivered
            _report(error)
            failed = "the mailbox could not be written"
    if chosen.broadcasts and busy:
        failed = "the mailbox was busy"
    note = f"{failed}, so new broadcasts were not handed over; they come next time." if failed else None
    shown = render.Selection(chosen.directed, handed, chosen.summarised)
    if not (shown.directed or shown.broadcasts or mail.unreadable or note):
        return None
    return render.framing(mail, shown, claims=claims, here=str(top), note=note)


def _stdin() -> str:
    if sys.stdin is None or sys.stdin.isatty():
        return ""
    return sys.stdin.read()


def _payload(raw: str) -> dict[str, Any]:
    try:
        payload = json.loads(raw) if raw.strip() else {}
    except ValueError:
        _warn("the hook input is not JSON; using the current directory")
        return {}
    return payload if isinstance(payload, dict) else {}


def _report(error: Exception) -> str:
    """Log the details; tell the session in one line that mail could not be checked."""
    import time
    import traceback

    from gitmail.store import default_path

    detail = "".join(traceback.format_exception(error))
    try:
        log = default_path().parent / "gitmail.log"
        if log.parent.is_dir():
            with open(log, "a", encoding="utf-8") as handle:
                handle.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} session-start: {detail}\n")
    except (OSError, RuntimeError):  # RuntimeError: no home directory to find the log in
        return f"gitmail could not check this repository's mail: {_reason(error)}."
    return f"gitmail could not check this repository's mail: {_reason(error)} (details: {log})."


def _reason(error: Exception) -> str:
    lines = str(error).splitlines()
    return lines[0] if lines else type(error).__name__


def _warn(text: str) -> None:
    print(f"gitmail: warning: {text}", file=sys.stderr)
