"""What doctor says of the mailbox itself: where it is and whose, its settings, a killed writer's journal, lock
files, damaged object and ref files, every message and notes ref, refs outside the layout and oversized mail. The
facts come from `store.integrity`; each table below turns them into lines."""

from __future__ import annotations

import json
import os
import shlex
from typing import TYPE_CHECKING, NamedTuple

from gitmail.doctor.findings import Finding, Level, Rule, always, each, holds, is_, judged, listed, points, them, was
from gitmail.errors import MailboxError
from gitmail.render.words import count
from gitmail.store import integrity, loose
from gitmail.store.integrity import DAMAGED_OBJECTS, DAMAGED_REFS, Inventory, JournalState, Notes, Record
from gitmail.store.moves import MOVES_REF
from gitmail.values.layout import DAMAGED, OVERSIZED, Located, is_message_ref

if TYPE_CHECKING:
    from pathlib import Path

    from gitmail.store.repository import Store

REPAIR = "gitmail doctor --repair"


def mailbox(store: Store) -> tuple[list[Finding], bool]:
    """Where the mailbox is, that gitmail made it and only this user can change it, and its settings; whether the
    other checks can look into it."""
    where = store.path
    try:
        if not os.path.lexists(where) or (where.is_dir() and not any(where.iterdir())):
            return [Finding("mailbox", Level.OK, f"none yet at {where}; the first message sent creates it")], False
    except OSError as error:
        return [Finding("mailbox", Level.PROBLEM, f"cannot read {where}: {error.strerror or error}")], False
    try:
        store.check()  # which checks its ownership
    except MailboxError as error:
        return [Finding("mailbox", Level.PROBLEM, str(error))], False
    mode = where.stat().st_mode & 0o777
    bare = integrity.config(store).get("core.bare") == "true"
    kind = "a bare git repository" if bare else "a git repository with a work tree"
    facts = f"{where}: {kind} gitmail made, files ref format, owned by you, mode {mode:o}"
    findings = [Finding("mailbox", Level.OK if bare else Level.PROBLEM, facts)]
    drift = integrity.config_drift(store)
    if drift:
        findings.append(
            Finding(
                "settings",
                Level.PROBLEM,
                "the mailbox's git settings differ from gitmail's: "
                + "; ".join(f"{key} is {have or 'unset'}, gitmail sets {want}" for key, want, have in drift),
                f"{REPAIR} sets them back",
            )
        )
    return findings, True


# -- a killed writer's journal, lock files ------------------------------------------------------------------------

JOURNAL: list[Rule[JournalState]] = [
    Rule("journal", Level.NOTE, lambda j: j.busy, lambda j: "a gitmail writer is at work on the mailbox now"),
    Rule(
        "journal",
        Level.PROBLEM,
        lambda j: j.unreadable,
        lambda j: f"a killed gitmail left a change unfinished ({j.path}), and it cannot be read: {j.unreadable}",
        lambda j: f"make {j.path} readable, then run {REPAIR}",
    ),
    Rule(
        "journal",
        Level.PROBLEM,
        lambda j: j.garbled,
        lambda j: (
            f"a killed gitmail left a journal gitmail cannot read ({j.path}: {j.garbled}); the change it was "
            "meant to record cannot be finished, and the next write sets it aside"
        ),
        f"{REPAIR} sets it aside now (deleting nothing)",
    ),
    Rule(
        "journal",
        Level.PROBLEM,
        lambda j: not (j.busy or j.unreadable or j.garbled),
        lambda j: (
            f"a killed gitmail left a change of {count(j.changes, 'ref')} unfinished ({j.path}); "
            + ("its objects are gone, so it will be set aside" if j.gone else "the next write finishes it")
        ),
        f"{REPAIR} does it now",
    ),
]


class Kept(NamedTuple):
    store: Store
    files: list[Path]


SET_ASIDE_JOURNALS: list[Rule[Kept]] = [
    Rule(
        "journal",
        Level.NOTE,
        lambda k: k.files,
        lambda k: (
            f"{count(len(k.files), 'change')} that killed commands left could not be finished (the objects "
            f"were pruned, or the journal could not be read) and {was(len(k.files))} set aside: "
            f"{listed([str(p) for p in k.files])}; those commands never reported success, and what they were writing "
            "is lost"
        ),
        lambda k: f"read them and {k.store.path.parent / 'gitmail.log'}, then delete them",
        lambda k: [str(p) for p in k.files],
    )
]


def journal(store: Store) -> list[Finding]:
    state = integrity.journal_state(store)
    found = judged(JOURNAL, state) if state is not None else []
    return found + judged(SET_ASIDE_JOURNALS, Kept(store, integrity.set_aside_journals(store)))


