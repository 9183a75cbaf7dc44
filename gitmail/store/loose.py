"""Reading the objects git keeps loose (one zlib-compressed file each) without starting git. New mail is loose until
gitmail packs it (writer.py packs only once thousands have piled up), so the documents, notes and receipts a
session start or an inbox shows are nearly always loose; reading them here spares those reads their git process
(the benchmark's session-start and inbox rows). What is packed is read from its pack (packs.py): a packed
mailbox's notes and archived commits cost no process either. Only what neither answers (gone, damaged, or in a
form packs.py does not read) is left to `git cat-file`, which answers the rest of the same request.

A request is a spec as `git cat-file --batch` takes one: `<object>`, `<object>:<path>` or `<object>^{tree}`, where
`<object>` is an id or a full ref name.

A loose file that is there but cannot be read whole (a torn write, a disk error: its zlib stream breaks off or its
length is not the one its header gives) is damaged: unless a pack holds the same object (git reads packs first), the
spec names nothing, as for a missing object, and the object's id is added to the caller's `damaged` set. git would
die on it, or worse, answer with fewer bytes than it announced.
"""

from __future__ import annotations

import os

from gitmail.store import packs, refs
from gitmail.values.ids import is_oid

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from _typeshed import StrPath

ELSEWHERE = object()  # not answerable from loose objects: ask git
TOO_LARGE = object()  # larger than the reader would read: not read, and not to be asked of git either
HEADER_READ = 256  # compressed bytes read to learn an object's type and size (its header is well under 64 bytes)
# A commit up to this size is read whole even where only its first line is wanted, so that one cut short is found
# damaged as git would find it; a larger one (mail from elsewhere, over every limit) is not read past that line.
WHOLE_COMMIT = 1 << 18
_DAMAGED = object()  # a loose file that cannot be read whole, of an object no pack holds: unreadable here
# The most requests whose packed objects are read here. A git process costs milliseconds to start, then reads
# faster than this process inflates (a message's document, through its commit and tree: 10 read here in 1.0 ms
# against 2.3 ms through git, 50 in 3.1 against 2.5, 1,000 in 65 against 23 ms, git's start not counted).
PACKED_READS = 64


def read(
    mailbox: StrPath, specs: Sequence[str], *, limit: int | None = None, damaged: set[str] | None = None
) -> list[bytes | None | object]:
    """The content each spec names (None: it names nothing, as cat-file's "missing", or what it names is damaged),
    ELSEWHERE, or TOO_LARGE when the object it names is larger than `limit` bytes (nothing of it is read past its
    header). The ids of damaged objects met on the way are added to `damaged`."""
    reader = _Loose(mailbox, packed=len(specs) <= PACKED_READS)
    found = [reader.spec(spec, limit) for spec in specs]
    if damaged is not None:
        damaged.update(reader.damaged)
    return found


class _Loose:
    def __init__(self, mailbox: StrPath, *, packed: bool = True) -> None:
        self.objects = os.path.join(mailbox, "objects")
        self.mailbox = mailbox
        self.cache: dict[str, tuple[bytes, bytes] | None | object] = {}
        self.trees: dict[str, dict[bytes, str]] = {}  # tree id -> its entries by name
        self.refs: dict[str, str | None] = {}
        self.damaged: set[str] = set()
        self.packs = packs.Packs(self.objects) if packed else None

    def spec(self, spec: str, limit: int | None = None) -> bytes | None | object:
        name, colon, path = spec.partition(":")
        peel_tree = name.endswith("^{tree}")
        name = name.removesuffix("^{tree}")
        oid = name if is_oid(name) else self.ref(name) if name.startswith("refs/") else None
        if oid is None:
            return ELSEWHERE if not name.startswith("refs/") else None  # a ref that is not there names nothing
        parts = [p for p in path.split("/") if p] if colon else []
        found = self.object(oid, None if peel_tree or colon else limit, head=peel_tree or bool(colon))
        if not isinstance(found, tuple):
            return _unread(found)
        kind, data = found
        if peel_tree or colon:
            if kind != b"commit":
                return ELSEWHERE
            oid = data[5:45].decode(errors="replace")  # "tree <id>" is a commit's first line (all of it read)
            found = self.object(oid, None if parts else limit)
            if not isinstance(found, tuple):
                return _unread(found)
            kind, data = found
        for number, part in enumerate(parts):
            if kind != b"tree":
                return None  # a path through something that is not a folder names nothing
            if oid not in self.trees:
                self.trees[oid] = _entries(data)
            entry = self.trees[oid].get(part.encode())
            if entry is None:
                return None
            oid = entry
            found = self.object(entry, limit if number == len(parts) - 1 else None)
            if not isinstance(found, tuple):
                return _unread(found)
            kind, data = found
        return bytes(data)  # the same object: bytes(b) is b

    def ref(self, name: str) -> str | None:
        if name not in self.refs:
            self.refs[name] = refs.resolve(self.mailbox, [name]).get(name)
        return self.refs[name]

    def object(self, oid: str, limit: int | None = None, *, head: bool = False) -> tuple[bytes, bytes] | None | object:
        """(type, content) of a loose object; None when it is not loose here; TOO_LARGE when it is larger than
        `limit` bytes (only its header is read); _DAMAGED when its file cannot be read whole and no pack holds it
        either. With `head`, a commit larger than WHOLE_COMMIT is read only to its first line (a message's commit holds
        the whole message: it is read only to find the message's tree)."""
        if oid in self.cache:
            return self.cache[oid]
        found: tuple[bytes, bytes] | None | object = None
        try:
            with open(os.path.join(self.objects, oid[:2], oid[2:]), "rb") as handle:
                if limit is not None or head:
                    start = _start(handle.read(HEADER_READ))
                    header, nul, rest = start.partition(b"\0")
                    kind, _, size = header.partition(b" ")
                    if nul and size.isdigit() and limit is not None and int(size) > limit:
                        return TOO_LARGE  # not cached: a later request may take it whole
                    if nul and head and kind == b"commit" and rest[:5] == b"tree " and len(rest) >= 45:
                        if size.isdigit() and int(size) > WHOLE_COMMIT:
                            return (kind, rest[:45])  # not cached either: it is not the whole commit
                    handle.seek(0)
                data = handle.read()
        except OSError:
            data = None  # not loose: packed, or gone
        if data is not None:
            found = _parse(data)
            if found is None and not (self.packs or packs.Packs(self.objects)).holds(oid):
                self.damaged.add(oid)
                found = _DAMAGED
        if found is None and self.packs is not None:  # in a pack, read here; or not (gone, damaged): git says which
            found = self.packs.object(oid, limit, head_over=WHOLE_COMMIT if head else None)
            if found is packs.TOO_LARGE:
                return TOO_LARGE
            if head:
                return found  # perhaps a commit's first line only: not cached
        self.cache[oid] = found
        return found


