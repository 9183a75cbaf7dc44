"""The sessions the hooks have seen on this machine: a small record per session, beside the mailbox, never in its
history (sessions are this machine's, and so is what they were told).

A session is keyed by its host and the host's session id. Its record says which repository it works for, which
messages it already knows of (shown, or counted in a "showing N of M" line) and which it was shown whole, which
stamps it last saw, how often its turn was continued and when it was last woken, the name and the one-line card it
chose, when it last started (or resumed), and when and why it ended. Parallel tool calls of one session run their
hooks at once, so a record is read and written under its own lock. Records are removed a week after their session
was last heard from.

Files beside the record serve hook.sh, which reads them with shell built-ins (hookfiles.py): `.stamps` (the stamps
the session last saw, and the moments at which nothing is to be done while they hold), `.top` (the work tree),
`.turn` (the last moment a hook saw, which hook.sh notes itself: most hook calls never start Python; the record
reads it when loaded and writes it when saved) and `.live` (the host process and its start time).

Whether a session is still there is never guessed from a timestamp a crash leaves behind: the host process it ran
in is recorded with its start time, and is asked (through /proc) whether it still runs; a session end the host
reports ends it too. The record and `.live` are files a session may write, so the process they name counts only
when it is a host program (Claude Code or Codex) of this user, started at the very time recorded and not a zombie;
anything else is gone. Where no process can be asked (no /proc), the state is said to be unchecked.
"""

from __future__ import annotations

import fcntl
import os
import time

from gitmail.errors import MailboxBusy, MailboxError
from gitmail.store import hookfiles, processes
from gitmail.store.files import make_dir, read_line, touch, unwritable, write_line
from gitmail.store.lock import Deadline
from gitmail.values import jsontext
from gitmail.values.session_info import Info

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from _typeshed import StrPath

STALE_AFTER = 7 * 24 * 3600.0
CLEAN_EVERY = 3600.0
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "busybox", "env", "timeout"})  # what a hook runs through
# The command names of the host programs: Claude Code (its own binary, or Node.js running it) and Codex.
HOSTS = frozenset({"claude", "node", "codex"})
key = hookfiles.session_key


class Record:
    """One session's record, loaded under its lock; saved when the block that holds it ends."""

    def __init__(self, path: str, data: dict[str, Any], moment: str = "") -> None:
        self.path, self.data = path, data
        self.moment = moment  # the last moment a hook of the session saw
        self.top: str | None = None  # set: the work tree hook.sh compares with before it reads the stamps
        self.quiet: tuple[str, ...] = ()  # the moments at which, while the stamps hold, there is nothing to do
        self.unsaved: OSError | None = None  # why the record could not be written back, once the block is over

    @property
    def known(self) -> set[str]:
        return set(self.data.get("known", []))

    def know(self, ids: set[str], *, reset: bool = False) -> None:
        self.data["known"] = sorted(ids if reset else self.known | ids)

    @property
    def shown(self) -> set[str]:
        """Messages this session was shown whole (what `gitmail done --all` may archive for it)."""
        return set(self.data.get("shown", []))

    def show(self, ids: set[str]) -> None:
        self.data["shown"] = sorted(self.shown | ids)

    @property
    def turn(self) -> bool:
        """In a turn: from a prompt or a tool call until the turn ends."""
        return hookfiles.in_turn(self.moment)

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


def record(mailbox: StrPath, host: str, session_id: str, deadline: Deadline, *, create: bool = True) -> _Held:
    """The session's record, locked for the `with` block that holds it and saved after it; None in the block when
    it cannot be had (a bad id, a read-only mailbox, a parallel hook of the same session holding it past the
    deadline, or, without `create`, a session with no record yet)."""
    return _Held(mailbox, host, session_id, deadline, create)


