"""What a repository has pending, and the one write that records a showing of it (broadcasts handed over, receipts)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from gitmail.mailbox.finding import oldest_first, parsed
from gitmail.mailbox.writes import local_machine_id, now, receipts_change, writer_for
from gitmail.store import machines, refs, syncedreceipts
from gitmail.store.lock import Deadline, attempts
from gitmail.store.machines import Here
from gitmail.store.machines import local_id as _local_id
from gitmail.store.repository import WRITE_WAIT, Store
from gitmail.values import receipts
from gitmail.values.layout import (
    SEEN_NOTES,
    Located,
    State,
    inbox_prefix,
    state_prefix,
)
from gitmail.values.mail import Entry, Pending
from gitmail.values.message import (
    DOCUMENT_NAME,
    MAX_DOCUMENT_BYTES,
)
from gitmail.values.names import RepoName
from gitmail.values.receipts import RECEIPTS_NOTES


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
    places = store.refs(inbox_prefix(me), *(inbox_prefix(name) for name in also), state_prefix(State.BROADCAST))
    receipted = store.flag("receipts")
    if store.kept is None:
        return _pending(store, me, places, receipted)[0]
    # A long-lived reader: the same refs, notes and machine files are the same mail (what was read is kept, kept.py).
    own = store.own_dir
    files = [str(own / name) for name in (machines.ID_FILE, machines.ARRIVED_FILE, syncedreceipts.FILE)]
    key = (tuple(places), receipted, tuple(sorted(refs.resolve(store.path, [SEEN_NOTES, RECEIPTS_NOTES]).items())))
    made = store.kept.while_same(
        ("pending", me, tuple(also)), key, lambda: files, lambda: _pending(store, me, places, receipted), _whole
    )
    return made[0]


def _whole(made: tuple[Pending, bool]) -> bool:
    return made[1]


def _pending(store: Store, me: RepoName, places: Sequence[Located], receipted: bool) -> tuple[Pending, bool]:
    """The pending mail, and whether it may be kept: every document read whole, and none from another machine
    (whose verdict depends on the keys this machine accepts)."""
    damaged = len(store.damaged)
    receipted_places = places if receipted else []
    notes = {
        SEEN_NOTES: [p.oid for p in places if p.state is State.BROADCAST],
        RECEIPTS_NOTES: [p.oid for p in receipted_places],
    }
    specs = [f"{p.oid}:{DOCUMENT_NAME}" for p in places]
    documents, noted = store.read_with_notes(specs, notes, limit=MAX_DOCUMENT_BYTES)  # nothing larger is read
    entries, unreadable = parsed(places, documents, Here(store))
    seen = noted[SEEN_NOTES]
    here = _local_id(store) if receipted_places else None
    made_up = syncedreceipts.load(store)  # what sync brought in claiming this machine's showings
    shown = frozenset(  # what this machine has receipted: one from another machine still wants this one's
        p.id
        for p in receipted_places
        if receipts.delivered(
            receipts.written_on(receipts.parse(noted[RECEIPTS_NOTES][p.oid]), here, made_up[p.oid]),
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
    mail = Pending(me, oldest_first(directed), oldest_first(broadcasts), unreadable, receipted=shown)
    whole = len(store.damaged) == damaged and not any(e.message.machine is not None for e in entries)
    return mail, whole


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
