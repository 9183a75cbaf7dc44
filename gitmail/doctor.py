"""`gitmail doctor`: everything that can stand between a repository and its mail, each finding with its remedy,
and the repairs that are safe to make. Pure of printing: the command line prints what `describe` writes.

Looking takes no lock and changes nothing (it only remembers which notes commits it found whole, so the next look
walks only what is new); what looks wrong is looked at again under the mailbox lock when that can be had, so a
writer caught mid-change is not reported as damage. Repairs are made under the lock, and no message is ever
deleted: a ref whose commit, tree or document is gone is moved under refs/gitmail/_damaged/ with a reflog entry; a
notes ref a prune damaged goes back to its newest whole commit, with what is left of later notes on top.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Any, NamedTuple

from gitmail.errors import MailboxError
from gitmail.store import gitcmd, lock, loose, migrate, refs, setup
from gitmail.store.claims import load_claims, save_claims
from gitmail.store.files import write_atomically
from gitmail.store.log import problem
from gitmail.store.repository import MARK_KEY, WRITE_WAIT, Store, check_ownership
from gitmail.store.transaction import reflog
from gitmail.store.writer import Writer, writing
from gitmail.values.layout import (
    DAMAGED,
    OVERSIZED,
    Change,
    Located,
    State,
    damaged_ref,
    is_message_ref,
    latest,
    locate,
)
from gitmail.values.message import DOCUMENT_NAME, MAX_DOCUMENT_BYTES, BadDocument, parse
from gitmail.values.names import RepoName, name_problem
from gitmail.values.verdict import ACCEPTED as ACCEPTED_KEYS
from gitmail.values.verdict import NEW as NEW_KEY
from gitmail.values.verdict import REVOKED as REVOKED_KEY
from gitmail.workspace import Place

LISTED = 10  # ids or files named in one line before "and N more"
NOTES = "refs/notes/"
ACTOR = RepoName("gitmail")  # who the reflog says made a repair


class Level(Enum):
    OK = "ok"
    NOTE = "note"  # worth knowing; nothing is broken
    PROBLEM = "problem"  # mail is lost, stuck or at risk until the remedy is applied


class Finding(NamedTuple):
    topic: str  # what was looked at: mailbox, messages, journal, locks, repository, claude, codex, ...
    level: Level
    text: str  # one line saying what was found
    remedy: str = ""  # what to do about it
    items: tuple[str, ...] = ()  # every ref, id or file it concerns (the text names the first few)


class Report(NamedTuple):
    mailbox: Path
    findings: list[Finding]
    repaired: list[str]  # what `repair` did, one line each

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.level is Level.PROBLEM]


def examine(store: Store, *, here: Place | None, home: Path, repaired: Sequence[str] = ()) -> Report:
    """Every check, for the mailbox, the repository of the work tree `here` (if any) and the hosts in `home`."""
    findings, usable = _mailbox(store)
    messages: list[Located] = []
    if usable:
        migrate.on_open(store)  # an older format is brought up to date first, as any opening does
        findings += _journal(store)
        findings += _locks(store)
        findings += _objects(store)
        findings += _broken_refs(store)
        inventory = _inventory(store)
        if inventory.troubled():
            with _held(store) as held:
                if held:  # a writer caught mid-change looks like damage: look again while none can be
                    inventory = _inventory(store)
        findings += inventory.findings(store)
        findings += _outside_layout(store)
        findings += _oversized(store)
        messages = inventory.readable()
        findings += _keys(store)
    findings += _repository(store, here, messages)
    findings += _hooks(home)
    findings += _waking(store) if usable else []
    return Report(store.path, findings, list(repaired))


def repair(store: Store, *, here: Place | None) -> list[str]:
    """Make the safe repairs, under the lock; what was done, one line each. A mailbox that cannot be used at all
    (someone else's, not gitmail's) is left alone: its findings say what to do."""
    try:
        if not store.exists():
            return []
        check_ownership(store.path)
        migrate.on_open(store)
    except MailboxError:
        return []
    done: list[str] = []
    journal = store.own_dir / lock.JOURNAL_NAME
    had_journal = journal.exists()
    why = "its objects are gone"  # why a journal the lock's holder finds is set aside rather than finished
    if had_journal:
        try:
            lock.Journal(store.own_dir).load()
        except ValueError as error:
            why = f"it could not be read ({_why(error)})"
        except OSError:
            pass
    kept_before = set(store.own_dir.glob(f"{lock.JOURNAL_NAME}.set-aside-*"))
    with writing(store, actor=ACTOR) as writer:
        if had_journal and not journal.exists():
            new_kept = set(store.own_dir.glob(f"{lock.JOURNAL_NAME}.set-aside-*")) - kept_before
            done.append(
                f"set aside the change a killed writer left ({', '.join(p.name for p in new_kept)}): {why}"
                if new_kept
                else "finished the change a killed writer left"
            )
        for stale in _lock_files(store):
            if lock.clear_if_abandoned(stale, only_if_old=True):
                done.append(f"removed {stale}: left behind by a git process that is gone")
        drift = _config_drift(store)
        if drift:
            setup.configure(store.path, {key: value for key, value, _ in drift})
            done.append(f"restored gitmail's settings: {', '.join(f'{k}={v}' for k, v, _ in drift)}")
        done += _mend_refs(store, writer)
        moved = _move_damaged_objects(store)
        if moved:
            done.append(
                f"moved {_count(len(moved), 'damaged object file')} git could not read to "
                f"{store.own_dir / DAMAGED_OBJECTS}: {_listed(moved)}"
            )
        inventory = _inventory(store)
        changes: list[Change] = []
        for place in [*inventory.lost, *inventory.unreadable]:
            changes += writer.set_aside(place.ref, place.oid, f"message {place.id}")
            done.append(f"set aside {place.id} ({_where(place)}) as {damaged_ref(place.ref)}")
        for kept, leftovers in inventory.twice:
            for place in leftovers:
                if place.oid == kept.oid:
                    changes.append(Change(place.ref, None, place.oid))
                    done.append(f"removed {place.ref}: {place.id} is {kept.state.value} ({kept.ref})")
                else:  # two different commits under one id: keep both in sight
                    changes += writer.set_aside(place.ref, place.oid, f"message {place.id}")
                    done.append(f"set aside {place.ref}: {place.id} is {kept.state.value} ({kept.ref})")
        for ref, oid in inventory.set_aside_lost:
            text = f"gitmail: {ref} pointed at {oid}, which the mailbox no longer has whole\n"
            changes.append(Change(ref, writer.objects.record(text, who=ACTOR), oid))
            done.append(f"gave {ref} a record of what was lost ({oid})")
        for notes in inventory.notes:
            if notes.gone or not notes.whole:
                changes.append(_mend(store, writer, notes))
                done.append(
                    f"mended {notes.ref}: {changes[-1].new} holds every note still whole"
                    if changes[-1].new
                    else f"removed {notes.ref}: no commit of it is left whole"
                )
        if changes:
            writer.apply(changes, "gitmail: doctor set aside what could not be read")
        if inventory.notes:
            for notes in _inventory(store).notes:  # the reflogs as the changes above left them
                if notes.stale:  # newest is @{0}: dropping the oldest first keeps the other indices valid
                    indices = sorted(notes.stale, reverse=True)
                    store.git("reflog", "delete", "--rewrite", *(f"{notes.ref}@{{{i}}}" for i in indices))
                    done.append(f"dropped {len(indices)} entries naming lost commits from the reflog of {notes.ref}")
        done += _reclaim(store, here)
    for line in done:
        problem(store.path, f"doctor: {line}")
    return done


def _mend(store: Store, writer: Writer, notes: Notes) -> Change:
    """Put a notes ref a prune damaged back on its feet: the newest of its commits that is still whole becomes its
    tip again; what later notes are still here is added on top, leaving out the notes that are gone."""
    candidates = [c for c in [notes.tip, *(new for _, new in reversed(reflog(store.path, notes.ref)))] if c]
    known = [c for c in [_checked(store).get(notes.ref)] if c and not store.missing([c])]
    whole = next((c for c in dict.fromkeys(candidates) if _reach(store, [c], [k for k in known if k != c])[0]), None)
    newest = writer.notes_tip(notes.ref)  # the newest commit of it that can still be read
    if newest is None or newest == whole:
        return Change(notes.ref, whole, notes.tip) if whole else Change(notes.ref, None, notes.tip)
    tree, dropped = writer.objects.mended(writer.objects.tree_of(newest))
    text = f"gitmail: {notes.ref} mended after a prune took part of it ({dropped} notes were lost)\n"
    mended = writer.objects.commit_tree(tree, [whole] if whole else [], text, who=ACTOR)
    return Change(notes.ref, mended, notes.tip)


# -- the mailbox itself ------------------------------------------------------------------------------------------


def _mailbox(store: Store) -> tuple[list[Finding], bool]:
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
    config = _config(store)
    kind = "a bare git repository" if config.get("core.bare") == "true" else "a git repository with a work tree"
    facts = f"{where}: {kind} gitmail made, files ref format, owned by you, mode {mode:o}"
    findings = [Finding("mailbox", Level.OK if config.get("core.bare") == "true" else Level.PROBLEM, facts)]
    drift = _config_drift(store)
    if drift:
        findings.append(
            Finding(
                "settings",
                Level.PROBLEM,
                "the mailbox's git settings differ from gitmail's: "
                + "; ".join(f"{key} is {have or 'unset'}, gitmail sets {want}" for key, want, have in drift),
                "gitmail doctor --repair sets them back",
            )
        )
    return findings, True


def _config(store: Store) -> dict[str, str]:
    """The mailbox's own git settings, keys in lower case."""
    out = store.git("config", "--local", "--list", "-z").decode(errors="replace")
    found = {}
    for item in out.split("\0"):
        key, _, value = item.partition("\n")
        if key:
            found[key.lower()] = value
    return found


