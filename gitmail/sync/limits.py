"""What a message arriving by sync may carry beside its document: no more than a message sent here may attach
(gitmail.attachmentLimit). Sync sets aside what carries more, unread, as it sets aside mail larger than gitmail sends
(reconcile.py). Only trees and sizes are read here, never a file's content."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gitmail.values.message import DOCUMENT_NAME

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from gitmail.store.repository import Store
    from gitmail.values.layout import Located

TREE_LIMIT = 4 * 1024 * 1024  # bytes one of an arriving message's trees is read to (gitmail's hold a few entries)
TREE_DEPTH = 4  # folders below a message's tree looked through (gitmail writes one: attachments/)


def over_attachment_limit(store: Store, arrivals: Sequence[Located]) -> list[tuple[Located, str]]:
    """The arrivals whose files beside their document (their attachments, and whatever else a remote put in the
    commit's tree) take more than a message sent here may carry, each with why."""
    from gitmail.values.attachments import DEFAULT_LIMIT, LIMIT_SETTING, parse_size, size_text

    limit = parse_size(store.setting(LIMIT_SETTING) or "") or DEFAULT_LIMIT
    total = dict.fromkeys((p.id for p in arrivals), 0)
    unread: dict[str, str] = {}
    level = [(p, f"{p.oid}^{{tree}}", True) for p in arrivals]  # (message, tree, whether it is the commit's own)
    for _ in range(TREE_DEPTH + 1):
        files: list[tuple[Located, str]] = []
        deeper: list[tuple[Located, str, bool]] = []
        for (place, _, top), tree in zip(level, store.read([t for _, t, _ in level], limit=TREE_LIMIT), strict=True):
            if tree is None:
                unread[place.id] = "its tree could not be read whole"
                continue
            for mode, name, oid in _entries(tree):
                if mode == b"40000":
                    deeper.append((place, oid, False))
                elif mode != b"160000" and not (top and name == DOCUMENT_NAME.encode()):  # 160000: names a commit
                    files.append((place, oid))
        sizes = _sizes(store, [oid for _, oid in files])
        for place, oid in files:
            total[place.id] += sizes.get(oid, 0)
        level = deeper
    for place, _, _ in level:
        unread[place.id] = f"its tree holds folders more than {TREE_DEPTH} deep"
    heavy = []
    for place in arrivals:
        if place.id in unread or total[place.id] > limit:
            said = (
                unread.get(place.id) or f"the files beside its document (attachments) take {size_text(total[place.id])}"
            )
            heavy.append(
                (place, f"{said}; a message sent here may carry at most {size_text(limit)} (gitmail.{LIMIT_SETTING})")
            )
    return heavy


def _entries(tree: bytes) -> Iterator[tuple[bytes, bytes, str]]:
    """(mode, name, object id) of each entry of a tree as git stores it: "<mode> <name>\\0<20-byte id>" each."""
    at = 0
    while (nul := tree.find(b"\0", at)) > 0 and nul + 21 <= len(tree):  # what is no tree (git refuses it) ends it
        mode, _, name = tree[at:nul].partition(b" ")
        yield mode, name, tree[nul + 1 : nul + 21].hex()
        at = nul + 21


def _sizes(store: Store, oids: Sequence[str]) -> dict[str, int]:
    """The size of each object, read without reading it (a missing one is left out)."""
    if not oids:
        return {}
    wanted = list(dict.fromkeys(oids))
    out = store.git(
        "cat-file", "--batch-check=%(objectname) %(objectsize)", stdin="".join(f"{o}\n" for o in wanted).encode()
    )
    found = {}
    for line in out.decode(errors="replace").splitlines():
        oid, _, size = line.partition(" ")
        if size.isdigit():
            found[oid] = int(size)
    return found
