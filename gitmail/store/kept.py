"""What a long-lived reader (the MCP server) keeps between calls: object contents and parsed messages, by object id.
git objects never change once written, so what a spec naming an object by its id read once is what it reads for
ever; only refs move. A call then reads its refs, and only the objects it has not read before.

A spec naming a ref (`refs/notes/...:path`) is first turned into one naming the ref's commit, so it can be kept too
(the note read is the note the ref held at that moment, as before). What was not read (missing, damaged, larger
than asked) is not kept: it is asked again next time. Every table is bounded; past the bound it starts over.

What is made from things that do change (a folder of refs, a file sync appends to) is kept while they are as they
were (`while_same`): each file's and folder's inode, size and modification time, as `os.stat` gives them. git moves,
adds and deletes a loose ref by renaming a lock file into its folder or unlinking it there, and replaces
packed-refs by renaming a new file over it, so a ref that moves changes its folder's time, or packed-refs'. A change
made in the same tick of the file system's clock as the one before it could leave those times as they were: what
is made while anything it depends on changed less than SETTLED seconds ago is not kept (git's "racy" rule).
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, TypeVar

from gitmail.store import refs
from gitmail.values.ids import is_oid

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Sequence
    from pathlib import Path

T = TypeVar("T")
LIMIT = 50_000  # entries each table keeps at most (a message's document is a few KB: tens of MB at worst)
SETTLED = 1.0  # seconds since a file or folder last changed before what was made from it is kept
WHILE_LIMIT = 64  # things `while_same` keeps at most (one a repository's pending mail, one its refs listing)
Stat = tuple[int, int, int] | None  # inode, size and modification time (ns); None: not there


class Kept:
    def __init__(self, mailbox: Path, *, limit: int = LIMIT) -> None:
        self.mailbox = mailbox
        self.limit = limit
        self.contents: dict[tuple[str, int | None], bytes | None] = {}
        self.made: dict[tuple[str, str], object] = {}
        self.held: dict[Hashable, tuple[Hashable, tuple[str, ...], tuple[Stat, ...], object]] = {}

    def read(
        self,
        specs: Sequence[str],
        limit: int | None,
        reading: Callable[[Sequence[str], int | None], list[bytes | None]],
        damaged: set[str],
    ) -> list[bytes | None]:
        """What `reading(specs, limit)` answers, reading only the specs not kept yet. Nothing (a path a tree does
        not hold, a note not written) is kept too, unless the read found a damaged object (`damaged` grew)."""
        named = {spec.partition(":")[0] for spec in specs if spec.startswith("refs/")}
        tips = refs.resolve(self.mailbox, sorted(named)) if named else {}
        fixed = [_by_id(spec, tips) for spec in specs]
        found: list[bytes | None] = [None] * len(specs)
        asked = []
        for i, spec in enumerate(fixed):
            if spec and (spec, limit) in self.contents:
                found[i] = self.contents[(spec, limit)]
            else:
                asked.append(i)
        if asked:
            before = len(damaged)
            answers = reading([fixed[i] or specs[i] for i in asked], limit)
            whole = len(damaged) == before
            if len(self.contents) + len(asked) > self.limit:
                self.contents.clear()
            for i, answer in zip(asked, answers, strict=True):
                found[i] = answer
                if fixed[i] and (answer is not None or whole):
                    self.contents[(fixed[i], limit)] = answer
        return found

    def made_of(self, kind: str, oid: str, make: Callable[[], T]) -> T:
        """`make()`, kept under an object's id: what a message parsed from a commit's document is, say."""
        key = (kind, oid)
        if key in self.made:
            return self.made[key]  # type: ignore[return-value]
        value = make()
        if len(self.made) >= self.limit:
            self.made.clear()
        self.made[key] = value
        return value

    def while_same(
        self, name: Hashable, key: Hashable, paths: Callable[[], Sequence[str]], make: Callable[[], T],
        keep: Callable[[T], bool] = lambda made: True,
    ) -> T:  # fmt: skip
        """`make()`, kept under `name` while `key` is equal and the files and folders `paths()` named when it was
        made are as they were then. What is made is shared between callers: it must not be changed. Not kept when
        any of them changed less than SETTLED seconds before, or when `keep(made)` says not to (it read a damaged
        object, say)."""
        held = self.held.get(name)
        if held is not None and held[0] == key and held[2] == stats(held[1]):
            return held[3]  # type: ignore[return-value]
        began = time.time()
        names = tuple(paths())
        before = stats(names)
        made = make()
        settled = all(st is None or st[2] < (began - SETTLED) * 1e9 for st in before)
        if settled and keep(made):
            if name not in self.held and len(self.held) >= WHILE_LIMIT:
                self.held.clear()
            self.held[name] = (key, names, before, made)
        else:
            self.held.pop(name, None)
        return made


def stats(paths: Sequence[str]) -> tuple[Stat, ...]:
    """What `while_same` compares: each path's inode, size and modification time, or None where it is not."""
    found: list[Stat] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            found.append(None)
        else:
            found.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(found)


def _by_id(spec: str, tips: dict[str, str]) -> str:
    """The spec naming its object by id, or "" when it cannot be (a ref that is not there, an abbreviated id)."""
    name, colon, path = spec.partition(":")
    if name.startswith("refs/"):
        name = tips.get(name, "")
    base = name.removesuffix("^{tree}")
    return f"{name}{colon}{path}" if base and is_oid(base) else ""
