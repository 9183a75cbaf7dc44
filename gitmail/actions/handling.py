"""Handling mail: marking it done (named, or everything the reader was shown whole) and reopening it."""

from __future__ import annotations

from gitmail import delivery, mailbox
from gitmail.actions.written import after_writing
from gitmail.errors import UsageError
from gitmail.store import sessions
from gitmail.values.phrase import Phrase

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from gitmail.store.repository import Store
    from gitmail.values.mail import DoneResult, Entry
    from gitmail.workspace import Actor


def done(box: Store, actor: Actor, *, ids: Sequence[str] = (), everything: bool = False) -> DoneResult:
    """Archive directed mail without replying: the messages named, or (`everything`) the pending mail the actor's
    session was shown whole (outside a session: that a session of the repo on this machine, or the person at a
    terminal in the repository, was shown whole), never
    mail that arrived unseen, or that a session only saw summarised, or that a receipt from elsewhere says was
    shown."""
    if bool(ids) == everything:
        raise UsageError(Phrase("name the messages to mark done, or ask for all of them with {everything} (not both)"))
    seen: set[str] = set()
    among: set[str] | None = None
    also = delivery.aliases(box, actor)
    if everything and actor.session is not None:
        seen = sessions.shown(box.path, actor.session.host, actor.session.id)
        mine = delivery.for_session(box, actor, mailbox.pending(box, repo=actor.repo, also=also))
        among = {e.message.id for e in mine.directed}  # not what was for another session, nor its own
    elif everything:
        from gitmail.store import terminal

        seen = terminal.shown(box.path, actor.repo)  # what the person was shown whole at a terminal here
        for found in sessions.listing(box.path):
            if found.repo == actor.repo:
                seen |= sessions.shown(box.path, found.host, found.id)
    result = mailbox.done(box, repo=actor.repo, also=also, ids=ids, everything=everything, seen=seen, among=among)
    if result.archived:
        after_writing(box, actor)
    return result


def reopen(box: Store, actor: Actor, message_id: str) -> Entry:
    """Undo a done (or a reply's archiving): the message is pending again for the actor's repo."""
    entry = mailbox.reopen(box, repo=actor.repo, message_id=message_id)
    after_writing(box, actor)
    return entry
