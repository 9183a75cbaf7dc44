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

It also keeps what the folder's refs were when a reader last listed them, with the folder's stamp taken before
that listing (refs.py): while the stamp holds, a reader takes that listing instead of reading every ref file. A
ref added, moved or deleted since (by a writer, one that died, a sync, git) changes the stamp, and the next reader
lists the files again; a stamp is trusted only once its times are older, by more than a file system's clock
granularity, than the index file the reader that took it had found (refs.unchanged), so a write in the same tick
as the listing cannot hide behind it.
"""

from __future__ import annotations

import marshal
import os

from gitmail.store import refs
from gitmail.store.files import write_atomically

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from _typeshed import StrPath

    from gitmail.store.writer import Writer
    from gitmail.values.message import Message

if TYPE_CHECKING:
    from typing import NamedTuple
else:
    from gitmail.values.tuples import NamedTuple

FOLDER = "pending"  # in the mailbox's own folder: one file per folder of refs
VERSION = 3
# A record: (id, date as ISO text, urgency, size of the document, sender, subject, session it is for or "",
# document, and the rest of the message as its document parses: (to, body, reply-to, machine field, from-session,
# to-handle), each "" for none; None for a message whose document must be parsed to read it (one with attachments)
Parsed = tuple[str, str, str, str, str, str]
Record = tuple[str, str, str, int, str, str, str, bytes, Parsed | None]
# The folder's refs as a reader listed them (ref -> commit), the stamp taken before, and the modification time (ns)
# of the index file that reader had found, 0 for none: what the stamp's times must be older than.
Listing = tuple[dict[str, str], refs.Stamp, int]


class Folder(NamedTuple):
    """A folder's records, and the refs in it now (from the index, or listed when it could not vouch for them)."""

    records: dict[str, Record]
    refs: dict[str, str]
    listing: Listing  # what the index is to keep of the listing
    fresh: bool  # listed anew: the index is to be written with it
    found: bool  # there was an index file


def path(own_dir: StrPath, prefix: str) -> str:
    """The index file of a folder of refs ("refs/gitmail/web/inbox/" -> pending/web~inbox): ref names hold only
    characters safe in a file name (names.py encodes them so), and '~' none of them."""
    return os.path.join(own_dir, FOLDER, prefix.removeprefix("refs/gitmail/").rstrip("/").replace("/", "~"))


def load(own_dir: StrPath, prefix: str) -> dict[str, Record]:
    """The folder's records by commit; empty when there is no index, or none that can be read."""
    return _opened(own_dir, prefix)[0]


def read(own_dir: StrPath, mailbox: StrPath, prefix: str) -> Folder:
    """The folder's records, and its refs now: the index's listing while the folder's stamp holds, else the ref
    files as they are (refs.listing_stamped), with the listing for `kept` to keep."""
    records, listing, found_at = _opened(own_dir, prefix)
    if listing is not None and refs.unchanged(mailbox, listing[1], listing[2]):
        return Folder(records, listing[0], listing, False, True)
    listed, stamp = refs.listing_stamped(mailbox, prefix)
    return Folder(records, listed, (listed, stamp, found_at), True, found_at != 0)


def _opened(own_dir: StrPath, prefix: str) -> tuple[dict[str, Record], Listing | None, int]:
    """The records, the listing kept beside them, and the file's modification time in ns (0 without a file)."""
    try:
        with open(path(own_dir, prefix), "rb") as handle:
            found_at = os.fstat(handle.fileno()).st_mtime_ns  # before any stamp this reader takes
            found = marshal.loads(handle.read())  # marshal.load reads a file a few bytes at a time
    except (OSError, EOFError, ValueError, TypeError):
        return {}, None, 0
    if not (isinstance(found, tuple) and len(found) == 4 and found[0] == VERSION and found[1] == prefix):
        return {}, None, found_at
    records, listing = found[2], found[3]
    if not isinstance(records, dict):
        return {}, None, found_at
    whole = {oid: record for oid, record in records.items() if _whole(record)}
    return whole, listing if _listing(listing) else None, found_at


