"""Bringing a mailbox of an older format up to date: once, under the write lock, a few batches at a time.

Format 2 spells a repo name in refs so that no two names share a file where case is ignored, and keeps names in
NFC (identity.py). Format 1 kept upper case (`Web` beside `web`) and the name's characters as given (NFD from
macOS), so on a case-insensitive file system two repos' refs shared one directory and one repo's listing showed
the other's mail. Migration renames every ref of format 1 to its format-2 name with checked `git update-ref`
transactions (each batch lands whole, or is finished by the next writer if this one dies), carrying each ref's
reflog along; renames the stamp files; normalises the names in claims.json; and then records `gitmail.version`
in the mailbox config, so it runs once. Until then every read also looks under the old spellings, so a mailbox
this process cannot write is read whole.

A message a shared directory filed under the wrong name goes back where it belongs: its commit's `To` trailer says
which of the names that differ only in case it was sent to. A ref whose new name differs from a present one only
in case cannot be renamed in one transaction there (both names lock the same file), nor be created while the
other spelling's directory still exists (the file would land in it): it waits under refs/gitmail/_migrating/
until everything else has moved, then takes its place.

Format 3 keeps the moves of every ref but the notes refs in one record (moves.py) instead of a reflog per ref, and
format 4 the notes refs' moves there too, with no reflog at all: migrating to either brings the old reflogs into
that record (reflogs.py) and starts a packer.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from gitmail.errors import GitmailError, UsageError
from gitmail.store import claims, history, hookfiles, setup, stamps, startcache
from gitmail.store.claims import load_claims, save_claims
from gitmail.store.gitcmd import GitFailed
from gitmail.store.lock import GIT_LOCK_WAIT, Deadline
from gitmail.store.log import problem
from gitmail.store.setup import MAILBOX_CONFIG
from gitmail.store.writer import Writer, writing
from gitmail.values import jsontext
from gitmail.values.layout import ROOT, Change, repo_of_component
from gitmail.values.names import RepoName, first_format_ref, name_problem

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gitmail.store.repository import Store

VERSION_KEY = "gitmail.version"
DIRECTORY_TRIES = 12  # of a batch whose directory the file system refuses for a moment (0.25 s apart)
VERSION = int(MAILBOX_CONFIG[VERSION_KEY])
RENAMED = 2  # the format from which refs have their names as now
WAITING = ROOT + "_migrating/"  # refs that wait for their place (see above); '_' names are reserved
BATCH = 100  # refs per transaction: each is a file written and synced, a few milliseconds apiece
BUDGET = 1.0  # seconds one process spends renaming before it leaves the rest to the next one that opens the mailbox
LOCK_WAIT = 0.5  # seconds to wait for another writer; reads go on meanwhile under both spellings


def version(store: Store) -> int:
    """The mailbox format its config records (0 when it records none)."""
    recorded = store.settings().get(VERSION_KEY) or ""
    return int(recorded) if recorded.strip().isdigit() else 0


def on_open(store: Store) -> None:
    """Called once when a process opens an existing mailbox (opening.py). An older format is migrated (as much as the
    budget allows) when this process can write; otherwise, or until it is done, reads look under the old spellings
    too."""
    if version(store) >= VERSION:
        return
    store.old_names = version(store) < RENAMED  # format 2 has every ref's name as now: only its reflogs to bring in
    import importlib.util

    if not store.writable() or importlib.util.find_spec("pygit2") is None:
        return  # a process that can write it will migrate it
    try:
        finished = run(store)
    except Exception as error:  # never worth failing a read for: reads still find every ref, the log says why
        problem(store.path, f"renaming refs to format {VERSION} was put off: {type(error).__name__}: {error}")
        return
    store.old_names = store.old_names and not finished


class Move(NamedTuple):
    ref: str
    oid: str
    to: str


def run(store: Store) -> bool:
    """Migrate under the write lock; True once the mailbox is of the current format."""
    with writing(store, actor=RepoName("gitmail"), deadline=Deadline(LOCK_WAIT)) as writer:
        if version(store) >= VERSION:
            return True  # another process finished it meanwhile
        if version(store) >= RENAMED:  # formats 2 and 3: only the reflogs to bring into the record of moves
            _record_moves(writer)
            return True
        budget = Deadline(BUDGET)
        direct, waiting = plan(store, folds_case(store.path))
        for done, batch in enumerate(_batches(direct), start=1):
            _move(writer, batch)
            if budget.left() <= 0 and done * BATCH < len(direct):
                return False  # every run moves one batch at least, so the next one gets further
        # Everything else has moved, so no directory of another spelling is left: park, then take the place.
        final = [m if m.ref.startswith(WAITING) else Move(WAITING + m.to[len(ROOT) :], m.oid, m.to) for m in waiting]
        _move(writer, [Move(m.ref, m.oid, f.ref) for m, f in zip(waiting, final, strict=True) if m.ref != f.ref])
        _move(writer, final)
        _rename_stamps(store.path)
        _normalise_claims(store)
        history.forget(store.path)  # its lines name repos as refs were spelled: rebuilt from the refs as now
        startcache.forget_all(store.path)
        if direct or waiting:
            _pack_refs(writer)
        _record_moves(writer)
    return True


def _record_moves(writer: Writer) -> None:
    """Formats 3 and 4: every reflog in the record of moves (reflogs.py), and no reflog from then on; then the
    mailbox packed, beside whoever writes next."""
    from gitmail.store import moves, packing, reflogs

    setup.configure(writer.store.path, {"core.logAllRefUpdates": "false"})  # no new reflog from here on
    recorded = reflogs.into_moves(writer.store, writer.lock_fd)
    setup.configure(writer.store.path, {VERSION_KEY: str(VERSION)})
    if recorded:
        problem(writer.store.path, f"brought {recorded} reflog entries into {moves.MOVES_REF}")
    if writer.store.flag(packing.SETTING):
        packing.start(writer.store)


def plan(store: Store, folded: bool) -> tuple[list[Move], list[Move]]:
    """The renames still to do: those that can be done at once, and those that must wait for every other (see
    the module's docstring; only where the file system folds case)."""
    trailer = "%00%(trailers:key=To,valueonly,separator=%x01)" if folded else ""
    out = store.git("for-each-ref", f"--format=%(objectname)%00%(refname){trailer}", ROOT)
    listed: list[tuple[str, str, str]] = []
    for line in out.decode("utf-8", errors="surrogateescape").splitlines():
        oid, _, rest = line.partition("\0")
        ref, _, to = rest.partition("\0")
        listed.append((oid, ref, to.split("\x01")[0]))
    present = {ref: oid for oid, ref, _ in listed}
    spellings = {_component(ref) for ref in present}
    direct: list[Move] = []
    waiting: list[Move] = []
    for oid, ref, to in listed:
        target = _target(ref, to)
        if target is None or target == ref:
            continue
        if target in present:  # the same message under both names (a copy synced in, say): keep one
            if present[target] == oid:
                direct.append(Move(ref, oid, ""))
            else:
                problem(store.path, f"left {ref} in place: {target} exists and holds another commit")
            continue
        component = _component(target).lower()
        clash = folded and any(s.lower() == component and s != _component(target) for s in spellings)
        (waiting if clash or ref.startswith(WAITING) else direct).append(Move(ref, oid, target))
    return direct, waiting


def _component(ref: str) -> str:
    return ref[len(ROOT) :].split("/", 1)[0]


def _target(ref: str, to: str) -> str | None:
    """Where a format-1 ref goes; None for refs that are not per-repo (broadcasts, damaged ones) or not gitmail's."""
    if ref.startswith(WAITING):
        return ROOT + ref[len(WAITING) :]
    component, _, rest = ref[len(ROOT) :].partition("/")
    if component.startswith("_"):
        return None
    try:
        name = repo_of_component(component)
    except UsageError:
        return None
    # A shared directory lists every ref in it under one spelling; the message knows which name it was sent to.
    if to and not name_problem(to) and first_format_ref(to).lower() == component.lower():
        name = RepoName(to)
    return f"{ROOT}{name.ref}/{rest}"


def _batches(moves: Sequence[Move]) -> list[Sequence[Move]]:
    return [moves[i : i + BATCH] for i in range(0, len(moves), BATCH)]


def _move(writer: Writer, moves: Sequence[Move]) -> None:
    for batch in _batches(moves):
        changes: list[Change] = []
        for move in batch:
            if move.to:
                _carry_reflog(writer.store.path, move.ref, move.to)
                changes.append(Change(move.to, move.oid, None))
            changes.append(Change(move.ref, None, move.oid))
        for attempt in range(DIRECTORY_TRIES):
            try:
                writer.apply(changes, f"gitmail: renamed for mailbox format {RENAMED}")
                break
            except GitFailed as failure:
                # A case-insensitive file system can refuse `web/` for a moment after it removed `Web/` (seen with
                # exFAT through FUSE): the same change a little later goes through.
                if "unable to create directory" not in failure.stderr or attempt == DIRECTORY_TRIES - 1:
                    raise
                time.sleep(0.25)


def _carry_reflog(mailbox: Path, ref: str, to: str) -> None:
    """The new name starts from the old one's history (git appends to it): when the message was sent, archived."""
    old, new = mailbox / "logs" / ref, mailbox / "logs" / to
    if old.is_file() and not new.exists():
        import shutil

        new.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(old, new)


def _rename_stamps(mailbox: Path) -> None:
    """Stamp files are named by the ref encoding. They are hints: one lost costs a session one look, never mail."""
    directory = Path(stamps.directory(mailbox))
    for file in sorted(os.listdir(directory)) if directory.is_dir() else []:
        if file in (hookfiles.BROADCAST_STAMP, hookfiles.CLAIMS_STAMP):
            continue
        try:
            RepoName.from_ref(file)
            continue
        except UsageError:
            pass
        try:
            new = directory / RepoName.from_first_format_ref(file).ref
        except UsageError:
            continue
        if new.exists():
            os.unlink(directory / file)
        else:
            os.replace(directory / file, new)


def _normalise_claims(store: Store) -> None:
    try:
        written = jsontext.loads((store.own_dir / claims.FILE).read_text())
    except (OSError, ValueError):
        return
    normal = load_claims(store)  # read with its names in NFC
    if isinstance(written, dict) and set(written) != set(normal):
        save_claims(store, normal)


def folds_case(mailbox: Path) -> bool:
    """Whether the mailbox's file system ignores case (as macOS and Windows do by default)."""
    try:  # not by inode: FUSE file systems may number one file differently under each spelling
        return (mailbox / "CONFIG").exists() and "CONFIG" not in os.listdir(mailbox)
    except OSError:
        return False


def _pack_refs(writer: Writer) -> None:
    """Leave the refs packed, as gitmail keeps them: thousands of loose refs would slow every listing."""
    waits = ("-c", f"core.packedRefsTimeout={int(GIT_LOCK_WAIT * 1000)}")
    try:
        writer.store.git(*waits, "pack-refs", "--all", "--prune", pass_fds=(writer.lock_fd,))
    except GitmailError as error:
        problem(writer.store.path, f"packing refs after renaming them was put off: {error}")
