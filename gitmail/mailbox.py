"""Mail in the mailbox: writing a message, a reply, a broadcast or a retraction; reading what is pending for a repo;
recording what was shown; marking done and reopening; history and single messages. The operations over the store
that the action layer (actions.py) composes into what users ask for; it decides nothing about sessions or hosts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from gitmail.errors import GitmailError, MailboxError, NotFound, Unwritable, UsageError
from gitmail.store.claims import load_claims
from gitmail.store.lock import Deadline, attempts
from gitmail.store.machines import Here
from gitmail.store.repository import WRITE_WAIT, Store
from gitmail.values import receipts
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
from gitmail.values.message import DOCUMENT_NAME, BadDocument, Message, clean_body, clean_subject, parse, reply_subject
from gitmail.values.names import RepoName
from gitmail.values.receipts import RECEIPTS_NOTES

if TYPE_CHECKING:  # what writes is loaded only to write
    from gitmail.store import history
    from gitmail.store.writer import Writer


CANDIDATES_LISTED = 10  # ids an ambiguous prefix's error names before "and N more"


class Entry(NamedTuple):
    """A stored message and where it stands."""

    message: Message
    state: State
    oid: str  # the message's commit
    recipient: RepoName | None  # whose inbox or archive holds it; None for broadcasts
    records: Sequence[receipts.Record] = ()  # its receipts, where the reader asked for them (log, show)


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
) -> Entry:
    """Leave a message in `to`'s inbox; it stays pending there until `to` replies or marks it done."""
    recipient = RepoName.parse(to)
    message = _compose(sender=sender, to=recipient, subject=subject, body=body, when=when)
    for attempt in attempts():
        with attempt, _writing(store, actor=message.sender) as writer:
            message = _unique(writer.target, message, inbox_prefix(recipient))
            oid = writer.commit(message)
            writer.apply(
                [Change(inbox_prefix(recipient) + message.id, oid, None)],
                f"gitmail: {message.sender} sent {message.id}",
            )
    return Entry(message, State.PENDING, oid, recipient)


def broadcast(
    store: Store, *, sender: str, subject: str, body: bytes | str = "", when: datetime | None = None
) -> Entry:
    """Leave a message for every repo: each is handed it once; its sender never is."""
    message = _compose(sender=sender, to=BROADCAST, subject=subject, body=body, when=when)
    active = state_prefix(State.BROADCAST)
    for attempt in attempts():
        with attempt, _writing(store, actor=message.sender) as writer:
            message = _unique(writer.target, message, active)
            oid = writer.commit(message)
            # One transaction: the broadcast, and its sender in its seen-set (a sender is never handed its own).
            seen, _ = writer.note_lines(SEEN_NOTES, {oid: [str(message.sender)]}, who=message.sender, when=message.date)
            changes = [Change(active + message.id, oid, None), *([seen] if seen else [])]
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
) -> Entry:
    """Answer a message: routed to its sender, threaded on it, and archiving it for the replier in one step."""
    me = RepoName.parse(sender)
    original = show(store, to_id)
    first = original.message
    if first.sender == me and first.is_broadcast:
        raise GitmailError(f"{first.id} is your own broadcast; send a new broadcast instead of a reply")
    # Answering your own directed message is a follow-up to its recipient.
    recipient = RepoName(first.to) if first.sender == me else first.sender
    message = _compose(
        sender=me,
        to=recipient,
        subject=subject if subject is not None else reply_subject(first.subject),
        body=body,
        when=when,
        reply_to=first.id,
    )
    for attempt in attempts():
        with attempt, _writing(store, actor=me) as writer:
            message = _unique(writer.target, message, inbox_prefix(recipient))
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


def _unique(target: Callable[[str], str | None], message: Message, prefix: str) -> Message:
    while target(prefix + message.id) is not None:  # 50 random bits: practically never loops
        message = message._replace(id=new_id())
    return message


# -- reading and handing over ----------------------------------------------------------------------------------