class Locks(NamedTuple):
    old: list[str]  # left by git processes that are gone
    fresh: list[str]  # of a git process at work now


LOCKS: list[Rule[Locks]] = [
    Rule(
        "locks",
        Level.PROBLEM,
        lambda found: found.old,
        lambda found: f"lock files left behind by git processes that are gone: {listed(found.old)}",
        f"{REPAIR} removes them",
        lambda found: found.old,
    ),
    Rule(
        "locks",
        Level.NOTE,
        lambda found: found.fresh,
        lambda found: f"a git process is at work on the mailbox now: {listed(found.fresh)}",
        items=lambda found: found.fresh,
    ),
]


def locks(store: Store) -> list[Finding]:
    from gitmail.store import lock

    found = Locks([], [])
    for path in integrity.lock_files(store):
        (found.old if lock.lock_age(path) >= lock.ABANDONED_AFTER else found.fresh).append(str(path))
    return judged(LOCKS, found)


# -- damaged files ---------------------------------------------------------------------------------------------


class Files(NamedTuple):
    store: Store
    damaged: list[str]  # object files that cannot be read whole
    moved: list[str]  # those an earlier repair moved aside
    ref_files: list[tuple[str, str]]  # ref files that hold no object id, with what they hold
    lines: list[tuple[int, str]]  # packed-refs lines that are no ref

    @property
    def objects_folder(self) -> Path:
        return self.store.own_dir / DAMAGED_OBJECTS

    @property
    def refs_folder(self) -> Path:
        return self.store.own_dir / DAMAGED_REFS


FILES: list[Rule[Files]] = [
    Rule(
        "objects",
        Level.PROBLEM,
        lambda f: f.damaged,
        lambda f: (
            f"{count(len(f.damaged), 'object file')} {is_(len(f.damaged))} damaged (cut short or garbled on "
            f"disk), so git cannot read {them(len(f.damaged))} and `git fsck` fails: {listed(f.damaged)}; gitmail "
            "reads the rest of the mail around it, and names the messages it cannot read"
        ),
        lambda f: (
            f"{REPAIR} moves {them(len(f.damaged))} to {f.objects_folder} (deleting nothing) and sets aside "
            "the messages that cannot be read"
        ),
        lambda f: f.damaged,
    ),
    Rule(
        "objects",
        Level.NOTE,
        lambda f: f.moved,
        lambda f: (
            f"{count(len(f.moved), 'damaged object file')} {was(len(f.moved))} moved aside earlier: {f.objects_folder}"
        ),
        lambda f: (
            "delete them once nobody needs to look at them" if len(f.moved) > 1 else "delete it once nobody needs it"
        ),
        lambda f: f.moved,
    ),
    Rule(
        "refs",
        Level.PROBLEM,
        lambda f: f.ref_files,
        lambda f: (
            f"{count(len(f.ref_files), 'ref file')} {holds(len(f.ref_files))} no object id, so git skips "
            f"{them(len(f.ref_files))} and `git fsck` fails: "
            + listed([f"{ref} ({json.dumps(text, ensure_ascii=True)})" for ref, text in f.ref_files])
        ),
        lambda f: (
            f"{REPAIR} moves {them(len(f.ref_files))} to {f.refs_folder} (deleting nothing) and gives each "
            "ref back the commit its reflog last gave it, or sets it aside"
        ),
        lambda f: [ref for ref, _ in f.ref_files],
    ),
    Rule(
        "refs",
        Level.PROBLEM,
        lambda f: f.lines,
        lambda f: (
            f"{f.store.path / 'packed-refs'} has {count(len(f.lines), 'line')} that {is_(len(f.lines))} not "
            f"a ref, so git stops on {them(len(f.lines))} and nothing can be written: "
            + listed([f"line {number} ({json.dumps(text, ensure_ascii=True)})" for number, text in f.lines])
        ),
        lambda f: f"{REPAIR} keeps a copy in {f.refs_folder} and leaves those lines out",
        lambda f: [f"packed-refs:{number}" for number, _ in f.lines],
    ),
]


def files(store: Store) -> list[Finding]:
    """Loose object files that cannot be read whole (a torn write, a disk error): git stops on them, gitmail reads
    around them as if they were gone; those an earlier repair moved aside; and ref files and packed-refs lines that
    hold no ref (garbled on disk, or edited by hand): git passes over such a file (the message it named drops out
    of every listing and `git fsck` fails) and stops on such a line."""
    damaged = [str(store.path / "objects" / oid[:2] / oid[2:]) for oid in loose.damaged_files(store.path)]
    ref_files, lines = integrity.broken_refs(store)
    facts = Files(store, damaged, integrity.moved_objects(store), ref_files, lines)
    return judged(FILES, facts)


# -- every message and notes ref ------------------------------------------------------------------------------


