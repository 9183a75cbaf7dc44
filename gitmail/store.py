"""The mailbox repository: where it is, whether it may be used, lock-free reads, and writes under one lock.

Reads go through `git for-each-ref` and `git cat-file --batch`: listing refs under a prefix costs git the same
whether the mailbox holds 10 or 100,000 other refs (libgit2 walks every ref), and a session-start read cannot
afford pygit2's import. Writes build objects with pygit2 (objects.py) and move refs with `git update-ref`
transactions that check each ref against the value they expect, under the mailbox's lock (lock.py).
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from gitmail import gitcmd, history, lock, migrate, stamps
from gitmail.errors import MailboxBusy, MailboxError, Transient, UsageError
from gitmail.identity import RepoName, from_address, nfc_keys
from gitmail.layout import OWN_DIR, SEEN_NOTES, Change, Located, State, damaged_ref, email, locate
from gitmail.lock import Deadline

if TYPE_CHECKING:
    from gitmail.message import Message
    from gitmail.objects import Objects

MAILBOX_ENV = "GITMAIL_DIR"
MARK_KEY = "gitmail.version"  # set in every mailbox gitmail made: what makes a repository one
LOOSE_OBJECTS_BEFORE_PACKING = 27  # in the objects/17 sample: ~6,900 loose objects, git gc's own threshold
WRITE_WAIT = 10.0  # seconds a command waits for another writer


def default_path() -> Path:
    """~/.gitmail/mail.git, or the absolute path $GITMAIL_DIR names."""
    configured = os.environ.get(MAILBOX_ENV)
    if not configured:
        return Path.home() / ".gitmail" / "mail.git"
    path = Path(configured).expanduser()
    if not path.is_absolute():
        raise UsageError(
            f"{MAILBOX_ENV} must be an absolute path (it is {configured!r}): a relative one would make a separate "
            "mailbox in every directory"
        )
    return path


class Store:
    """One mailbox repository. Reading never creates it; the first write does."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else default_path()
        self._checked = False
        self.old_names = False  # refs may still be spelled as an older format spelled names (migrate.py)
        self._reader: gitcmd.BatchReader | None = None  # a cat-file kept running, for long-lived processes

    # -- existence and health ---------------------------------------------------------------------------------

    def exists(self) -> bool:
        """True when a mailbox is at the path (an empty directory is not one yet); raises if what is there
        cannot be used as one."""
        try:
            if not os.path.lexists(self.path) or (self.path.is_dir() and not any(self.path.iterdir())):
                return False
        except OSError as error:
            raise MailboxError(f"cannot read the mailbox at {self.path}: {error.strerror or error}") from None
        self.check()
        return True

    def check(self) -> None:
        if self._checked:
            return
        where = self.path
        try:
            if not where.is_dir():
                raise MailboxError(f"mailbox path {where} exists but is not a directory")
            check_ownership(where)
            head, config = where / "HEAD", where / "config"
            if not head.is_file() or not (where / "objects").is_dir() or not config.is_file():
                raise MailboxError(f"mailbox path {where} is not a git repository")
            settings = config.read_text(errors="replace")
            head.read_bytes()
            os.listdir(where / "refs")
        except MailboxError:
            raise
        except OSError as error:
            raise MailboxError(f"cannot read the mailbox at {where}: {error.strerror or error}") from None
        if re.search(r"refstorage\s*=\s*reftable", settings, re.IGNORECASE):
            raise MailboxError(
                f"mailbox at {where} uses the reftable ref format, which gitmail cannot use; "
                "move it away and gitmail will create a new one"
            )
        if not re.search(r"^\[gitmail\]", settings, re.MULTILINE | re.IGNORECASE):
            if re.search(r"bare\s*=\s*false", settings, re.IGNORECASE) or where.name == ".git":
                raise MailboxError(
                    f"{where} is a project's git repository, not a gitmail mailbox; point {MAILBOX_ENV} at a new path"
                )
            raise MailboxError(
                f"{where} is a git repository gitmail did not create; point {MAILBOX_ENV} at a new or empty path"
            )
        self._checked = True
        migrate.on_open(self, settings)

    @property
    def own_dir(self) -> Path:
        return self.path / OWN_DIR

    def claims(self) -> dict[str, str]:
        """Which local path first used each repo name (machine-local, never synced)."""
        try:
            data = json.loads((self.own_dir / "claims.json").read_text())
        except (OSError, ValueError):
            return {}
        return nfc_keys({str(k): str(v) for k, v in data.items()}) if isinstance(data, dict) else {}

    def setting(self, name: str) -> str | None:
        """A value from the `[gitmail]` section of the mailbox's config (`git config gitmail.NAME VALUE`), read
        without starting git: the hooks ask at every session start."""
        try:
            with open(self.path / "config", encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except OSError:
            return None
        found = None
        section = False
        for raw in text.splitlines():
            line = raw.split("#", 1)[0].split(";", 1)[0].strip()
            if line.startswith("["):
                section = line.lower().replace(" ", "") == "[gitmail]"
            elif section and "=" in line:
                key, _, value = line.partition("=")
                if key.strip().lower() == name.lower():
                    found = value.strip().strip('"')
        return found

    def flag(self, name: str, default: bool = True) -> bool:
        value = self.setting(name)
        return default if value is None else value.lower() not in ("false", "no", "off", "0")

    def writable(self) -> bool:
        """Whether this process may write the mailbox (a read-only mailbox is still read)."""
        return os.access(self.own_dir if self.own_dir.is_dir() else self.path, os.W_OK)

    # -- lock-free reads through git --------------------------------------------------------------------------

    def git(
        self,
        *args: str,
        stdin: bytes | None = None,
        pass_fds: Sequence[int] = (),
        env: dict[str, str] | None = None,
    ) -> bytes:
        return gitcmd.run(self.path, *args, stdin=stdin, env=env, pass_fds=pass_fds)

    def refs(self, *patterns: str, count: int | None = None) -> list[Located]:
        """Message refs under the given prefixes (or glob patterns), parsed; foreign refs are ignored."""
        if not self.exists():
            return []
        limit = [f"--count={count}"] if count is not None else []
        out = self.git("for-each-ref", "--format=%(objectname) %(refname)", *limit, *migrate.readable(self, patterns))
        found = []
        for line in out.decode(errors="replace").splitlines():
            oid, _, ref = line.partition(" ")
            place = locate(ref, oid)
            if place:
                found.append(place)
        return found

    def log_refs(self, *args: str) -> list[tuple[str, list[str]]]:
        """Commits `git log` selects with the given arguments, newest first, with their gitmail refs. A ref among
        those the `--glob` arguments name whose commit is missing comes last, as a row of its own: git log skips
        it, and its readers find no document there and report it. Finding those costs nothing while every ref
        is whole: git log fails on such a ref, and only then are they looked for."""
        if not self.exists():
            return []
        try:
            return self._log(*args)
        except gitcmd.GitFailed as failure:
            if not re.search(r"\b(bad|missing) object\b", failure.stderr):
                raise
        globs = [a.split("=", 1)[1] for a in args if a.startswith("--glob=")]
        return self._log("--ignore-missing", *args) + [(p.oid, [p.ref]) for p in self.dangling(*globs)]

    def _log(self, *args: str) -> list[tuple[str, list[str]]]:
        out = self.git(
            "log",
            "--no-color",
            "--no-show-signature",
            "--format=%H%x00%D",
            "--decorate-refs=refs/gitmail/",
            *migrate.readable(self, args),
        )
        rows = []
        for line in out.decode(errors="replace").splitlines():
            oid, _, decorations = line.partition("\x00")
            rows.append((oid, [d for d in decorations.split(", ") if d]))
        return rows

    def dangling(self, *patterns: str) -> list[Located]:
        """Message refs under these prefixes whose commit the mailbox no longer has (a `git gc --prune=now` ran
        while they were being written)."""
        if not patterns:
            return []
        places = self.refs(*patterns)
        gone = self.missing([p.oid for p in places])
        return [p for p in places if p.oid in gone]

    def read(self, specs: Sequence[str]) -> list[bytes | None]:
        """Object contents for each `git cat-file` spec (`<oid>:<path>`, `<ref>:<path>`); None where missing."""
        if not specs:
            return []
        if self._reader is not None:
            return self._reader.read(specs)
        out = self.git("cat-file", "--batch", "--buffer", stdin="".join(s + "\n" for s in specs).encode())
        return gitcmd.parse_batch(out, len(specs))

    def keep_reading(self) -> None:
        """For a process that reads this mailbox many times (the MCP server): keep one `git cat-file` running for
        `read` instead of starting one per read. `close` stops it."""
        if self._reader is None:
            self._reader = gitcmd.BatchReader(self.path)

    def close(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.close()

    def targets(self, refs: Sequence[str]) -> dict[str, str]:
        """What each of these refs points at, for those that exist and point at an object the mailbox has."""
        if not refs:
            return {}
        out = self.git("cat-file", "--batch-check=%(objectname)", stdin="".join(r + "\n" for r in refs).encode())
        lines = out.decode(errors="replace").splitlines()
        return {ref: line for ref, line in zip(refs, lines, strict=True) if not line.endswith(" missing")}

    def written(self, refs: Sequence[str]) -> dict[str, str]:
        """Of these refs, the ones that exist, with what they hold, whether or not the mailbox has that object:
        found as git stores them (a loose file, or a line of packed-refs). For the few refs `targets` did not
        find, to tell a ref whose commit is gone from one that is not there."""
        found: dict[str, str] = {}
        for ref in refs:
            try:
                found[ref] = (self.path / ref).read_text(encoding="ascii", errors="replace").strip()
            except OSError:
                continue
        rest = set(refs) - set(found)
        if rest:
            try:
                with open(self.path / "packed-refs", encoding="utf-8", errors="replace") as packed:
                    for line in packed:
                        oid, _, ref = line.rstrip("\n").partition(" ")
                        if ref in rest:
                            found[ref] = oid
            except OSError:
                pass
        return {ref: oid for ref, oid in found.items() if len(oid) >= 40}

    def whole(self, oid: str) -> bool:
        """Whether this commit and everything it reaches (its tree, its documents, the commits it answers) are
        here: what git fsck and git gc need of every ref."""
        try:
            out = self.git("rev-list", "--objects", "--missing=print", oid)
        except gitcmd.GitFailed:  # the commit, or one it reaches, is gone
            return False
        return not any(line.startswith("?") for line in out.decode(errors="replace").splitlines())

    def missing(self, oids: Sequence[str]) -> set[str]:
        """Which of these objects the mailbox does not have."""
        if not oids:
            return set()
        out = self.git(
            "cat-file", "--batch-check=%(objectname)", "--buffer", stdin="".join(o + "\n" for o in oids).encode()
        )
        lines = out.decode(errors="replace").splitlines()
        return {oid for oid, line in zip(oids, lines, strict=True) if line.endswith(" missing")}

    # -- writes -------------------------------------------------------------------------------------------------

    def create(self) -> None:
        """Create the mailbox if absent: built aside and renamed into place, so racing creators never clash."""
        if self.exists():
            return
        import tempfile

        from gitmail import objects

        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            building = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.new-", dir=self.path.parent))
        except OSError as error:
            raise lock.unwritable(self.path.parent, error) from None
        try:
            objects.init(building)
            (building / OWN_DIR).mkdir(mode=0o700)
            os.chmod(building, 0o700)
            try:
                os.rename(building, self.path)
            except OSError as error:
                if error.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise lock.unwritable(self.path.parent, error) from None
        except OSError as error:
            raise lock.unwritable(self.path.parent, error) from None
        finally:
            if building.exists():
                _remove_tree(building)
        self._checked = False
        self.check()

    @contextmanager
    def locked(self, *, timeout: float = WRITE_WAIT, deadline: Deadline | None = None) -> Iterator[int]:
        """Hold the mailbox's write lock; finish any change a dead writer left half-applied."""
        self.create()
        try:
            self.own_dir.mkdir(mode=0o700, exist_ok=True)
        except OSError as error:
            raise lock.unwritable(self.path, error) from None
        fd = lock.open_lock(self.own_dir)
        try:
            lock.acquire(fd, deadline or Deadline(timeout), self.path)
            self._finish_dead_writers_change(fd)
            yield fd
        finally:
            os.close(fd)  # releases the flock

    @contextmanager
    def writing(
        self, *, actor: RepoName, timeout: float = WRITE_WAIT, deadline: Deadline | None = None
    ) -> Iterator[Writer]:
        from gitmail import objects

        deadline = deadline or Deadline(timeout)
        with self.locked(deadline=deadline) as fd, objects.repository(self.path) as repo:
            if MARK_KEY not in repo.config:
                objects.configure(repo)
            writer = Writer(self, objects.Objects(repo, self.path), actor, fd, deadline)
            yield writer
            writer.maintain()

    def recent(self, names: Sequence[str], wanted: int) -> list[history.Line] | None:
        """The newest lines of these history files; None when the index cannot be had (a mailbox this process
        may not write, whose index was never built; a mailbox whose migration is not finished)."""
        if not self.exists():
            return []
        if self.old_names:
            return None  # refs are still being renamed: the index is built once they all have their names
        if not history.complete(self.path):
            if not self.writable():
                return None
            with self.locked():
                if not history.complete(self.path):
                    history.rebuild(self.path, self._every_message())
        return history.newest(self.path, names, wanted)

    def _every_message(self) -> list[history.Line]:
        fields = "%(objectname) %(refname) %(authordate:unix) %(authoremail)"
        try:
            rows = self.git("for-each-ref", f"--format={fields}", "refs/gitmail/").decode(errors="replace")
        except gitcmd.GitFailed:  # a ref whose commit is gone: git reads what is there, the rest is named
            out = self.git("log", "--no-walk", "--ignore-missing", "--format=%H %at %ae", "--glob=refs/gitmail/")
            dated = {oid: rest for oid, _, rest in (row.partition(" ") for row in out.decode().splitlines())}
            listed = self.git("for-each-ref", "--format=%(objectname) %(refname)", "refs/gitmail/").decode()
            now = str(int(time.time()))  # a message whose commit is gone has no date: it is news now
            rows = "\n".join(
                f"{row} {dated.get(row.split(' ', 1)[0], f'{now} <>')}" for row in listed.splitlines() if " " in row
            )
        lines = []
        for row in rows.splitlines():
            oid, ref, when, email = (row.split(" ", 3) + ["", "", ""])[:4]
            place = locate(ref, oid)
            if place is None or not when.isdigit():
                continue
            recipient = place.recipient.ref if place.recipient is not None else history.BROADCAST
            sender = from_address(email)
            lines.append(history.Line(int(when), place.id, recipient, sender.ref if sender else history.UNKNOWN))
        return lines

    def write_claims(self, claims: dict[str, str]) -> None:
        lock.write_atomically(self.own_dir / "claims.json", json.dumps(claims, indent=1, sort_keys=True).encode())
        stamps.bump(self.path, [stamps.CLAIMS], f"{time.time_ns():x}")  # trust labels may read differently now

    def _finish_dead_writers_change(self, fd: int) -> None:
        """Replay a journal a killed writer left. One whose objects are gone (a `git gc --prune=now` ran since) is
        set aside whole and logged: the command that wrote it never reported success, and the rest of the mailbox
        must go on working."""
        journal = lock.Journal(self.own_dir)
        if not journal.exists():
            return
        try:
            changes = journal.load()
        except (OSError, ValueError) as error:
            kept = journal.set_aside()
            log_problem(self, f"set aside an unreadable journal ({error}) as {kept.name}")
            return
        lock.remove_left_by_dead_writer(self.path, [c.ref for c in changes])
        gone = self.missing([c.new for c in changes if c.new is not None])
        if gone:
            kept = journal.set_aside()
            log_problem(
                self,
                f"set aside an unfinished change whose objects are gone ({', '.join(sorted(gone))}) as {kept.name}: "
                + "; ".join(f"{c.ref} {c.old or '-'} -> {c.new or '-'}" for c in changes),
            )
            return
        finish = "gitmail: finish a change its writer did not"
        _update_refs(self, changes, finish, RepoName("gitmail"), fd, Deadline(lock.GIT_LOCK_WAIT), verify=False)
        journal.clear()
        history.forget(self.path)  # what the dead writer brought in is found when the index is rebuilt
        stamps.bump(self.path, *touched(changes, None))


class Writer:
    """What may be done while holding the lock. Every ref change goes through `apply`."""

    def __init__(self, store: Store, objects: Objects, actor: RepoName, lock_fd: int, deadline: Deadline) -> None:
        self.store, self.objects, self.actor, self.lock_fd = store, objects, actor, lock_fd
        self.deadline = deadline
        self._wrote = False
        self._readable: dict[str, bool] = {}  # notes commits looked at: whether they can be built on
        self._told: set[tuple[str, str | None]] = set()  # notes refs whose damage was logged, with what replaced it

    def target(self, ref: str) -> str | None:
        return self.objects.target(ref)

    def commit(self, message: Message, parents: Sequence[str] = ()) -> str:
        """Write the message's blob, tree and commit (no ref yet: unreferenced objects are harmless garbage).
        The commit records the machine it was written on."""
        from gitmail import machine

        self._wrote = True
        return self.objects.commit(message._replace(machine=machine.current(self.store)), parents)

    def apply(self, changes: Sequence[Change], reason: str) -> None:
        """Make every change or none. Each is checked against the value it expects (git update-ref refuses the
        transaction otherwise). The journal is written first: a change of several refs is replayed if this process
        dies, and the next writer knows which ref locks it may have left."""
        arrivals = self._arrivals(changes)  # before the journal: a failure here leaves nothing to finish
        journal = lock.Journal(self.store.own_dir)
        journal.record(changes, durable=len(changes) > 1)
        try:
            _update_refs(self.store, changes, reason, self.actor, self.lock_fd, self.deadline, verify=True)
        finally:
            journal.clear()  # done, or refused whole before anything moved
        self._wrote = True
        stamps.bump(self.store.path, *touched(changes, self.actor))
        if arrivals and history.complete(self.store.path):
            try:
                history.append(self.store.path, arrivals)
            except OSError:
                history.forget(self.store.path)  # rebuilt from the refs when next needed

    def _arrivals(self, changes: Sequence[Change]) -> list[history.Line]:
        """History lines for the messages these changes bring into the mailbox (a move within it is no arrival)."""
        moved = {p.id for c in changes if c.new is None and c.old and (p := locate(c.ref, c.old))}
        lines = []
        for change in changes:
            place = locate(change.ref, change.new) if change.old is None and change.new else None
            if place is None or place.id in moved:
                continue
            address, when = self.objects.author(place.oid)
            recipient = place.recipient.ref if place.recipient is not None else history.BROADCAST
            sender = from_address(address)
            lines.append(history.Line(when, place.id, recipient, sender.ref if sender else history.UNKNOWN))
        return lines

    def note_lines(
        self,
        notes_ref: str,
        additions: Mapping[str, Sequence[str]],
        *,
        who: RepoName,
        when: datetime,
        fan_out: bool = False,
    ) -> tuple[Change | None, list[str]]:
        """A notes commit adding these lines to the notes on these objects (kept sorted and unique, so copies
        merge as a union), and the ref change that would publish it; None and [] when every line is there."""
        current = self.target(notes_ref)
        notes: dict[str, str] = {}
        for oid, lines in additions.items():
            old = set(self.note(notes_ref, oid).splitlines())
            if not set(lines) <= old:
                notes[oid] = "".join(f"{line}\n" for line in sorted(old | set(lines)))
        parent = self.notes_tip(notes_ref)  # the commit every note above was read from
        if not notes:  # a tip lost to a prune is put back even when there is nothing to add
            return (Change(notes_ref, parent, current) if parent is not None and parent != current else None), []
        text = f"gitmail: notes for {' '.join(notes)} by {who}\n"
        commit = self.objects.notes_commit(parent, notes, who=who, when=when, text=text, fan_out=fan_out)
        return Change(notes_ref, commit, current), list(notes)

    def note(self, notes_ref: str, oid: str) -> str:
        """The note on `oid` in the commit of `notes_ref` that `notes_tip` chooses ('' when there is none)."""
        from gitmail.objects import Gone

        while True:
            tip = self.notes_tip(notes_ref)
            try:
                return self.objects.note(tip, oid)
            except Gone:  # this commit lost a note to a prune: building on it would keep the hole in history
                self._readable[tip or ""] = False

    def notes_tip(self, notes_ref: str) -> str | None:
        """The commit the next notes commit on `notes_ref` builds on: its tip, or, when a `git gc --prune=now`
        took the tip or part of it while it was being written, the newest commit the ref's reflog names that the
        mailbox still has whole enough to read. Only what those writes added is lost, and notes go on being
        written (`gitmail doctor --repair` mends the ref's history)."""
        tip = self.target(notes_ref)
        if tip is None or self._readable_notes(tip):
            return tip
        older = (new for _, new in reversed(reflog(self.store.path, notes_ref)) if new != tip)
        kept = next((new for new in older if self._readable_notes(new)), None)
        if (notes_ref, kept) not in self._told:
            self._told.add((notes_ref, kept))
            log_problem(
                self.store, f"{notes_ref} pointed at {tip}, which the mailbox no longer has whole; went on from {kept}"
            )
        return kept

    def _readable_notes(self, commit: str) -> bool:
        if commit not in self._readable:
            self._readable[commit] = self.objects.readable_notes(commit)
        return self._readable[commit]

    def set_aside(self, ref: str, oid: str, what: str) -> list[Change]:
        """The changes that move a damaged message ref out of every listing, into refs/gitmail/_damaged/, never
        deleting what is known of it. A ref whose commit is gone, or lacks part of what it reaches, cannot point
        there (git refuses a ref to a missing object; git fsck and git gc fail on a commit with parts missing): a
        small commit recording the ref and the lost commit id stands in for it."""
        kept = oid
        if not self.store.whole(oid):
            text = f"gitmail: {what} set aside: {ref} pointed at {oid}, which the mailbox no longer has whole\n"
            kept = self.objects.record(text, who=self.actor)
        return [Change(damaged_ref(ref), kept, None), Change(ref, None, oid)]

    def maintain(self) -> None:
        """Pack loose objects and refs once enough have piled up (git gc's own measure), still under the lock."""
        sample = self.store.path / "objects" / "17"
        loose = len(os.listdir(sample)) if sample.is_dir() else 0
        if not self._wrote or loose <= LOOSE_OBJECTS_BEFORE_PACKING:
            return
        # The git children share the lock, so it stays held even if this process dies before they finish.
        waits = ("-c", f"core.packedRefsTimeout={int(lock.GIT_LOCK_WAIT * 1000)}")
        try:
            self.store.git(*waits, "pack-refs", "--all", "--prune", pass_fds=(self.lock_fd,))
            # Geometric repacking rolls loose objects into packs while keeping the number of packs logarithmic.
            self.store.git("repack", "-d", "-q", "--geometric=2", pass_fds=(self.lock_fd,))
        except MailboxError as error:  # packing is housekeeping: the write itself has landed
            log_problem(self.store, f"packing was put off: {error}")


def touched(changes: Sequence[Change], actor: RepoName | None) -> tuple[set[RepoName | None], str]:
    """Whose pending mail these changes alter (None: every repo's broadcasts), and the stamp to mark it with:
    a new message's id where one arrives. A session that looked before then looks again."""
    names: set[RepoName | None] = set()
    value = ""
    for change in changes:
        place = locate(change.ref, change.new or change.old or "")
        if place is not None and place.state in (State.PENDING, State.BROADCAST):
            names.add(place.recipient)
            value = place.id if change.new and change.old is None else value
        elif place is not None and place.state is State.RETRACTED:
            names.add(None)
        elif change.ref == SEEN_NOTES and actor is not None:
            names.add(actor)  # a broadcast was handed to it: no longer pending there
    return names, value or f"{time.time_ns():x}"


def _update_refs(
    store: Store,
    changes: Sequence[Change],
    reason: str,
    actor: RepoName,
    lock_fd: int,
    deadline: Deadline,
    *,
    verify: bool,
) -> None:
    """One `git update-ref` transaction: all refs are locked before any moves. libgit2 is not used for ref writes:
    it re-reads every packed ref before each write, which costs ~40 ms per write in a mailbox of 100,000.
    A ref lock another git process holds is waited for (git's own timeouts); one left behind long ago is cleared."""
    commands = []
    for ref, new, old in changes:
        expect = (old or "") if verify else ""
        if new is None:
            commands.append(f"delete {ref}\0{expect}\0")
        elif old is None and verify:
            commands.append(f"create {ref}\0{new}\0")
        else:
            commands.append(f"update {ref}\0{new}\0{expect}\0")
    for ref in [*(c.ref for c in changes), "packed-refs"]:
        if lock.clear_if_abandoned(lock.lock_file(store.path, ref), only_if_old=True):
            log_problem(store, f"removed {lock.lock_file(store.path, ref)}: left behind by a git process that is gone")
    identity = {"GIT_COMMITTER_NAME": str(actor), "GIT_COMMITTER_EMAIL": email(actor)}  # the reflog's "who"
    wait = int(min(lock.GIT_LOCK_WAIT, deadline.left()) * 1000)
    arguments = (
        "-c",
        "core.fsync=committed,reference",
        "-c",
        f"core.filesRefLockTimeout={wait}",
        "-c",
        f"core.packedRefsTimeout={wait}",
        "update-ref",
        "-z",
        "--stdin",
        "-m",
        reason,
    )
    for attempt in range(2):
        try:
            store.git(*arguments, stdin="".join(commands).encode(), env=identity, pass_fds=(lock_fd,))
            return
        except gitcmd.GitFailed as failure:
            if "nonexistent object" in failure.stderr:  # a concurrent prune took an object just written
                raise Transient(str(failure)) from None
            held = lock.held_lock(failure.stderr, store.path)
            if held is None:
                raise
            if attempt == 0 and lock.clear_if_abandoned(held, only_if_old=False):
                log_problem(store, f"removed {held}: left behind by a git process that is gone")
                continue
            raise MailboxBusy(
                f"another git process holds {held} (for {lock.lock_age(held):.0f}s); try again, or remove that "
                "file if no git process is running on the mailbox"
            ) from None


def reflog(git_dir: Path, ref: str, *, every: bool = False) -> list[tuple[str, str]]:
    """The (old, new) commit ids of each entry in a ref's reflog, oldest first; [] when it has none. With `every`,
    each line of it is an entry (as git counts them: `ref@{0}` is the last), "" where a line names no commit."""
    try:
        text = (git_dir / "logs" / ref).read_text(errors="replace")
    except OSError:
        return []
    entries = []
    for line in text.splitlines():
        old, _, rest = line.partition(" ")
        new = rest.partition(" ")[0]
        if len(old) == len(new) in (40, 64) and new.strip("0"):
            entries.append((old, new))
        elif every:
            entries.append(("", ""))
    return entries


def check_ownership(where: Path) -> None:
    """Refuse a mailbox another user owns or could change (as ssh refuses a key file others can write): its
    config and refs decide what gitmail runs and delivers. Inside a private (0700) mailbox nobody else can reach
    anything, whatever the modes there."""
    uid = os.getuid()
    root = where.stat()
    _check_owned(where, root, uid, where)
    if not stat.S_IMODE(root.st_mode) & 0o077:
        return
    for path in (where / "config", where / "refs", where / "objects", where / "hooks", where / OWN_DIR):
        try:
            _check_owned(path, path.lstat(), uid, where)
        except FileNotFoundError:
            continue


def _check_owned(path: Path, info: os.stat_result, uid: int, where: Path) -> None:
    if info.st_uid != uid:
        raise MailboxError(
            f"{path} belongs to another user (uid {info.st_uid}); gitmail uses only a mailbox you own "
            f"(fix: chown -R {uid} {where}, or set {MAILBOX_ENV} to a mailbox of your own)"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not stat.S_ISLNK(info.st_mode):
        raise MailboxError(
            f"{path} can be changed by other users (mode {stat.S_IMODE(info.st_mode):o}); "
            f"gitmail refuses such a mailbox (fix: chmod -R go-w {where})"
        )


def log_problem(store: Store, text: str) -> None:
    """A line in the log beside the mailbox; logging never fails an operation."""
    import time

    try:
        with open(store.path.parent / "gitmail.log", "a", encoding="utf-8") as handle:
            handle.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} {store.path}: {text}\n")
    except OSError:
        pass


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