def _listing(listing: object) -> bool:
    if not (isinstance(listing, tuple) and len(listing) == 3 and isinstance(listing[0], dict)):
        return False
    stamp, since = listing[1], listing[2]
    return (
        isinstance(since, int)
        and isinstance(stamp, tuple)
        and {*map(type, listing[0]), *map(type, listing[0].values())} <= {str}
        and all(
            isinstance(s, tuple) and len(s) == 3 and isinstance(s[0], str) and type(s[1]) is type(s[2]) is int
            for s in stamp
        )
    )


def _whole(record: object) -> bool:
    """Whether a record read back is one `record_of` made (marshal reads back exact types, never a subclass)."""
    if type(record) is not tuple or tuple(map(type, record)) not in _SHAPES:
        return False
    return record[3] == len(record[7]) and (record[8] is None or tuple(map(type, record[8])) == _PARSED)


_SHAPES = {(str, str, str, int, str, str, str, bytes, kind) for kind in (tuple, type(None))}
_PARSED = (str,) * 6


def save(own_dir: StrPath, prefix: str, records: Mapping[str, Record], listing: Listing | None = None) -> bool:
    """Replace the folder's index (with the listing to keep, when one is given); False when it could not be
    written (a read-only mailbox, a full disk): the next reader reads the refs and objects, as without an index."""
    try:
        os.makedirs(os.path.join(own_dir, FOLDER), mode=0o700, exist_ok=True)
        plain = {str(oid): record for oid, record in records.items()}  # marshal writes no str subclass (ObjectId)
        if listing is not None:  # plain str and int
            listing = ({str(r): str(o) for r, o in listing[0].items()}, listing[1], int(listing[2]))
        written = marshal.dumps((VERSION, str(prefix), plain, listing))
        write_atomically(path(own_dir, prefix), written, durable=False)
    except (OSError, ValueError):
        return False
    except Exception as error:  # Unwritable, a MailboxError: the index is a cache, it never fails a read or write
        if type(error).__name__ != "Unwritable":
            raise
        return False
    return True


def kept(
    own_dir: StrPath,
    prefix: str,
    held: Mapping[str, Record],
    listed: Iterable[str],
    added: Mapping[str, Record],
    listing: Listing | None = None,
    fresh: bool = False,
) -> bool:
    """Write the index again when it disagreed with the refs, or a reader listed them anew (`fresh`): the
    records `held` of the commits still `listed`, those `added`, and the `listing` to keep. True when it was
    written (or did not need to be)."""
    listed = set(listed)
    if not added and listed.issuperset(held) and not fresh:
        return True
    records = {oid: record for oid, record in held.items() if oid in listed}
    records.update((oid, record) for oid, record in added.items() if oid in listed)
    return save(own_dir, prefix, records, listing)


def add(own_dir: StrPath, prefix: str, oid: str, record: Record) -> bool:
    """The record of a commit a ref of this folder now names, added (a writer does it under the mailbox's lock).
    The listing kept beside the records stays: the ref the writer moved changed the folder's stamp."""
    records, listing, _ = _opened(own_dir, prefix)
    records[oid] = record
    return save(own_dir, prefix, records, listing)


def written(writer: Writer, prefix: str, oid: str) -> None:
    """The writer's part, under the lock once the ref has moved: the record of the message it wrote, added to the
    pending index of its folder when there is one (the first reader makes it)."""
    from gitmail.values.message import DOCUMENT_NAME, BadDocument, parse  # loaded already: the writer wrote it

    store = writer.store
    if store.old_names or not os.path.exists(path(store.own_root, prefix)):
        return
    document = writer.objects.read([f"{oid}:{DOCUMENT_NAME}"])[0]  # as stored, byte for byte
    try:
        message = parse(document) if document is not None else None  # as every reader parses it
    except BadDocument:
        return
    if message is not None and document is not None:
        add(store.own_root, prefix, oid, record_of(message, document))


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
