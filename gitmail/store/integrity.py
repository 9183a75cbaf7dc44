"""Whether the mailbox is whole: every ref and what it points at, the notes refs and their history, a killed writer's
journal, git's lock files, damaged object and ref files, and gitmail's settings. Facts only, for `gitmail doctor`
to phrase and `repair.py` to mend.

Looking takes no lock and changes nothing (it only remembers which notes commits it found whole, so the next look
walks only what is new); `held` takes the lock, when it can be had, for a second look at what looked wrong, so a
writer caught mid-change is not taken for damage.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from gitmail.errors import MailboxError
from gitmail.store import gitcmd, lock, refs
from gitmail.store.files import write_atomically
from gitmail.store.moves import MOVES_REF, intact
from gitmail.store.repository import MARK_KEY, WRITE_WAIT, Store
from gitmail.store.transaction import reflog
from gitmail.values import jsontext
from gitmail.values.layout import DAMAGED, OVERSIZED, Change, Located, State, latest, locate
from gitmail.values.message import DOCUMENT_NAME, MAX_DOCUMENT_BYTES, BadDocument, parse

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

NOTES = "refs/notes/"
CHECKED = "notes-checked.json"  # in gitmail's own folder: the newest commit of each notes ref found whole
DAMAGED_OBJECTS = "damaged-objects"  # in gitmail's own folder: object files git could not read, moved aside
DAMAGED_REFS = "damaged-refs"  # in gitmail's own folder: ref files and packed-refs lines git could not read


class Notes(NamedTuple):
    """A notes ref (the broadcast seen-sets, the receipts) and what a prune may have taken of it."""

    ref: str
    tip: str
    gone: bool  # its commit is gone
    whole: bool  # its commit and everything that commit reaches are here
    stale: list[int]  # reflog entries (by index, newest @{0}) naming commits the mailbox no longer has whole

    @property
    def damaged(self) -> bool:
        return self.gone or not self.whole or bool(self.stale)


class Record(NamedTuple):
    """The record of moves (moves.py) when a prune took one of its commits: where its chain breaks."""

    tip: str
    kept: list[str]  # its commits from the tip down to the last one still here, newest first ([]: the tip is gone)
    lost: str  # the first commit below those that the mailbox does not have


class Inventory(NamedTuple):
    messages: list[Located]  # every message ref
    lost: list[Located]  # refs whose commit is gone
    unreadable: list[Located]  # refs whose commit is there but whose document is missing or does not parse
    twice: list[tuple[Located, list[Located]]]  # a message in two states: the place that counts, the leftovers
    notes: list[Notes]
    set_aside: list[str]  # refs under refs/gitmail/_damaged/
    set_aside_lost: list[tuple[str, str]]  # of those, the ones whose commit is not here whole: (ref, commit)
    lost_other: list[tuple[str, str]]  # other refs pointing at a missing object
    record: Record | None = None  # the record of moves, when its chain is broken

    def readable(self) -> list[Located]:
        """Each message that can be read, in the state that counts."""
        damaged = {p.ref for p in [*self.lost, *self.unreadable]}
        return latest([p for p in self.messages if p.ref not in damaged])

    def troubled(self) -> bool:
        return bool(
            self.lost
            or self.unreadable
            or self.twice
            or self.set_aside_lost
            or self.lost_other
            or any(n.damaged for n in self.notes)
            or self.record is not None
        )


def inventory(store: Store) -> Inventory:
    """Every ref and whether what it points at is here: one `git for-each-ref`, one `git cat-file --batch-check`
    (each message's commit, tree and document), a read of the documents sessions are handed (pending mail and
    active broadcasts), and a walk of each notes ref's history."""
    messages: list[Located] = []
    others: list[tuple[str, str]] = []
    set_aside: list[tuple[str, str]] = []
    for ref, oid in listed(store.path, "refs/").items():
        place = locate(ref, oid)
        if place is not None:
            messages.append(place)
        elif ref.startswith(DAMAGED):
            set_aside.append((ref, oid))
        else:
            others.append((ref, oid))
    absent = store.missing([f"{p.oid}:{DOCUMENT_NAME}" for p in messages] + [oid for _, oid in [*others, *set_aside]])
    suspects = [p for p in messages if f"{p.oid}:{DOCUMENT_NAME}" in absent]
    gone = store.missing([p.oid for p in suspects])
    lost = [p for p in suspects if p.oid in gone]
    unreadable = [p for p in suspects if p.oid not in gone]
    # What sessions are handed is read and parsed too; the archive's documents are only checked to be there.
    handed = [p for p in messages if p.state in (State.PENDING, State.BROADCAST) and p not in suspects]
    documents = store.read([f"{p.oid}:{DOCUMENT_NAME}" for p in handed], limit=MAX_DOCUMENT_BYTES)
    for place, document in zip(handed, documents, strict=True):
        try:
            parse(document or b"")
        except BadDocument:
            unreadable.append(place)
    notes = [notes_of(store, ref, oid, oid in absent) for ref, oid in others if ref.startswith(NOTES)]
    record = next((record_of(store, oid, oid in absent) for ref, oid in others if ref == MOVES_REF), None)
    present = [(r, o) for r, o in set_aside if o not in absent]
    unwhole = [] if reach(store, [o for _, o in present])[0] else [(r, o) for r, o in present if not store.whole(o)]
    return Inventory(
        messages,
        lost,
        unreadable,
        _twice(messages, {p.ref for p in [*lost, *unreadable]}),
        notes,
        [ref for ref, _ in set_aside],
        [(r, o) for r, o in set_aside if o in absent] + unwhole,
        [(r, o) for r, o in others if o in absent and not r.startswith(NOTES) and r != MOVES_REF],
        record,
    )