def _config_drift(store: Store) -> list[tuple[str, str, str | None]]:
    """(key, gitmail's value, the mailbox's value) for each setting gitmail relies on that differs. The format
    mark is not one of them: a mailbox of an older format is moved to the new one by the writer that migrates it."""
    from gitmail.store.setup import MAILBOX_CONFIG

    have = _config(store)
    return [
        (k, v, have.get(k.lower())) for k, v in MAILBOX_CONFIG.items() if k != MARK_KEY and have.get(k.lower()) != v
    ]


def _keys(store: Store) -> list[Finding]:
    """The key this machine signs with, and the keys of other machines: a changed key is a problem until the user
    trusts it or revokes the machine (its mail reads UNVERIFIED meanwhile)."""
    from gitmail.store import keys
    from gitmail.store import machines as machine
    from gitmail.store import pins as known_keys

    findings = []
    try:
        own = keys.signer(store, create=False)
    except keys.SigningKeyError as error:
        findings.append(Finding("keys", Level.PROBLEM, f"no mail can be written: {error}"))
        own = None
    else:
        if own is None:
            findings.append(Finding("keys", Level.OK, "no signing key yet: the first write makes one"))
        else:
            which = f"gitmail's own key {own.path}" if own.own else f"your key {own.path} (gitmail.{keys.SETTING})"
            findings.append(Finding("keys", Level.OK, f"signs with {own.kind} {own.fingerprint}: {which}"))
            here = machine.current(store) if store.writable() else None
            if here is not None and keys.published_mark(store) != keys.mark(own, here):
                findings.append(
                    Finding(
                        "keys",
                        Level.NOTE,
                        "this machine's key is not published yet, so other machines cannot verify its mail",
                        "the next write publishes it; `gitmail keys init` does it now",
                    )
                )
    pins = store.own_dir / keys.FOLDER / known_keys.FILE
    try:
        json.loads(pins.read_text(encoding="utf-8")) if pins.exists() else None
    except (OSError, ValueError) as error:
        findings.append(
            Finding(
                "keys",
                Level.PROBLEM,
                f"{pins} cannot be read ({error}): every machine's key would be taken on first sight again",
                f"restore it from a backup, or remove it to pin the keys published now ({shlex.quote(str(pins))})",
            )
        )
    known = known_keys.known(store).all
    for key in known:
        if key.state == NEW_KEY:
            findings.append(
                Finding(
                    "keys",
                    Level.PROBLEM,
                    f'machine "{key.name}" ({key.machine}) published a key this machine does not accept: '
                    f"{key.fingerprint}; its mail signed with it reads UNVERIFIED",
                    f"if you expect it (compare with `gitmail keys` on that machine): gitmail keys trust {key.machine} "
                    f"{key.fingerprint}; if not: gitmail keys revoke {key.machine}",
                    (key.machine, key.fingerprint),
                )
            )
        elif key.state == REVOKED_KEY:
            findings.append(
                Finding(
                    "keys",
                    Level.NOTE,
                    f'the key {key.fingerprint} of machine "{key.name}" ({key.machine}) is revoked: its mail reads '
                    "UNVERIFIED",
                )
            )
    accepted = sorted({f"{k.name} ({k.machine})" for k in known if k.state in ACCEPTED_KEYS})
    if accepted:
        findings.append(
            Finding(
                "keys", Level.OK, f"keys accepted for {_count(len(accepted), 'other machine')}: " + _listed(accepted)
            )
        )
    own_id = machine.local_id(store)
    taken = {(k.machine, k.fingerprint) for k in known}
    fresh = {(p.machine, p.fingerprint) for p in keys.publications(store).found if p.machine != own_id} - taken
    if fresh:
        findings.append(
            Finding(
                "keys",
                Level.NOTE,
                f"{_count(len(fresh), 'key')} published by other machines not taken in yet (the next sync does it)",
                "`gitmail keys` takes them in now",
            )
        )
    return findings


