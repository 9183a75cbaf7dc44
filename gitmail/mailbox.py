"""Mail in the mailbox: writing a message, a reply, a broadcast or a retraction; reading what is pending for a repo;
recording what was shown; marking done and reopening; history and single messages. The operations over the store
that the action layer (actions.py) composes into what users ask for; it decides nothing about sessions or hosts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from gitmail.errors import GitmailError, MailboxError, NotFound, Unwritable, UsageError
from gitmail.store import machines, syncedreceipts
from gitmail.store.claims import load_claims
from gitmail.store.lock import Deadline, attempts
from gitmail.store.machines import Here
from gitmail.store.machines import local_id as _local_id
from gitmail.store.repository import WRITE_WAIT, Store
from gitmail.values import receipts
from gitmail.values import urgency as levels
from gitmail.values.ids import BROADCAST, ID_ALPHABET, ID_LENGTH, new_id
from gitmail.values.layout import (
    BROADCASTS,
    ROOT,
    SEEN_NOTES,
    Change,
    Located,
    State,
    archive_prefix,
    emails,
    inbox_prefix,
    latest,
    locate,
    note_lines,
    note_specs,
    seen_specs,
    state_prefix,
)
from gitmail.values.message import (
    DOCUMENT_NAME,
    MAX_DOCUMENT_BYTES,
    BadDocument,
    Message,
    clean_body,
    clean_subject,
    parse,
    reply_subject,
)
from gitmail.values.names import UNSAFE_TEXT, RepoName
from gitmail.values.receipts import RECEIPTS_NOTES

if TYPE_CHECKING:  # what writes is loaded only to write
    from gitmail.store import history
    from gitmail.store.remotemoves import Move
    from gitmail.store.writer import Writer
    from gitmail.values.attachments import Attachment
    from gitmail.values.outgoing import Outgoing
    from gitmail.values.verdict import Verdict


CANDIDATES_LISTED = 10  # ids an ambiguous prefix's error names before "and N more"


class Entry(NamedTuple):
    """A stored message and where it stands."""

    message: Message
    state: State
    oid: str  # the message's commit
    recipient: RepoName | None  # whose inbox or archive holds it; None for broadcasts
    records: Sequence[receipts.Record] = ()  # its receipts, where the reader asked for them (log, show)
    moved: Move | None = None  # archived or retracted here because a remote said so (log, show)
    verdict: Verdict | None = None  # from another machine: whether that machine's key vouches for it; None: from here


class Pending(NamedTuple):
    """What a repo has to read: directed mail until done, broadcasts until handed over once."""

    repo: RepoName
    directed: Sequence[Entry] = ()  # oldest first
    broadcasts: Sequence[Entry] = ()  # oldest first
    unreadable: Sequence[str] = ()  # ids whose commit or document cannot be read
    claimed_by: str | None = None  # another path that uses the same repo name, when there is one
    receipted: frozenset[str] = frozenset()  # ids already put in front of a session of this repo once


class DoneResult(NamedTuple):
    archived: Sequence[Entry] = ()
    already: Sequence[str] = ()  # already archived, or broadcasts (nothing to archive)
    unshown: Sequence[str] = ()  # `everything`: pending mail no session of this repo was shown yet, left alone
    set_aside: Sequence[str] = ()  # unreadable: moved under refs/gitmail/_damaged/ instead of archived


class History(list[Entry]):
    """What `log` found: its entries, the ids of messages it selected that could not be read, and what it could
    not record on the way (the history index, on a full disk), one line."""

    def __init__(
        self, entries: Iterable[Entry] = (), unreadable: Sequence[str] = (), unrecorded: str | None = None
    ) -> None:
        super().__init__(entries)
        self.unreadable = list(unreadable)
        self.unrecorded = unrecorded


def _delivered(
    entry: Entry, me: RepoName, when: datetime, host: str, moment: str, machine: str | None
) -> receipts.Record:
    """A first showing's receipt; mail a worktree's old name holds is receipted for that name."""
    whose = str(entry.recipient or me)
    return receipts.Record(receipts.DELIVERED, whose, when, host=host, moment=moment, machine=machine)


def local_machine_id(store: Store) -> str | None:
    """This mailbox's machine id, as receipts record where a showing happened."""
    try:
        return _local_id(store, create=True)
    except MailboxError:
        return None