def _twice(messages: Sequence[Located], damage: set[str]) -> list[tuple[Located, list[Located]]]:
    """Messages found in two states at once: the place that counts, and the leftovers."""
    groups: dict[tuple[str | None, str], list[Located]] = {}
    for place in messages:
        if place.ref not in damage:
            groups.setdefault((place.recipient, place.id), []).append(place)
    twice = []
    for group in groups.values():
        if len(group) > 1:
            kept = latest(group)[0]
            twice.append((kept, [p for p in group if p is not kept]))
    return twice


def listed(repository: Path, prefix: str) -> dict[str, str]:
    """The refs below `prefix`, by name, with what each holds: as git lists them, or where git stops on a
    packed-refs line that is no ref (see `broken_refs`), as gitmail's own reader finds them."""
    try:
        out = gitcmd.run(repository, "for-each-ref", "--format=%(refname) %(objectname)", prefix)
    except gitcmd.GitFailed:
        return dict(sorted(refs.listing(repository, prefix).items()))
    lines = out.decode(errors="replace").splitlines()
    return {ref: oid for ref, _, oid in (line.partition(" ") for line in lines)}


def oversized(store: Store) -> list[str]:
    """The refs of mail that arrived by sync larger than gitmail sends, which sync set aside unread."""
    return list(listed(store.path, OVERSIZED))


def broken_refs(store: Store) -> tuple[list[tuple[str, str]], list[tuple[int, str]]]:
    """Ref files that hold no ref (ref, what it begins with) and packed-refs lines that are none (number, line)."""
    return refs.broken(store.path)


def notes_of(store: Store, ref: str, tip: str, gone: bool) -> Notes:
    """A notes ref's tip and the commits its reflog names: gone, or missing something they reach. One walk over
    all of them, which skips what a commit already found whole reaches (see `checked`); only when that walk
    finds a hole is each looked at on its own."""
    news = [new for _, new in reflog(store.path, ref, every=True)]
    heads = sorted({new for new in news if new} | ({tip} if not gone else set()))
    absent = store.missing(heads)
    present = [h for h in heads if h not in absent]
    found = checked(store)
    known = [c for c in [found.get(ref)] if c and c in present]
    whole, _ = reach(store, present, known)
    if whole:
        bad = absent
        if not gone and store.writable():
            record_checked(store, {**found, ref: tip})
    else:
        whole, reached = (False, set()) if gone else reach(store, [tip])
        others = [h for h in present if h not in reached and h != tip]
        bad = absent | {h for h in others if not reach(store, [h], [tip] if whole else [])[0]}
    stale = [len(news) - 1 - i for i, new in enumerate(news) if new in bad]
    return Notes(ref, tip, gone, not gone and tip not in bad and whole, stale)


def record_of(store: Store, tip: str, gone: bool) -> Record | None:
    """Where the record of moves breaks, or None when it is whole. One `git rev-list` down from the newest commit
    an earlier look found whole (see `checked`), so a long record costs a walk of what is new; only a hole costs
    the walk that finds where it is."""
    found = checked(store)
    known = [c for c in [found.get(MOVES_REF)] if c]  # the tip itself when nothing moved since: nothing to walk
    if not gone and (reach(store, [tip], known)[0] or (known and reach(store, [tip])[0])):
        if found.get(MOVES_REF) != tip and store.writable():
            record_checked(store, {**found, MOVES_REF: tip})
        return None
    kept = [] if gone else intact(store, tip)
    if not kept:
        return Record(tip, [], tip)
    head = (store.read([kept[-1]])[0] or b"").partition(b"\n\n")[0].decode(errors="replace").splitlines()
    return Record(tip, kept, next((line[7:] for line in head if line.startswith("parent ")), ""))