def _journal(store: Store) -> list[Finding]:
    findings = []
    journal = lock.Journal(store.own_dir)
    if journal.exists():
        with _held(store, wait=0.0) as held:
            if not held:
                findings.append(Finding("journal", Level.NOTE, "a gitmail writer is at work on the mailbox now"))
            else:
                try:
                    changes = journal.load()
                except OSError as error:
                    findings.append(
                        Finding(
                            "journal",
                            Level.PROBLEM,
                            f"a killed gitmail left a change unfinished ({journal.path}), and it cannot be read: "
                            f"{error.strerror or error}",
                            f"make {journal.path} readable, then run gitmail doctor --repair",
                        )
                    )
                except ValueError as error:
                    findings.append(
                        Finding(
                            "journal",
                            Level.PROBLEM,
                            f"a killed gitmail left a journal gitmail cannot read ({journal.path}: {_why(error)}); "
                            "the change it was meant to record cannot be finished, and the next write sets it aside",
                            "gitmail doctor --repair sets it aside now (deleting nothing)",
                        )
                    )
                else:
                    gone = store.missing([c.new for c in changes if c.new is not None])
                    fate = "its objects are gone, so it will be set aside" if gone else "the next write finishes it"
                    findings.append(
                        Finding(
                            "journal",
                            Level.PROBLEM,
                            f"a killed gitmail left a change of {_count(len(changes), 'ref')} unfinished "
                            f"({journal.path}); {fate}",
                            "gitmail doctor --repair does it now",
                        )
                    )
    kept = sorted(store.own_dir.glob(f"{lock.JOURNAL_NAME}.set-aside-*"))
    if kept:
        findings.append(
            Finding(
                "journal",
                Level.NOTE,
                f"{_count(len(kept), 'change')} that killed commands left could not be finished (the objects were "
                f"pruned, or the journal could not be read) and {_be(len(kept))} set aside: "
                f"{_listed([str(p) for p in kept])}; those commands never reported success, and what they were "
                "writing is lost",
                f"read them and {store.path.parent / 'gitmail.log'}, then delete them",
                tuple(str(p) for p in kept),
            )
        )
    return findings


