"""What each running session has been told: a small record per session, beside the mailbox, never in its history.

A session is keyed by its host and the host's session id. Its record says which messages it already knows of
(shown, or counted in a "showing N of M" line), which stamps it last saw, how often its turn was continued and
when it was last woken. Parallel tool calls of one session run their hooks at once, so a record is read and
written under its own lock. Records of sessions that ended without notice are removed once they are a week old.

Two small files beside the record serve hook.sh, which reads and writes them with shell built-ins (hookfiles.py):
`.stamps` (the stamps the session last saw) and `.turn` (whether it is in a turn). The turn lives only in that
file, because most hook calls never start Python: the record reads it when loaded and writes it when saved.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gitmail.store import hookfiles
from gitmail.store.files import read_line, write_line
from gitmail.store.lock import Deadline

STALE_AFTER = 7 * 24 * 3600.0
CLEAN_EVERY = 3600.0
key = hookfiles.session_key


class Record:
    """One session's record, loaded under its lock; `save` writes it back."""

    def __init__(self, path: Path, data: dict[str, Any], turn: bool = False) -> None:
        self.path, self.data = path, data
        self.turn = turn  # in a turn: from a prompt or a tool call until the turn ends
        self.unsaved: OSError | None = None  # why the record could not be written back, once the block is over

    @property
    def known(self) -> set[str]:
        return set(self.data.get("known", []))

    def know(self, ids: set[str], *, reset: bool = False) -> None:
        self.data["known"] = sorted(ids if reset else self.known | ids)

    @property
    def shown(self) -> set[str]:
        """Messages whose text this session was shown (what `gitmail done --all` may archive for it)."""
        return set(self.data.get("shown", []))

    def show(self, ids: set[str]) -> None:
        self.data["shown"] = sorted(self.shown | ids)

    @property
    def stamps(self) -> str:
        return str(self.data.get("stamps", ""))

    def count(self, name: str) -> int:
        return int(self.data.get(name, 0))

    def add(self, name: str, amount: int = 1) -> None:
        self.data[name] = self.count(name) + amount

    def times(self, name: str) -> list[float]:
        return [float(t) for t in self.data.get(name, [])]

    def set(self, name: str, value: Any) -> None:
        self.data[name] = value

    def get(self, name: str) -> Any:
        return self.data.get(name)


@contextmanager
def record(mailbox: Path, host: str, session_id: str, deadline: Deadline) -> Iterator[Record | None]:
    """The session's record, locked for this block and saved after it; None when it cannot be had (a bad id, a
    read-only mailbox, or a parallel hook of the same session holding it past the deadline)."""
    name = key(host, session_id)
    if name is None:
        yield None
        return
    files = hookfiles.session_files(mailbox, name)
    try:
        files.record.parent.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(files.record, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        yield None
        return
    try:
        if not _lock(fd, deadline):
            yield None
            return
        raw = b""
        while chunk := os.read(fd, 65536):
            raw += chunk
        try:
            data = json.loads(raw) if raw.strip() else {}
        except ValueError:
            data = {}
        data = data if isinstance(data, dict) else {}
        data.pop("turn", None)  # kept in the turn file only
        entry = Record(files.record, data, turn=read_line(files.turn) == hookfiles.BUSY)
        fresh = not raw.strip()
        yield entry
        entry.data["touched"] = time.time()
        try:
            _save(fd, json.dumps(entry.data, sort_keys=True).encode(), raw)
            write_line(files.stamps, entry.stamps)
            write_line(files.turn, hookfiles.BUSY if entry.turn else hookfiles.IDLE)
        except OSError as error:  # a full disk: the caller says what was not recorded
            entry.unsaved = error
        if fresh:
            _clean(files.record.parent)
    except OSError:
        return
    finally:
        os.close(fd)


def _save(fd: int, encoded: bytes, before: bytes) -> None:
    """Write the record over the old one in place (its lock is on this file), then cut what is left of the old.
    Where the disk has no room for it, the old record is put back (the room it took is still the file's), so what
    the session knew is not lost with the write."""
    try:
        _write_at_start(fd, encoded)
    except OSError:
        try:
            _write_at_start(fd, before)
            os.ftruncate(fd, len(before))
        except OSError:
            pass
        raise
    os.ftruncate(fd, len(encoded))


def _write_at_start(fd: int, data: bytes) -> None:
    os.lseek(fd, 0, os.SEEK_SET)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def current() -> tuple[str, str] | None:
    """The host and session a command runs in, when the host says (Claude Code and Codex name it to the shell
    commands a session runs)."""
    for variable, host in (("CLAUDE_CODE_SESSION_ID", "claude"), ("CODEX_SESSION_ID", "codex")):
        session = os.environ.get(variable)
        if session and key(host, session):
            return host, session
    return None


def shown(mailbox: Path, host: str, session_id: str) -> set[str]:
    """What a session was shown, read without waiting for its lock (a snapshot is enough)."""
    name = key(host, session_id)
    try:
        data = json.loads(hookfiles.session_files(mailbox, name).record.read_bytes()) if name else {}
    except (OSError, ValueError):
        return set()
    return {str(i) for i in data.get("shown", [])} if isinstance(data, dict) else set()


def saw(mailbox: Path, host: str, session_id: str, ids: set[str]) -> None:
    """The session read these messages whole (`gitmail show` in it): they count as shown to it."""
    if (
        key(host, session_id) is None
        or not (hookfiles.folder(mailbox, hookfiles.SESSIONS) / f"{host}-{session_id}.json").exists()
    ):
        return  # a session the hooks never saw keeps no record
    with record(mailbox, host, session_id, Deadline(1.0)) as found:
        if found is not None:
            found.show(ids)


def forget(mailbox: Path, host: str, session_id: str) -> None:
    """The session ended: its record goes."""
    name = key(host, session_id)
    if name is None:
        return
    for file in hookfiles.session_files(mailbox, name):
        try:
            file.unlink()
        except OSError:
            pass


def _lock(fd: int, deadline: Deadline) -> bool:
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if deadline.left() <= 0:
                return False
            time.sleep(min(0.005, deadline.left()))


def _clean(folder: Path) -> None:
    """Remove the records of sessions not heard from in a week; at most once an hour."""
    marker = folder / ".cleaned"
    now = time.time()
    try:
        if now - marker.stat().st_mtime < CLEAN_EVERY:
            return
    except FileNotFoundError:
        pass
    marker.touch()
    for entry in os.scandir(folder):
        try:
            if entry.name != ".cleaned" and now - entry.stat().st_mtime > STALE_AFTER:
                os.unlink(entry.path)
        except OSError:
            continue