def _where(place: Located) -> str:
    return f"{place.state.value} for {place.recipient}" if place.recipient is not None else place.state.value


def _places(places: list[Located]) -> str:
    return listed([f"{p.id} ({_where(p)})" for p in places])


class Refs(NamedTuple):
    store: Store
    found: Inventory

    @property
    def git_dir(self) -> str:
        return shlex.quote(str(self.store.path))


SET_ASIDE_NOW = f"{REPAIR} moves them under refs/gitmail/_damaged/, deleting nothing"

MESSAGES: list[Rule[Refs]] = [
    Rule(
        "messages",
        Level.PROBLEM,
        lambda r: r.found.lost,
        lambda r: (
            f"{count(len(r.found.lost), 'message ref')} {points(len(r.found.lost))} at a commit the mailbox no "
            f"longer has (a `git gc --prune=now` ran while it was being written): {_places(r.found.lost)}"
        ),
        SET_ASIDE_NOW,
        lambda r: [p.ref for p in r.found.lost],
    ),
    Rule(
        "messages",
        Level.PROBLEM,
        lambda r: r.found.unreadable,
        lambda r: (
            f"{count(len(r.found.unreadable), 'message')} {is_(len(r.found.unreadable))} stored but cannot be "
            f"read (document missing or damaged): {_places(r.found.unreadable)}"
        ),
        SET_ASIDE_NOW,
        lambda r: [p.ref for p in r.found.unreadable],
    ),
    Rule(
        "messages",
        Level.PROBLEM,
        lambda r: r.found.twice,
        lambda r: (
            f"{count(len(r.found.twice), 'message')} {is_(len(r.found.twice))} in two states at once (a move "
            "was interrupted; the later state counts): "
            + listed(
                [
                    f"{kept.id} ({_where(kept)}, also {' and '.join(p.state.value for p in rest)})"
                    for kept, rest in r.found.twice
                ]
            )
        ),  # fmt: skip
        f"{REPAIR} removes the leftover refs; the messages stay in their later state",
        lambda r: [p.ref for _, leftovers in r.found.twice for p in leftovers],
    ),
]

NOTES: list[Rule[Notes]] = [
    Rule(
        "notes",
        Level.PROBLEM,
        lambda n: n.gone,
        lambda n: (
            f"{n.ref} points at {n.tip}, which the mailbox no longer has (a `git gc --prune=now` ran while it "
            "was being written); its notes read as none until the next write"
        ),
        f"{REPAIR} mends it from what is left",
        lambda n: [n.ref],
    ),
    Rule(
        "notes",
        Level.PROBLEM,
        lambda n: not n.gone and not n.whole,
        lambda n: (
            f"part of what {n.ref} holds is gone (a `git gc --prune=now` ran while notes were being written); "
            "git fsck and git gc fail on it"
        ),
        f"{REPAIR} mends it from what is left",
        lambda n: [n.ref],
    ),
    Rule(
        "notes",
        Level.PROBLEM,
        lambda n: n.whole and n.stale,
        lambda n: (
            f"the reflog of {n.ref} names {count(len(n.stale), 'commit')} the mailbox no longer has whole "
            "(`git fsck` reports them)"
        ),
        f"{REPAIR} drops those entries",
        lambda n: [n.ref],
    ),
]

PRUNED = "(a `git gc --prune=now` ran while it was being written)"

RECORD: list[Rule[Record]] = [
    Rule(
        "moves",
        Level.PROBLEM,
        lambda r: not r.kept,
        lambda r: (
            f"the record of moves ({MOVES_REF}) points at {r.tip}, which the mailbox no longer has {PRUNED}; "
            "`gitmail log` finds no moves in it, and `git fsck` fails on it"
        ),
        f"{REPAIR} starts it anew, with a commit that notes the loss",
        lambda r: [MOVES_REF],
    ),
    Rule(
        "moves",
        Level.PROBLEM,
        lambda r: r.kept,
        lambda r: (
            f"the record of moves ({MOVES_REF}) lacks commit {r.lost} {PRUNED}: "
            f"{count(len(r.kept), 'newer commit')} {is_(len(r.kept))} whole, the older record is lost to git, "
            "and `git fsck` fails on it"
        ),
        f"{REPAIR} rebuilds the newer part and notes the loss",
        lambda r: [MOVES_REF],
    ),
]

SET_ASIDE: list[Rule[Refs]] = [
    Rule(
        "messages",
        Level.PROBLEM,
        lambda r: r.found.set_aside_lost,
        lambda r: (
            f"{count(len(r.found.set_aside_lost), 'ref')} set aside as damaged point at commits the mailbox no "
            f"longer has whole: {listed([ref for ref, _ in r.found.set_aside_lost])}"
        ),
        f"{REPAIR} gives each a record of what was lost",
        lambda r: [ref for ref, _ in r.found.set_aside_lost],
    ),
]

