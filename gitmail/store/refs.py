"""Reading refs from the files git keeps them in, without starting git: a loose file per ref under refs/, and
packed-refs, one sorted line per ref, which a loose file of the same name overrides. The hooks, `send` and the MCP
server read a few refs at a time and cannot afford a git process for each look (the benchmark's session-start,
send and MCP inbox rows); everything else lists refs with `git for-each-ref`.

Reads take no lock. git writes a loose ref by renaming a finished file into place, and packed-refs by renaming a
whole new file over the old one, so each file is read whole or not at all; a ref moving while it is read is seen
before or after the move, as `git for-each-ref` would see it.

A ref file or a packed-refs line that does not hold a ref (garbled on disk, or edited by hand) is passed over: git
stops on such a packed-refs line, and `gitmail doctor` reports both (`broken`).
"""

from __future__ import annotations

import bisect
import mmap
import os

from gitmail.values.ids import is_oid

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from collections.abc import Callable, Iterable, Iterator

    from _typeshed import StrPath


def resolve(mailbox: StrPath, refs: Iterable[str]) -> dict[str, str]:
    """What each of these refs holds, for those that exist."""
    found: dict[str, str] = {}
    rest = []
    for ref in refs:
        oid = _loose(os.path.join(mailbox, ref))
        if oid is not None:
            found[ref] = oid
        else:
            rest.append(ref)
    if rest:
        packed = _Packed(os.path.join(mailbox, "packed-refs"))
        try:
            if packed.size < min(2048 * len(rest), 1 << 16):  # a few short lines a ref: read whole, not bisected
                every = {name.decode("utf-8", "replace"): oid for name, oid in packed.every() if is_oid(oid)}
                found.update((ref, every[ref]) for ref in rest if ref in every)
            else:
                for ref in rest:
                    oid = packed.find(ref)
                    if oid is not None:
                        found[ref] = oid
        finally:
            packed.close()
    return found


def listing(mailbox: StrPath, prefix: str, limit: int | None = None) -> dict[str, str]:
    """Every ref whose name starts with `prefix` (a folder: "refs/gitmail/web/inbox/"), with what it holds; with
    `limit`, the first that many of them by name."""
    # Loose files first, packed-refs after: `git pack-refs` writes packed-refs before it removes the files it packed,
    # so a ref packed meanwhile is in one or the other (read the other way round, it could be in neither).
    loose = _loose_refs(mailbox, prefix)
    found: dict[str, str] = {}
    packed = _Packed(os.path.join(mailbox, "packed-refs"))
    try:
        found.update(packed.under(prefix, limit))
    finally:
        packed.close()
    found.update(loose)  # a loose file overrides a packed line of the same ref
    if limit is not None and len(found) > limit:
        return dict(sorted(found.items())[:limit])
    return found


def lines(mailbox: StrPath, prefix: str) -> set[bytes]:
    """Every ref whose name starts with `prefix`, as packed-refs spells a line (b"<oid> <ref>"), a loose file
    overriding the packed line of its ref: whole listings compared as sets of lines, with no Python step per ref
    (100,000 refs cost a read and a split). Lines that hold no ref may be among them (a peeled value, garbage
    between refs): read the few a caller picks out with `ref_line`."""
    loose = _loose_refs(mailbox, prefix)
    packed = _Packed(os.path.join(mailbox, "packed-refs"))
    try:
        if not packed.there:
            found: set[bytes] = set()
        elif not packed.sorted:
            found = {f"{oid} {ref}".encode() for ref, oid in packed.under(prefix)}
        else:
            key = prefix.encode()
            start, end = packed.first_at_or_after(key), packed.first_at_or_after(_after_all(key))
            block = packed.data[start:end]
            listed = block.split(b"\n")  # in the order of their refs, but for peeled values
            found = set(listed)
            found.discard(b"")
            names = {ref.encode() for ref in loose}
            if b"^" in block:  # a peeled value breaks the order: the lines of overridden refs are looked for
                found.difference_update([line for line in found if line[41:] in names])
            for name in names if b"^" not in block else ():  # each overridden ref's packed line, by bisection
                at = bisect.bisect_left(listed, name, hi=len(listed) - (not listed[-1]), key=lambda line: line[41:])
                if at < len(listed) and listed[at][41:] == name:
                    found.discard(listed[at])
    finally:
        packed.close()
    found.update(f"{oid} {ref}".encode() for ref, oid in loose.items())
    return found


