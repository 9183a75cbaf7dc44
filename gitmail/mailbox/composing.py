"""Writing a message, a reply, a broadcast or a retraction: each checked whole before anything is written."""

from __future__ import annotations

from gitmail.errors import GitmailError, UsageError
from gitmail.mailbox.finding import show
from gitmail.mailbox.writes import now, receipts_change, writer_for
from gitmail.store import machines, pendingindex
from gitmail.store.lock import attempts
from gitmail.values import receipts
from gitmail.values import urgency as levels
from gitmail.values.ids import BROADCAST, new_id
from gitmail.values.layout import (
    SEEN_NOTES,
    Change,
    State,
    archive_prefix,
    inbox_prefix,
    state_prefix,
)
from gitmail.values.mail import Entry
from gitmail.values.message import (
    MAX_DOCUMENT_BYTES,
    Message,
    clean_body,
    clean_subject,
    reply_subject,
)
from gitmail.values.names import RepoName
from gitmail.values.receipts import RECEIPTS_NOTES

TYPE_CHECKING = False
if TYPE_CHECKING:  # what writes is loaded only to write
    from collections.abc import Callable, Sequence

    from gitmail.store.repository import Store
    from gitmail.values.dates import datetime
    from gitmail.values.outgoing import Outgoing


def send(
    store: Store,
    *,
    sender: str,
    to: str,
    subject: str,
    body: bytes | str = "",
    when: datetime | None = None,
    from_session: str | None = None,
    to_session: str | None = None,
    to_handle: str | None = None,
    urgency: str = levels.NORMAL,
    attachments: Sequence[Outgoing] = (),
) -> Entry:
    """Leave a message in `to`'s inbox; it stays pending there until `to` replies or marks it done. With
    `to_session` ("host:id"), it is for that one session of `to` (`to_handle`: how the sender named it); with
    `from_session`, it records the session that sent it, which is never shown it. `urgency`: now, normal or low."""
    recipient = RepoName.parse(to)
    message = _compose(sender=sender, to=recipient, subject=subject, body=body, when=when)
    message = message._replace(
        from_session=from_session, to_session=to_session, to_handle=to_handle, urgency=levels.parse(urgency)
    )
    _fits(message, attachments)
    for attempt in attempts():
        with attempt, writer_for(store, actor=message.sender) as writer:
            message = _unique(writer.target, message, inbox_prefix(recipient))
            message = message._replace(attachments=writer.attach(attachments))
            oid = writer.commit(message)
            writer.apply(
                [Change(inbox_prefix(recipient) + message.id, oid, None)],
                f"gitmail: {message.sender} sent {message.id}",
            )
            pendingindex.written(writer, inbox_prefix(recipient), oid)
    return Entry(message, State.PENDING, oid, recipient)


def broadcast(
    store: Store,
    *,
    sender: str,
    subject: str,
    body: bytes | str = "",
    when: datetime | None = None,
    from_session: str | None = None,
    urgency: str = levels.NORMAL,
    attachments: Sequence[Outgoing] = (),
) -> Entry:
    """Leave a message for every repo: each is handed it once; its sender never is. Sent from a session
    (`from_session`), it is that session that never is: the repo's other sessions get it like any repo."""
    message = _compose(sender=sender, to=BROADCAST, subject=subject, body=body, when=when)
    message = message._replace(from_session=from_session, urgency=levels.parse(urgency))
    active = state_prefix(State.BROADCAST)
    _fits(message, attachments)
    for attempt in attempts():
        with attempt, writer_for(store, actor=message.sender) as writer:
            message = _unique(writer.target, message, active)
            message = message._replace(attachments=writer.attach(attachments))
            oid = writer.commit(message)
            changes = [Change(active + message.id, oid, None)]
            if from_session is None:  # one transaction: the broadcast, and its sender in its seen-set
                seen, _ = writer.note_lines(
                    SEEN_NOTES, {oid: [str(message.sender)]}, who=message.sender, when=message.date
                )
                changes += [seen] if seen else []
            writer.apply(changes, f"gitmail: {message.sender} broadcast {message.id}")
    return Entry(message, State.BROADCAST, oid, None)


