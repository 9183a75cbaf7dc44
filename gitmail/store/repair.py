"""Mending the mailbox: the repairs that are safe to make, under its lock, for `gitmail doctor --repair`. No message
is ever deleted: a ref whose commit, tree or document is gone is moved under refs/gitmail/_damaged/ with a reflog
entry; a notes ref a prune damaged goes back to its newest whole commit, with what is left of later notes on top;
damaged files are moved into gitmail's own folder. What was done comes back as facts (`Mended`), for doctor to say.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, NamedTuple

from gitmail.errors import MailboxError
from gitmail.store import integrity as check
from gitmail.store import keys, lock, loose, migrate, moves, refs, setup
from gitmail.store.integrity import DAMAGED_OBJECTS, DAMAGED_REFS, Inventory, Notes
from gitmail.store.log import problem
from gitmail.store.ownership import check_ownership
from gitmail.store.writer import Writer, writing
from gitmail.values.layout import Change, Located, damaged_ref, locate
from gitmail.values.names import RepoName

if TYPE_CHECKING:
    from gitmail.store.repository import Store

ACTOR = RepoName("gitmail")  # who the reflog says made a repair

# What a repair did (`Mended.kind`); the fields each fills are named beside it.
JOURNAL_SET_ASIDE = "journal set aside"  # subject: the files it was set aside as; other: why
JOURNAL_FINISHED = "journal finished"
LOCK_REMOVED = "lock removed"  # subject: the lock file
SETTINGS_RESTORED = "settings restored"  # items: key=value
PACKED_LINES_LEFT_OUT = "packed-refs lines left out"  # number: how many; subject: where packed-refs was kept
REF_FILE_MOVED = "ref file moved"  # subject: the ref; other: where its file went
REF_GIVEN_BACK = "ref given back"  # subject: the ref; other: the commit
REF_LOST = "ref lost"  # subject: the ref; other: where it was set aside
OBJECTS_MOVED = "objects moved"  # subject: the folder; items: the object ids
MESSAGE_SET_ASIDE = "message set aside"  # subject: its id; other: where it was (state, recipient); items: (new ref,)
LEFTOVER_REMOVED = "leftover removed"  # subject: the ref; other: the id; items: (state, the ref that counts)
LEFTOVER_SET_ASIDE = "leftover set aside"  # as LEFTOVER_REMOVED
RECORD_GIVEN = "record given"  # subject: a ref set aside earlier; other: the lost commit
NOTES_MENDED = "notes mended"  # subject: the notes ref; other: its new tip
NOTES_REMOVED = "notes removed"  # subject: the notes ref
RECORD_MENDED = "record of moves mended"  # subject: its ref; other: its new tip; number: the commits kept
REFLOG_DROPPED = "reflog entries dropped"  # subject: the notes ref; number: how many
KEY_REPLACED = "key replaced"  # subject: the key file; other: where the damaged one went; items: (fingerprint,)


class Mended(NamedTuple):
    kind: str
    subject: str = ""
    other: str = ""
    number: int = 0
    items: tuple[str, ...] = ()


def usable(store: Store) -> bool:
    """Whether the mailbox is one repairs may touch: it exists, is the user's own, and is brought up to date (a
    mailbox someone else owns, or that gitmail did not make, is left alone: doctor's findings say what to do)."""
    try:
        if not store.exists():
            return False
        check_ownership(store.path)
        migrate.on_open(store)
    except MailboxError:
        return False
    return True


def repair(store: Store) -> list[Mended]:
    """Make the safe repairs of a `usable` mailbox, under the lock; what was done."""
    done = _renew_key(store)
    journal = store.own_dir / lock.JOURNAL_NAME
    had_journal = journal.exists()
    why = "its objects are gone"  # why a journal the lock's holder finds is set aside rather than finished
    if had_journal:
        try:
            lock.Journal(store.own_dir).load()
        except ValueError as error:
            why = f"it could not be read ({check.why_unreadable(error)})"
        except OSError:
            pass
    kept_before = set(check.set_aside_journals(store))
    with writing(store, actor=ACTOR) as writer:
        if had_journal and not journal.exists():
            new_kept = sorted(set(check.set_aside_journals(store)) - kept_before)
            names = ", ".join(p.name for p in new_kept)
            done.append(Mended(JOURNAL_SET_ASIDE, names, why) if new_kept else Mended(JOURNAL_FINISHED))
        for stale in check.lock_files(store):
            if lock.clear_if_abandoned(stale, only_if_old=True):
                done.append(Mended(LOCK_REMOVED, str(stale)))
        drift = check.config_drift(store)
        if drift:
            setup.configure(store.path, {key: value for key, value, _ in drift})
            done.append(Mended(SETTINGS_RESTORED, items=tuple(f"{k}={v}" for k, v, _ in drift)))
        done += _mend_refs(store, writer)
        moved = _move_damaged_objects(store)
        if moved:
            done.append(Mended(OBJECTS_MOVED, str(store.own_dir / DAMAGED_OBJECTS), items=tuple(moved)))
        done += _mend_record(store, writer)
        done += _set_aside(store, writer, check.inventory(store))
        if any(done_.kind == KEY_REPLACED for done_ in done):
            writer.signing_key()  # the new key, published by this write
            writer.apply([], "gitmail: publish this machine's new key")
    return done


