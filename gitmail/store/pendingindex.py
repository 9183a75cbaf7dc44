"""The index of pending mail: for each folder of pending refs (a repository's inbox, the active broadcasts), a
record of each message there (its id, date, urgency, size, sender, subject, the session it is for, and its
document), keyed by the commit the ref names. A session start or an inbox then reads one file instead of three
objects a message (commit, tree, document).

It is a cache, never the truth: the refs say what is pending, and a record is used only for a commit a ref of its
folder names now. A commit never changes, so a record cannot be stale for the commit it is keyed by; a ref the
index has no record for (mail a writer that died did not index, mail a sync brought in) is read from its objects
and its record added, and the records of commits no ref names any more (mail done, replied to, handed over) are
dropped: each reader that finds the index disagreeing with the refs writes it again. The writer adds the record of
what it sends while it holds the mailbox's lock, after the ref has moved; dying in between leaves an index that
lacks it, which the next reader mends. Every write replaces the whole file by a rename, so a reader sees one
version or the next, never a part; a file that cannot be read (damaged, or from another version) is no index.
"""

from __future__ import annotations

import marshal
import os

from gitmail.store.files import write_atomically

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from pathlib import Path

    from gitmail.store.writer import Writer
    from gitmail.values.message import Message

FOLDER = "pending"  # in the mailbox's own folder: one file per folder of refs
VERSION = 1
# A record: (id, date as ISO text, urgency, size of the document, sender, subject, session it is for or "",
# document, and the rest of the message as its document parses: (to, body, reply-to, machine field, from-session,
# to-handle), each "" for none; None for a message whose document must be parsed to read it (one with attachments)
Parsed = tuple[str, str, str, str, str, str]
Record = tuple[str, str, str, int, str, str, str, bytes, Parsed | None]


def path(own_dir: Path, prefix: str) -> Path:
    """The index file of a folder of refs ("refs/gitmail/web/inbox/" -> pending/web~inbox): ref names hold only
    characters safe in a file name (names.py encodes them so), and '~' none of them."""
    return own_dir / FOLDER / prefix.removeprefix("refs/gitmail/").rstrip("/").replace("/", "~")


def load(own_dir: Path, prefix: str) -> dict[str, Record]:
    """The folder's records by commit; empty when there is no index, or none that can be read."""
    try:
        with open(path(own_dir, prefix), "rb") as handle:
            found = marshal.load(handle)
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    if not (isinstance(found, tuple) and len(found) == 3 and found[0] == VERSION and found[1] == prefix):
        return {}
    records = found[2]
    if not isinstance(records, dict):
        return {}
    return {oid: record for oid, record in records.items() if _whole(record)}


def _whole(record: object) -> bool:
    if not (isinstance(record, tuple) and len(record) == 9 and isinstance(record[7], bytes)):
        return False
    parsed = record[8]
    return (
        record[3] == len(record[7])
        and all(isinstance(field, str) for field in record[:3] + record[4:7])
        and (parsed is None or (len(parsed) == 6 and all(isinstance(field, str) for field in parsed)))
    )


def save(own_dir: Path, prefix: str, records: Mapping[str, Record]) -> bool:
    """Replace the folder's index; False when it could not be written (a read-only mailbox, a full disk): the
    next reader reads the objects, as without an index."""
    try:
        os.makedirs(own_dir / FOLDER, mode=0o700, exist_ok=True)
        plain = {str(oid): record for oid, record in records.items()}  # marshal writes no str subclass (ObjectId)
        write_atomically(path(own_dir, prefix), marshal.dumps((VERSION, str(prefix), plain)), durable=False)
    except (OSError, ValueError):
        return False
    except Exception as error:  # Unwritable, a MailboxError: the index is a cache, it never fails a read or write
        if type(error).__name__ != "Unwritable":
            raise
        return False
    return True


def kept(
    own_dir: Path, prefix: str, held: Mapping[str, Record], listed: Iterable[str], added: Mapping[str, Record]
) -> bool:
    """Write the index again when it disagreed with the refs: the records `held` of the commits still `listed`,
    and those `added`. True when it was written (or did not need to be)."""
    listed = set(listed)
    if not added and listed.issuperset(held):
        return True
    records = {oid: record for oid, record in held.items() if oid in listed}
    records.update((oid, record) for oid, record in added.items() if oid in listed)
    return save(own_dir, prefix, records)


def add(own_dir: Path, prefix: str, oid: str, record: Record) -> bool:
    """The record of a commit a ref of this folder now names, added (a writer does it under the mailbox's lock)."""
    records = load(own_dir, prefix)
    records[oid] = record
    return save(own_dir, prefix, records)


def written(writer: Writer, prefix: str, oid: str) -> None:
    """The writer's part, under the lock once the ref has moved: the record of the message it wrote, added to the
    pending index of its folder when there is one (the first reader makes it)."""
    from gitmail.values.message import DOCUMENT_NAME, BadDocument, parse  # loaded already: the writer wrote it

    store = writer.store
    if store.old_names or not path(store.own_dir, prefix).exists():
        return
    document = writer.objects.read([f"{oid}:{DOCUMENT_NAME}"])[0]  # as stored, byte for byte
    try:
        message = parse(document) if document is not None else None  # as every reader parses it
    except BadDocument:
        return
    if message is not None and document is not None:
        add(store.own_dir, prefix, oid, record_of(message, document))


def record_of(message: Message, document: bytes) -> Record:
    """What the pending index keeps of a message: its summary, its document as stored, and the rest of it as the
    document parses (`message` must be what it parses to, before anything is made of where it was written)."""
    from gitmail.values.machine import Machine

    field = message.machine.field() if message.machine is not None else ""
    whole = not message.attachments and (Machine.parse(field) if field else None) == message.machine
    rest: Parsed = (
        str(message.to),
        str(message.body),
        str(message.reply_to or ""),
        field,
        str(message.from_session or ""),
        str(message.to_handle or ""),
    )
    return (  # plain str and bytes: the index's file format (marshal) writes no subclass of them
        str(message.id),
        message.date.isoformat(),
        str(message.urgency),
        len(document),
        str(message.sender),
        str(message.subject),
        str(message.to_session or ""),
        bytes(document),
        rest if whole else None,
    )