def _locks(store: Store) -> list[Finding]:
    old: list[str] = []
    fresh: list[str] = []
    for found in _lock_files(store):
        (old if lock.lock_age(found) >= lock.ABANDONED_AFTER else fresh).append(str(found))
    findings = []
    if old:
        findings.append(
            Finding(
                "locks",
                Level.PROBLEM,
                f"lock files left behind by git processes that are gone: {_listed(old)}",
                "gitmail doctor --repair removes them",
                tuple(old),
            )
        )
    if fresh:
        findings.append(
            Finding(
                "locks", Level.NOTE, f"a git process is at work on the mailbox now: {_listed(fresh)}", "", tuple(fresh)
            )
        )
    return findings


DAMAGED_OBJECTS = "damaged-objects"  # in gitmail's own folder: object files git could not read, moved aside


def _objects(store: Store) -> list[Finding]:
    """Loose object files that cannot be read whole (a torn write, a disk error): git stops on them, gitmail reads
    around them as if they were gone. And those an earlier repair moved aside."""
    findings = []
    damaged = loose.damaged_files(store.path)
    if damaged:
        files = [str(store.path / "objects" / oid[:2] / oid[2:]) for oid in damaged]
        findings.append(
            Finding(
                "objects",
                Level.PROBLEM,
                f"{_count(len(damaged), 'object file')} {_is(len(damaged))} damaged (cut short or garbled on disk), "
                f"so git cannot read {_them(len(damaged))} and `git fsck` fails: {_listed(files)}; "
                "gitmail reads the rest of the mail around it, and names the messages it cannot read",
                f"gitmail doctor --repair moves {_them(len(damaged))} to "
                f"{store.own_dir / DAMAGED_OBJECTS} (deleting nothing) and sets aside the messages that cannot be read",
                tuple(files),
            )
        )
    try:
        kept = sorted(os.listdir(store.own_dir / DAMAGED_OBJECTS))
    except OSError:
        kept = []
    if kept:
        findings.append(
            Finding(
                "objects",
                Level.NOTE,
                f"{_count(len(kept), 'damaged object file')} {_be(len(kept))} moved aside earlier: "
                f"{store.own_dir / DAMAGED_OBJECTS}",
                "delete them once nobody needs to look at them" if len(kept) > 1 else "delete it once nobody needs it",
                tuple(kept),
            )
        )
    return findings


DAMAGED_REFS = "damaged-refs"  # in gitmail's own folder: ref files and packed-refs lines git could not read


def _broken_refs(store: Store) -> list[Finding]:
    """Ref files and packed-refs lines that hold no ref (garbled on disk, or edited by hand). git passes over such a
    file (the message it named drops out of every listing and `git fsck` fails) and stops on such a line."""
    files, lines = refs.broken(store.path)
    findings = []
    if files:
        findings.append(
            Finding(
                "refs",
                Level.PROBLEM,
                f"{_count(len(files), 'ref file')} {_hold(len(files))} no object id, so git skips "
                f"{_them(len(files))} and `git fsck` fails: "
                + _listed([f"{ref} ({json.dumps(text, ensure_ascii=True)})" for ref, text in files]),
                f"gitmail doctor --repair moves {_them(len(files))} to {store.own_dir / DAMAGED_REFS} "
                "(deleting nothing) and gives each ref back the commit its reflog last gave it, or sets it aside",
                tuple(ref for ref, _ in files),
            )
        )
    if lines:
        findings.append(
            Finding(
                "refs",
                Level.PROBLEM,
                f"{store.path / 'packed-refs'} has {_count(len(lines), 'line')} that {_is(len(lines))} not a ref, so "
                f"git stops on {_them(len(lines))} and nothing can be written: "
                + _listed([f"line {number} ({json.dumps(text, ensure_ascii=True)})" for number, text in lines]),
                f"gitmail doctor --repair keeps a copy in {store.own_dir / DAMAGED_REFS} and leaves those lines out",
                tuple(f"packed-refs:{number}" for number, _ in lines),
            )
        )
    return findings


def _mend_refs(store: Store, writer: Writer) -> list[str]:
    """Take out what git cannot read as refs (under the lock, before anything else is written: git stops on a bad
    packed-refs line): a copy of packed-refs is kept and the bad lines left out; a bad ref file is moved aside.
    Each ref that then names nothing gets back the commit its reflog last gave it when the mailbox has that whole;
    a message ref that cannot is set aside with a record of what it held."""
    files, lines = refs.broken(store.path)
    if not files and not lines:
        return []
    done: list[str] = []
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
        done.append(f"left {_count(len(lines), 'line')} git could not read out of packed-refs (kept whole as {kept})")
    for ref, _ in files:
        aside = folder / f"{ref}.{stamp}"
        aside.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.replace(store.path / ref, aside)
        done.append(f"moved {ref} aside to {aside}: it held no object id")
        lost.append(ref)
    changes: list[Change] = []
    for ref in dict.fromkeys(lost):
        if refs.resolve(store.path, [ref]):
            continue  # a packed value it overrode, or a loose file a packed line was stale beside
        before = next((new for _, new in reversed(reflog(store.path, ref)) if store.whole(new)), None)
        if before is not None:
            changes.append(Change(ref, before, None))
            done.append(f"gave {ref} back {before}, the commit its reflog last gave it")
        elif locate(ref, "0" * 40) is not None:
            text = f"gitmail: {ref} held no object id, and its reflog names no commit the mailbox has whole\n"
            changes.append(Change(damaged_ref(ref), writer.objects.record(text, who=ACTOR), None))
            done.append(f"set aside {ref} as {damaged_ref(ref)}: what it held is lost")
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