def _renew_key(store: Store) -> list[Mended]:
    """A new key for this machine in place of gitmail's own damaged one."""
    try:
        keys.signer(store, create=False)
    except keys.DamagedKey as damaged:
        key = keys.replace_damaged(store, damaged)
        return [Mended(KEY_REPLACED, str(damaged.path), str(damaged.aside), items=(key.fingerprint,))]
    except MailboxError:
        pass  # the user's own key, or one others may read: theirs to fix, as doctor says
    return []


def _set_aside(store: Store, writer: Writer, inventory: Inventory) -> list[Mended]:
    """Set aside what cannot be read, remove what an interrupted move left, and mend the notes refs."""
    done: list[Mended] = []
    changes: list[Change] = []
    for place in [*inventory.lost, *inventory.unreadable]:
        changes += writer.set_aside(place.ref, place.oid, f"message {place.id}")
        done.append(Mended(MESSAGE_SET_ASIDE, place.id, _where(place), items=(damaged_ref(place.ref),)))
    for kept, leftovers in inventory.twice:
        for place in leftovers:
            said = (kept.state.value, kept.ref)
            if place.oid == kept.oid:
                changes.append(Change(place.ref, None, place.oid))
                done.append(Mended(LEFTOVER_REMOVED, place.ref, place.id, items=said))
            else:  # two different commits under one id: keep both in sight
                changes += writer.set_aside(place.ref, place.oid, f"message {place.id}")
                done.append(Mended(LEFTOVER_SET_ASIDE, place.ref, place.id, items=said))
    for ref, oid in inventory.set_aside_lost:
        text = f"gitmail: {ref} pointed at {oid}, which the mailbox no longer has whole\n"
        changes.append(Change(ref, writer.objects.record(text, who=ACTOR), oid))
        done.append(Mended(RECORD_GIVEN, ref, oid))
    for notes in inventory.notes:
        if notes.gone or not notes.whole:
            changes.append(mend_notes(store, writer, notes))
            new = changes[-1].new
            done.append(Mended(NOTES_MENDED, notes.ref, new) if new else Mended(NOTES_REMOVED, notes.ref))
    if changes:
        writer.apply(changes, "gitmail: doctor set aside what could not be read")
    if inventory.notes:
        for notes in check.inventory(store).notes:  # the reflogs as the changes above left them
            if notes.stale:  # newest is @{0}: dropping the oldest first keeps the other indices valid
                indices = sorted(notes.stale, reverse=True)
                store.git("reflog", "delete", "--rewrite", *(f"{notes.ref}@{{{i}}}" for i in indices))
                done.append(Mended(REFLOG_DROPPED, notes.ref, number=len(indices)))
    return done


def _where(place: Located) -> str:
    return f"{place.state.value} for {place.recipient}" if place.recipient is not None else place.state.value


def mend_notes(store: Store, writer: Writer, notes: Notes) -> Change:
    """Put a notes ref a prune damaged back on its feet: the newest of its commits that is still whole becomes its
    tip again; what later notes are still here is added on top, leaving out the notes that are gone."""
    candidates = [c for c in [notes.tip, *reversed(moves.given(store, notes.ref))] if c]
    known = [c for c in [check.checked(store).get(notes.ref)] if c and not store.missing([c])]
    whole = next(
        (c for c in dict.fromkeys(candidates) if check.reach(store, [c], [k for k in known if k != c])[0]), None
    )
    newest = writer.notes_tip(notes.ref)  # the newest commit of it that can still be read
    if newest is None or newest == whole:
        return Change(notes.ref, whole, notes.tip) if whole else Change(notes.ref, None, notes.tip)
    tree, dropped = writer.objects.mended(writer.objects.tree_of(newest))
    text = f"gitmail: {notes.ref} mended after a prune took part of it ({dropped} notes were lost)\n"
    mended = writer.objects.commit_tree(tree, [whole] if whole else [], text, who=ACTOR)
    return Change(notes.ref, mended, notes.tip)


