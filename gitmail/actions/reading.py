"""Reading: what is pending, framed as a session receives it (asked, or at a host's moment), what a showing leaves
to record, one message whole, and history."""

from __future__ import annotations

from gitmail import mailbox
from gitmail.actions.rules import without
from gitmail.errors import UsageError
from gitmail.store import hookfiles
from gitmail.store.claims import load_claims
from gitmail.store.lock import Deadline
from gitmail.store.repository import WRITE_WAIT, Store
from gitmail.values.address import Address
from gitmail.values.mail import Entry, History
from gitmail.values.names import RepoName, name_problem
from gitmail.values.phrase import Phrase

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple

    from gitmail import delivery
    from gitmail.delivery import Delivery, Moment
    from gitmail.workspace import Actor, Session
else:
    from gitmail.values.tuples import NamedTuple

HOOK_WAIT = 1.5  # seconds one hook run may wait for the mailbox, all waits together


def inbox(box: Store, actor: Actor, *, peek: bool = False, command: str = "gitmail", person: bool = False) -> Delivery:
    """Everything pending for the actor's repo, framed as a session receives it, within the budget its reader
    has (delivery.py). Unless `peek`, the broadcasts shown are handed over and receipts are written. `person`: the
    reader is the person at a terminal; outside a session, in the repository itself (not one named from elsewhere)
    or the person's own inbox, what was shown whole is recorded for `done --all`."""
    from gitmail import delivery  # the policy: loaded by what shows mail, not by what lists or sends it

    shown = delivery.deliver(
        box, actor, delivery.Moment.INBOX, deadline=Deadline(WRITE_WAIT), peek=peek, command=command
    )
    if person and not peek and actor.session is None and (actor.here is not None or actor.repo.is_person):
        from gitmail.store import terminal

        whole = [e.message.id for e in shown.shown.directed if e.message.id not in shown.shown.summarised]
        try:
            terminal.saw(box.root, actor.repo, whole)
        except OSError as error:
            return shown._replace(unrecorded=f"what the person was shown could not be recorded ({error.strerror})")
    return shown


def at_moment(
    box: Store,
    actor: Actor,
    moment: Moment,
    *,
    continuing: bool = False,
    command: str = "gitmail",
    watch: bool = False,
) -> Delivery:
    """What a host's hook hands its session at a moment (delivery.py decides). A session start also starts a
    background sync when one is due. Receipts are left for the caller to write once it has answered
    (`Delivery.recording`, `record`)."""
    from gitmail import delivery
    from gitmail.delivery import Moment

    if moment is Moment.START:
        from gitmail.sync import background

        background.start_if_due(box)  # spawned, never waited for
    shown = delivery.deliver(
        box, actor, moment, deadline=Deadline(HOOK_WAIT), continuing=continuing, command=command, defer=True,
        watch=watch,
    )  # fmt: skip
    if (
        moment in (Moment.START, Moment.TOOL, Moment.PROMPT)
        and actor.session is not None
        and hookfiles.tracked_leases(box.root, actor.session.key) is not None
    ):  # a session holding leases: they are kept up
        from gitmail.actions.leases import keep_up

        told = keep_up(box, actor)
        if told is not None:
            shown = shown._replace(text=(shown.text or "") + told, settled=False, generic=False)
    return shown


def session_ended(box: Store, session: Session, reason: str = "") -> None:
    """A session ended: its record stays a while, marked ended, and its leases end with it. Replies waiting for it
    now reach its repo's other sessions, so the repo's stamp changes: their hooks look again, and no kept
    session-start answer still holds."""
    if not box.exists():
        return
    from gitmail.store import sessions, stamps

    repo = sessions.ended(box.root, session.host, session.id, reason)
    if repo is not None and not name_problem(repo):
        from gitmail.actions.leases import end_with_session

        end_with_session(box, RepoName(repo), session.key)
        stamps.bump(box.root, [RepoName(repo)])
        from gitmail import arrivals

        arrivals.prepare_starts(box, [repo])


def record(box: Store, recording: delivery.Recording) -> None:
    """Write what a showing left to record (its receipts)."""
    from gitmail import delivery

    delivery.record(box, recording, deadline=Deadline(WRITE_WAIT))


class Shown(NamedTuple):
    entry: Entry
    claims: dict[str, str]  # who uses which name here: what the PEER/UNVERIFIED label is decided by


def show(box: Store, actor: Actor | None, message_id: str) -> Shown:
    """One message whole, with its receipts. Read whole inside a session, it counts as shown to that session."""
    entry = mailbox.show(box, message_id)
    if actor is not None and actor.session is not None and entry.recipient == actor.repo:
        from gitmail.store import sessions

        sessions.saw(box.root, actor.session.host, actor.session.id, {entry.message.id})
    return Shown(entry, load_claims(box))


def log(
    box: Store,
    *,
    repo: RepoName | None = None,
    everyone: bool = False,
    limit: int | None = 20,
    grep: str | None = None,
    thread: str | None = None,
    sent: bool = False,
    handle: str | None = None,
) -> History:
    """History, newest first, each message with its receipts: a repo's mail, what it sent (`sent`), everyone's
    (`everyone`, or no `repo`), or one conversation oldest first (`thread`). With `handle`, only the mail to or
    from that session of `repo` (read from the repo's whole history: the index knows repos, not sessions)."""
    if everyone:
        without("everyone", {"repo": repo, "sent": sent})
    if handle is not None and (everyone or thread is not None or repo is None):
        raise UsageError(Phrase("{handle} is one session of a repo: give it without {everyone} or {thread}"))
    if grep is not None and "\0" in grep:
        raise UsageError("a search cannot hold a NUL character")
    if handle is None or repo is None:
        return mailbox.log(box, repo=repo, limit=limit, grep=grep, thread=thread, sent=sent)
    from gitmail.actions.addressing import find_session  # sessions as addresses: loaded for one session's log

    key = find_session(box, Address(repo, handle)).info.key
    found = mailbox.log(box, repo=repo, limit=None, grep=grep, sent=sent)
    theirs = [e for e in found if key in (e.message.from_session, e.message.to_session)]
    return History(theirs[:limit], found.unreadable)


def known(box: Store, repo: RepoName) -> bool:
    """Whether any repository of this name has used the mailbox."""
    return mailbox.known(box, repo)