def reply(
    store: Store,
    *,
    sender: str,
    to_id: str,
    subject: str | None = None,
    body: bytes | str = "",
    when: datetime | None = None,
    from_session: str | None = None,
    to_handle: str | None = None,
    urgency: str = levels.NORMAL,
    attachments: Sequence[Outgoing] = (),
) -> Entry:
    """Answer a message: routed to its sender (to the very session that sent it, when one did), threaded on it,
    and archiving it for the replier in one step."""
    me = RepoName.parse(sender)
    original = show(store, to_id)
    first = original.message
    if first.sender == me and first.is_broadcast and first.from_session in (None, from_session):
        raise GitmailError(f"{first.id} is your own broadcast; send a new broadcast instead of a reply")
    # Answering your own directed message is a follow-up to its recipient (and to its session, if it had one); a
    # message another session of the same repo sent is answered like any other: back to that session.
    follow_up = first.sender == me and (first.from_session is None or first.from_session == from_session)
    recipient = RepoName(first.to) if follow_up else first.sender
    to_session = first.to_session if follow_up else first.from_session
    message = _compose(
        sender=me,
        to=recipient,
        subject=subject if subject is not None else reply_subject(first.subject),
        body=body,
        when=when,
        reply_to=first.id,
    )
    handle = (first.to_handle if follow_up else to_handle) if to_session else None
    message = message._replace(
        from_session=from_session, to_session=to_session, to_handle=handle, urgency=levels.parse(urgency)
    )
    _fits(message, attachments)
    for attempt in attempts():
        with attempt, writer_for(store, actor=me) as writer:
            message = _unique(writer.target, message, inbox_prefix(recipient))
            message = message._replace(attachments=writer.attach(attachments))
            oid = writer.commit(message, parents=[original.oid])
            changes = [Change(inbox_prefix(recipient) + message.id, oid, None)]
            mine = inbox_prefix(me) + first.id
            if writer.target(mine) == original.oid:
                changes += [Change(archive_prefix(me) + first.id, original.oid, None), Change(mine, None, original.oid)]
            record = receipts.Record(receipts.REPLIED, str(me), message.date, reply=message.id)
            changes += receipts_change(writer, {original.oid: [record]}, me)
            writer.apply(changes, f"gitmail: {me} replied to {first.id} with {message.id}")
            pendingindex.written(writer, inbox_prefix(recipient), oid)
    return Entry(message, State.PENDING, oid, recipient)


def retract(store: Store, *, sender: str, message_id: str) -> bool:
    """Stop handing out one's own broadcast (repos that were handed it keep it). False if already retracted."""
    me = RepoName.parse(sender)
    entry = show(store, message_id)
    if not entry.message.is_broadcast:
        raise GitmailError(f"{entry.message.id} is not a broadcast; only broadcasts can be retracted")
    if entry.message.sender != me:
        raise GitmailError(
            f"{entry.message.id} was broadcast by {entry.message.sender!r}; only its sender can retract it"
        )
    if entry.state is State.RETRACTED:
        return False
    active = state_prefix(State.BROADCAST) + entry.message.id
    for attempt in attempts():
        with attempt, writer_for(store, actor=me) as writer:
            if writer.target(active) != entry.oid:
                return False
            retracted = state_prefix(State.RETRACTED) + entry.message.id
            changes = [Change(retracted, entry.oid, None), Change(active, None, entry.oid)]
            # The signed record of it: a "retracted" receipt on the broadcast, in a notes commit of its own that
            # names what it retracts (readers that know no such receipt pass over it).
            record = receipts.Record(receipts.RETRACTED, str(me), now())
            text = (
                f"gitmail: {me} retracted {entry.message.id}\n\nMessage-Id: {entry.message.id}\nCommit: {entry.oid}\n"
                f"Machine: {machines.current(store).field()}\n"
            )
            note, _ = writer.note_lines(
                RECEIPTS_NOTES, {entry.oid: [record.line()]}, who=me, when=record.at, fan_out=True, text=text
            )
            changes += [note] if note is not None else []
            writer.apply(changes, f"gitmail: {me} retracted {entry.message.id}")
    return True


def _compose(
    *,
    sender: str,
    to: str,
    subject: str,
    body: bytes | str,
    when: datetime | None,
    reply_to: str | None = None,
) -> Message:
    """Validate everything before anything is written."""
    if when is not None and when.utcoffset() is None:
        raise UsageError("a message's time must carry a timezone (a naive datetime could never be read back)")
    return Message(
        id=new_id(),
        sender=RepoName.parse(sender),
        to=to,
        subject=clean_subject(subject),
        body=clean_body(body),
        date=when or now(),
        reply_to=reply_to,
    )


_SIGNATURE_ROOM = 512  # bytes a commit's gpgsig header takes (an Ed25519 SSH signature: ~330)


def _fits(message: Message, attachments: Sequence[Outgoing]) -> None:
    """A message with attachments stays within what gitmail reads of one (MAX_DOCUMENT_BYTES), its document and
    its commit alike: the record of its attachments is counted, as the largest machine field and the commit's own
    lines (its signature too) would make it, before anything is written."""
    if not attachments:
        return
    from gitmail.store.objects import ident
    from gitmail.values.machine import Machine

    probe = message._replace(
        attachments=tuple(item.stored("0" * 40) for item in attachments), machine=Machine("m" * 64, "0" * 10)
    )
    heads = 2 * len(f"committer {ident(message.sender, message.date)}\n".encode()) + len("tree \nparent \n") + 80
    heads += _SIGNATURE_ROOM
    size = max(len(probe.document()), len(probe.commit_message().encode()) + heads)
    if size > MAX_DOCUMENT_BYTES:
        body = len(message.body.encode())
        raise UsageError(
            f"the body ({body:,} bytes) and the record of {len(attachments)} attachment"
            f"{'s' if len(attachments) != 1 else ''} come to {size:,} bytes; a message takes at most "
            f"{MAX_DOCUMENT_BYTES:,} (shorten the body by {size - MAX_DOCUMENT_BYTES:,} bytes, or attach fewer files)"
        )


def _unique(target: Callable[[str], str | None], message: Message, prefix: str) -> Message:
    while target(prefix + message.id) is not None:  # 50 random bits: practically never loops
        message = message._replace(id=new_id())
    return message
