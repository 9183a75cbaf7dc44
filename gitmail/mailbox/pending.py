"""What a repository has pending, and the one write that records a showing of it (broadcasts handed over, receipts)."""

from __future__ import annotations

import os

from gitmail.mailbox.finding import oldest_first, parsed
from gitmail.mailbox.writes import local_machine_id, now, receipts_change, writer_for
from gitmail.store import machines, pendingindex, refs, syncedreceipts
from gitmail.store.lock import Deadline, attempts
from gitmail.store.machines import Here
from gitmail.store.machines import local_id as _local_id
from gitmail.store.repository import WRITE_WAIT, Store
from gitmail.values import receipts
from gitmail.values.dates import datetime
from gitmail.values.layout import (
    SEEN_NOTES,
    Located,
    State,
    inbox_prefix,
    located_in,
    state_prefix,
)
from gitmail.values.machine import Machine
from gitmail.values.mail import Entry, Pending, Receipted
from gitmail.values.message import (
    DOCUMENT_NAME,
    MAX_DOCUMENT_BYTES,
    BadDocument,
    Message,
    parse,
)
from gitmail.values.names import RepoName
from gitmail.values.receipts import RECEIPTS_NOTES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


def _delivered(
    entry: Entry, me: RepoName, when: datetime, host: str, moment: str, machine: str | None
) -> receipts.Record:
    """A first showing's receipt; mail a worktree's old name holds is receipted for that name."""
    whose = str(entry.recipient or me)
    return receipts.Record(receipts.DELIVERED, whose, when, host=host, moment=moment, machine=machine)


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
    store.finish_interrupted(deadline or Deadline(timeout))
    prefixes = [inbox_prefix(me), *(inbox_prefix(name) for name in also), state_prefix(State.BROADCAST)]
    receipted = store.flag("receipts")
    if store.kept is None and not store.old_names:
        folders = _folders(store, prefixes)  # the refs as the pending index vouches for them, or as listed now
        return _pending(store, me, _places(folders), receipted, folders)[0]
    places = store.refs(*prefixes)
    if store.kept is None:
        return _pending(store, me, places, receipted)[0]
    # A long-lived reader: the same refs, notes and machine files are the same mail (what was read is kept, kept.py).
    own = store.own_root
    files = [os.path.join(own, name) for name in (machines.ID_FILE, machines.ARRIVED_FILE, syncedreceipts.FILE)]
    key = (tuple(places), receipted, tuple(sorted(refs.resolve(store.root, [SEEN_NOTES, RECEIPTS_NOTES]).items())))
    made = store.kept.while_same(
        ("pending", me, tuple(also)), key, lambda: files, lambda: _pending(store, me, places, receipted), _whole
    )
    return made[0]


def _whole(made: tuple[Pending, bool]) -> bool:
    return made[1]


def _folders(store: Store, prefixes: Sequence[str]) -> dict[str, pendingindex.Folder]:
    """Each folder's records and refs (pendingindex.read: its listing while the folder's stamp holds)."""
    return {prefix: pendingindex.read(store.own_root, store.root, prefix) for prefix in dict.fromkeys(prefixes)}


def _places(folders: Mapping[str, pendingindex.Folder]) -> list[Located]:
    """The message refs of these folders, in git's order (as Store.refs lists them); foreign refs are ignored."""
    places = [place for prefix, folder in folders.items() for place in located_in(prefix, folder.refs)]
    return sorted(places, key=_ref)


def _ref(place: Located) -> str:
    return place.ref


def _pending(
    store: Store,
    me: RepoName,
    places: Sequence[Located],
    receipted: bool,
    folders: Mapping[str, pendingindex.Folder] | None = None,
) -> tuple[Pending, bool]:
    """The pending mail, and whether it may be kept: every document read whole, and none from another machine
    (whose verdict depends on the keys this machine accepts). `folders`: what the pending index had of them."""
    damaged = len(store.damaged)
    receipted_places = places if receipted and folders is None else []  # else read for what is shown (_receipts)
    notes = {
        SEEN_NOTES: [p.oid for p in places if p.state is State.BROADCAST],
        RECEIPTS_NOTES: [p.oid for p in receipted_places],
    }
    held = _indexed(store, places) if folders is None else {p: f.records for p, f in folders.items()}
    indexed = {oid: record for records in held.values() for oid, record in records.items()}
    specs = [f"{p.oid}:{DOCUMENT_NAME}" for p in places if p.oid not in indexed]
    read, noted = store.read_with_notes(specs, notes, limit=MAX_DOCUMENT_BYTES)  # nothing larger is read
    documents = _documents(places, indexed, read)
    known = {oid: message for oid, record in indexed.items() if (message := _message(record)) is not None}
    entries, unreadable = parsed(places, documents, Here(store), known=known)
    if folders is None or specs or not _agrees(folders, len(places)):
        _index(store, held, places, documents, folders or {})
    seen = noted[SEEN_NOTES]
    if receipted and folders is not None:  # one reading: the receipts of what it shows are read when it shows them
        shown = Receipted(find=lambda ids: _receipts(store, me, places, ids))
    else:  # a long-lived reader keeps the mail, receipts read with it
        shown = Receipted(_receipted(store, me, receipted_places, noted[RECEIPTS_NOTES]))
    directed = [e for e in entries if e.state is State.PENDING]
    broadcasts = [
        e
        for e in entries
        if e.state is State.BROADCAST
        and (e.message.sender != me or e.message.from_session is not None)
        and me not in seen[e.oid]
    ]
    mail = Pending(me, oldest_first(directed), oldest_first(broadcasts), unreadable, receipted=shown)
    whole = len(store.damaged) == damaged and not any(e.message.machine is not None for e in entries)
    return mail, whole


