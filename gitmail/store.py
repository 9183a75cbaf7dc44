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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from gitmail import gitcmd, lock
from gitmail.errors import MailboxBusy, MailboxError, UsageError
from gitmail.identity import RepoName
from gitmail.layout import OWN_DIR, SEEN_NOTES, Change, Located, email, locate
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
            _check_ownership(where)
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

    @property
    def own_dir(self) -> Path:
        return self.path / OWN_DIR

    def claims(self) -> dict[str, str]:
        """Which local path first used each repo name (machine-local, never synced)."""
        try:
            data = json.loads((self.own_dir / "claims.json").read_text())
        except (OSError, ValueError):
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

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
        out = self.git("for-each-ref", "--format=%(objectname) %(refname)", *limit, *patterns)
        found = []
        for line in out.decode(errors="replace").splitlines():
            oid, _, ref = line.partition(" ")
            place = locate(ref, oid)
            if place:
                found.append(place)
        return found

    def log_refs(self, *args: str) -> list[tuple[str, list[str]]]:
        """Commits `git log` selects with the given arguments, newest first, with their gitmail refs. A ref whose
        commit is missing is skipped (`gitmail doctor` reports it)."""
        if not self.exists():
            return []
        out = self.git(
            "log",
            "--ignore-missing",
            "--no-color",
            "--no-show-signature",
            "--format=%H%x00%D",
            "--decorate-refs=refs/gitmail/",
            *args,
        )
        rows = []
        for line in out.decode(errors="replace").splitlines():
            oid, _, decorations = line.partition("\x00")
            rows.append((oid, [d for d in decorations.split(", ") if d]))
        return rows

    def read(self, specs: Sequence[str]) -> list[bytes | None]:
        """Object contents for each `git cat-file` spec (`<oid>:<path>`, `<ref>:<path>`); None where missing."""
        if not specs:
            return []
        out = self.git("cat-file", "--batch", stdin="".join(s + "\n" for s in specs).encode())
        return gitcmd.parse_batch(out, len(specs))

    def missing(self, oids: Sequence[str]) -> set[str]:
        """Which of these objects the mailbox does not have."""
        if not oids:
            return set()
        out = self.git("cat-file", "--batch-check=%(objectname)", stdin="".join(o + "\n" for o in oids).encode())
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

    def write_claims(self, claims: dict[str, str]) -> None:
        lock.write_atomically(self.own_dir / "claims.json", json.dumps(claims, indent=1, sort_keys=True).encode())

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


class Writer:
    """What may be done while holding the lock. Every ref change goes through `apply`."""

    def __init__(self, store: Store, objects: Objects, actor: RepoName, lock_fd: int, deadline: Deadline) -> None:
        self.store, self.objects, self.actor, self.lock_fd = store, objects, actor, lock_fd
        self.deadline = deadline
        self._wrote = False

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
        journal = lock.Journal(self.store.own_dir)
        journal.record(changes, durable=len(changes) > 1)
        try:
            _update_refs(self.store, changes, reason, self.actor, self.lock_fd, self.deadline, verify=True)
        finally:
            journal.clear()  # done, or refused whole before anything moved
        self._wrote = True

    def add_seen(self, oids: Sequence[str], repo: RepoName, when: datetime) -> list[str]:
        """Record `repo` in the seen-sets of these broadcasts; return those it was not in yet. A seen-set is the
        note on the broadcast's commit, sorted unique lines, so git can merge two copies as a union."""
        parent = self.target(SEEN_NOTES)
        notes: dict[str, str] = {}
        for oid in oids:
            old = set(self.objects.note(parent, oid).splitlines())
            if str(repo) not in old:
                notes[oid] = "".join(f"{name}\n" for name in sorted(old | {str(repo)}))
        if not notes:
            return []
        text = f"gitmail: {repo} was handed {' '.join(notes)}\n"
        commit = self.objects.notes_commit(parent, notes, who=repo, when=when, text=text)
        self.apply([Change(SEEN_NOTES, commit, parent)], text.strip())
        return list(notes)

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


def _check_ownership(where: Path) -> None:
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