def _why(error: ValueError) -> str:
    """Why a journal could not be read, in a few words."""
    if isinstance(error, UnicodeDecodeError):
        return "not text"
    return "not JSON" if isinstance(error, json.JSONDecodeError) else str(error)


def _lock_files(store: Store) -> list[Path]:
    """git's `.lock` files in the mailbox: beside its own files, under refs/ and in objects/info/."""
    found = [p for p in store.path.glob("*.lock") if p.is_file()]
    found += [p for p in (store.path / "objects" / "info").glob("*.lock") if p.is_file()]
    for folder, _, files in os.walk(store.path / "refs"):
        found += [Path(folder) / name for name in files if name.endswith(".lock")]
    return sorted(found)


@contextmanager
def _held(store: Store, *, wait: float = WRITE_WAIT) -> Iterator[bool]:
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


# -- refs and what they point at ---------------------------------------------------------------------------------


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


class Inventory(NamedTuple):
    messages: list[Located]  # every message ref
    lost: list[Located]  # refs whose commit is gone
    unreadable: list[Located]  # refs whose commit is there but whose document is missing or does not parse
    twice: list[tuple[Located, list[Located]]]  # a message in two states: the place that counts, the leftovers
    notes: list[Notes]
    set_aside: list[str]  # refs under refs/gitmail/_damaged/
    set_aside_lost: list[tuple[str, str]]  # of those, the ones whose commit is not here whole: (ref, commit)
    lost_other: list[tuple[str, str]]  # other refs pointing at a missing object

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
        )

    def findings(self, store: Store) -> list[Finding]:
        remedy = "gitmail doctor --repair moves them under refs/gitmail/_damaged/, deleting nothing"
        findings = []
        if self.lost:
            findings.append(
                Finding(
                    "messages",
                    Level.PROBLEM,
                    f"{_count(len(self.lost), 'message ref')} {_point(len(self.lost))} at a commit the mailbox no "
                    f"longer has (a `git gc --prune=now` ran while it was being written): {_places(self.lost)}",
                    remedy,
                    tuple(p.ref for p in self.lost),
                )
            )
        if self.unreadable:
            findings.append(
                Finding(
                    "messages",
                    Level.PROBLEM,
                    f"{_count(len(self.unreadable), 'message')} {_is(len(self.unreadable))} stored but cannot be read "
                    f"(document missing or damaged): {_places(self.unreadable)}",
                    remedy,
                    tuple(p.ref for p in self.unreadable),
                )
            )
        if self.twice:
            findings.append(
                Finding(
                    "messages",
                    Level.PROBLEM,
                    f"{_count(len(self.twice), 'message')} {_is(len(self.twice))} in two states at once (a move was "
                    "interrupted; the later state counts): "
                    + _listed([f"{kept.id} ({_where(kept)}, also {_states(rest)})" for kept, rest in self.twice]),
                    "gitmail doctor --repair removes the leftover refs; the messages stay in their later state",
                    tuple(p.ref for _, leftovers in self.twice for p in leftovers),
                )
            )
        for notes in self.notes:
            mend = "gitmail doctor --repair mends it from what is left"
            if notes.gone:
                text = (
                    f"{notes.ref} points at {notes.tip}, which the mailbox no longer has (a `git gc --prune=now` ran "
                    "while it was being written); its notes read as none until the next write"
                )
            elif not notes.whole:
                text = (
                    f"part of what {notes.ref} holds is gone (a `git gc --prune=now` ran while notes were being "
                    "written); git fsck and git gc fail on it"
                )
            elif notes.stale:
                text = (
                    f"the reflog of {notes.ref} names {_count(len(notes.stale), 'commit')} the mailbox no longer has "
                    "whole (`git fsck` reports them)"
                )
                mend = "gitmail doctor --repair drops those entries"
            else:
                continue
            findings.append(Finding("notes", Level.PROBLEM, text, mend, (notes.ref,)))
        if self.set_aside_lost:
            refs = [ref for ref, _ in self.set_aside_lost]
            findings.append(
                Finding(
                    "messages",
                    Level.PROBLEM,
                    f"{_count(len(refs), 'ref')} set aside as damaged point at commits the mailbox no longer has "
                    f"whole: {_listed(refs)}",
                    "gitmail doctor --repair gives each a record of what was lost",
                    tuple(refs),
                )
            )
        for ref, oid in self.lost_other:
            findings.append(
                Finding(
                    "refs",
                    Level.PROBLEM,
                    f"{ref} points at {oid}, which the mailbox does not have; it is not gitmail's, and `git gc` "
                    "fails while it is there",
                    f"git --git-dir {shlex.quote(str(store.path))} update-ref -d {ref} (once you know what it was)",
                    (ref,),
                )
            )
        if not (self.lost or self.unreadable or self.twice):
            findings.append(
                Finding("messages", Level.OK, f"{_count(len(self.messages), 'message')} stored, every one readable")
            )
        if self.set_aside:
            findings.append(
                Finding(
                    "messages",
                    Level.NOTE,
                    f"{_count(len(self.set_aside), 'message ref')} set aside as damaged earlier",
                    f"git --git-dir {shlex.quote(str(store.path))} for-each-ref {DAMAGED}",
                    tuple(self.set_aside),
                )
            )
        return findings