def _receipts(store: Store, me: RepoName, places: Sequence[Located], ids: Sequence[str]) -> set[str]:
    """Of these ids, those a session of this repo was shown (the receipts of their places, read now)."""
    wanted = frozenset(ids)
    places = [p for p in places if p.id in wanted]
    if not places:
        return set()
    noted = store.notes(RECEIPTS_NOTES, [p.oid for p in places])
    return _receipted(store, me, places, noted)


def _receipted(store: Store, me: RepoName, places: Sequence[Located], noted: Mapping[str, set[str]]) -> set[str]:
    """Of these places, the ids whose receipts (`noted`: the lines of each commit's note) say this machine showed
    them to a session of this repo: one from another machine still wants this one's."""
    if not places:
        return set()
    here = _local_id(store)
    made_up = syncedreceipts.load(store)  # what sync brought in claiming this machine's showings
    return {
        p.id
        for p in places
        if noted[p.oid]  # no note, no receipt: most pending mail was never shown
        and receipts.delivered(
            receipts.written_on(receipts.parse(noted[p.oid]), here, made_up[p.oid]), str(p.recipient or me)
        )
    }


def _prefix(place: Located) -> str:
    return place.ref[: -len(place.id)]


def _indexed(store: Store, places: Sequence[Located]) -> dict[str, dict[str, pendingindex.Record]]:
    """What the pending index holds for the folders of these places: one file per folder, records by commit."""
    if not places or store.old_names:
        return {}
    return {prefix: pendingindex.load(store.own_root, prefix) for prefix in dict.fromkeys(map(_prefix, places))}


def _documents(
    places: Sequence[Located], indexed: Mapping[str, pendingindex.Record], read: Sequence[bytes | None]
) -> list[bytes | None]:
    """Each place's document: its record's where the index has one, else as read from its objects (in order)."""
    from_objects = iter(read)
    return [indexed[p.oid][7] if p.oid in indexed else next(from_objects) for p in places]


_senders: dict[str, RepoName] = {}


def _message(record: pendingindex.Record) -> Message | None:
    """The message a record holds, as its document parses; None where only its document says (attachments)."""
    rest = record[8]
    if rest is None:
        return None
    to, body, reply_to, machine, from_session, to_handle = rest
    sender = _senders.get(record[4])
    if sender is None:  # most pending mail comes from a few repos: each name is made once
        if len(_senders) >= 1024:
            _senders.clear()
        sender = _senders[record[4]] = RepoName(record[4])
    return Message(
        id=record[0],
        sender=sender,
        to=to,
        subject=record[5],
        body=body,
        date=datetime.fromisoformat(record[1]),
        reply_to=reply_to or None,
        machine=Machine.parse(machine) if machine else None,
        from_session=from_session or None,
        to_session=record[6] or None,
        to_handle=to_handle or None,
        urgency=record[2],
    )


def _agrees(folders: Mapping[str, pendingindex.Folder], places: int) -> bool:
    """Whether the index, which has a record of every place's commit, has no other (one for each of the `places`,
    each message being one commit in one folder) and keeps a listing of the refs as they are: nothing to mend."""
    return not any(f.fresh for f in folders.values()) and sum(len(f.records) for f in folders.values()) == places


def _index(
    store: Store,
    held: Mapping[str, Mapping[str, pendingindex.Record]],
    places: Sequence[Located],
    documents: Sequence[bytes | None],
    folders: Mapping[str, pendingindex.Folder],
) -> None:
    """Mend the pending index where it disagreed with the refs: add what was read from objects (and parses), drop
    what no ref names any more, keep a listing of the refs made anew. A mailbox this process cannot write keeps
    its index as it is."""
    if store.old_names or not (places or any(f.fresh and f.found for f in folders.values())) or not store.writable():
        return
    by_prefix: dict[str, list[tuple[Located, bytes | None]]] = {p: [] for p, f in folders.items() if f.found}
    for place, document in zip(places, documents, strict=True):
        by_prefix.setdefault(_prefix(place), []).append((place, document))
    for prefix, found in by_prefix.items():
        records = held.get(prefix, {})
        folder = folders.get(prefix)
        added: dict[str, pendingindex.Record] = {}
        for place, document in found:
            if place.oid not in records and document is not None:
                try:
                    added[str(place.oid)] = pendingindex.record_of(parse(document), document)
                except BadDocument:
                    continue  # named unreadable each time, as without an index
        listing, fresh = (folder.listing, folder.fresh) if folder is not None else (None, False)
        pendingindex.kept(store.own_root, prefix, records, [p.oid for p, _ in found], added, listing, fresh)


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
        with attempt, writer_for(store, actor=me, deadline=deadline or Deadline(timeout)) as writer:
            active = [e for e in broadcasts if writer.target(state_prefix(State.BROADCAST) + e.message.id) == e.oid]
            seen, added = writer.note_lines(SEEN_NOTES, {e.oid: [str(me)] for e in active}, who=me, when=when)
            handed = [e for e in active if e.oid in added]
            changes = [c for c in [seen] if c is not None]
            if store.flag("receipts"):
                records = {e.oid: [_delivered(e, me, when, host, moment, here)] for e in [*shown, *handed]}
                changes += receipts_change(writer, records, me, only_first=True)
            if changes:
                writer.apply(changes, f"gitmail: shown to {me} ({host}, {moment})")
    return handed
