"""The record of moves: one append-only chain of commits on `refs/gitmail-moves`, one commit per write that moved
refs, saying what moved, when, by whom and why. It is what the reflogs used to be (a reflog file per ref, 4 KB of
disk each, never expired; then the notes refs' alone, a line of some 150 bytes per write), in a form whose size
follows the moves: a commit of a few hundred bytes that packs with the rest, a line more for each ref a write moved.

The commit of a write moves in the same `git update-ref` transaction as the refs it records (writer.py), so the
record and the move land together or not at all. Its tree is the empty tree; its message is the write's reason,
then one line per ref it moved, as a reflog line starts: `<old id> <new id> <ref>`, zeros for none. Its author
and committer are who made the write, at the time it was made. Plain git reads it:

    git log refs/gitmail-moves --format='%ci %an %s'            # every write, newest first
    git log refs/gitmail-moves --grep=7kq2m9x4ab --format=%B     # every move of one message

The commit is not signed (it says nothing another machine needs to believe, and sync never sends it). No ref keeps
a reflog (`core.logAllRefUpdates = false`): a notes ref's moves are here too, so a notes commit a prune took can be
stepped over to the one before it (writer.py, repair.py), and its history stays its own chain of commits.
"""

from __future__ import annotations

from gitmail.values.dates import UTC, datetime
from gitmail.values.layout import Change

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import NamedTuple

    from gitmail.store.objects import Objects
    from gitmail.store.repository import Store
    from gitmail.values.names import RepoName
else:
    from gitmail.values.tuples import NamedTuple  # a send writes the record: no typing on its path

MOVES_REF = "refs/gitmail-moves"
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
NONE = "0" * 40


def recorded(changes: Sequence[Change]) -> list[Change]:
    """The changes the record keeps: every one but its own."""
    return [c for c in changes if c.ref != MOVES_REF]


def record(objects: Objects, changes: Sequence[Change], reason: str, actor: RepoName) -> list[Change]:
    """The change that adds these changes to the record (written as an object already), or [] when it keeps none
    of them. Called under the lock, with the changes about to be applied."""
    kept = recorded(changes)
    if not kept:
        return []
    from gitmail.store.objects import ident

    tip = objects.target(MOVES_REF)
    tree = objects.write("tree", b"")  # the empty tree: written once (packing folds it in, then once more)
    stamp = ident(actor, datetime.now(UTC))
    parent = f"parent {tip}\n" if tip else ""
    lines = "".join(f"{c.old or NONE} {c.new or NONE} {c.ref}\n" for c in kept)
    subject = " ".join(reason.split()) or "gitmail: moved"
    text = f"tree {tree}\n{parent}author {stamp}\ncommitter {stamp}\n\n{subject}\n\n{lines}"
    return [Change(MOVES_REF, objects.write("commit", text.encode()), tip)]


class Move(NamedTuple):
    """One ref's move, as the record (or an old reflog) tells it."""

    time: int  # unix seconds
    who: str  # the name of who moved it
    reason: str
    ref: str
    old: str | None
    new: str | None


def history(store: Store, ref: str | None = None) -> list[Move]:
    """Every move the record holds (of `ref` alone, when given), oldest first; [] when there is no record."""
    if not store.exists() or MOVES_REF not in store.targets([MOVES_REF]):
        return []
    from gitmail.store import gitcmd

    grep = ["--fixed-strings", f"--grep= {ref}"] if ref else []
    # Newest first, and whatever git printed before it stopped: where a prune took one of the record's commits
    # (see `intact`), the moves above the hole are still read.
    _, out = gitcmd.attempt(store.root, "log", "--format=%ct%x00%an%x00%B%x01", *grep, MOVES_REF)
    found = []
    for entry in reversed(out.decode("utf-8", "replace").split("\x01")):
        when, _, rest = entry.strip("\n").partition("\0")
        who, _, body = rest.partition("\0")
        if not when.isdigit():
            continue
        subject, _, lines = body.partition("\n\n")
        for line in lines.splitlines():
            parts = line.split(" ", 2)
            if len(parts) == 3 and (ref is None or parts[2] == ref):
                old, new, name = parts
                found.append(Move(int(when), who, subject, name, None if old == NONE else old,
                                  None if new == NONE else new))  # fmt: skip
    return sorted(found, key=lambda move: move.time)  # as the moves were made (an imported reflog sits on top)


def given(store: Store, ref: str) -> list[str]:
    """The commits `ref` was given, oldest first: by its reflog where it still has one (a mailbox not yet migrated),
    or else by the record."""
    from gitmail.store.transaction import reflog

    return [new for _, new in reflog(store.root, ref)] or [m.new for m in history(store, ref) if m.new]


# -- a record a prune broke ---------------------------------------------------------------------------------------

LOST = "gitmail: the older record of moves was lost to a prune"


def intact(store: Store, tip: str) -> list[str]:
    """The record's commits from `tip` down to the last one that can still be read, newest first (a walk that
    stops where a `git gc --prune=now` took a commit written just before the ref named it)."""
    from gitmail.store import gitcmd

    _, out = gitcmd.attempt(store.root, "log", "--format=%H %P", tip)  # dies on the commit whose parent is gone
    lines = [line.split() for line in out.decode(errors="replace").splitlines() if line]
    kept = [line[0] for line in lines]
    below = lines[-1][1:2] if lines else [tip]  # the one git stopped on, when it is still here
    return kept + [c for c in below if not store.missing([c])]


def rebuilt(store: Store, kept: Sequence[str], actor: RepoName) -> str:
    """A new record of moves: the commits `kept` (newest first) as they were (tree, message, author, committer),
    the oldest now without a parent, and one commit on top saying the older record was lost. Written as one pack
    by `git fast-import` (a record may hold a great many commits); no ref moves. Its tip."""
    from gitmail.store import gitcmd
    from gitmail.store.objects import ident

    stamp = ident(actor, datetime.now(UTC))
    texts = store.read(list(kept))
    stream = []
    for mark, text in enumerate(reversed(texts), 1):
        head, _, message = (text or b"").partition(b"\n\n")
        fields = dict(line.split(b" ", 1) for line in head.splitlines() if b" " in line)
        stream.append(b"commit %s\nmark :%d\n" % (MOVES_REF.encode() + b"-rebuilt", mark))
        stream.append(b"author %s\ncommitter %s\n" % (fields[b"author"], fields[b"committer"]))
        stream.append(b"data %d\n%s\n" % (len(message), message) + (b"from :%d\n" % (mark - 1) if mark > 1 else b""))
    note = f"{LOST} ({len(kept)} moves kept)\n".encode()
    top = len(kept) + 1
    stream.append(b"commit %s-rebuilt\nmark :%d\n" % (MOVES_REF.encode(), top))
    stream.append(b"author %s\ncommitter %s\n" % (stamp.encode(), stamp.encode()))
    stream.append(b"data %d\n%s\n" % (len(note), note) + (b"from :%d\n" % (top - 1) if kept else b""))
    stream.append(b"reset %s-rebuilt\n\nget-mark :%d\n" % (MOVES_REF.encode(), top))  # the reset: no ref is written
    out = gitcmd.run(store.root, "fast-import", "--quiet", "--date-format=raw", stdin=b"".join(stream))
    return out.decode().split()[-1]
