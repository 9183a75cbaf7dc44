"""What every write of mail shares: the writer (loaded only to write), the time it records, the notes change that
adds receipts, setting a damaged message aside, and this machine's id for receipts."""

from __future__ import annotations

from gitmail.errors import MailboxError
from gitmail.store import syncedreceipts
from gitmail.store.machines import local_id as _local_id
from gitmail.values import receipts
from gitmail.values.dates import UTC, datetime
from gitmail.values.receipts import RECEIPTS_NOTES

TYPE_CHECKING = False
if TYPE_CHECKING:  # what writes is loaded only to write
    from collections.abc import Mapping
    from contextlib import AbstractContextManager
    from typing import Any

    from gitmail.store.repository import Store
    from gitmail.store.writer import Writer
    from gitmail.values.ids import ObjectId
    from gitmail.values.layout import (
        Change,
        Located,
    )
    from gitmail.values.names import RepoName


def local_machine_id(store: Store) -> str | None:
    """This mailbox's machine id, as receipts record where a showing happened."""
    try:
        return _local_id(store, create=True)
    except MailboxError:
        return None


def writer_for(store: Store, **kwargs: Any) -> AbstractContextManager[Writer]:
    """store/writer.py's `writing`, imported when something is to be written: readers never load the writer."""
    from gitmail.store.writer import writing

    return writing(store, **kwargs)


def now() -> datetime:
    return datetime.now(UTC).astimezone()


def receipts_change(
    writer: Writer, records: Mapping[ObjectId, list[receipts.Record]], who: RepoName, *, only_first: bool = False
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


def set_aside_change(writer: Writer, place: Located) -> list[Change]:
    """A message ref whose commit is gone cannot be archived (git refuses a ref to a missing object): its ref is
    removed and a record of it kept under refs/gitmail/_damaged/, with the reason and the lost commit id."""
    return writer.set_aside(place.ref, place.oid, f"message {place.id}")