def ref_line(line: bytes) -> tuple[str, str] | None:
    """(ref, oid) of a line `lines` gave; None for a line that holds no ref."""
    found = _packed_line(line)
    return (found[1], found[0]) if found is not None else None


def _after_all(key: bytes) -> bytes:
    """The least name above every name that starts with `key` (a folder's, ending in "/")."""
    return key[:-1] + bytes([key[-1] + 1])


def _loose_refs(mailbox: StrPath, prefix: str, entering: Callable[[str], object] | None = None) -> dict[str, str]:
    """The loose ref files under `prefix` (a folder), with what each holds; `entering` is told each folder before
    its entries are read, the prefix's own first, there or not."""
    loose: dict[str, str] = {}
    folder = _folder(mailbox, prefix)
    start = len(folder) + 1  # the ref's name below the folder: its path past the folder's (as relpath)
    for path in _files(folder, entering):
        oid = _loose(path)
        if oid is not None:
            loose[prefix + path[start:].replace(os.sep, "/")] = oid
    return loose


# A folder's stamp: (path inside the mailbox, inode, modification time in ns) of packed-refs and of every folder
# of loose refs under it, (path, -1, -1) where one is not there. git and libgit2 write a ref file by renaming a
# finished file into place, remove one by unlinking it, and packed-refs by renaming a whole new file over it: each
# changes a folder's entries, so its time, or packed-refs' inode and time. A change within the clock's granularity
# of the last one may leave the time as it was: a stamp vouches for a listing only once every time in it is older
# than a moment seen before the stamp was taken, by more than any file system's granularity (`RACY`; git's "racy"
# entries).
Stamp = tuple[tuple[str, int, int], ...]
RACY = 3_000_000_000  # ns: FAT keeps times to 2 s, most others to the ns, with a clock tick of a few ms


def listing_stamped(mailbox: StrPath, prefix: str) -> tuple[dict[str, str], Stamp]:
    """`listing(mailbox, prefix)`, and the folder's stamp, taken before it was read: a ref written while it was
    read changes what the stamp names (see `unchanged`)."""
    root = os.path.normpath(mailbox)  # the stamp's paths are relative to it: the same spelling each time
    stamps = [_stat(root, "packed-refs")]
    found = _loose_refs(root, prefix, lambda here: stamps.append(_stat(root, here[len(root) + 1 :])))
    packed = _Packed(os.path.join(mailbox, "packed-refs"))
    try:
        listed = dict(packed.under(prefix))
    finally:
        packed.close()
    listed.update(found)  # a loose file overrides a packed line of the same ref
    return listed, tuple(stamps)


def unchanged(mailbox: StrPath, stamp: Stamp, before: int) -> bool:
    """Whether nothing a stamp of this mailbox names has changed since it was taken, as far as it can tell: each is
    as it was, and each time in it older by RACY than `before` (a file time, in ns, read before the stamp was
    taken). Its paths are the mailbox's own (relative): a copy's folders, other files, never pass for the
    original's."""
    root = os.path.normpath(mailbox)
    return bool(stamp) and all(
        (mtime < before - RACY or mtime == -1) and _stat(root, path) == (path, inode, mtime)
        for path, inode, mtime in stamp
    )


def _stat(root: str, path: str) -> tuple[str, int, int]:
    """(path, inode, modification time in ns) of `path` inside the mailbox at `root`; (path, -1, -1) without one."""
    try:
        status = os.stat(os.path.join(root, path))
    except OSError:
        return (path, -1, -1)
    return (path, status.st_ino, status.st_mtime_ns)


def first(mailbox: StrPath, prefix: str, accept: Callable[[str, str], bool]) -> tuple[str, str] | None:
    """Some ref under `prefix` that `accept(ref, oid)` takes, or None: the listing stops at the first one, so that
    asking whether a folder holds anything costs one file where it holds thousands."""
    folder = _folder(mailbox, prefix)
    if os.path.isdir(folder):
        for path in _files(folder):
            oid = _loose(path)
            ref = prefix + os.path.relpath(path, folder).replace(os.sep, "/")
            if oid is not None and accept(ref, oid):
                return ref, oid
    packed = _Packed(os.path.join(mailbox, "packed-refs"))
    try:
        for limit in (1, None):  # the first packed line under the prefix mostly answers, when it is sorted
            found = next(((ref, oid) for ref, oid in packed.under(prefix, limit) if accept(ref, oid)), None)
            if found is not None:
                return found
        return None
    finally:
        packed.close()


