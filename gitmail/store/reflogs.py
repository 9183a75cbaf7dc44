"""Bringing the reflogs of a format-2 or format-3 mailbox into the record of moves (moves.py), once, under the
write lock.

Format 2 kept a reflog file for every ref (`core.logAllRefUpdates = always`): at 4 KB of disk each, most of a
mailbox's size. Format 3 kept reflogs for the notes refs alone (a line of some 150 bytes a write), and the moves of
every other ref in `refs/gitmail-moves`; format 4 keeps no reflog. Migration reads every reflog, joins the entries
one write made (the same time, the same who, the same reason) into one record, writes the records oldest first on
top of the record's tip with `git fast-import` (into a pack: one process, whatever the number), and only then
removes those reflogs. An entry the
record holds already (a write made by this version before the migration could run) is not recorded twice.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from gitmail.store import moves

if TYPE_CHECKING:
    from gitmail.store.repository import Store


class Entry(NamedTuple):
    time: int
    zone: str
    name: str
    email: str
    reason: str
    ref: str
    old: str | None
    new: str | None


def old_logs(mailbox: Path) -> list[Path]:
    """Every reflog file the record takes over (the reflogs of refs/)."""
    found = []
    for folder, _, files in os.walk(mailbox / "logs" / "refs"):
        found += [Path(folder) / name for name in files if not name.endswith(".lock")]
    return sorted(found)


def parse(mailbox: Path, path: Path) -> list[Entry]:
    """The entries of one reflog file (lines that do not read as entries are passed over)."""
    ref = path.relative_to(mailbox / "logs").as_posix()
    entries = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        head, _, reason = line.partition("\t")
        old, _, rest = head.partition(" ")
        new, _, rest = rest.partition(" ")
        name, _, rest = rest.partition(" <")
        email, _, stamp = rest.partition("> ")
        when, _, zone = stamp.partition(" ")
        if len(old) != 40 or len(new) != 40 or not when.lstrip("-").isdigit() or ref == moves.MOVES_REF:
            continue
        entries.append(
            Entry(
                int(when),
                zone or "+0000",
                name,
                email,
                reason,
                ref,
                None if old == moves.NONE else old,
                None if new == moves.NONE else new,
            )  # fmt: skip
        )
    return entries


def into_moves(store: Store, lock_fd: int) -> int:
    """Record every old reflog's entries in the record of moves and remove those reflogs (the caller holds the
    write lock, `lock_fd`); how many entries were recorded."""
    files = old_logs(store.path)
    if not files:
        return 0
    known = {(m.ref, m.old, m.new, m.time, m.reason) for m in moves.history(store)}
    writes: dict[tuple[int, str, str, str], list[Entry]] = {}
    for path in files:
        for entry in parse(store.path, path):
            if (entry.ref, entry.old, entry.new, entry.time, " ".join(entry.reason.split())) not in known:
                writes.setdefault((entry.time, entry.name, entry.email, entry.reason), []).append(entry)
    if writes:
        store.git("fast-import", "--quiet", "--date-format=raw", stdin=_stream(store, writes), pass_fds=(lock_fd,))
    for path in files:
        path.unlink(missing_ok=True)
    _remove_empty(store.path / "logs" / "refs")
    return sum(len(entries) for entries in writes.values())


def _stream(store: Store, writes: dict[tuple[int, str, str, str], list[Entry]]) -> bytes:
    tip = store.targets([moves.MOVES_REF]).get(moves.MOVES_REF)
    chunks = []
    for number, key in enumerate(sorted(writes, key=lambda k: k[0])):
        entries = writes[key]
        first = entries[0]
        who = f"{first.name} <{first.email}> {first.time} {first.zone}"
        lines = "".join(f"{e.old or moves.NONE} {e.new or moves.NONE} {e.ref}\n" for e in sorted(entries))
        text = f"{' '.join(first.reason.split()) or 'gitmail: moved'}\n\n{lines}".encode()
        parent = f"from {tip}\n" if number == 0 and tip else ""
        chunks.append(
            f"commit {moves.MOVES_REF}\nauthor {who}\ncommitter {who}\ndata {len(text)}\n".encode()
            + text
            + f"\n{parent}\n".encode()
        )
    return b"".join(chunks)


def _remove_empty(top: Path) -> None:
    for folder, _, _ in sorted(os.walk(top), key=lambda walked: -len(walked[0])):
        if Path(folder) != top:
            try:
                os.rmdir(folder)
            except OSError:
                pass
