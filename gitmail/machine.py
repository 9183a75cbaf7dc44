"""Which machine a mailbox is on, and which machine a message was written on.

A machine has a name for people — GITMAIL_MACHINE, else the mailbox setting `gitmail.machine`, else the host
name — and an id that keeps machines apart when their names are the same (two laptops called "laptop"): 50 random
bits, made once per mailbox and kept in `gitmail/machine-id` inside it. Each message records both in its
`machine` field ("laptop 4kq8m2x9ab"). A message without that field was written before gitmail recorded machines,
in the mailbox it is in — unless sync brought it here, which `gitmail/arrived-by-sync` remembers.

Reading a message turns "written here" into `machine=None`, so everything downstream knows one thing: None is this
machine, anything else is another one (and another one is never vouched for).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from gitmail.errors import UsageError

if TYPE_CHECKING:
    from gitmail.store import Store

MACHINE_ENV = "GITMAIL_MACHINE"
SETTING = "gitmail.machine"
ID_FILE = "machine-id"
ARRIVED_FILE = "arrived-by-sync"  # messages sync brought that would otherwise pass for this machine's own
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class Machine(NamedTuple):
    """Where a message was written: a name for people and an id that tells machines apart."""

    name: str  # "" when not known
    id: str  # "" when not known

    def field(self) -> str:
        """The `machine` frontmatter field and commit trailer: "laptop 4kq8m2x9ab"."""
        return f"{self.name} {self.id}"

    @classmethod
    def parse(cls, text: str) -> Machine:
        """The machine a message names. A field gitmail did not write names an unknown machine, never this one."""
        from gitmail.message import ID_PATTERN

        name, _, machine_id = text.strip().partition(" ")
        if NAME_PATTERN.fullmatch(name) and ID_PATTERN.fullmatch(machine_id):
            return cls(name, machine_id)
        return ELSEWHERE


ELSEWHERE = Machine("", "")  # another machine that did not say which


def name_problem(raw: str) -> str | None:
    if not NAME_PATTERN.fullmatch(raw):
        return "use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit"
    return None


def host_name() -> str:
    """The host name made into a machine name (characters a name cannot hold become '-')."""
    import socket

    raw = socket.gethostname() or "machine"
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "-", raw).lstrip("._-")[:64]
    return cleaned or "machine"


def configured_name(store: Store) -> str | None:
    """The name the environment or the mailbox setting gives, validated; None when neither does."""
    raw = os.environ.get(MACHINE_ENV)
    where = f"{MACHINE_ENV}"
    if not raw and store.exists():
        raw = store.setting(SETTING.split(".", 1)[1])  # read from the config file: no git process per message
        where = f"the mailbox setting {SETTING}"
    if not raw:
        return None
    problem = name_problem(raw)
    if problem:
        raise UsageError(f"invalid machine name {raw!r} in {where}: {problem}")
    return raw


def local_id(store: Store, *, create: bool = False) -> str | None:
    """This mailbox's machine id; made on first need when `create` (racing makers agree on one)."""
    path = store.own_dir / ID_FILE
    try:
        return _read_id(path)
    except FileNotFoundError:
        if not create:
            return None
    from gitmail.lock import unwritable
    from gitmail.message import new_id

    temporary = path.with_name(f".{ID_FILE}.{os.getpid()}")
    try:
        temporary.write_text(new_id() + "\n")
        try:
            os.link(temporary, path)  # fails if another process made it first: then theirs is the one
        except FileExistsError:
            pass
        except PermissionError:  # a file system without hard links (exFAT, FAT): first to create it wins
            _create_once(path, temporary.read_text())
        finally:
            temporary.unlink()
    except OSError as error:
        raise unwritable(store.path, error) from None
    return _read_id(path)


def _create_once(path: Path, text: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        for _ in range(100):  # the maker is writing it: a moment
            if path.stat().st_size:
                return
            import time

            time.sleep(0.01)
        return
    try:
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_id(path: Path) -> str:
    from gitmail.errors import MailboxError
    from gitmail.message import ID_PATTERN

    text = path.read_text(errors="replace").strip()
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
        from gitmail.errors import MailboxError

        self.store = store
        try:
            self.id = local_id(store) if store.own_dir.is_dir() else None
        except MailboxError:  # an unreadable id vouches for no message
            self.id = None
        self._arrived: frozenset[str] | None = None

    def arrived(self) -> frozenset[str]:
        if self._arrived is None:
            try:
                text = (self.store.own_dir / ARRIVED_FILE).read_text(errors="replace")
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
    from gitmail.lock import unwritable

    lines = "".join(f"{i}\n" for i in ids)
    if not lines:
        return
    try:
        with open(store.own_dir / ARRIVED_FILE, "a", encoding="utf-8") as handle:
            handle.write(lines)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as error:
        raise unwritable(store.path, error) from None
