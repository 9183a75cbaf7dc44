"""Receipts that arrived by sync claiming a showing on this machine: a "delivered" record that names this machine, or
names no machine (as records written before machines were named do), and that this mailbox did not have. This
machine writes the record of its own showings itself, so such a record was made up elsewhere (by another machine,
or by whoever can write to the remote): it counts for nothing here, not as a showing in `log`, `show` or the view,
nor as a receipt this machine has already written. Receipts naming another machine say what that machine did (as
the remote tells it) and are not kept here.

Sync records what it brings in (`claimed_here`, `remember`) before the notes ref moves, one JSON line per record in
`gitmail/receipts-from-sync`: `{"commit": <the message's commit>, "line": <the receipt line>}`. The file stays on
this machine; sync never sends it. Readers that find no file read nothing more.
"""

from __future__ import annotations

import os

from gitmail.store.files import append_durably, read_text
from gitmail.values import jsontext, receipts
from gitmail.values.layout import annotated, note_lines, note_specs
from gitmail.values.message import MAX_DOCUMENT_BYTES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from gitmail.store.repository import Store

FILE = "receipts-from-sync"


class Claimed(dict[str, frozenset[receipts.Record]]):
    """The records sync brought in that claim a showing here, by the commit they are notes on (none: empty)."""

    def __missing__(self, oid: str) -> frozenset[receipts.Record]:
        return frozenset()


def claimed_here(store: Store, mine: str | None, theirs: str, here: str | None) -> dict[str, list[str]]:
    """The receipt lines that the notes commit `theirs` brings to `mine` (this mailbox's, None when it has none)
    claiming a showing on this machine (`here`, its id): {commit annotated: lines}."""
    changed = (
        ["diff-tree", "-r", "-z", "--no-renames", "--name-only", mine, theirs]
        if mine
        else ["ls-tree", "-r", "-z", "--name-only", theirs]
    )
    out = store.git(*changed).decode(errors="replace")
    objects = annotated(out.split("\0"))
    specs = [spec for oid in objects for side in (mine, theirs) if side for spec in note_specs(side, oid)]
    notes = store.read(specs, limit=MAX_DOCUMENT_BYTES)
    width = 6 if mine else 3  # the places of each note on both sides (note_specs names 3 per side)
    found: dict[str, list[str]] = {}
    for number, oid in enumerate(objects):
        read = notes[width * number : width * number + width]
        had = note_lines(read[:3]) if mine else set()
        new = sorted(note_lines(read[-3:]) - had)
        claims = [line for line in new if _claims_here(line, here)]
        if claims:
            found[oid] = claims
    return found


def _claims_here(line: str, here: str | None) -> bool:
    return any(r.event == receipts.DELIVERED and r.machine in (None, here) for r in receipts.parse([line]))


def remember(store: Store, found: Mapping[str, Sequence[str]]) -> None:
    """Record these lines (synced to disk) before the notes that hold them land here: no crash lets one count."""
    lines = [
        jsontext.dumps({"commit": oid, "line": line}, ensure_ascii=False)
        for oid, said in found.items()
        for line in said
    ]
    append_durably(os.path.join(store.own_root, FILE), "".join(f"{line}\n" for line in lines), where=store.root)


def load(store: Store) -> Claimed:
    """Every record kept, by commit; lines that do not read are skipped."""
    claimed = Claimed()
    for text in (read_text(os.path.join(store.own_root, FILE)) or "").splitlines():
        try:
            raw = jsontext.loads(text)
            oid, line = str(raw["commit"]), str(raw["line"])
        except (ValueError, KeyError, TypeError):
            continue
        claimed[oid] = claimed[oid] | frozenset(receipts.parse([line]))
    return claimed
