"""This machine, as the mailbox knows it: its name (GITMAIL_MACHINE, else the mailbox setting `gitmail.machine`,
else the host name) and its id (50 random bits, made once per mailbox and kept in `gitmail/machine-id` inside it).
A message without a `machine` field was written before gitmail recorded machines, in the mailbox it is in, unless
sync brought it here, which `gitmail/arrived-by-sync` remembers (`Here`).
"""

from __future__ import annotations

import os
import time

from gitmail.errors import MailboxError, UsageError
from gitmail.store.files import append_durably, unwritable
from gitmail.values.ids import ID_PATTERN, new_id
from gitmail.values.machine import ELSEWHERE, Machine, name_problem

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from _typeshed import StrPath

    from gitmail.store.repository import Store

MACHINE_ENV = "GITMAIL_MACHINE"
SETTING = "gitmail.machine"
ID_FILE = "machine-id"
ARRIVED_FILE = "arrived-by-sync"  # messages sync brought that would otherwise pass for this machine's own


def host_name() -> str:
    """The host name made into a machine name (characters a name cannot hold become '-')."""
    raw = os.uname().nodename or "machine"  # what socket.gethostname() says, without importing socket
    cleaned = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "-" for c in raw).lstrip("._-")[:64]
    return cleaned or "machine"


def configured_name(store: Store) -> str | None:
    """The name the environment or the mailbox setting gives, validated; None when neither does."""
    raw = os.environ.get(MACHINE_ENV)
    where = f"{MACHINE_ENV}"
    if not raw and store.exists():
        raw = store.settings().get(SETTING)  # read from the config file: no git process per message
        where = f"the mailbox setting {SETTING}"
    if not raw:
        return None
    problem = name_problem(raw)
    if problem:
        raise UsageError(f"invalid machine name {raw!r} in {where}: {problem}")
    return raw


def local_id(store: Store, *, create: bool = False) -> str | None:
    """This mailbox's machine id; made on first need when `create` (racing makers agree on one)."""
    path = os.path.join(store.own_root, ID_FILE)
    try:
        return _read_id(path)
    except FileNotFoundError:
        if not create:
            return None
    temporary = os.path.join(store.own_root, f".{ID_FILE}.{os.getpid()}")
    try:
        with open(temporary, "w") as file:
            file.write(new_id() + "\n")
        try:
            os.link(temporary, path)  # fails if another process made it first: then theirs is the one
        except FileExistsError:
            pass
        except PermissionError:  # a file system without hard links (exFAT, FAT): first to create it wins
            with open(temporary) as file:
                _create_once(path, file.read())
        finally:
            os.unlink(temporary)
    except OSError as error:
        raise unwritable(store.root, error) from None
    return _read_id(path)


def _create_once(path: StrPath, text: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        for _ in range(100):  # the maker is writing it: a moment
            if os.stat(path).st_size:
                return
            time.sleep(0.01)
        return
    try:
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_id(path: StrPath) -> str:
    with open(path, errors="replace") as file:
        text = file.read().strip()
    if not ID_PATTERN.fullmatch(text):
        raise MailboxError(f"{path} does not hold a machine id; remove it and gitmail makes a new one")
    return text


def current(store: Store) -> Machine:
    """This machine, as new messages record it (creates the id on first use)."""
    machine_id = local_id(store, create=True)
    assert machine_id is not None
    return Machine(configured_name(store) or host_name(), machine_id)


class Here:
    """What a reader needs to tell this machine's messages from others': the local id, and the ids of messages
    sync brought that carry no machine or this machine's id (read only when such a message turns up)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        try:
            self.id = local_id(store) if os.path.isdir(store.own_root) else None
        except MailboxError:  # an unreadable id vouches for no message
            self.id = None
        self._arrived: frozenset[str] | None = None

    def arrived(self) -> frozenset[str]:
        if self._arrived is None:
            try:
                with open(os.path.join(self.store.own_root, ARRIVED_FILE), errors="replace") as file:
                    text = file.read()
            except OSError:
                text = ""
            self._arrived = frozenset(text.split())
        return self._arrived

    def machine_of(self, message_id: str, recorded: Machine | None) -> Machine | None:
        """None when the message was written here; the machine it names (or ELSEWHERE) when not."""
        if recorded is not None and recorded.id != self.id:
            return recorded
        return ELSEWHERE if message_id in self.arrived() else None


def remember_arrivals(store: Store, ids: Iterable[str]) -> None:
    """Record messages sync is about to bring that would otherwise pass for this machine's own. Written (and
    synced to disk) before their refs exist, so no crash can leave one unmarked."""
    append_durably(os.path.join(store.own_root, ARRIVED_FILE), "".join(f"{i}\n" for i in ids), where=store.root)
