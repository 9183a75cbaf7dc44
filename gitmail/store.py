"""The mailbox repository: where it lives, its ref layout, lock-free reads, and writes under one lock.

Reads go through `git for-each-ref` and `git cat-file --batch`: listing refs under a prefix costs git the same
whether the mailbox holds 10 or 100,000 other refs (libgit2 walks every ref), and a session-start read cannot
afford pygit2's import. Writes build objects with pygit2 and move refs with `git update-ref` transactions that
check each ref against the value they expect (libgit2 re-reads every packed ref before each ref write).
Every write holds one exclusive flock, so check-then-write sequences (is it still pending? was this repo handed
that broadcast?) cannot interleave; the kernel drops the lock when its holder dies. A change of several refs is
journaled first and replayed by the next lock holder if its writer died midway, so it lands whole.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from gitmail.errors import MailboxBusy, MailboxError
from gitmail.identity import RepoName
from gitmail.message import DOCUMENT_NAME, ID_PATTERN, Message

if TYPE_CHECKING:
    import pygit2

MAILBOX_ENV = "GITMAIL_DIR"
ROOT = "refs/gitmail/"
BROADCASTS = ROOT + "_broadcast/"
SEEN_NOTES = "refs/notes/gitmail-seen"
OWN_DIR = "gitmail"  # gitmail's own files inside the repository: lock, journal, claims
LOOSE_OBJECTS_BEFORE_PACKING = 27  # in the objects/17 sample: ~6,900 loose objects, git gc's own threshold

# Variables that would point git at another repository, namespace or object store than the mailbox.
_REDIRECTING_ENV = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_NAMESPACE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_REPLACE_REF_BASE",
    "GIT_NOTES_REF",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_QUARANTINE_PATH",
)


class State(Enum):
    PENDING = "pending"
    ARCHIVED = "archived"
    BROADCAST = "broadcast"
    RETRACTED = "retracted"


def inbox_prefix(repo: RepoName) -> str:
    return f"{ROOT}{repo.ref}/inbox/"


def archive_prefix(repo: RepoName) -> str:
    return f"{ROOT}{repo.ref}/archive/"


def state_prefix(state: State, repo: RepoName | None = None) -> str:
    if state is State.BROADCAST:
        return BROADCASTS + "active/"
    if state is State.RETRACTED:
        return BROADCASTS + "retracted/"
    assert repo is not None
    return inbox_prefix(repo) if state is State.PENDING else archive_prefix(repo)


class Located(NamedTuple):
    """Where a message's ref says it is."""

    ref: str
    oid: str
    id: str
    state: State
    recipient: RepoName | None  # None for broadcasts


_STATE_OF_FOLDER = {
    "inbox": State.PENDING,
    "archive": State.ARCHIVED,
    "active": State.BROADCAST,
    "retracted": State.RETRACTED,
}
# When a crash left one message under two refs, the later state is the true one.
_PRECEDENCE = {State.PENDING: 0, State.BROADCAST: 0, State.ARCHIVED: 1, State.RETRACTED: 1}


def locate(ref: str, oid: str) -> Located | None:
    parts = ref[len(ROOT) :].split("/") if ref.startswith(ROOT) else []
    if len(parts) != 3 or not ID_PATTERN.fullmatch(parts[2]) or parts[1] not in _STATE_OF_FOLDER:
        return None
    state = _STATE_OF_FOLDER[parts[1]]
    if (parts[0] == "_broadcast") != (state in (State.BROADCAST, State.RETRACTED)):
        return None
    try:
        recipient = None if parts[0] == "_broadcast" else RepoName.from_ref(parts[0])
    except Exception:
        return None
    return Located(ref=ref, oid=oid, id=parts[2], state=state, recipient=recipient)


def latest(places: Sequence[Located]) -> list[Located]:
    """One place per message id: the later state wins over a leftover of an interrupted move."""
    best: dict[str, Located] = {}
    for place in places:
        known = best.get(place.id)
        if known is None or _PRECEDENCE[place.state] > _PRECEDENCE[known.state]:
            best[place.id] = place
    return list(best.values())


