"""Reading objects from git's packs without starting git. Once a mailbox has been packed (packing.py, as mail
accumulates), the notes a session start reads and the commits `log` shows are in packs: read here, they cost a
lookup in the pack's index and a zlib stream each, where asking `git cat-file` costs a process (milliseconds, more
than the rest of a session start's work).

What is read: version 2 pack indexes (the sorted ids, then their offsets; a pack over 2 GiB keeps large offsets
in a table of their own) and the objects of version 2 and 3 packs, whole or as deltas on a base in the same pack
(by its offset, or named by its id). Anything else (a thin pack's base elsewhere: git completes those it fetches),
and anything that does not read back whole (a zlib stream that breaks off, a delta that does not fit its base, a
size other than the one announced), is not answered here: the caller asks git, which knows the rest and says
what is damaged. An index is read only after its pack is complete (git renames the index into place last), and a
pack a packer deletes meanwhile stays readable through the open mapping.
"""

from __future__ import annotations

import mmap
import os
import zlib

KINDS = {1: b"commit", 2: b"tree", 3: b"blob", 4: b"tag"}
_OFS_DELTA, _REF_DELTA = 6, 7
_INDEX_MAGIC = b"\377tOc\x00\x00\x00\x02"
_NAMES = 8 + 256 * 4  # where an index's sorted ids begin, after its header and fan-out table
_MAX_CHAIN = 100  # deeper than git makes (its default depth is 50): a loop in a damaged pack ends here
TOO_LARGE = object()  # larger than the caller would read: its content is not inflated


class _Pack:
    def __init__(self, index: mmap.mmap, pack: mmap.mmap) -> None:
        self.index, self.pack = index, pack
        self.count = int.from_bytes(index[_NAMES - 4 : _NAMES], "big")
        self.bases: dict[int, tuple[int, bytes]] = {}  # the objects deltas were made on, by offset

    def offset(self, want: bytes) -> int | None:
        """Where the pack holds the object with this (binary) id; None when it holds none."""
        index, first = self.index, want[0]
        low = int.from_bytes(index[8 + 4 * first - 4 : 8 + 4 * first], "big") if first else 0
        high = int.from_bytes(index[8 + 4 * first : 12 + 4 * first], "big")
        while low < high:
            middle = (low + high) // 2
            found = index[_NAMES + 20 * middle : _NAMES + 20 * middle + 20]
            if found == want:
                return self._offset_of(middle)
            if found < want:
                low = middle + 1
            else:
                high = middle
        return None

    def _offset_of(self, number: int) -> int:
        at = _NAMES + 24 * self.count + 4 * number  # past the ids and their CRCs
        offset = int.from_bytes(self.index[at : at + 4], "big")
        if offset & 0x80000000:  # a large offset: its place in the table of 8-byte offsets that follows
            large = _NAMES + 28 * self.count + 8 * (offset & 0x7FFFFFFF)
            offset = int.from_bytes(self.index[large : large + 8], "big")
        return offset


class Packs:
    """The packs of one objects folder, opened when first asked of, each mapped rather than read."""

    def __init__(self, objects: str) -> None:
        self.folder = os.path.join(objects, "pack")
        self._packs: list[_Pack] | None = None
        self.unread = False  # an index here could not be read (not version 2, or its pack gone meanwhile)

    def holds(self, oid: str) -> bool:
        """Whether a pack here holds the object with this id; True too where an index could not be read (git,
        asked, knows)."""
        want = bytes.fromhex(oid)
        return any(pack.offset(want) is not None for pack in self._opened()) or self.unread

    def object(
        self, oid: str, limit: int | None = None, *, head_over: int | None = None
    ) -> tuple[bytes, bytes] | object | None:
        """(kind, content) of the object with this id; TOO_LARGE when it is larger than `limit` bytes; None when no
        pack holds it, or it cannot be read here whole. With `head_over`, an object larger than that is read only
        as far as a commit's first line ("tree <id>": a message's commit holds the whole message), or where it is
        a delta, not at all (None: git reads it, in a memory not this process's)."""
        try:
            want = bytes.fromhex(oid)
        except ValueError:
            return None
        for pack in self._opened():
            offset = pack.offset(want)
            if offset is None:
                continue
            try:
                size = _size(pack, offset) if limit is not None or head_over is not None else 0
                if limit is not None and size > limit:
                    return TOO_LARGE
                if head_over is not None and size > head_over:
                    return _first_line(pack.pack, offset)
                kind, data = _object(pack, offset, 0)
            except (ValueError, IndexError, RecursionError, zlib.error):  # not readable here: git knows more
                return None
            return (KINDS[kind], data) if kind in KINDS else None
        return None

    def _opened(self) -> list[_Pack]:
        if self._packs is None:
            self._packs = []
            try:
                names = sorted(n for n in os.listdir(self.folder) if n.endswith(".idx"))
            except OSError:
                names = []
            for name in names:
                pack = _open(os.path.join(self.folder, name))
                if pack is not None:
                    self._packs.append(pack)
                else:
                    self.unread = True
        return self._packs


