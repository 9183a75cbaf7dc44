"""Marking mail done, reopening it, and recording that a patch was applied."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gitmail.errors import GitmailError
from gitmail.store.lock import attempts
from gitmail.store.machines import Here
from gitmail.values import receipts
from gitmail.values.layout import (
    Change,
    Located,
    State,
    archive_prefix,
    inbox_prefix,
)
from gitmail.values.mail import DoneResult, Entry
from gitmail.values.names import RepoName

if TYPE_CHECKING:  # what writes is loaded only to write
    from collections.abc import Sequence

    from gitmail.store.repository import Store

    pass


from gitmail.mailbox.finding import documents_of, parsed, resolve, show
from gitmail.mailbox.writes import now, receipts_change, set_aside_change, writer_for


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
    entries = {e.message.id: e for e in parsed(list(todo.values()), documents_of(store, todo.values()), Here(store))[0]}
    archived: list[Entry] = []
    for attempt in attempts():
        with attempt, writer_for(store, actor=me) as writer:
            changes: list[Change] = []
            for place in todo.values():
                if writer.target(place.ref) != place.oid:  # a concurrent `done` got there first
                    already.append(place.id)
                    continue
                if place.id not in entries:  # its commit is gone: it can only be set aside
                    changes += set_aside_change(writer, place)
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
            changes += receipts_change(writer, records, me)
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
        with attempt, writer_for(store, actor=me) as writer:
            if writer.target(place.ref) != place.oid:
                raise GitmailError(f"{place.id} changed while reopening it; try again")
            changes = [Change(inbox_prefix(me) + place.id, place.oid, None), Change(place.ref, None, place.oid)]
            changes += receipts_change(writer, {place.oid: [receipts.Record(receipts.REOPENED, str(me), now())]}, me)
            writer.apply(changes, f"gitmail: {me} reopened {place.id}")
    return entry._replace(state=State.PENDING)


def record_applied(store: Store, *, repo: str, entry: Entry, applied: bool) -> None:
    """Record on the message that `repo` applied its patch (or tried, and git could not)."""
    me = RepoName.parse(repo)
    if not store.flag("receipts"):
        return
    event = receipts.APPLIED if applied else receipts.APPLY_FAILED
    record = receipts.Record(event, str(me), now())
    for attempt in attempts():
        with attempt, writer_for(store, actor=me) as writer:
            changes = receipts_change(writer, {entry.oid: [record]}, me)
            if changes:
                writer.apply(changes, f"gitmail: {me} {'applied' if applied else 'could not apply'} {entry.message.id}")