def _unread(found: object) -> object:
    """What a spec answers when an object on its way is not read here: ELSEWHERE (ask git) when it is not loose,
    None when it is damaged (it names nothing), TOO_LARGE as it is."""
    return ELSEWHERE if found is None else None if found is _DAMAGED else found


def _start(data: bytes) -> bytes:
    """What the first compressed bytes of a loose object file inflate to (at most 128 bytes: its header and what
    follows it); b"" when they are not zlib (the whole file is then read, and found damaged or not)."""
    import zlib

    try:
        return zlib.decompressobj().decompress(data, 128)
    except zlib.error:
        return b""


_KINDS = (b"blob", b"tree", b"commit", b"tag")


def _parse(data: bytes) -> tuple[bytes, bytes] | None:
    """(type, content) of a loose object file's bytes; None when they are not one whole object."""
    import zlib

    try:
        raw = zlib.decompress(data)
    except zlib.error:
        return None
    header, _, content = raw.partition(b"\0")
    kind, _, size = header.partition(b" ")
    return (kind, content) if size.isdigit() and int(size) == len(content) and kind in _KINDS else None


def _whole(path: str) -> bool:
    """Whether a loose object file can be read whole, as `_parse` reads it, inflated a piece at a time: a large
    object is never held in memory (`gitmail doctor` checks every file, a message too large to read among them)."""
    import zlib

    inflater = zlib.decompressobj()
    start, size, pending = b"", 0, b""
    try:
        with open(path, "rb") as handle:
            while not inflater.eof:
                fresh = b"" if pending else handle.read(_PIECE)
                out = inflater.decompress(pending or fresh, _PIECE)
                pending = inflater.unconsumed_tail
                if not (out or pending or fresh):
                    break  # the file ended before its zlib stream did
                if b"\0" not in start and len(start) < 64:  # the header ("blob 1234\0") is in the first bytes
                    start += out[:64]
                size += len(out)
    except (OSError, zlib.error):
        return False
    header, nul, _ = start.partition(b"\0")
    kind, _, announced = header.partition(b" ")
    whole = inflater.eof and bool(nul) and kind in _KINDS and announced.isdigit()
    return whole and int(announced) == size - len(header) - 1


_PIECE = 1 << 16  # bytes read and inflated at a time when a loose file is only checked


def damaged_files(mailbox: StrPath) -> list[str]:
    """The id of every loose object file that cannot be read whole (whether or not a pack holds the object too):
    what `git fsck` calls corrupt. Reads every loose object (a piece at a time): for `gitmail doctor`."""
    objects = os.path.join(mailbox, "objects")
    found = []
    try:
        folders = sorted(f for f in os.listdir(objects) if len(f) == 2 and is_oid(f + "0" * 38))
    except OSError:
        return []
    for folder in folders:
        try:
            names = sorted(n for n in os.listdir(os.path.join(objects, folder)) if is_oid(folder + n))
        except OSError:
            continue
        found += [folder + name for name in names if not _whole(os.path.join(objects, folder, name))]
    return found


def damaged(mailbox: StrPath, oids: Sequence[str]) -> set[str]:
    """Which of these objects are loose files that cannot be read whole (and are in no pack)."""
    objects = os.path.join(mailbox, "objects")
    return {
        oid
        for oid in oids
        if is_oid(oid)
        and os.path.exists(path := os.path.join(objects, oid[:2], oid[2:]))
        and not _whole(path)
        and not packed(objects, oid)
    }


def packed(objects: str, oid: str) -> bool:
    """Whether a pack in this objects folder holds `oid`, found in the packs' indexes (a pack whose index this
    cannot read is taken to hold it, so git is asked)."""
    return packs.Packs(objects).holds(oid)


def names(tree: bytes) -> set[bytes] | None:
    """The names of a tree's entries, as `_entries` reads them; None for one that does not parse."""
    try:
        return set(_entries(tree))
    except ValueError:
        return None


def _entries(tree: bytes) -> dict[bytes, str]:
    """A tree's entries: name -> id."""
    found = {}
    at = 0
    while at < len(tree):
        space = tree.index(b" ", at)
        nul = tree.index(b"\0", space)
        found[tree[space + 1 : nul]] = tree[nul + 1 : nul + 21].hex()
        at = nul + 21
    return found