def _writing(store: Store, **kwargs: Any) -> AbstractContextManager[Writer]:
    """store/writer.py's `writing`, imported when something is to be written: readers never load the writer."""
    from gitmail.store.writer import writing

    return writing(store, **kwargs)


def now() -> datetime:
    return datetime.now(UTC).astimezone()


# -- sending ---------------------------------------------------------------------------------------------------


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
        with attempt, _writing(store, actor=message.sender) as writer:
            message = _unique(writer.target, message, inbox_prefix(recipient))
            message = message._replace(attachments=writer.attach(attachments))
            oid = writer.commit(message)
            writer.apply(
                [Change(inbox_prefix(recipient) + message.id, oid, None)],
                f"gitmail: {message.sender} sent {message.id}",
            )
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
        with attempt, _writing(store, actor=message.sender) as writer:
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
        with attempt, _writing(store, actor=me) as writer:
            message = _unique(writer.target, message, inbox_prefix(recipient))
            message = message._replace(attachments=writer.attach(attachments))
            oid = writer.commit(message, parents=[original.oid])
            changes = [Change(inbox_prefix(recipient) + message.id, oid, None)]
            mine = inbox_prefix(me) + first.id
            if writer.target(mine) == original.oid:
                changes += [Change(archive_prefix(me) + first.id, original.oid, None), Change(mine, None, original.oid)]
            record = receipts.Record(receipts.REPLIED, str(me), message.date, reply=message.id)
            changes += _receipts(writer, {original.oid: [record]}, me)
            writer.apply(changes, f"gitmail: {me} replied to {first.id} with {message.id}")
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
        with attempt, _writing(store, actor=me) as writer:
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


# -- reading and handing over ----------------------------------------------------------------------------------


def pending(
    store: Store,
    *,
    repo: str,
    also: Sequence[RepoName] = (),
    timeout: float = WRITE_WAIT,
    deadline: Deadline | None = None,
) -> Pending:
    """A repo's pending directed mail (and what waits under the other names in `also`) and the broadcasts not yet
    handed to it, with which of them a session of this repo was already shown. A broadcast its repo sent is not for
    it, unless a session sent it (then the repo's other sessions get it: delivery.py keeps it from the sender's).
    Writes nothing (unless a writer died mid-change: that change is finished first, when this process may write
    and the lock comes free in time)."""
    me = RepoName.parse(repo)
    if not store.exists():
        return Pending(me)
    if (store.own_dir / "journal").exists() and store.writable():
        try:
            with store.locked(deadline=deadline or Deadline(timeout)):
                pass  # a writer died mid-change: the lock finishes it
        except MailboxError:
            pass  # a live writer holds the lock and will finish it; reading meanwhile is safe
    places = store.refs(inbox_prefix(me), *(inbox_prefix(name) for name in also), state_prefix(State.BROADCAST))
    broadcast_places = [p for p in places if p.state is State.BROADCAST]
    specs = [f"{p.oid}:{DOCUMENT_NAME}" for p in places]
    specs += [s for p in broadcast_places for s in seen_specs(p.oid)]
    receipted_places = places if store.flag("receipts") else []
    specs += [s for p in receipted_places for s in note_specs(RECEIPTS_NOTES, p.oid)]
    documents = store.read(specs, limit=MAX_DOCUMENT_BYTES)  # documents and notes: nothing larger is read
    entries, unreadable = _entries(places, documents[: len(places)], Here(store))
    notes = documents[len(places) : len(places) + 3 * len(broadcast_places)]
    seen = {p.oid: note_lines(notes[3 * i : 3 * i + 3]) for i, p in enumerate(broadcast_places)}
    receipt_notes = documents[len(places) + 3 * len(broadcast_places) :]
    here = _local_id(store) if receipted_places else None
    made_up = syncedreceipts.load(store)  # what sync brought in claiming this machine's showings
    receipted = frozenset(  # what this machine has receipted: one from another machine still wants this one's
        p.id
        for i, p in enumerate(receipted_places)
        if receipts.delivered(
            receipts.written_on(receipts.parse(note_lines(receipt_notes[3 * i : 3 * i + 3])), here, made_up[p.oid]),
            str(p.recipient or me),
        )
    )
    directed = [e for e in entries if e.state is State.PENDING]
    broadcasts = [
        e
        for e in entries
        if e.state is State.BROADCAST
        and (e.message.sender != me or e.message.from_session is not None)
        and me not in seen[e.oid]
    ]
    return Pending(me, _oldest_first(directed), _oldest_first(broadcasts), unreadable, receipted=receipted)


