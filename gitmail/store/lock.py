"""The mailbox's write lock, its journal, and the lock files git leaves behind.

Every gitmail writer holds one exclusive `flock` on `gitmail/lock` and passes it on to the git processes it starts,
so the lock stays held until the last of them exits, even if gitmail itself is killed. Before a writer moves refs
it writes down what it is about to do (the journal); the next lock holder finishes a change whose writer died
midway, so it lands whole, and knows that the `.lock` files of the refs named there were left by that dead writer.
A `.lock` file nobody can vouch for is a live git process's until it is old: gitmail waits for it (git's own lock
timeouts), then reports it, and only treats it as abandoned once it is older than a minute.
"""

from __future__ import annotations

import os
import time

from gitmail.errors import MailboxBusy, Transient
from gitmail.store.files import unwritable, write_atomically
from gitmail.values import jsontext
from gitmail.values.layout import Change

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from _typeshed import StrPath

LOCK_NAME = "lock"
JOURNAL_NAME = "journal"
ABANDONED_AFTER = 60.0  # seconds: no git operation on a mailbox holds a ref lock this long
GIT_LOCK_WAIT = 2.0  # seconds git itself retries a lock another git process holds


class Deadline:
    """One point in time that every wait of an operation shares (a hook has one budget, not one per step)."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())


class Attempt:
    """One try at a write; a Transient failure inside it is swallowed unless it is the last try."""

    def __init__(self, last: bool) -> None:
        self.last, self.succeeded = last, False

    def __enter__(self) -> Attempt:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: object) -> bool:
        if kind is None:
            self.succeeded = True
            return False
        return isinstance(error, Transient) and not self.last


def attempts(tries: int = 3) -> Iterator[Attempt]:
    """Tries for a write that a concurrent `git gc` may pull objects from under: each try starts again from the
    lock, so it rewrites what the last one lost.

        for attempt in attempts():
            with attempt, writing(store, actor=me) as writer:
                ...
    """
    for n in range(tries):
        attempt = Attempt(last=n == tries - 1)
        yield attempt
        if attempt.succeeded:
            return


def acquire(fd: int, deadline: Deadline, where: StrPath) -> None:
    import fcntl  # loaded by what writes: a read never locks

    pause = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if deadline.left() <= 0:
                raise MailboxBusy(
                    f"the mailbox at {where} stayed locked by another gitmail process; try again"
                ) from None
            time.sleep(min(pause, deadline.left()))
            pause = min(pause * 2, 0.05)


def open_lock(own_dir: StrPath) -> int:
    try:
        return os.open(os.path.join(own_dir, LOCK_NAME), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as error:
        raise unwritable(os.path.dirname(os.fspath(own_dir)), error) from None


class Journal:
    """What a writer is about to change, so the next lock holder can finish it."""

    def __init__(self, own_dir: StrPath) -> None:
        self.path = os.path.join(own_dir, JOURNAL_NAME)

    def exists(self) -> bool:
        return os.path.exists(self.path)

    def record(self, changes: Sequence[Change], *, durable: bool) -> None:
        """Durable (fsynced) when the change must be finished after a crash; otherwise it only names the refs
        whose lock files a killed writer may leave."""
        write_atomically(self.path, jsontext.dumps([list(c) for c in changes]).encode(), durable=durable)

    def load(self) -> list[Change]:
        """The recorded changes; ValueError when the journal cannot be read as one."""
        with open(self.path, "rb") as file:
            raw = jsontext.loads(file.read())
        if not isinstance(raw, list):
            raise ValueError("not a list of changes")
        changes = []
        for item in raw:
            if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)):
                raise ValueError(f"not a change: {item!r}")
            if not all(v is None or isinstance(v, str) for v in item[1:]):
                raise ValueError(f"not a change: {item!r}")
            changes.append(Change(*item))
        return changes

    def clear(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def set_aside(self) -> str:
        """Keep a journal that cannot be replayed for inspection, out of the way of every later writer."""
        aside = f"{JOURNAL_NAME}.set-aside-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
        kept = os.path.join(os.path.dirname(self.path), aside)
        os.replace(self.path, kept)
        return kept


def lock_file(git_dir: StrPath, ref: str) -> str:
    return os.path.join(git_dir, f"{ref}.lock")


def remove_left_by_dead_writer(git_dir: StrPath, refs: Sequence[str]) -> None:
    """The `.lock` files of refs a dead gitmail writer was moving: its git processes shared its flock, which we
    now hold, so none of them is alive."""
    for ref in refs:
        try:
            os.unlink(lock_file(git_dir, ref))
        except FileNotFoundError:
            pass


def held_lock(stderr: str, git_dir: StrPath) -> str | None:
    """The lock file a failed git command names as held ("Unable to create '….lock': File exists")."""
    marker = "Unable to create '"
    at = stderr.find(marker)
    if at < 0:
        return None
    end = stderr.find("'", at + len(marker))
    found = stderr[at + len(marker) : end] if end > 0 else None
    if found is None or not os.path.basename(found).endswith(".lock"):
        return None
    inside, where = os.path.realpath(found), os.path.realpath(git_dir)
    if os.path.commonpath([inside, where]) != where:
        return None
    return found


def clear_if_abandoned(lock: StrPath, *, only_if_old: bool) -> bool:
    """Remove a lock file old enough that no live git can be holding it. Returns whether it removed one, or (when
    not `only_if_old`) whether the lock is gone now."""
    try:
        age = time.time() - os.stat(lock).st_mtime
    except FileNotFoundError:
        return not only_if_old
    if age < ABANDONED_AFTER:
        return False
    try:
        os.unlink(lock)
    except FileNotFoundError:
        pass
    return True


def lock_age(lock: StrPath) -> float:
    try:
        return time.time() - os.stat(lock).st_mtime
    except OSError:
        return 0.0