def _mend_record(store: Store, writer: Writer) -> list[Mended]:
    """Rebuild the record of moves a prune broke: the part of it still whole, on a new root, under a commit that
    says the older record was lost (moves.rebuilt); the ref moves alone, so the write records nothing of itself."""
    tip = writer.target(moves.MOVES_REF)
    record = check.record_of(store, tip, bool(store.missing([tip]))) if tip else None
    if record is None:
        return []
    new = moves.rebuilt(store, record.kept, ACTOR)
    writer.apply([Change(moves.MOVES_REF, new, record.tip)], "gitmail: doctor mended the record of moves")
    return [Mended(RECORD_MENDED, moves.MOVES_REF, new, number=len(record.kept))]


def _mend_refs(store: Store, writer: Writer) -> list[Mended]:
    """Take out what git cannot read as refs (under the lock, before anything else is written: git stops on a bad
    packed-refs line): a copy of packed-refs is kept and the bad lines left out; a bad ref file is moved aside.
    Each ref that then names nothing gets back the commit its reflog (or the record of moves) last gave it when the
    mailbox has that whole; a message ref that cannot is set aside with a record of what it held."""
    files, lines = refs.broken(store.path)
    if not files and not lines:
        return []
    done: list[Mended] = []
    folder = store.own_dir / DAMAGED_REFS
    stamp = time.strftime("%Y%m%dT%H%M%S")
    lost: list[str] = []  # refs that may now name nothing
    folder.mkdir(mode=0o700, exist_ok=True)
    if lines:
        packed = store.path / "packed-refs"
        kept = folder / f"packed-refs.{stamp}"
        data = packed.read_bytes()
        kept.write_bytes(data)
        bad = {number for number, _ in lines}
        good = [line for number, line in enumerate(data.splitlines(keepends=True), 1) if number not in bad]
        lost += [name.decode(errors="replace") for n, line in enumerate(data.splitlines(), 1) if n in bad
                 for name in [line.rpartition(b" ")[2]] if name.startswith(b"refs/")]  # fmt: skip
        _replace_packed_refs(store, b"".join(good))
        done.append(Mended(PACKED_LINES_LEFT_OUT, str(kept), number=len(lines)))
    for ref, _ in files:
        aside = folder / f"{ref}.{stamp}"
        aside.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.replace(store.path / ref, aside)
        done.append(Mended(REF_FILE_MOVED, ref, str(aside)))
        lost.append(ref)
    changes: list[Change] = []
    for ref in dict.fromkeys(lost):
        if refs.resolve(store.path, [ref]):
            continue  # a packed value it overrode, or a loose file a packed line was stale beside
        given = moves.given(store, ref)
        before = next((new for new in reversed(given) if store.whole(new)), None)
        if before is not None:
            changes.append(Change(ref, before, None))
            done.append(Mended(REF_GIVEN_BACK, ref, before))
        elif locate(ref, "0" * 40) is not None:
            text = f"gitmail: {ref} held no object id, and its reflog names no commit the mailbox has whole\n"
            changes.append(Change(damaged_ref(ref), writer.objects.record(text, who=ACTOR), None))
            done.append(Mended(REF_LOST, ref, damaged_ref(ref)))
    if changes:
        writer.apply(changes, "gitmail: doctor mended refs git could not read")
    return done


def _replace_packed_refs(store: Store, data: bytes) -> None:
    """Write packed-refs as git does: under its lock file, renamed into place."""
    lock_path = store.path / "packed-refs.lock"
    fd = os.open(lock_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(lock_path, store.path / "packed-refs")
    except BaseException:
        lock_path.unlink(missing_ok=True)
        raise


def _move_damaged_objects(store: Store) -> list[str]:
    """Move every damaged loose object file into gitmail's own folder (under the lock): git then finds the object
    missing, which every read and repair knows how to go on without. The ids moved."""
    moved = []
    folder = store.own_dir / DAMAGED_OBJECTS
    for oid in loose.damaged_files(store.path):
        try:
            folder.mkdir(mode=0o700, exist_ok=True)
            os.replace(store.path / "objects" / oid[:2] / oid[2:], folder / oid)
        except OSError as error:
            problem(store.path, f"doctor: could not move the damaged object {oid} aside: {error}")
            continue
        moved.append(oid)
    return moved