def _inventory(store: Store) -> Inventory:
    """Every ref and whether what it points at is here: one `git for-each-ref`, one `git cat-file --batch-check`
    (each message's commit, tree and document), a read of the documents sessions are handed (pending mail and
    active broadcasts), and a walk of each notes ref's history."""
    listed = [(oid, ref) for ref, oid in _refs(store.path, "refs/").items()]
    messages: list[Located] = []
    others: list[tuple[str, str]] = []
    set_aside: list[tuple[str, str]] = []
    for oid, ref in listed:
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
    damage = {p.ref for p in [*lost, *unreadable]}
    groups: dict[tuple[str | None, str], list[Located]] = {}
    for place in messages:
        if place.ref not in damage:
            groups.setdefault((place.recipient, place.id), []).append(place)
    twice = []
    for group in groups.values():
        if len(group) > 1:
            kept = latest(group)[0]
            twice.append((kept, [p for p in group if p is not kept]))
    notes = [_notes(store, ref, oid, oid in absent) for ref, oid in others if ref.startswith(NOTES)]
    present = [(r, o) for r, o in set_aside if o not in absent]
    unwhole = [] if _reach(store, [o for _, o in present])[0] else [(r, o) for r, o in present if not store.whole(o)]
    return Inventory(
        messages,
        lost,
        unreadable,
        twice,
        notes,
        [ref for ref, _ in set_aside],
        [(r, o) for r, o in set_aside if o in absent] + unwhole,
        [(r, o) for r, o in others if o in absent and not r.startswith(NOTES)],
    )


def _outside_layout(store: Store) -> list[Finding]:
    """Refs in the mailbox (and in the repository sync fetches in) that are no part of gitmail's layout: gitmail
    never reads them, but they keep objects alive, and a remote that planted them before sync fetched only its
    own refs left them here."""
    from gitmail.store.keys import KEYS_NOTES
    from gitmail.sync.quick import SYNCED
    from gitmail.sync.remotes import TRACKING_ROOT, configured
    from gitmail.values.layout import SEEN_NOTES
    from gitmail.values.receipts import RECEIPTS_NOTES

    remotes = [f"{TRACKING_ROOT}{remote.name}/" for remote in configured(store)]
    known = {SEEN_NOTES, RECEIPTS_NOTES, KEYS_NOTES} | {prefix + name for prefix in remotes for name in SYNCED}
    network = store.own_dir / "sync" / "fetch.git"
    foreign: list[str] = []
    dropped_by_sync = True  # every one is below a remote's tracking refs, which the next sync sets to what it uses
    for repository in (store.path, network):
        if repository != store.path and not (repository / "HEAD").is_file():
            continue
        for ref in _refs(repository, "refs/"):
            if (
                ref in known
                or ref.startswith((DAMAGED, OVERSIZED))
                or (repository == store.path and is_message_ref(ref))
            ):
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
    return [
        Finding(
            "refs",
            Level.NOTE,
            f"{_count(len(foreign), 'ref')} outside gitmail's layout, which gitmail never reads: {_listed(foreign)}",
            remedy,
            tuple(foreign),
        )
    ]


def _refs(repository: Path, prefix: str) -> dict[str, str]:
    """The refs below `prefix`, by name, with what each holds: as git lists them, or where git stops on a
    packed-refs line that is no ref (reported by `_broken_refs`), as gitmail's own reader finds them."""
    try:
        out = gitcmd.run(repository, "for-each-ref", "--format=%(refname) %(objectname)", prefix)
    except gitcmd.GitFailed:
        return dict(sorted(refs.listing(repository, prefix).items()))
    lines = out.decode(errors="replace").splitlines()
    return {ref: oid for ref, _, oid in (line.partition(" ") for line in lines)}


def _oversized(store: Store) -> list[Finding]:
    """Mail that arrived by sync larger than gitmail sends, which sync set aside unread."""
    refs = list(_refs(store.path, OVERSIZED))
    if not refs:
        return []
    ids = [ref.rpartition("/")[2] for ref in refs]
    return [
        Finding(
            "messages",
            Level.NOTE,
            f"{_count(len(refs), 'message')} that arrived by sync larger than gitmail sends {_be(len(refs))} set "
            f"aside unread: {_listed(ids)}",
            f"git --git-dir {shlex.quote(str(store.path))} for-each-ref {OVERSIZED} (and see gitmail.log)",
            tuple(refs),
        )
    ]


def _notes(store: Store, ref: str, tip: str, gone: bool) -> Notes:
    """A notes ref's tip and the commits its reflog names: gone, or missing something they reach. One walk over
    all of them, which skips what a commit already found whole reaches (see `_checked`); only when that walk
    finds a hole is each looked at on its own."""
    news = [new for _, new in reflog(store.path, ref, every=True)]
    heads = sorted({new for new in news if new} | ({tip} if not gone else set()))
    absent = store.missing(heads)
    present = [h for h in heads if h not in absent]
    checked = _checked(store)
    known = [c for c in [checked.get(ref)] if c and c in present]
    whole, _ = _reach(store, present, known)
    if whole:
        bad = absent
        if not gone and store.writable():
            _record_checked(store, {**checked, ref: tip})
    else:
        whole, reached = (False, set()) if gone else _reach(store, [tip])
        others = [h for h in present if h not in reached and h != tip]
        bad = absent | {h for h in others if not _reach(store, [h], [tip] if whole else [])[0]}
    stale = [len(news) - 1 - i for i, new in enumerate(news) if new in bad]
    return Notes(ref, tip, gone, not gone and tip not in bad and whole, stale)