def record_shown(
    store: Store,
    *,
    repo: str,
    shown: Sequence[Entry],
    broadcasts: Sequence[Entry] = (),
    host: str,
    moment: str,
    when: datetime | None = None,
    timeout: float = WRITE_WAIT,
    deadline: Deadline | None = None,
) -> list[Entry]:
    """One write for one showing: hand these broadcasts over to `repo` and record a delivery receipt for every
    message shown to it for the first time. Returns the broadcasts this call handed over: one retracted or handed
    to the same repo by a concurrent reader meanwhile is left out, so each repo gets each one once."""
    me = RepoName.parse(repo)
    if not shown and not broadcasts:
        return []
    when = when or now()
    here = local_machine_id(store)
    for attempt in attempts():
        with attempt, _writing(store, actor=me, deadline=deadline or Deadline(timeout)) as writer:
            active = [e for e in broadcasts if writer.target(state_prefix(State.BROADCAST) + e.message.id) == e.oid]
            seen, added = writer.note_lines(SEEN_NOTES, {e.oid: [str(me)] for e in active}, who=me, when=when)
            handed = [e for e in active if e.oid in added]
            changes = [c for c in [seen] if c is not None]
            if store.flag("receipts"):
                records = {e.oid: [_delivered(e, me, when, host, moment, here)] for e in [*shown, *handed]}
                changes += _receipts(writer, records, me, only_first=True)
            if changes:
                writer.apply(changes, f"gitmail: shown to {me} ({host}, {moment})")
    return handed


def show(store: Store, message_id: str) -> Entry:
    """One message, by id or any unique prefix of it, with its receipts."""
    place = resolve(store, message_id)
    entries, unreadable = _entries([place], _documents(store, [place]), Here(store))
    if unreadable:
        raise _unreadable(place)
    return with_receipts(store, entries)[0]


class Status(NamedTuple):
    """Where a message stands as its sender sees it."""

    name: str  # pending (not yet shown), delivered (shown), done, replied, retracted
    at: datetime | None = None  # when it was first shown, or handled (None where unknown)
    reply: str | None = None  # replied: the reply's id
    reached: Sequence[receipts.Record] = ()  # the first showing to each repo, oldest first


def status(entry: Entry) -> Status:
    """From the message's ref and its receipts (`log` and `show` read them)."""
    if entry.state is State.RETRACTED:
        return Status("retracted", reached=receipts.delivered(entry.records))
    if entry.recipient is None:  # an active broadcast: delivered once any repo was shown it
        reached = receipts.delivered(entry.records)
        return Status("delivered", reached[0].at, reached=reached) if reached else Status("pending")
    reached = receipts.delivered(entry.records, str(entry.recipient))
    if entry.state is State.ARCHIVED:
        handled = receipts.handled(entry.records, str(entry.recipient))
        if handled is not None and handled.event == receipts.REPLIED:
            return Status("replied", handled.at, handled.reply, reached)
        return Status("done", handled.at if handled is not None else None, reached=reached)
    return Status("delivered", reached[0].at, reached=reached) if reached else Status("pending")


# -- attachments ---------------------------------------------------------------------------------------------------


def attachment(entry: Entry, name: str | None = None) -> Attachment:
    """One of a message's attachments, by its name (or the name it was given before it was made safe); the only
    one when no name is given."""
    from gitmail.values.attachments import safe_name

    m = entry.message
    found = m.attachments
    listed = ", ".join(_quoted(a.name) for a in found)
    if not found:
        raise GitmailError(f"message {m.id} has no attachments")
    if name is None:
        if len(found) == 1:
            return found[0]
        raise UsageError(f"message {m.id} has {len(found)} attachments; name one of {listed}")
    for candidate in (name, safe_name(name)):
        for item in found:
            if item.name == candidate:
                return item
    raise NotFound(f"message {m.id} has no attachment named {_quoted(name)}; it has {listed}")


def _quoted(name: str) -> str:
    return json.dumps(name, ensure_ascii=False) if not UNSAFE_TEXT.search(name) else json.dumps(name)