def kept_in(mailbox: StrPath, prefixes: Iterable[str]) -> list[str]:
    """Where the refs `listing` reads for these prefixes are kept: packed-refs, and each prefix's folder with every
    folder below it (named even where it is not there). A ref added, moved or deleted changes one of them
    (kept.py keeps a listing while none has changed)."""
    found = [os.path.join(mailbox, "packed-refs")]
    for prefix in prefixes:
        pending = [_folder(mailbox, prefix)]
        while pending:
            folder = pending.pop()
            found.append(folder)
            try:
                pending += [e.path for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)]
            except OSError:
                continue
    return found


def _folder(mailbox: StrPath, prefix: str) -> str:
    """The folder of a prefix's loose refs, spelled as Path spells it (no trailing '/'): stamps record it."""
    return os.path.join(mailbox, prefix).rstrip("/")


def _files(folder: StrPath, entering: Callable[[str], object] | None = None) -> Iterable[str]:
    pending = [os.fspath(folder)]
    while pending:
        here = pending.pop()
        if entering is not None:
            entering(here)
        try:
            entries = list(os.scandir(here))
        except OSError:  # not there, or removed while listed: its refs were packed or deleted
            continue
        for entry in entries:
            if entry.name.endswith(".lock"):
                continue
            if entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)
            elif entry.is_file(follow_symlinks=False):
                yield entry.path


def _loose(path: StrPath) -> str | None:
    try:
        with open(path, "rb") as handle:
            text = handle.read(128).decode("ascii", "replace").strip()
    except OSError:
        return None
    return text if is_oid(text) else None


class _Packed:
    """packed-refs, searched by bisection: git keeps it sorted (its header says so), so finding a few refs among
    100,000 reads a few pages instead of the whole file. Mapped, not read: a bisection step finds its line in C.
    A file without that header is read line by line. git replaces the file by renaming another over it, so the
    mapping stays the file it opened."""

    def __init__(self, path: StrPath) -> None:
        self.data: mmap.mmap | bytes = b""
        self.there = False
        try:
            handle = open(path, "rb")
        except OSError:
            handle = None
        if handle is not None:
            with handle:
                self.there = True
                try:
                    self.data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
                except (ValueError, OSError):  # empty, or on a file system that maps nothing: read
                    self.data = handle.read()
        self.size = len(self.data)
        first = self.data[: self.data.find(b"\n") + 1 or self.size]
        self.start = len(first) if first.startswith(b"#") else 0
        self.sorted = first.startswith(b"#") and b" sorted" in first

    def close(self) -> None:
        if isinstance(self.data, mmap.mmap):
            self.data.close()

    def every(self) -> Iterator[tuple[bytes, str]]:
        """(ref, oid) of every line that holds a ref."""
        return _ref_lines(self.data[self.start :], small=True)

    def find(self, ref: str) -> str | None:
        for name, oid in self.under(ref, limit=1):  # sorted, the ref itself comes before any below it
            if name == ref:
                return oid
            break
        return None

    def under(self, prefix: str, limit: int | None = None) -> list[tuple[str, str]]:
        """The (ref, oid) lines whose ref starts with `prefix`, in order (the first `limit` of them). Read in
        growing blocks, matched whole: a listing of 100,000 refs costs a regular expression over the file, not a
        Python loop per line; a few refs cost one small block."""
        key = prefix.encode()
        at = self.first_at_or_after(key) if self.sorted else self.start
        found: list[tuple[str, str]] = []
        block, rest = 4096, b""
        while True:
            data = self.data[at : at + block]
            at += len(data)
            text = rest + data
            end = text.rfind(b"\n") + 1 if data else len(text)
            text, rest = text[:end], text[end:]
            for name, oid in _ref_lines(text, small=len(text) < 1 << 16):
                if name.startswith(key) and is_oid(oid):  # the line's form is the pattern's; an id's is is_oid's
                    found.append((name.decode("utf-8", "replace"), oid))
                    if limit is not None and self.sorted and len(found) >= limit:
                        return found
                elif self.sorted and name > key:
                    return found
            if not data:
                return found
            block = min(block * 4, 1 << 22)

    def first_at_or_after(self, key: bytes) -> int:
        """The offset of the first line whose ref is not below `key` (the file's end when there is none). The
        first line starting at or after a position has a ref that never decreases as the position grows: bisect on
        the position."""
        low, high = self.start, self.size
        while low < high:
            middle = (low + high) // 2
            if self._line_from(middle)[1] >= key:
                high = middle
            else:
                low = middle + 1
        return self._line_from(low)[0]

    def _line_from(self, offset: int) -> tuple[int, bytes]:
        """The first line that starts at or after `offset` (skipping peeled lines): its start and its ref."""
        data = self.data
        if offset <= self.start:
            start = self.start
        elif data[offset - 1] == 10:  # offset starts a line
            start = offset
        else:
            start = data.find(b"\n", offset) + 1 or self.size
        while start < self.size:
            end = data.find(b"\n", start) + 1 or self.size
            line = data[start:end]
            if _packed_line(line) is not None:  # not a peeled value, nor a line that holds no ref
                return start, line.rstrip(b"\n").partition(b" ")[2]
            start = end
        return self.size, b"\xff"