def _reach(store: Store, commits: Sequence[str], known: Sequence[str] = ()) -> tuple[bool, set[str]]:
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


CHECKED = "notes-checked.json"  # in gitmail's own folder: the newest commit of each notes ref found whole


def _checked(store: Store) -> dict[str, str]:
    """The notes commits an earlier doctor found whole. What they reach stays whole: they are in their ref's
    reflog, which git gc keeps; and should one be gone, the walk that leans on it fails and is made in full."""
    try:
        data = json.loads((store.own_dir / CHECKED).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _record_checked(store: Store, checked: dict[str, str]) -> None:
    try:
        write_atomically(store.own_dir / CHECKED, json.dumps(checked, sort_keys=True).encode(), durable=False)
    except MailboxError:
        pass  # only a shortcut for the next doctor


# -- this repository and the hosts -------------------------------------------------------------------------------


def _repository(store: Store, here: Place | None, messages: Sequence[Located]) -> list[Finding]:
    """This repository's name (its folder's, or the one gitmail.name chooses), its claim, mail a worktree's own
    folder name still holds, and mail that waits for names no repository here has used."""
    claims = load_claims(store)
    name = RepoName(here.name) if here is not None and not name_problem(here.name) else None
    chosen = here is not None and here.named_by != "folder"
    how = "chosen with git config gitmail.name" if chosen else "its folder's name"
    rename = "rename the folder, or choose a name with `git config gitmail.name NAME` in the repository"
    findings = []
    if here is None:
        findings.append(
            Finding(
                "repository",
                Level.NOTE,
                "not inside a git repository; run `gitmail doctor` in one to check its name and claim",
            )
        )
    elif name is None:
        findings.append(
            Finding(
                "repository",
                Level.PROBLEM,
                f"this repository's name {here.name!r} ({how}) cannot be a mailbox name: {name_problem(here.name)}",
                rename,
            )
        )
    else:
        first = claims.get(name)
        pending = len({p.id for p in messages if p.recipient == name and p.state is State.PENDING})
        where = f"{here.home}" + (
            f" (worktree {json.dumps(here.worktree, ensure_ascii=False)})" if here.worktree else ""
        )
        facts = f"{json.dumps(name, ensure_ascii=False)} ({how}) at {where}, {_count(pending, 'message')} pending"
        if first is None:
            findings.append(
                Finding(
                    "repository",
                    Level.OK,
                    f"{facts}; no path is recorded for the name yet: the first session start or inbox here records "
                    "this one",
                )
            )
        elif os.path.realpath(first) == os.path.realpath(here.home):
            findings.append(Finding("repository", Level.OK, f"{facts}; the name is recorded for this path"))
        elif not os.path.exists(first):
            findings.append(
                Finding(
                    "repository",
                    Level.PROBLEM,
                    f"{facts}; the name is recorded for {first}, which no longer exists, so readers here are warned",
                    "if the repository moved here, gitmail doctor --repair records this path instead",
                )
            )
        else:
            findings.append(
                Finding(
                    "repository",
                    Level.PROBLEM,
                    f"{facts}; the name was first used by {first}, so the two repositories share one mailbox",
                    rename,
                )
            )
        old = here.worktree
        if old and old != name and not name_problem(old):
            kept = len({p.id for p in messages if p.recipient == RepoName(old) and p.state is State.PENDING})
            if kept and os.path.realpath(claims.get(RepoName(old), "")) == os.path.realpath(here.top):
                findings.append(
                    Finding(
                        "repository",
                        Level.NOTE,
                        f"{_count(kept, 'message')} {_is(kept)} addressed to {json.dumps(old, ensure_ascii=False)}, "
                        f"the name this worktree went by before; its sessions are shown {_them(kept)} too",
                    )
                )
    waiting: dict[str, int] = {}
    for place in messages:
        if place.state is State.PENDING and place.recipient not in claims and place.recipient != name:
            waiting[str(place.recipient)] = waiting.get(str(place.recipient), 0) + 1
    if waiting:
        named = ", ".join(f"{json.dumps(n, ensure_ascii=False)} ({c})" for n, c in sorted(waiting.items()))
        findings.append(
            Finding(
                "repository",
                Level.NOTE,
                f"mail waits for names no repository on this machine has used yet: {named}",
                "a repository's mailbox name is its folder's (or its gitmail.name); mail to a misspelt one never "
                "arrives (resend it)",
            )
        )
    return findings


def _reclaim(store: Store, here: Place | None) -> list[str]:
    """Record this repository's path for its name when the recorded one no longer exists (it moved here)."""
    if here is None or name_problem(here.name):
        return []
    claims = load_claims(store)
    first = claims.get(here.name)
    if first is None or os.path.exists(first):
        return []
    claims[here.name] = os.path.realpath(here.home)
    save_claims(store, claims)
    return [f"recorded {here.home} for the name {json.dumps(here.name, ensure_ascii=False)} instead of {first}"]


def _hooks(home: Path) -> list[Finding]:
    """Each host's gitmail hooks (`gitmail.install.status`): installed for which moments, still running, trusted
    by Codex; and the plugin, which installed hooks would double."""
    from gitmail import __version__
    from gitmail.install.status import status

    findings = []
    for host in status(home):
        plugin = host.host == "claude" and _plugin_enabled(home)
        if not host.installed and not host.path.parent.is_dir():
            continue  # that host is not on this machine
        if not host.installed:
            if plugin:
                findings.append(Finding(host.host, Level.OK, "gitmail is enabled as a plugin"))
            else:
                text = f"gitmail's hooks are not installed in {host.path}: sessions get mail only from `gitmail inbox`"
                findings.append(Finding(host.host, Level.NOTE, text, f"gitmail install --{host.host}"))
            continue
        if plugin:
            text = f"gitmail is both installed in {host.path} and enabled as a plugin: sessions get their mail twice"
            findings.append(Finding(host.host, Level.PROBLEM, text, f"gitmail uninstall --{host.host}, or disable it"))
        if not host.runs:
            text = f"{host.detail}: sessions get no mail"
            findings.append(Finding(host.host, Level.PROBLEM, text, f"gitmail install --{host.host}"))
        elif host.trust not in (None, "trusted"):
            text = f"Codex does not run gitmail's hooks (trust: {host.trust}); it skips them without a word"
            findings.append(Finding(host.host, Level.PROBLEM, text, "gitmail install --codex, or /hooks in Codex"))
        elif __version__ not in host.detail:
            text = f"{host.detail}; this is gitmail {__version__}"
            findings.append(
                Finding(host.host, Level.NOTE, text, f"gitmail install --{host.host}, from the one you use")
            )
        else:
            findings.append(Finding(host.host, Level.OK, host.detail))
    return findings


def _waking(store: Store) -> list[Finding]:
    """Which of the sessions gitmail knows on this machine mail can wake while they wait for their user, per host
    (Claude Code: its wake hook; Codex: an open window, through `codex queue`)."""
    from gitmail import actions, delivery

    if not delivery.wake_enabled(store):
        text = "waking idle sessions is switched off (gitmail.wake = false, or GITMAIL_WAKE=0)"
        return [Finding("wake", Level.NOTE, text, "git config --file MAILBOX/config gitmail.wake true")]
    live = [v for v in actions.sessions_here(store, None) if v.info.state != "ended"]
    findings = []
    for host, how in (("claude", "its wake hook"), ("codex", "an open Codex window, through codex queue")):
        mine = [v for v in live if v.info.host == host]
        if not mine:
            continue
        woken = [v.address for v in mine if v.wakeable]
        text = f"{len(woken)} of {_count(len(mine), 'live ' + host + ' session')} can be woken by mail ({how})"
        findings.append(Finding("wake", Level.OK, text + (f": {_listed(woken)}" if woken else ""), items=tuple(woken)))
    return findings


def _plugin_enabled(home: Path) -> bool:
    try:
        settings = json.loads((home / ".claude" / "settings.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    plugins = settings.get("enabledPlugins") if isinstance(settings, dict) else None
    return isinstance(plugins, dict) and any(str(k).startswith("gitmail@") and v for k, v in plugins.items())


# -- text and JSON -----------------------------------------------------------------------------------------------


def describe(report: Report) -> str:
    """The report for people: what was repaired, one line per finding (a problem with its remedy), a verdict."""
    lines = [f"gitmail doctor: {report.mailbox}"]
    lines += [f"repaired  {line}" for line in report.repaired]
    for finding in report.findings:
        text = f"{finding.level.value:<8}  {finding.topic}: {finding.text}"
        if finding.remedy:
            text += f" -- fix: {finding.remedy}" if finding.level is Level.PROBLEM else f" -- {finding.remedy}"
        lines.append(text)
    problems = len(report.problems)
    lines.append(f"{_count(problems, 'problem')} found." if problems else "No problems found.")
    return "\n".join(lines) + "\n"


def as_json(report: Report) -> dict[str, Any]:
    return {
        "mailbox": str(report.mailbox),
        "healthy": not report.problems,
        "repaired": report.repaired,
        "findings": [
            {"topic": f.topic, "level": f.level.value, "text": f.text, "remedy": f.remedy, "items": list(f.items)}
            for f in report.findings
        ],
    }


def _where(place: Located) -> str:
    return f"{place.state.value} for {place.recipient}" if place.recipient is not None else place.state.value


def _states(places: Sequence[Located]) -> str:
    return " and ".join(p.state.value for p in places)


def _places(places: Sequence[Located]) -> str:
    return _listed([f"{p.id} ({_where(p)})" for p in places])


def _listed(items: Sequence[str]) -> str:
    more = len(items) - LISTED
    return ", ".join(items[:LISTED]) + (f" and {more:,} more" if more > 0 else "")


def _be(n: int) -> str:
    return "was" if n == 1 else "were"


def _is(n: int) -> str:
    return "is" if n == 1 else "are"


def _them(n: int) -> str:
    return "it" if n == 1 else "them"


def _hold(n: int) -> str:
    return "holds" if n == 1 else "hold"


def _point(n: int) -> str:
    return "points" if n == 1 else "point"


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")