def attached_blob(store: Store, entry: Entry, item: Attachment) -> str:
    """The blob of an attachment as the message's commit holds it, checked against what its document records."""
    from gitmail.values.attachments import FOLDER

    spec = f"{entry.oid}:{FOLDER}/{item.name}"
    out = store.git("cat-file", "--batch-check=%(objectname) %(objecttype) %(objectsize)", stdin=f"{spec}\n".encode())
    fields = out.decode(errors="replace").split()
    if fields[-1:] == ["missing"] or len(fields) != 3:
        raise GitmailError(
            f"the content of {_quoted(item.name)} in message {entry.message.id} is not in this mailbox (its commit has "
            "no such file, or a prune took it); run `gitmail doctor`"
        )
    oid, kind, size = fields
    if oid != item.blob or kind != "blob" or size != str(item.size):
        raise GitmailError(
            f"message {entry.message.id} records {_quoted(item.name)} as blob {item.blob} of {item.size} bytes, but "
            f"its commit holds {kind} {oid} of {size} bytes; it was not written by gitmail as it says"
        )
    return oid


def write_attachment(store: Store, entry: Entry, item: Attachment, fd: int) -> None:
    """Write an attachment's content into an open file, streamed (never whole in memory)."""
    from gitmail.store import gitcmd

    gitcmd.run_into(store.path, fd, "cat-file", "blob", attached_blob(store, entry, item))


def attachment_content(store: Store, entry: Entry, item: Attachment) -> bytes:
    """An attachment's content, whole (for what is small enough to hand over in one answer)."""
    found = store.read([attached_blob(store, entry, item)])[0]
    if found is None:
        raise GitmailError(f"the content of {_quoted(item.name)} in message {entry.message.id} is not in this mailbox")
    return found


def record_applied(store: Store, *, repo: str, entry: Entry, applied: bool) -> None:
    """Record on the message that `repo` applied its patch (or tried, and git could not)."""
    me = RepoName.parse(repo)
    if not store.flag("receipts"):
        return
    event = receipts.APPLIED if applied else receipts.APPLY_FAILED
    record = receipts.Record(event, str(me), now())
    for attempt in attempts():
        with attempt, _writing(store, actor=me) as writer:
            changes = _receipts(writer, {entry.oid: [record]}, me)
            if changes:
                writer.apply(changes, f"gitmail: {me} {'applied' if applied else 'could not apply'} {entry.message.id}")


def _unreadable(place: Located) -> GitmailError:
    return GitmailError(
        f"message {place.id} is stored but cannot be read (its commit or document is damaged); run `gitmail doctor`"
    )


def resolve(store: Store, message_id: str) -> Located:
    prefix = message_id.strip().lower()
    if not prefix or len(prefix) > ID_LENGTH or any(c not in ID_ALPHABET for c in prefix):
        raise UsageError(f"{message_id!r} is not a message id (ids look like 7kq2m9x4ab; a prefix will do)")
    places = latest(store.refs(f"{ROOT}*/*/{prefix}*"))
    if not places:
        raise NotFound(f"no message with id {prefix}")
    if len(places) > 1:
        ids = sorted(p.id for p in places)
        more = f" and {len(ids) - CANDIDATES_LISTED:,} more" if len(ids) > CANDIDATES_LISTED else ""
        raise UsageError(f"id {prefix} is ambiguous: it matches {', '.join(ids[:CANDIDATES_LISTED])}{more}")
    return places[0]


# -- handling ----------------------------------------------------------------------------------------------------