def pending(store: Store, *, repo: str, timeout: float = WRITE_WAIT, deadline: Deadline | None = None) -> Pending:
    """A repo's pending directed mail and the broadcasts not yet handed to it, with which of them a session of
    this repo was already shown. Writes nothing (unless a writer died mid-change: that change is finished first,
    when this process may write and the lock comes free in time)."""
    me = RepoName.parse(repo)
    if not store.exists():
        return Pending(me)
    if (store.own_dir / "journal").exists() and store.writable():
        try:
            with store.locked(deadline=deadline or Deadline(timeout)):
                pass  # a writer died mid-change: the lock finishes it
        except MailboxError:
            pass  # a live writer holds the lock and will finish it; reading meanwhile is safe
    places = store.refs(inbox_prefix(me), state_prefix(State.BROADCAST))
    broadcast_places = [p for p in places if p.state is State.BROADCAST]
    specs = [f"{p.oid}:{DOCUMENT_NAME}" for p in places]
    specs += [s for p in broadcast_places for s in seen_specs(p.oid)]
    receipted_places = places if store.flag("receipts") else []
    specs += [s for p in receipted_places for s in note_specs(RECEIPTS_NOTES, p.oid)]
    documents = store.read(specs)
    entries, unreadable = _entries(places, documents[: len(places)], Here(store))
    notes = documents[len(places) : len(places) + 3 * len(broadcast_places)]
    seen = {p.oid: note_lines(notes[3 * i : 3 * i + 3]) for i, p in enumerate(broadcast_places)}
    receipt_notes = documents[len(places) + 3 * len(broadcast_places) :]
    receipted = frozenset(
        p.id
        for i, p in enumerate(receipted_places)
        if receipts.delivered(receipts.parse(note_lines(receipt_notes[3 * i : 3 * i + 3])), str(me))
    )
    directed = [e for e in entries if e.state is State.PENDING]
    broadcasts = [e for e in entries if e.state is State.BROADCAST and e.message.sender != me and me not in seen[e.oid]]
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
    for attempt in attempts():
        with attempt, _writing(store, actor=me, deadline=deadline or Deadline(timeout)) as writer:
            active = [e for e in broadcasts if writer.target(state_prefix(State.BROADCAST) + e.message.id) == e.oid]
            seen, added = writer.note_lines(SEEN_NOTES, {e.oid: [str(me)] for e in active}, who=me, when=when)
            handed = [e for e in active if e.oid in added]
            record = receipts.Record(receipts.DELIVERED, str(me), when, host=host, moment=moment)
            changes = [c for c in [seen] if c is not None]
            if store.flag("receipts"):
                changes += _receipts(writer, {e.oid: [record] for e in [*shown, *handed]}, me, only_first=True)
            if changes:
                writer.apply(changes, f"gitmail: shown to {me} ({host}, {moment})")
    return handed


def show(store: Store, message_id: str) -> Entry:
    """One message, by id or any unique prefix of it, with its receipts."""
    place = resolve(store, message_id)
    entries, unreadable = _entries([place], store.read([f"{place.oid}:{DOCUMENT_NAME}"]), Here(store))
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
    ids: Sequence[str] = (),
    everything: bool = False,
    seen: set[str] | None = None,
) -> DoneResult:
    """Archive directed mail without replying. Already archived mail and broadcasts are reported, not errors;
    another repo's message is refused, and then nothing is archived. `everything` archives the pending mail the
    caller was shown (`seen`: what its session was shown; else what any session of this repo was shown), never
    mail that arrived unseen (that is reported as `unshown`)."""
    me = RepoName.parse(repo)
    unshown: list[str] = []
    if everything:
        mail = pending(store, repo=me)
        if seen is None and not store.flag("receipts"):
            raise UsageError("with receipts off, name the messages to mark done (gitmail cannot tell what was seen)")
        shown = seen if seen is not None else mail.receipted
        places = [p for p in store.refs(inbox_prefix(me)) if p.id in shown]
        unshown = sorted(set(ids_of(mail.directed)) - shown)
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
        elif place.recipient != me:
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
                    changes += [
                        Change(archive_prefix(me) + place.id, place.oid, None),
                        Change(place.ref, None, place.oid),
                    ]
                    archived.append(entries[place.id]._replace(state=State.ARCHIVED, recipient=me))
            record = receipts.Record(receipts.DONE, str(me), now())
            changes += _receipts(writer, {e.oid: [record] for e in archived}, me)
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
    "delivered" record is added only where the repo has none yet: later showings add nothing."""
    lines: dict[str, list[str]] = {}
    for oid, wanted in records.items():
        if only_first:
            old = receipts.parse(writer.note(RECEIPTS_NOTES, oid).splitlines())
            wanted = [r for r in wanted if not receipts.delivered(old, r.repo)]
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
    return store.read([f"{p.oid}:{DOCUMENT_NAME}" for p in places])


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
    """The entries, each with its receipt records (one read for all)."""
    notes = store.read([spec for e in entries for spec in note_specs(RECEIPTS_NOTES, e.oid)])
    return [
        e._replace(records=tuple(receipts.parse(note_lines(notes[3 * i : 3 * i + 3])))) for i, e in enumerate(entries)
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
    return _entries(places, store.read([f"{p.oid}:{DOCUMENT_NAME}" for p in places]), Here(store))


def _entries(places: Sequence[Located], documents: Sequence[bytes | None], here: Here) -> tuple[list[Entry], list[str]]:
    entries, unreadable = [], []
    for place, document in zip(places, documents, strict=True):
        try:
            if document is None:
                raise BadDocument("missing document")
            message = parse(document)
            message = message._replace(machine=here.machine_of(message.id, message.machine))
            entries.append(Entry(message, place.state, place.oid, place.recipient))
        except BadDocument:
            unreadable.append(place.id)
    return entries, unreadable


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
