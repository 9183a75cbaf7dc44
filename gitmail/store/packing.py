"""Packing the mailbox as mail accumulates, without the user and beside writers: so that its size is its mail.

gitmail writes every object loose and every new ref as a file of its own (4 KB of disk each, whatever they hold).
Each write adds a byte to `gitmail/unpacked`; once it holds PACK_AFTER, the writer starts a packer, detached (its
own session, no terminal, never waited for), so no write waits for packing. The packer:

1. packs every ref into packed-refs (`git pack-refs --all --prune`) under the mailbox's write lock, as every ref
   change is made, and empties the count;
2. rolls the loose objects into packs (`git repack -d --geometric=2`) without the lock: repacking only adds packs,
   and removes a loose object or a pack once another pack holds all of it, so a writer beside it loses nothing (a
   reader that finds a loose object gone reads it from its pack; a writer whose object folder was emptied writes
   into it again or finds its objects packed). Geometric repacking keeps the number of packs logarithmic in the
   number of objects, so a packing costs what it packs, not what the mailbox holds.

One packer runs at a time: the writer that starts one takes the flock on `gitmail/packing` and hands it over
(the packer inherits it); a writer that cannot take it leaves the packing to the one running. `git config
gitmail.autoPack false` in the mailbox stops all of it (`gitmail doctor` still reads a mailbox left loose).
"""

from __future__ import annotations

import fcntl
import os
import sys
from contextlib import contextmanager

from gitmail.errors import GitmailError
from gitmail.store import lock
from gitmail.store.log import problem
from gitmail.store.repository import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

COUNTER = "unpacked"  # in gitmail/: one byte per write since refs were last packed
LOCK = "packing"  # in gitmail/: held (flock) by the packer that runs
PACK_AFTER = 10  # writes: ~50 loose objects (in as many folders) and ~10 loose refs at most, ~0.4 MB of disk
SETTING = "autoPack"
LOCK_WAIT = 30.0  # seconds the packer waits for the write lock before it gives up (the next writer starts another)
PACKER = "import sys; from gitmail.store.packing import main; sys.exit(main(sys.argv[1:]))"


def counted(store: Store) -> None:
    """After a write, under the lock: count it, and start a packer once enough writes piled up unpacked. Never
    fails the write."""
    try:
        path = os.path.join(store.own_root, COUNTER)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, b".")
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if size >= PACK_AFTER and store.flag(SETTING):
            start(store)
    except OSError as error:  # packing is housekeeping: the write itself has landed
        problem(store.root, f"packing was put off: {error}")


@contextmanager
def held(store: Store) -> Iterator[None]:
    """The packing lock, taken once a packer that runs has ended: no packer runs or starts while it is held (a
    packer by hand, and whoever must see the mailbox's files stand still, such as a copy)."""
    fd = os.open(os.path.join(store.own_root, LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def start(store: Store) -> bool:
    """Start a detached packer unless one runs; True when one was started."""
    fd = os.open(os.path.join(store.own_root, LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a packer runs: it packs what this write added too, or the next write starts one
        os.posix_spawn(
            sys.executable,
            [sys.executable, "-P", "-c", PACKER, store.root, str(fd)],
            {**os.environ, "GITMAIL_DIR": store.root},
            file_actions=[
                *((os.POSIX_SPAWN_OPEN, n, os.devnull, os.O_RDWR, 0) for n in (0, 1, 2)),
                (os.POSIX_SPAWN_DUP2, fd, fd),  # the packer holds the packing lock from here on
            ],
            setsid=True,  # detached: not killed with the writer's process group, never waited for
        )
        return True
    finally:
        os.close(fd)


def pack(store: Store, *, wait: float = LOCK_WAIT) -> None:
    """Pack refs under the write lock, then objects beside writers (see above). The caller holds the packing lock.
    MailboxError when git failed; MailboxBusy when the write lock stayed held."""
    waits = ("-c", f"core.packedRefsTimeout={int(lock.GIT_LOCK_WAIT * 1000)}")
    with store.locked(deadline=lock.Deadline(wait)) as fd:
        # The git child shares the lock, so it stays held even if this process dies before it finishes.
        store.git(*waits, "pack-refs", "--all", "--prune", pass_fds=(fd,))
        counter = os.path.join(store.own_root, COUNTER)
        os.truncate(counter, 0) if os.path.exists(counter) else None
    store.git("repack", "-d", "-q", "-n", "--geometric=2")


def main(argv: list[str]) -> int:
    """The detached packer: `MAILBOX [PACKING-LOCK-FD]`. Without the fd (run by hand) it takes the lock itself,
    and waits for a packer that runs."""
    try:
        os.nice(19)  # housekeeping: the sends and session starts beside it come first for the processor
    except OSError:
        pass
    store = Store(argv[0])
    try:
        if len(argv) > 1:  # the packing lock, handed over by the writer that started it
            try:
                pack(store)
            finally:
                os.close(int(argv[1]))
        else:
            with held(store):
                pack(store)
    except GitmailError as error:
        problem(store.root, f"packing was put off: {error}")
        return 1
    return 0