def done(
    store: Store,
    *,
    repo: str,
    also: Sequence[RepoName] = (),
    ids: Sequence[str] = (),
    everything: bool = False,
    seen: set[str] | None = None,
    among: set[str] | None = None,
) -> DoneResult:
    """Archive directed mail without replying (for `repo`, or under the other names in `also` it answers to).
    Already archived mail and broadcasts are reported, not errors; another repo's message is refused, and then
    nothing is archived. `everything` archives the pending mail in `seen` (what the caller was shown whole) among
    the pending ids `among` (default: all), never mail that arrived unseen (that is reported as `unshown`)."""
    me = RepoName.parse(repo)
    names = {me, *also}
    unshown: list[str] = []
    if everything:
        shown = seen or set()
        listed = store.refs(*(inbox_prefix(name) for name in sorted(names)))
        candidates = {p.id for p in listed} if among is None else {p.id for p in listed} & among
        places = [p for p in listed if p.id in shown and p.id in candidates]
        unshown = sorted(candidates - shown)
    else:
        if not ids:
            raise UsageError("name the messages to mark done, or pass --all")
        places = [resolve(store, i) for i in ids]
    already: list[str] = []
    set_aside: list[str] = []
    todo: dict[str, Located] = {}
    for place in places:
        if place.recipient is None:
            already.append(place.id)
        elif place.recipient not in names:
            raise GitmailError(
                f"{place.id} is addressed to {place.recipient!r}, not to {me!r}; "
                f"only {place.recipient!r} can mark it done"
            )
        elif place.state is State.ARCHIVED:
            already.append(place.id)
        else:
            todo[place.id] = place
    if not todo:
        return DoneResult((), already, unshown)
    entries = {e.message.id: e for e in _entries(list(todo.values()), _documents(store, todo.values()), Here(store))[0]}
    archived: list[Entry] = []
    for attempt in attempts():
        with attempt, _writing(store, actor=me) as writer:
            changes: list[Change] = []
            for place in todo.values():
                if writer.target(place.ref) != place.oid:  # a concurrent `done` got there first
                    already.append(place.id)
                    continue
                if place.id not in entries:  # its commit is gone: it can only be set aside
                    changes += _set_aside(writer, place)
                    set_aside.append(place.id)
                else:
                    whose = place.recipient or me
                    changes += [
                        Change(archive_prefix(whose) + place.id, place.oid, None),
                        Change(place.ref, None, place.oid),
                    ]
                    archived.append(entries[place.id]._replace(state=State.ARCHIVED, recipient=whose))
            done_at = now()
            records = {e.oid: [receipts.Record(receipts.DONE, str(e.recipient or me), done_at)] for e in archived}
            changes += _receipts(writer, records, me)
            if changes:
                writer.apply(changes, f"gitmail: {me} marked done {' '.join(todo)}")
    return DoneResult(archived, already, unshown, set_aside)


def reopen(store: Store, *, repo: str, message_id: str) -> Entry:
    """Undo a done (or a reply's archiving): the message is pending again for `repo`."""
    me = RepoName.parse(repo)
    place = resolve(store, message_id)
    if place.recipient is None:
        raise GitmailError(f"{place.id} is a broadcast; only directed mail is archived and reopened")
    if place.recipient != me:
        raise GitmailError(f"{place.id} is addressed to {place.recipient!r}, not to {me!r}; only it can reopen it")
    if place.state is State.PENDING:
        raise GitmailError(f"{place.id} is already pending")
    entry = show(store, place.id)
    for attempt in attempts():
        with attempt, _writing(store, actor=me) as writer:
            if writer.target(place.ref) != place.oid:
                raise GitmailError(f"{place.id} changed while reopening it; try again")
            changes = [Change(inbox_prefix(me) + place.id, place.oid, None), Change(place.ref, None, place.oid)]
            changes += _receipts(writer, {place.oid: [receipts.Record(receipts.REOPENED, str(me), now())]}, me)
            writer.apply(changes, f"gitmail: {me} reopened {place.id}")
    return entry._replace(state=State.PENDING)


def _receipts(
    writer: Writer, records: dict[str, list[receipts.Record]], who: RepoName, *, only_first: bool = False
) -> list[Change]:
    """The ref change that adds these receipt records (none when there is nothing new). With `only_first`, a
    "delivered" record is added only where the repo has none yet from the same machine: later showings add
    nothing."""
    lines: dict[str, list[str]] = {}
    made_up = syncedreceipts.load(writer.store) if only_first else syncedreceipts.Claimed()
    for oid, wanted in records.items():
        if only_first:
            old = [r for r in receipts.parse(writer.note(RECEIPTS_NOTES, oid).splitlines()) if r not in made_up[oid]]
            # first per repo on each machine: one another machine wrote (or a remote made up) is not this one's
            wanted = [r for r in wanted if not receipts.delivered(receipts.written_on(old, r.machine), r.repo)]
        if wanted:
            lines[oid] = [r.line() for r in wanted]
    if not lines:
        return []
    change, _ = writer.note_lines(RECEIPTS_NOTES, lines, who=who, when=now(), fan_out=True)
    return [change] if change is not None else []