def default_path() -> Path:
    configured = os.environ.get(MAILBOX_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".gitmail" / "mail.git"


class Store:
    """One mailbox repository. Reading never creates it; the first write does."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else default_path()
        self._checked = False

    # -- existence and health ---------------------------------------------------------------------------------

    def exists(self) -> bool:
        """True when something is at the mailbox path; `check` says whether it is a usable mailbox."""
        if not os.path.lexists(self.path):
            return False
        self.check()
        return True

    def check(self) -> None:
        if self._checked:
            return
        where = self.path
        try:
            if not where.is_dir():
                raise MailboxError(f"mailbox path {where} exists but is not a directory")
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

    # -- lock-free reads through git --------------------------------------------------------------------------

    def git(
        self, *args: str, stdin: bytes | None = None, pass_fds: Sequence[int] = (), env: dict[str, str] | None = None
    ) -> bytes:
        environment = {k: v for k, v in os.environ.items() if k not in _REDIRECTING_ENV}
        environment.update(env or {}, GIT_NO_REPLACE_OBJECTS="1")
        try:
            done = subprocess.run(
                ["git", "--git-dir", str(self.path), *args],
                input=stdin,
                capture_output=True,
                env=environment,
                pass_fds=pass_fds,
            )
        except FileNotFoundError:
            raise MailboxError("git was not found on PATH; gitmail reads the mailbox with it") from None
        if done.returncode != 0:
            reason = done.stderr.decode(errors="replace").strip().splitlines()
            command = next(a for a in args if not a.startswith("-") and "=" not in a)
            raise MailboxError(f"git {command} failed on the mailbox: {reason[-1] if reason else done.returncode}")
        return done.stdout

    def refs(self, *patterns: str, count: int | None = None) -> list[Located]:
        """Message refs under the given prefixes (or glob patterns), parsed; foreign refs are ignored."""
        if not self.exists():
            return []
        limit = [f"--count={count}"] if count is not None else []
        out = self.git("for-each-ref", "--format=%(objectname) %(refname)", *limit, *patterns)
        found = []
        for line in out.decode().splitlines():
            oid, _, ref = line.partition(" ")
            place = locate(ref, oid)
            if place:
                found.append(place)
        return found

    def log_refs(self, *args: str) -> list[tuple[str, list[str]]]:
        """Commits `git log` selects with the given arguments, newest first, with their gitmail refs."""
        if not self.exists():
            return []
        out = self.git(
            "log", "--no-color", "--no-show-signature", "--format=%H%x00%D", f"--decorate-refs={ROOT}", *args
        )
        rows = []
        for line in out.decode().splitlines():
            oid, _, decorations = line.partition("\x00")
            rows.append((oid, [d for d in decorations.split(", ") if d]))
        return rows

    def read(self, specs: Sequence[str]) -> list[bytes | None]:
        """Object contents for each `git cat-file` spec (`<oid>:<path>`, `<ref>:<path>`); None where missing."""
        if not specs:
            return []
        out = self.git("cat-file", "--batch", stdin="".join(s + "\n" for s in specs).encode())
        results: list[bytes | None] = []
        at = 0
        for _ in specs:
            end = out.index(b"\n", at)
            header = out[at:end].split(b" ")
            at = end + 1
            if len(header) == 3 and header[2].isdigit():
                size = int(header[2])
                results.append(out[at : at + size])
                at += size + 1
            else:  # "<spec> missing" or "<spec> ambiguous"
                results.append(None)
        return results

    # -- writes -------------------------------------------------------------------------------------------------

    def create(self) -> None:
        """Create the mailbox if absent: built aside and renamed into place, so racing creators never clash."""
        if self.exists():
            return
        import tempfile

        import pygit2

        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.new-", dir=self.path.parent))
        try:
            _configure(pygit2.init_repository(str(building), bare=True))
            (building / OWN_DIR).mkdir(mode=0o700)
            os.chmod(building, 0o700)
            try:
                os.rename(building, self.path)
            except OSError as error:
                if error.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise
        finally:
            if building.exists():
                _remove_tree(building)
        self._checked = False
        self.check()

    @contextmanager
    def locked(self, *, timeout: float = 10.0) -> Iterator[int]:
        """Hold the mailbox's write lock; finish any change a dead writer left half-applied."""
        self.create()
        self.own_dir.mkdir(mode=0o700, exist_ok=True)  # a mailbox made by plain `git init --bare` lacks it
        fd = os.open(self.own_dir / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            _acquire(fd, timeout, self.path)
            journal = self.own_dir / "journal"
            if journal.exists():
                changes = [Change(*c) for c in json.loads(journal.read_text())]
                _update_refs(
                    self, changes, "gitmail: finish a change its writer did not", RepoName("gitmail"), verify=False
                )
                journal.unlink()
            yield fd
        finally:
            os.close(fd)  # releases the flock

    @contextmanager
    def writing(self, *, actor: RepoName, timeout: float = 10.0) -> Iterator[Writer]:
        with self.locked(timeout=timeout) as fd, self._repository() as repo:
            if "gitmail.version" not in repo.config:
                _configure(repo)
            writer = Writer(self, repo, actor)
            yield writer
            writer.maintain(fd)

    @contextmanager
    def _repository(self) -> Iterator[pygit2.Repository]:
        import pygit2
        from pygit2.enums import Option, RepositoryOpenFlag

        pygit2.option(Option.ENABLE_FSYNC_GITDIR, True)  # a reported send survives power loss, not only crashes
        try:
            repo = pygit2.Repository(str(self.path), RepositoryOpenFlag.NO_SEARCH | RepositoryOpenFlag.BARE)
        except pygit2.GitError as error:
            raise MailboxError(f"cannot open the mailbox at {self.path}: {error}") from None
        try:
            yield repo
        finally:
            repo.free()

    def write_claims(self, claims: dict[str, str]) -> None:
        _write_atomically(self.own_dir / "claims.json", json.dumps(claims, indent=1, sort_keys=True).encode())


class Writer:
    """What may be done while holding the lock. Every ref change goes through `apply`."""

    def __init__(self, store: Store, repo: pygit2.Repository, actor: RepoName) -> None:
        self.store, self.repo, self.actor = store, repo, actor
        self._wrote = False

    def target(self, ref: str) -> str | None:
        found = self.repo.references.get(ref)
        return str(found.target) if found is not None else None

    def commit(self, message: Message, parents: Sequence[str] = ()) -> str:
        """Write the message's blob, tree and commit (no ref yet: unreferenced objects are harmless garbage)."""
        import pygit2
        from pygit2.enums import FileMode

        blob = self.repo.create_blob(message.document())
        builder = self.repo.TreeBuilder()
        builder.insert(DOCUMENT_NAME, blob, FileMode.BLOB)
        author = _signature(message.sender, message.date)
        oid = self.repo.create_commit(
            None, author, author, message.commit_message(), builder.write(), [pygit2.Oid(hex=p) for p in parents]
        )
        self._wrote = True
        return str(oid)

    def apply(self, changes: Sequence[Change], reason: str) -> None:
        """Make every change or none. Each is checked against the value it expects (git update-ref refuses the
        transaction otherwise); a change of several refs is journaled first and replayed if this process dies."""
        journal = self.store.own_dir / "journal"
        if len(changes) > 1:
            _write_atomically(journal, json.dumps([list(c) for c in changes]).encode())
        try:
            _update_refs(self.store, changes, reason, self.actor, verify=True)
        finally:
            journal.unlink(missing_ok=True)  # done, or refused whole before anything moved
        self._wrote = True

    def add_seen(self, oids: Sequence[str], repo: RepoName, when: datetime) -> list[str]:
        """Record `repo` in the seen-sets of these broadcasts; return those it was not in yet. A seen-set is the
        note on the broadcast's commit, sorted unique lines, so git can merge two copies as a union."""
        import pygit2
        from pygit2.enums import FileMode

        parent = self.target(SEEN_NOTES)
        root = self.repo[parent].peel(pygit2.Tree) if parent else None
        top = self.repo.TreeBuilder(root) if root is not None else self.repo.TreeBuilder()
        fanned: dict[str, pygit2.TreeBuilder] = {}  # git fans notes out into subtrees as they grow
        added = []
        for oid in oids:
            directory = oid[:2] if root is not None and oid[:2] in root else None
            old = _note(root, oid)
            if str(repo) in old:
                continue
            blob = self.repo.create_blob("".join(f"{name}\n" for name in sorted(old | {str(repo)})))
            if directory is None:
                top.insert(oid, blob, FileMode.BLOB)
            else:
                assert root is not None
                if directory not in fanned:
                    fanned[directory] = self.repo.TreeBuilder(root[directory].peel(pygit2.Tree))
                fanned[directory].insert(oid[2:], blob, FileMode.BLOB)
            added.append(oid)
        if not added:
            return []
        for directory, builder in fanned.items():
            top.insert(directory, builder.write(), FileMode.TREE)
        signature = _signature(repo, when)
        message = f"gitmail: {repo} was handed {' '.join(added)}\n"
        commit = self.repo.create_commit(None, signature, signature, message, top.write(), [parent] if parent else [])
        self.apply([Change(SEEN_NOTES, str(commit), parent)], message.strip())
        return added

    def maintain(self, lock_fd: int) -> None:
        """Pack loose objects and refs once enough have piled up (git gc's own measure), still under the lock."""
        sample = self.store.path / "objects" / "17"
        loose = len(os.listdir(sample)) if sample.is_dir() else 0
        if not self._wrote or loose <= LOOSE_OBJECTS_BEFORE_PACKING:
            return
        _clear_stale_lock(self.store.path, "packed-refs")
        # The git children inherit the lock, so it stays held even if this process dies before they finish.
        self.store.git("pack-refs", "--all", "--prune", pass_fds=(lock_fd,))
        # Geometric repacking rolls loose objects into packs while keeping the number of packs logarithmic.
        self.store.git("repack", "-d", "-q", "--geometric=2", pass_fds=(lock_fd,))


def _configure(repo: pygit2.Repository) -> None:
    for key, value in {
        "core.logAllRefUpdates": "always",  # every ref move leaves a reflog entry
        "gc.auto": "0",  # gitmail packs under its own lock; no git command may do it behind its back
        "notes.gitmail-seen.mergeStrategy": "cat_sort_uniq",  # seen-sets merge as a union on sync
        "gitmail.version": "1",
    }.items():
        repo.config[key] = value


class Change(NamedTuple):
    """One ref change: create (old None), update, or delete (new None)."""

    ref: str
    new: str | None
    old: str | None


def _update_refs(store: Store, changes: Sequence[Change], reason: str, actor: RepoName, *, verify: bool) -> None:
    """One `git update-ref` transaction: all refs are locked before any moves. libgit2 is not used for ref writes:
    it re-reads every packed ref before each write, which costs ~40 ms per write in a mailbox of 100,000."""
    commands = []
    for ref, new, old in changes:
        _clear_stale_lock(store.path, ref)
        expect = (old or "") if verify else ""
        if new is None:
            commands.append(f"delete {ref}\0{expect}\0")
        elif old is None and verify:
            commands.append(f"create {ref}\0{new}\0")
        else:
            commands.append(f"update {ref}\0{new}\0{expect}\0")
    _clear_stale_lock(store.path, "packed-refs")
    identity = {"GIT_COMMITTER_NAME": str(actor), "GIT_COMMITTER_EMAIL": email(actor)}  # the reflog's "who"
    store.git(
        "-c",
        "core.fsync=committed,reference",
        "update-ref",
        "-z",
        "--stdin",
        "-m",
        reason,
        stdin="".join(commands).encode(),
        env=identity,
    )


def _note(root: pygit2.Tree | None, oid: str) -> set[str]:
    """The repos in a broadcast's seen-set note, wherever in the (possibly fanned-out) notes tree it is."""
    if root is None:
        return set()
    import pygit2

    for path in (oid, f"{oid[:2]}/{oid[2:]}", f"{oid[:2]}/{oid[2:4]}/{oid[4:]}"):
        try:
            note = root[path]
        except KeyError:
            continue
        if isinstance(note, pygit2.Blob):
            return set(note.data.decode(errors="replace").splitlines())
    return set()


def _clear_stale_lock(root: Path, ref: str) -> None:
    """Under the mailbox lock no other gitmail writer runs, so a ref's `.lock` file is left from a killed one."""
    try:
        (root / f"{ref}.lock").unlink()
    except FileNotFoundError:
        pass


def _acquire(fd: int, timeout: float, where: Path) -> None:
    deadline = time.monotonic() + timeout
    pause = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise MailboxBusy(
                    f"the mailbox at {where} stayed locked by another gitmail process for {timeout:g}s; try again"
                ) from None
            time.sleep(pause)
            pause = min(pause * 2, 0.05)


def _write_atomically(path: Path, data: bytes) -> None:
    import tempfile

    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def seen_specs(oid: str) -> list[str]:
    """Where a broadcast's seen-set note may be: libgit2 writes it at the top of the notes tree; git fans notes
    out into subdirectories as they grow (after a sync, say)."""
    return [f"{SEEN_NOTES}:{oid}", f"{SEEN_NOTES}:{oid[:2]}/{oid[2:]}", f"{SEEN_NOTES}:{oid[:2]}/{oid[2:4]}/{oid[4:]}"]


def seen_set(notes: Sequence[bytes | None]) -> set[str]:
    text = next((n for n in notes if n is not None), b"")
    return set(text.decode(errors="replace").splitlines())


def email(repo: RepoName) -> str:
    return f"{repo.ref}@gitmail"


def _signature(repo: RepoName, when: datetime) -> pygit2.Signature:
    import pygit2

    offset = when.utcoffset()
    minutes = int(offset.total_seconds() // 60) if offset else 0
    # git forbids angle brackets in names; the frontmatter keeps the exact name.
    name = str(repo).replace("<", "%3C").replace(">", "%3E")
    return pygit2.Signature(name, email(repo), int(when.timestamp()), minutes)


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