OTHER_LOST: list[Rule[tuple[Refs, str, str]]] = [
    Rule(
        "refs",
        Level.PROBLEM,
        always,
        lambda t: (
            f"{t[1]} points at {t[2]}, which the mailbox does not have; it is not gitmail's, and `git gc` "
            "fails while it is there"
        ),
        lambda t: f"git --git-dir {t[0].git_dir} update-ref -d {t[1]} (once you know what it was)",
        lambda t: [t[1]],
    ),
]

STORED: list[Rule[Refs]] = [
    Rule(
        "messages",
        Level.OK,
        lambda r: not (r.found.lost or r.found.unreadable or r.found.twice),
        lambda r: f"{count(len(r.found.messages), 'message')} stored, every one readable",
    ),
    Rule(
        "messages",
        Level.NOTE,
        lambda r: r.found.set_aside,
        lambda r: f"{count(len(r.found.set_aside), 'message ref')} set aside as damaged earlier",
        lambda r: f"git --git-dir {r.git_dir} for-each-ref {DAMAGED}",
        lambda r: r.found.set_aside,
    ),
]


def inventory(store: Store) -> tuple[list[Finding], Inventory]:
    """Every ref and what it points at (looked at again under the lock when something looks wrong: a writer caught
    mid-change looks like damage); the findings, and the inventory they came from."""
    found = integrity.inventory(store)
    if found.troubled():
        with integrity.held(store) as held:
            if held:
                found = integrity.inventory(store)
    facts = Refs(store, found)
    findings = judged(MESSAGES, facts) + each(NOTES, found.notes) + judged(SET_ASIDE, facts)
    findings += each(OTHER_LOST, [(facts, ref, oid) for ref, oid in found.lost_other])
    findings += each(RECORD, [found.record] if found.record else [])
    return findings + judged(STORED, facts), found


# -- refs outside the layout, oversized mail ------------------------------------------------------------------


def outside_layout(store: Store) -> list[Finding]:
    """Refs in the mailbox (and in the repository sync fetches in) that are no part of gitmail's layout: gitmail
    never reads them, but they keep objects alive, and a remote that planted them before sync fetched only its
    own refs left them here."""
    from gitmail.store.keys import KEYS_NOTES
    from gitmail.store.lease_refs import is_lease_ref
    from gitmail.store.moves import MOVES_REF
    from gitmail.sync.quick import SYNCED
    from gitmail.sync.remotes import TRACKING_ROOT, configured
    from gitmail.values.layout import SEEN_NOTES
    from gitmail.values.receipts import RECEIPTS_NOTES

    remotes = [f"{TRACKING_ROOT}{remote.name}/" for remote in configured(store)]
    known = {SEEN_NOTES, RECEIPTS_NOTES, KEYS_NOTES, MOVES_REF}
    known |= {prefix + name for prefix in remotes for name in SYNCED}
    network = store.own_dir / "sync" / "fetch.git"
    foreign: list[str] = []
    dropped_by_sync = True  # every one is below a remote's tracking refs, which the next sync sets to what it uses
    for repository in (store.path, network):
        if repository != store.path and not (repository / "HEAD").is_file():
            continue
        for ref in integrity.listed(repository, "refs/"):
            ours = repository == store.path and (is_message_ref(ref) or is_lease_ref(ref))
            if ref in known or ref.startswith((DAMAGED, OVERSIZED)) or ours:
                continue
            foreign.append(ref if repository == store.path else f"{ref} (in {network})")
            dropped_by_sync = dropped_by_sync and ref.startswith(tuple(remotes))
    if not foreign:
        return []
    remedy = (
        "the next `gitmail sync` drops them"
        if dropped_by_sync and remotes
        else f"git --git-dir {shlex.quote(str(store.path))} update-ref -d REF, for each, once you know what it is"
    )
    text = f"{count(len(foreign), 'ref')} outside gitmail's layout, which gitmail never reads: {listed(foreign)}"
    return [Finding("refs", Level.NOTE, text, remedy, tuple(foreign))]


def oversized(store: Store) -> list[Finding]:
    """Mail that arrived by sync larger than gitmail sends, which sync set aside unread."""
    refs = integrity.oversized(store)
    if not refs:
        return []
    text = (
        f"{count(len(refs), 'message')} that arrived by sync larger than gitmail sends {was(len(refs))} set aside "
        f"unread: {listed([ref.rpartition('/')[2] for ref in refs])}"
    )
    remedy = f"git --git-dir {shlex.quote(str(store.path))} for-each-ref {OVERSIZED} (and see gitmail.log)"
    return [Finding("messages", Level.NOTE, text, remedy, tuple(refs))]
