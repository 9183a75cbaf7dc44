"""The waker of idle Codex sessions, and whether a session can be woken at all. Claude Code wakes its own sessions (a
hook watches the mailbox's stamps); Codex offers no such hook, so whatever brings mail in starts this detached
(arrivals.py), and it queues one turn (codex.py) for each idle Codex session the mail is for, when delivery.py says
it may be woken. The turn carries gitmail's fixed notice; the session's own hooks hand it the mail."""

from __future__ import annotations

import os
from pathlib import Path

from gitmail import codex, delivery
from gitmail.delivery import Moment
from gitmail.store import sessions
from gitmail.store.lock import Deadline
from gitmail.store.log import problem
from gitmail.store.repository import Store
from gitmail.values.names import RepoName, name_problem
from gitmail.workspace import Actor, Session, own_command, place

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gitmail.values.session_info import Info

WAIT = 1.5  # seconds the waker may wait for the mailbox per session


def main(argv: list[str]) -> int:
    """The waker: `MAILBOX KEY...`, each key a Codex session ("codex:THREAD")."""
    store = Store(Path(argv[0]).absolute())
    os.chdir("/")  # Codex reads a project's settings where it runs: the sender's directory may be any repository
    if not delivery.wake_enabled(store):
        return 0
    for key in argv[1:]:
        found = Session.from_key(key)
        if found is not None:
            try:
                wake(store, found)
            except Exception as error:
                problem(store.path, f"could not wake {key}: {error}")
    return 0


def wake(store: Store, session: Session) -> str:
    """Queue a turn for one idle Codex session when delivery.py says it is to be woken; what happened, in words."""
    info = sessions.info(store.path, session.host, session.id)
    if info is None or info.state != "idle" or name_problem(info.repo):
        return "not an idle session"
    window = codex.window_showing(store.path, info)
    if window is None:
        return "no Codex window shows it"
    unsafe = codex.unsafe(window)
    if unsafe is not None:  # found before anything is marked shown
        problem(store.path, f"cannot wake {session.key}: {unsafe}")
        return unsafe
    where = place(info.top) if info.top and os.path.isdir(info.top) else None
    actor = Actor(RepoName(info.repo), None, "codex", session, where)
    shown = delivery.deliver(store, actor, Moment.WAKE, deadline=Deadline(WAIT), command=own_command())
    if shown.text is None:
        return "nothing to wake it for"
    done, said = codex.queue(window, session.id, shown.text)
    if not done:
        with sessions.record(store.path, session.host, session.id, Deadline(WAIT), create=False) as record:
            if record is not None:  # not outstanding after all: the next arrival may try again
                record.data.pop("nudged_at", None)
        problem(store.path, f"codex queue for {session.key} failed: {said}")
        return f"codex queue failed: {said}"
    return f"queued: {said}"


def wakeable(store: Store, info: Info) -> bool:
    """Whether mail can start a turn in this session while it waits for its user."""
    if info.state == "ended" or not delivery.wake_enabled(store):
        return False
    if info.host == "claude":
        return info.watch
    window = codex.window_showing(store.path, info) if info.host == "codex" else None
    return window is not None and codex.unsafe(window) is None