_REF_LINES: list[re.Pattern[bytes]] = []


def _ref_line() -> re.Pattern[bytes]:
    """A packed-refs line that holds a ref, as `_packed_line` reads one (peeled values, the header and garbage are
    not). Compiled on first use, not when the module is imported."""
    if not _REF_LINES:
        import re

        _REF_LINES.append(re.compile(rb"^([0-9a-f]+) (refs/[^ \n]+)$", re.MULTILINE))
    return _REF_LINES[0]


def _ref_lines(text: bytes, *, small: bool) -> Iterator[tuple[bytes, str]]:
    """(ref, oid) of each line of `text` that holds a ref as `_ref_line` reads one: a small block line by line (no
    pattern compiled, re not even loaded, for the few refs a send or a start looks up), a large one by the pattern."""
    if not small:
        for match in _ref_line().finditer(text):
            yield match.group(2), match.group(1).decode()
        return
    for line in text.split(b"\n"):
        oid, space, name = line.partition(b" ")
        if space and oid and not oid.strip(b"0123456789abcdef") and name.startswith(b"refs/") and len(name) > 5:
            if b" " not in name:
                yield name, oid.decode()


def _packed_line(line: bytes) -> tuple[str, str] | None:
    """(oid, ref) of a packed-refs line that holds a ref; None for the header, a peeled value, or garbage."""
    oid, space, name = line.rstrip(b"\n").partition(b" ")
    if not space or not name.startswith(b"refs/") or b" " in name or not is_oid(oid.decode("ascii", "replace")):
        return None
    return oid.decode(), name.decode("utf-8", "replace")


def broken(mailbox: StrPath) -> tuple[list[tuple[str, str]], list[tuple[int, str]]]:
    """What git cannot read as refs: loose ref files under refs/ that hold neither an object id nor a symbolic ref
    (ref, what the file begins with), and packed-refs lines that are neither a ref, a peeled value nor the header
    (line number, the line). For `gitmail doctor`: it reads every ref file."""
    files = []
    for path in _files(os.path.join(mailbox, "refs")):
        try:
            with open(path, "rb") as handle:
                text = handle.read(128).decode("ascii", "replace").strip()
        except OSError:
            continue
        if not (is_oid(text) or text.startswith("ref: refs/")):
            files.append((os.path.relpath(path, mailbox).replace(os.sep, "/"), text[:60]))
    lines = []
    try:
        with open(os.path.join(mailbox, "packed-refs"), "rb") as packed:
            for number, line in enumerate(packed, 1):
                peeled = line.startswith(b"^") and is_oid(line[1:].strip().decode("ascii", "replace"))
                header = number == 1 and line.startswith(b"# pack-refs with:")
                if not (peeled or header or _packed_line(line)):
                    lines.append((number, line.rstrip(b"\n").decode("utf-8", "replace")[:80]))
    except OSError:
        pass
    return sorted(files), lines