def _open(index_path: str) -> _Pack | None:
    """The pack of this index, both mapped; None where either cannot be (not version 2, gone, empty)."""
    try:
        with open(index_path, "rb") as index_file, open(index_path[: -len(".idx")] + ".pack", "rb") as pack_file:
            index = mmap.mmap(index_file.fileno(), 0, access=mmap.ACCESS_READ)
            pack = mmap.mmap(pack_file.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    if index[:8] != _INDEX_MAGIC or pack[:4] != b"PACK" or pack[4:8] not in (b"\0\0\0\2", b"\0\0\0\3"):
        return None
    return _Pack(index, pack)


def _header(pack: mmap.mmap, offset: int) -> tuple[int, int, int]:
    """(type, size, where the data begins) of the object entry at `offset`."""
    byte = pack[offset]
    kind, size, shift, at = (byte >> 4) & 7, byte & 15, 4, offset + 1
    while byte & 0x80:
        byte = pack[at]
        size |= (byte & 0x7F) << shift
        shift, at = shift + 7, at + 1
    return kind, size, at


def _first_line(pack: mmap.mmap, offset: int) -> tuple[bytes, bytes] | None:
    """(b"commit", its "tree <id>" line) of a commit stored whole at `offset`, inflating no more than that line."""
    kind, _, at = _header(pack, offset)
    start = zlib.decompressobj().decompress(pack[at : at + 1024], 45)
    return (KINDS[1], start) if kind == 1 and len(start) == 45 and start.startswith(b"tree ") else None


def _size(pack: _Pack, offset: int) -> int:
    """The size of the object at `offset`: its header's, or for a delta the size its delta makes."""
    kind, size, at = _header(pack.pack, offset)
    if kind not in (_OFS_DELTA, _REF_DELTA):
        return size
    at = _base_offset(pack.pack, at)[1] if kind == _OFS_DELTA else at + 20
    start = zlib.decompressobj().decompress(pack.pack[at : at + 1024], 20)  # its two sizes, 10 bytes at most each
    return _varint(start, _varint(start, 0)[1])[0]


def _object(pack: _Pack, offset: int, depth: int) -> tuple[int, bytes]:
    if depth > _MAX_CHAIN:
        raise ValueError("a delta chain too long")
    kept = pack.bases.get(offset)
    if kept is not None:
        return kept
    kind, size, at = _header(pack.pack, offset)
    if kind == _OFS_DELTA:
        distance, at = _base_offset(pack.pack, at)
        if not 0 < distance <= offset:
            raise ValueError("a delta's base outside its pack")
        base_kind, base = _object(pack, offset - distance, depth + 1)
        found = (base_kind, _apply(base, _inflate(pack.pack, at, size)))
    elif kind == _REF_DELTA:  # its base named by id: in this pack (git completes a fetched pack whose base is not)
        base_offset = pack.offset(pack.pack[at : at + 20])
        if base_offset is None:
            raise ValueError("a delta's base is not in its pack")
        base_kind, base = _object(pack, base_offset, depth + 1)
        found = (base_kind, _apply(base, _inflate(pack.pack, at + 20, size)))
    elif kind in KINDS:
        found = (kind, _inflate(pack.pack, at, size))
    else:
        raise ValueError(f"an object of type {kind}")
    if depth:  # a delta's base: others of the chain, read next, are made on it too
        pack.bases[offset] = found
    return found


def _base_offset(pack: mmap.mmap, at: int) -> tuple[int, int]:
    """An offset delta's distance back to its base, and where its data begins."""
    byte = pack[at]
    distance, at = byte & 0x7F, at + 1
    while byte & 0x80:
        byte = pack[at]
        distance = ((distance + 1) << 7) | (byte & 0x7F)
        at += 1
    return distance, at


def _inflate(pack: mmap.mmap, at: int, size: int) -> bytes:
    """The `size` bytes the zlib stream at `at` inflates to; ValueError when it does not end with exactly those
    (never inflating more than one byte past them, whatever the stream holds)."""
    stream = zlib.decompressobj()
    out = bytearray()
    step = size + 64
    while not stream.eof:
        data = stream.unconsumed_tail
        if not data:
            data = pack[at : at + step]
            if not data:
                raise ValueError("a zlib stream cut short")
            at, step = at + len(data), step * 2
        out += stream.decompress(data, size + 1 - len(out))
        if len(out) > size:
            raise ValueError("an object longer than its header says")
    if len(out) != size:
        raise ValueError("an object shorter than its header says")
    return bytes(out)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        shift, at = shift + 7, at + 1
        if not byte & 0x80:
            return value, at


def _apply(base: bytes, delta: bytes) -> bytes:
    """The object a delta makes of its base: its copies of the base's ranges and its own inserted bytes."""
    base_size, at = _varint(delta, 0)
    size, at = _varint(delta, at)
    if base_size != len(base):
        raise ValueError("a delta made for another base")
    out = bytearray()
    end = len(delta)
    while at < end:
        op = delta[at]
        at += 1
        if op & 0x80:  # copy: up to four bytes of offset and three of length, each present where its bit is set
            offset = length = 0
            for bit in range(4):
                if op & (1 << bit):
                    offset |= delta[at] << (8 * bit)
                    at += 1
            for bit in range(3):
                if op & (0x10 << bit):
                    length |= delta[at] << (8 * bit)
                    at += 1
            length = length or 0x10000
            if offset + length > base_size:
                raise ValueError("a delta copying past its base")
            out += base[offset : offset + length]
        elif op:  # insert the next `op` bytes
            out += delta[at : at + op]
            at += op
        else:
            raise ValueError("a delta with a reserved instruction")
    if len(out) != size:
        raise ValueError("a delta making an object of another size")
    return bytes(out)