class _Held:
    """A record held by a `with` block: a class rather than a contextlib generator, which would load contextlib
    (and collections, functools and types beneath it) at every session start."""

    def __init__(self, mailbox: StrPath, host: str, session_id: str, deadline: Deadline, create: bool) -> None:
        self.mailbox, self.host, self.session_id, self.deadline, self.create = (
            mailbox, host, session_id, deadline, create,
        )  # fmt: skip
        self.fd: int | None = None
        self.raw, self.fresh = b"", False

    def __enter__(self) -> Record | None:
        name = key(self.host, self.session_id)
        if name is None:
            return None
        self.files = files = hookfiles.session_files(self.mailbox, name)
        if not self.create and not os.path.exists(files.record):
            return None
        try:
            make_dir(os.path.dirname(files.record))
            fd = os.open(files.record, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:
            return None
        try:
            if not _lock(fd, self.deadline):
                os.close(fd)
                return None
            raw = b""
            while chunk := os.read(fd, 65536):
                raw += chunk
            moment = read_line(files.turn)
        except OSError:
            os.close(fd)
            return None
        try:
            data = jsontext.loads(raw) if raw.strip() else {}
        except ValueError:
            data = {}
        data = data if isinstance(data, dict) else {}
        data.pop("turn", None)  # kept in the turn file only
        self.entry = entry = Record(files.record, data, moment=moment)
        self.fd, self.raw, self.fresh = fd, raw, not raw.strip()
        if self.fresh:
            entry.data["started"] = time.time()
        return entry

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        """Saves the record when the block ended without an error; after an error the record is left as it was."""
        if self.fd is None:
            return
        try:
            if kind is None:
                self._save(self.fd)
        finally:
            os.close(self.fd)

    def _save(self, fd: int) -> None:
        entry, files = self.entry, self.files
        entry.data["touched"] = time.time()
        try:
            _save(fd, jsontext.dumps(entry.data, sort_keys=True).encode(), self.raw)
            write_line(files.stamps, hookfiles.quiet_line(entry.stamps, entry.quiet))
            if entry.moment:
                write_line(files.turn, entry.moment)
            if entry.top is not None:
                write_line(files.top, entry.top)
        except OSError as error:  # a full disk: the caller says what was not recorded
            entry.unsaved = error
        if self.fresh:
            try:
                _clean(os.path.dirname(files.record))
            except OSError:
                pass


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


def shown(mailbox: StrPath, host: str, session_id: str) -> set[str]:
    """What a session was shown whole, read without waiting for its lock (a snapshot is enough)."""
    data = _data(mailbox, host, session_id)
    return {str(i) for i in data.get("shown", [])}


def saw(mailbox: StrPath, host: str, session_id: str, ids: set[str]) -> None:
    """The session read these messages whole (`gitmail show` in it): they count as shown to it."""
    with record(mailbox, host, session_id, Deadline(1.0), create=False) as found:
        if found is not None:
            found.show(ids)


def ended(mailbox: StrPath, host: str, session_id: str, reason: str) -> str | None:
    """The host said the session ended (its record stays a while, marked, so mail to it is not stranded). Returns
    the repo it was in, if known."""
    with record(mailbox, host, session_id, Deadline(1.0), create=False) as found:
        if found is None:
            return None
        found.set("ended", time.time())
        found.set("end_reason", reason or "ended")
        repo = found.data.get("repo")
        return repo if isinstance(repo, str) and repo else None


def describe(mailbox: StrPath, host: str, session_id: str, *, name: str | None, card: str | None) -> None:
    """Set the name and/or the card a session chose; a MailboxError when that cannot be recorded."""
    with record(mailbox, host, session_id, Deadline(2.0), create=False) as found:
        if found is not None:
            if name is not None:
                found.set("name", name)
            if card is not None:
                found.set("card", card)
    if found is None or found.unsaved is not None:
        raise _not_recorded(mailbox, host, session_id, found.unsaved if found is not None else None)


def _not_recorded(mailbox: StrPath, host: str, session_id: str, error: OSError | None) -> MailboxError:
    """Why a session's record could not be had or written back, in one line."""
    name = key(host, session_id)
    if error is None and name is not None:
        try:  # what opening it for writing says (a read-only mailbox, ...)
            os.close(os.open(hookfiles.session_files(mailbox, name).record, os.O_RDWR | os.O_CLOEXEC))
        except OSError as refusal:
            error = refusal
    if error is not None:
        return unwritable(mailbox, error)
    return MailboxBusy(f"the record of session {name or session_id} is held by another gitmail process; try again")


def resumed(found: Record) -> None:
    """The session started (or started again: resumed, cleared, compacted): it is not ended, and it opened now."""
    found.data.pop("ended", None)
    found.data.pop("end_reason", None)
    found.set("opened", time.time())


def note_live(mailbox: StrPath, host: str, session_id: str, *, unless_known: bool = False) -> None:
    """Record the host process this session runs in, as hook.sh does at a session start it answers itself.
    `unless_known`: only when none is recorded yet (a session first seen after its start: the mailbox did not exist
    then)."""
    name = key(host, session_id)
    if name is None:
        return
    live = hookfiles.session_files(mailbox, name).live
    if unless_known and os.path.exists(live):
        return
    found = host_process()
    if found is None:
        return
    try:
        write_line(live, f"{found[0]} {found[1]}")
    except OSError:
        pass


def introduce(mailbox: StrPath, host: str, session_id: str, *, repo: str, top: str | None) -> None:
    """Record a session that runs a gitmail command before any hook of it could: it started before this mailbox
    existed. Its process is the command's host."""
    with record(mailbox, host, session_id, Deadline(2.0)) as found:
        if found is None:
            return
        found.set("repo", repo)
        if top is not None:
            found.top = top
    note_live(mailbox, host, session_id, unless_known=True)


# -- who is here ------------------------------------------------------------------------------------------------


def listing(mailbox: StrPath, repo: str | None = None) -> list[Info]:
    """Every session with a record (of one repo, or of every repo), oldest first."""
    folder = hookfiles.folder(mailbox, hookfiles.SESSIONS)
    try:
        names = [n[: -len(".json")] for n in os.listdir(folder) if n.endswith(".json")]
    except OSError:
        return []
    found = [info for name in names if (info := _info(mailbox, name, repo)) is not None]
    return sorted(found, key=lambda i: (i.started, i.id))


def transcript(mailbox: StrPath, host: str, session_id: str) -> str | None:
    """Where the session's host keeps its transcript, as its hooks were last told (None: never told)."""
    found = _data(mailbox, host, session_id).get("transcript")
    return found if isinstance(found, str) and found else None


def info(mailbox: StrPath, host: str, session_id: str) -> Info | None:
    name = key(host, session_id)
    return _info(mailbox, name) if name is not None else None


def _info(mailbox: StrPath, name: str, repo: str | None = None) -> Info | None:
    host, _, session_id = name.partition("-")
    files = hookfiles.session_files(mailbox, name)
    data = _read(files.record)
    if data is None or (repo is not None and data.get("repo") != repo):
        return None
    turn, live, top = read_line(files.turn), read_line(files.live), read_line(files.top)
    active = max(
        float(data.get("touched", 0) or 0), _mtime(files.turn), _mtime(files.stamps), float(data.get("started", 0) or 0)
    )
    pid, ticks = _numbers(live)
    running = alive(pid, ticks) if pid is not None else None
    ended_at = data.get("ended")
    ended = float(ended_at) if isinstance(ended_at, (int, float)) else None
    reason = str(data.get("end_reason", ""))
    if ended is None and running is False:
        ended, reason = _mtime(files.live) or active, "its process is gone"
    state = "ended" if ended is not None else "live" if hookfiles.in_turn(turn) else "idle"
    started = float(data.get("started", 0) or 0) or _mtime(files.live) or active
    return Info(
        host=host,
        id=session_id,
        repo=str(data.get("repo", "")),
        top=top,
        name=str(data.get("name", "")),
        card=str(data.get("card", "")),
        started=started,
        opened=float(data.get("opened", 0) or 0) or started,
        active=active,
        ended=ended,
        end_reason=reason,
        state=state,
        checked=running is not None or ended_at is not None,
        pid=pid,
        ticks=ticks,
        watch=bool(data.get("watch")),
    )


def host_process() -> tuple[int, int] | None:
    """The host program this process runs under: the first ancestor that is not a shell (or Python: a hook is
    Python started by hook.sh, started by the host's shell), with its start time; None without /proc, and for pid 1
    seen from a sandbox (Codex runs commands in a pid namespace of their own, where its sandbox is pid 1: outside,
    pid 1 is another process; the host's next hook, run outside, records the host)."""
    pid = os.getppid()
    for _ in range(5):
        found = processes.stat(pid)
        if found is None:
            return None
        if found.comm not in SHELLS and not found.comm.startswith("python"):
            return None if pid == 1 and processes.sandboxed() else (pid, found.ticks)
        pid = found.parent
    return None


def alive(pid: int | None, ticks: int | None) -> bool | None:
    """Whether the host process recorded still runs: the same process (a reused pid has another start time), not a
    zombie, a host program, this user's. None when it cannot be asked."""
    if pid is None or ticks is None or not os.path.isdir("/proc/self"):
        return None
    found = processes.running(pid, ticks)
    return found is not None and found.comm in HOSTS and processes.ours(pid)


def _numbers(line: str) -> tuple[int | None, int | None]:
    parts = line.split()
    try:
        return (int(parts[0]), int(parts[1])) if len(parts) == 2 else (None, None)
    except ValueError:
        return None, None


def _data(mailbox: StrPath, host: str, session_id: str) -> dict[str, Any]:
    name = key(host, session_id)
    found = _read(hookfiles.session_files(mailbox, name).record) if name else None
    return found or {}


def _read(path: str) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as file:
            data = jsontext.loads(file.read())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def _lock(fd: int, deadline: Deadline) -> bool:
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if deadline.left() <= 0:
                return False
            time.sleep(min(0.005, deadline.left()))


def _clean(folder: str) -> None:
    """Remove the files of sessions not heard from in a week; at most once an hour."""
    marker = os.path.join(folder, ".cleaned")
    now = time.time()
    try:
        if now - os.stat(marker).st_mtime < CLEAN_EVERY:
            return
    except FileNotFoundError:
        pass
    touch(marker)
    for entry in os.scandir(folder):
        try:
            if entry.name != ".cleaned" and now - entry.stat().st_mtime > STALE_AFTER:
                os.unlink(entry.path)
        except OSError:
            continue