def _set_aside(writer: Writer, place: Located) -> list[Change]:
    """A message ref whose commit is gone cannot be archived (git refuses a ref to a missing object): its ref is
    removed and a record of it kept under refs/gitmail/_damaged/, with the reason and the lost commit id."""
    return writer.set_aside(place.ref, place.oid, f"message {place.id}")


def ids_of(entries: Sequence[Entry]) -> list[str]:
    return [e.message.id for e in entries]


def _documents(store: Store, places: Iterable[Located]) -> list[bytes | None]:
    """Each message's document; None where it cannot be read, or is larger than any message gitmail writes."""
    return store.read([f"{p.oid}:{DOCUMENT_NAME}" for p in places], limit=MAX_DOCUMENT_BYTES)


def log(
    store: Store,
    *,
    repo: str | None = None,
    limit: int | None = 20,
    grep: str | None = None,
    thread: str | None = None,
    sent: bool = False,
) -> History:
    """History, newest first, each message with its receipts: a repo's mail (to it, from it, and broadcasts), or
    only what it sent (`sent`), or everyone's when `repo` is None. With `thread`, the whole conversation that
    message belongs to, oldest first. Messages that cannot be read are left out and named in `unreadable` (a
    thread's are left out only)."""
    if not store.exists():
        return History()
    if thread is not None:
        return History(with_receipts(store, _oldest_first(_thread(store, resolve(store, thread)))))
    me = RepoName.parse(repo) if repo is not None else None
    unrecorded = None
    if grep is None and limit is not None:
        try:
            recent = _recent(store, me, limit, sent)
        except Unwritable as error:  # the index is a cache: read every message instead, and say so
            recent, unrecorded = (
                None,
                f"the history index was not written ({error.reason}); this log was read without it",
            )
        if recent is not None:
            return History(with_receipts(store, recent[0]), recent[1])
    common = ["--no-walk=sorted"] + (["--regexp-ignore-case", "--fixed-strings", f"--grep={grep}"] if grep else [])
    common += [f"--max-count={limit}"] if limit is not None else []
    by_me = ["--fixed-strings", f"--glob={ROOT}", *(f"--author=<{e}>" for e in emails(me))] if me is not None else []
    if me is None:
        entries, unreadable = _from_rows(store, store.log_refs(*common, f"--glob={ROOT}"))
    elif sent:
        entries, _ = _from_rows(store, store.log_refs(*common, *by_me))  # another repo's damage is not ours to hear
        entries, unreadable = [e for e in entries if e.message.sender == me], []
    else:
        received, unreadable = _from_rows(
            store, store.log_refs(*common, f"--glob={ROOT}{me.ref}", f"--glob={BROADCASTS}")
        )
        mine, _ = _from_rows(store, store.log_refs(*common, *by_me))
        entries = list({e.message.id: e for e in received + [e for e in mine if e.message.sender == me]}.values())
    return History(with_receipts(store, _newest_first(entries)[:limit]), unreadable, unrecorded)


def _recent(store: Store, me: RepoName | None, limit: int, sent: bool) -> tuple[list[Entry], list[str]] | None:
    """The newest messages through the history index: a few small reads, whatever the archive holds. None when
    there is no index to read."""
    from gitmail.store import history

    names = [history.EVERYONE] if me is None else [me.ref] if sent else [me.ref, history.BROADCAST]
    wanted = limit + 8
    while True:
        lines = store.recent(names, wanted)
        if lines is None:
            return None
        mine = [line for line in lines if line.sender == me.ref] if sent and me is not None else lines
        refs = [ref for line in mine for ref in _homes(line)]
        targets = store.targets(refs)
        homeless = [ref for line in mine if not set(_homes(line)) & set(targets) for ref in _homes(line)]
        targets |= store.written(homeless) if homeless else {}  # a ref whose commit is gone is read as unreadable
        places = latest([p for ref, oid in targets.items() if (p := locate(ref, oid))])
        found, unreadable = _entries(places, _documents(store, places), Here(store))
        entries = _newest_first(found)
        if sent and me is not None:
            entries = [e for e in entries if e.message.sender == me]
        if len(entries) >= limit or len(lines) < wanted:
            return entries[:limit], unreadable
        wanted *= 4


