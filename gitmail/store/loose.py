"""Reading the objects git keeps loose (one zlib-compressed file each) without starting git. New mail is loose until
gitmail packs it (writer.py packs only once thousands have piled up), so the documents, notes and receipts a
session start or an inbox shows are nearly always loose; reading them here spares those reads their git process
(the benchmark's session-start and inbox rows). Whatever is not loose (packed, or gone) is left to `git cat-file`,
which answers the rest of the same request.

A request is a spec as `git cat-file --batch` takes one: `<object>`, `<object>:<path>` or `<object>^{tree}`, where
`<object>` is an id or a full ref name.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from gitmail.store import refs

ELSEWHERE = object()  # not answerable from loose objects: ask git
TOO_LARGE = object()  # larger than the reader would read: not read, and not to be asked of git either
HEADER_READ = 256  # compressed bytes read to learn an object's type and size (its header is well under 64 bytes)


def read(mailbox: Path, specs: Sequence[str], limit: int | None = None) -> list[bytes | None | object]:
    """The content each spec names (None: it names nothing, as cat-file's "missing"), ELSEWHERE, or TOO_LARGE when
    the object it names is larger than `limit` bytes (nothing of it is read past its header)."""
    reader = _Loose(mailbox)
    return [reader.spec(spec, limit) for spec in specs]


class _Loose:
    def __init__(self, mailbox: Path) -> None:
        self.objects = os.path.join(mailbox, "objects")
        self.mailbox = mailbox
        self.cache: dict[str, tuple[bytes, bytes] | None] = {}
        self.trees: dict[str, dict[bytes, str]] = {}  # tree id -> its entries by name
        self.refs: dict[str, str | None] = {}

    def spec(self, spec: str, limit: int | None = None) -> bytes | None | object:
        name, colon, path = spec.partition(":")
        peel_tree = name.endswith("^{tree}")
        name = name.removesuffix("^{tree}")
        oid = name if _is_oid(name) else self.ref(name) if name.startswith("refs/") else None
        if oid is None:
            return ELSEWHERE if not name.startswith("refs/") else None  # a ref that is not there names nothing
        parts = [p for p in path.split("/") if p] if colon else []
        found = self.object(oid, None if peel_tree or colon else limit, head=peel_tree or bool(colon))
        if not isinstance(found, tuple):
            return ELSEWHERE if found is None else found
        kind, data = found
        if peel_tree or colon:
            if kind != b"commit":
                return ELSEWHERE
            oid = data[5:45].decode()  # "tree <id>" is a commit's first line (all of it that was read)
            found = self.object(oid, None if parts else limit)
            if not isinstance(found, tuple):
                return ELSEWHERE if found is None else found
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
                return ELSEWHERE if found is None else found
            kind, data = found
        return bytes(data)  # the same object: bytes(b) is b

    def ref(self, name: str) -> str | None:
        if name not in self.refs:
            self.refs[name] = refs.resolve(self.mailbox, [name]).get(name)
        return self.refs[name]

    def object(self, oid: str, limit: int | None = None, *, head: bool = False) -> tuple[bytes, bytes] | None | object:
        """(type, content) of a loose object; None when it is not loose here; TOO_LARGE when it is larger than
        `limit` bytes (only its header is read). With `head`, a commit's content is only its first line (a message's
        commit holds the whole message: it is read only to find the message's tree)."""
        if oid in self.cache:
            return self.cache[oid]
        import zlib

        found = None
        try:
            with open(os.path.join(self.objects, oid[:2], oid[2:]), "rb") as handle:
                if limit is not None or head:
                    start = zlib.decompressobj().decompress(handle.read(HEADER_READ), 128)
                    header, nul, rest = start.partition(b"\0")
                    kind, _, size = header.partition(b" ")
                    if nul and size.isdigit() and limit is not None and int(size) > limit:
                        return TOO_LARGE  # not cached: a later request may take it whole
                    if nul and head and kind == b"commit" and rest[:5] == b"tree " and len(rest) >= 45:
                        return (kind, rest[:45])  # not cached either: it is not the whole commit
                    handle.seek(0)
                raw = zlib.decompress(handle.read())
            header, _, content = raw.partition(b"\0")
            kind, _, size = header.partition(b" ")
            if size.isdigit() and int(size) == len(content):
                found = (kind, content)
        except (OSError, zlib.error):
            found = None  # not loose, or unreadable: git says which
        self.cache[oid] = found
        return found


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


def _is_oid(text: str) -> bool:
    return len(text) == 40 and all(c in "0123456789abcdef" for c in text)