def reach(store: Store, commits: Sequence[str], known: Sequence[str] = ()) -> tuple[bool, set[str]]:
    """Whether these commits and everything they reach are here (what the `known` commits reach is taken to be),
    and (when they are) every commit walked."""
    if not commits:
        return True, set()
    request = "".join(c + "\n" for c in commits) + "".join(f"^{c}\n" for c in known)
    try:
        out = store.git("rev-list", "--objects", "--missing=print", "--stdin", stdin=request.encode())
    except gitcmd.GitFailed:  # a commit on the way is gone
        return False, set()
    lines = out.decode(errors="replace").splitlines()
    if any(line.startswith("?") for line in lines):
        return False, set()
    return True, {line for line in lines if " " not in line}


def checked(store: Store) -> dict[str, str]:
    """The notes commits an earlier look found whole. What they reach stays whole: they are in their ref's
    reflog, which git gc keeps; and should one be gone, the walk that leans on it fails and is made in full."""
    try:
        data = jsontext.loads((store.own_dir / CHECKED).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def record_checked(store: Store, found: dict[str, str]) -> None:
    try:
        write_atomically(store.own_dir / CHECKED, jsontext.dumps(found, sort_keys=True).encode(), durable=False)
    except MailboxError:
        pass  # only a shortcut for the next look


# -- the mailbox's settings, its journal, its lock files ----------------------------------------------------------


def config(store: Store) -> dict[str, str]:
    """The mailbox's own git settings, keys in lower case."""
    out = store.git("config", "--local", "--list", "-z").decode(errors="replace")
    found = {}
    for item in out.split("\0"):
        key, _, value = item.partition("\n")
        if key:
            found[key.lower()] = value
    return found


def config_drift(store: Store) -> list[tuple[str, str, str | None]]:
    """(key, gitmail's value, the mailbox's value) for each setting gitmail relies on that differs. The format
    mark is not one of them: a mailbox of an older format is moved to the new one by the writer that migrates it."""
    from gitmail.store.setup import MAILBOX_CONFIG

    have = config(store)
    return [
        (k, v, have.get(k.lower())) for k, v in MAILBOX_CONFIG.items() if k != MARK_KEY and have.get(k.lower()) != v
    ]


class JournalState(NamedTuple):
    """A journal a killed writer left, as the lock's holder finds it."""

    path: str
    busy: bool = False  # a writer holds the lock now: the journal is its own, at work
    unreadable: str = ""  # why it cannot be read from disk (an OSError)
    garbled: str = ""  # why what it holds is no journal (not text, not JSON, ...)
    changes: int = 0  # refs its change would move
    gone: bool = False  # the objects it would point refs at are gone: it will be set aside


def journal_state(store: Store) -> JournalState | None:
    """The journal a killed writer left, if any, looked at under the lock when that is free at once."""
    journal = lock.Journal(store.own_dir)
    if not journal.exists():
        return None
    with held(store, wait=0.0) as free:
        if not free:
            return JournalState(journal.path, busy=True)
        try:
            changes: list[Change] = journal.load()
        except OSError as error:
            return JournalState(journal.path, unreadable=error.strerror or str(error))
        except ValueError as error:
            return JournalState(journal.path, garbled=why_unreadable(error))
        gone = store.missing([c.new for c in changes if c.new is not None])
        return JournalState(journal.path, changes=len(changes), gone=bool(gone))


def set_aside_journals(store: Store) -> list[Path]:
    """Changes killed commands left that could not be finished, set aside by a later writer."""
    return sorted(store.own_dir.glob(f"{lock.JOURNAL_NAME}.set-aside-*"))


def why_unreadable(error: ValueError) -> str:
    """Why a journal could not be read, in a few words."""
    if isinstance(error, UnicodeDecodeError):
        return "not text"
    return "not JSON" if isinstance(error, jsontext.NotJSON) else str(error)


def lock_files(store: Store) -> list[Path]:
    """git's `.lock` files in the mailbox: beside its own files, under refs/ and in objects/info/."""
    found = [p for p in store.path.glob("*.lock") if p.is_file()]
    found += [p for p in (store.path / "objects" / "info").glob("*.lock") if p.is_file()]
    for folder, _, files in os.walk(store.path / "refs"):
        found += [Path(folder) / name for name in files if name.endswith(".lock")]
    return sorted(found)


def moved_objects(store: Store) -> list[str]:
    """The damaged object files an earlier repair moved aside."""
    try:
        return sorted(os.listdir(store.own_dir / DAMAGED_OBJECTS))
    except OSError:
        return []


@contextmanager
def held(store: Store, *, wait: float = WRITE_WAIT) -> Iterator[bool]:
    """Hold the mailbox's write lock if it can be had within `wait` seconds (writing nothing, finishing nothing);
    whether it was had."""
    try:
        fd = os.open(store.own_dir / lock.LOCK_NAME, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:  # no gitmail writer ever ran here, or the lock cannot be opened: nothing to wait for
        yield True
        return
    try:
        try:
            lock.acquire(fd, lock.Deadline(wait), store.path)
        except MailboxError:
            yield False
            return
        yield True
    finally:
        os.close(fd)