def _homes(line: history.Line) -> list[str]:
    """The refs a message of this history line can be under."""
    from gitmail.store import history

    if line.recipient == history.BROADCAST:
        return [state_prefix(State.BROADCAST) + line.id, state_prefix(State.RETRACTED) + line.id]
    return [f"{ROOT}{line.recipient}/inbox/{line.id}", f"{ROOT}{line.recipient}/archive/{line.id}"]


def with_receipts(store: Store, entries: Sequence[Entry]) -> list[Entry]:
    """The entries, each with its receipt records (one read for all), and for those a remote archived or retracted
    here, the record of it (store/remotemoves.py). A record made on this machine says so by naming no machine, as
    messages do; one made elsewhere (sync brought it) keeps the machine it names."""
    notes = store.read([spec for e in entries for spec in note_specs(RECEIPTS_NOTES, e.oid)], limit=MAX_DOCUMENT_BYTES)
    here, made_up = Here(store).id, syncedreceipts.load(store)
    moves: dict[str, Move] = {}
    if any(e.state in (State.ARCHIVED, State.RETRACTED) for e in entries):
        from gitmail.store import remotemoves  # log and show: the hooks never read it

        moves = remotemoves.load(store)

    def local(record: receipts.Record) -> receipts.Record:
        return record._replace(machine=None) if record.machine == here else record

    return [
        e._replace(
            records=tuple(
                local(r) for r in receipts.parse(note_lines(notes[3 * i : 3 * i + 3])) if r not in made_up[e.oid]
            ),
            moved=m if (m := moves.get(e.message.id)) is not None and m.state == e.state.value else None,
        )
        for i, e in enumerate(entries)
    ]


def _thread(store: Store, place: Located) -> list[Entry]:
    try:
        root = store.git("rev-list", "--max-parents=0", place.oid).decode().split()[0]
    except MailboxError:  # its commit, or one it answers, is gone
        raise _unreadable(place) from None
    rows = store.log_refs("--no-walk", root) + store.log_refs("--ancestry-path", f"^{root}", f"--glob={ROOT}")
    return _from_rows(store, rows)[0]


def _from_rows(store: Store, rows: Sequence[tuple[str, list[str]]]) -> tuple[list[Entry], list[str]]:
    places = latest([p for oid, refs in rows for ref in refs if (p := locate(ref, oid))])
    return _entries(places, _documents(store, places), Here(store))


def _entries(places: Sequence[Located], documents: Sequence[bytes | None], here: Here) -> tuple[list[Entry], list[str]]:
    entries: list[Entry] = []
    unreadable: list[str] = []
    elsewhere: list[tuple[int, Located]] = []
    for place, document in zip(places, documents, strict=True):
        try:
            if document is None:
                raise BadDocument("missing document")
            message = parse(document)
            message = message._replace(machine=here.machine_of(message.id, message.machine))
            if message.machine is not None:
                elsewhere.append((len(entries), place))
            entries.append(Entry(message, place.state, place.oid, place.recipient))
        except BadDocument:
            unreadable.append(place.id)
    if elsewhere:
        found = [(place, entries[i].message) for i, place in elsewhere]
        for (i, _), verdict in zip(elsewhere, vouched(here.store, found), strict=True):
            entries[i] = entries[i]._replace(verdict=verdict)
    return entries, unreadable


def vouched(store: Store, found: Sequence[tuple[Located, Message]]) -> list[Verdict]:
    """Whether the machine each of these messages names vouches for it, as found at its place (each commit's
    signature is checked once; its result is kept)."""
    from gitmail.store import signatures  # only where mail came from another machine

    return signatures.verdicts(store, found)


def _oldest_first(entries: list[Entry]) -> list[Entry]:
    return sorted(entries, key=lambda e: (e.message.date, e.message.id))


def _newest_first(entries: list[Entry]) -> list[Entry]:
    return sorted(entries, key=lambda e: (e.message.date, e.message.id), reverse=True)


def known(store: Store, repo: RepoName) -> bool:
    """Whether any repo of this name has used the mailbox (read or received mail) before."""
    # Cheapest first: the archive can hold many thousand refs, and listing them is what costs.
    return (
        repo in load_claims(store)
        or bool(store.refs(inbox_prefix(repo), count=1))
        or bool(store.refs(archive_prefix(repo), count=1))
    )
