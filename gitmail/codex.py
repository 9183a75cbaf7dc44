"""Codex's own processes, as gitmail needs them to wake an idle Codex session and to route mail to it: which
interactive Codex (its TUI) shows a thread, and `codex queue`, which stores a user turn for a thread that the thread
runs when it is next idle.

An interactive Codex keeps its threads in a managed app-server daemon, which runs the hooks; the daemon keeps a
thread loaded for about a minute after its window closed and would run a queued turn there unwatched, and a thread
no longer loaded would run it when someone resumes it. So a turn is queued only for a thread whose window is still
open: a TUI of the same CODEX_HOME working in the thread's work tree, matched to the thread by start time. A thread
of the daemon that no window shows has nobody in it: mail is routed as to an ended session. Linux (/proc) only;
elsewhere nothing is found and nothing is queued.

The session's record and `.live` are files a session may write (Codex's sandbox may write the mailbox), and anyone
may start a process called `codex`. So the daemon is the very process a hook of the session recorded (pid and start
time), it and every window are processes of this user confined no more than the waker, and `codex queue` runs only
a program no one else could have changed (processes.py), with an environment of our own making.
"""

from __future__ import annotations

import os
import time

from gitmail.store import processes, sessions
from gitmail.store.gitcmd import spawn

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import NamedTuple

    from _typeshed import StrPath

    from gitmail.values.session_info import Info
else:
    from gitmail.values.tuples import NamedTuple

# `codex SUBCOMMAND` that is not an interactive session.
NOT_INTERACTIVE = frozenset(
    "app-server queue exec e mcp mcp-server login logout features debug sandbox apply a completion archive delete "
    "unarchive doctor update cloud exec-server remote-control plugin migrate-rollouts migrate-nfs-db review help "
    "proto responses-api-proxy".split()
)
QUEUE_TIMEOUT = 10.0  # seconds: `codex queue` answers in a tenth of a second
CLOSED = "its window is closed"


class Daemon(NamedTuple):
    """Codex's managed app-server daemon: the host process of an interactive session's hooks."""

    pid: int
    started: float  # when it started (time.time() seconds)
    codex_home: str


class Window(NamedTuple):
    """An interactive Codex process."""

    pid: int
    started: float  # when it started (time.time() seconds)
    cwd: str
    exe: str  # the program it runs: the Codex that `codex queue` is asked of
    codex_home: str


class Thread(NamedTuple):
    """A Codex session gitmail knows: its thread id, where it works, when it was last opened (its latest session
    start: a resumed thread is opened in a window started after the thread was first seen)."""

    id: str
    top: str
    opened: float


def daemon(pid: int | None, ticks: int | None) -> Daemon | None:
    """Codex's managed app-server daemon, when the process a session's hook recorded (`pid`, started at `ticks`)
    is one of ours and still runs; else None (`codex exec` or a client's own app-server, whose threads live in that
    process; or anything else)."""
    if pid is None or ticks is None or not _codex_of_ours(pid, ticks):
        return None
    argv = processes.argv(pid)
    if len(argv) < 2 or os.path.basename(argv[0]) != "codex" or "app-server" not in argv:
        return None
    if "--managed-daemon" not in argv or _exe_problem(pid) is not None:
        return None
    home = _codex_home(processes.environ(pid))
    if home is None or processes.home_problem(home) is not None:
        return None
    return Daemon(pid, processes.started(ticks), home)


def windows(codex_home: str) -> list[Window]:
    """The interactive Codex processes of this CODEX_HOME (of this user, confined no more than we are)."""
    found = []
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []
    for pid in pids:
        argv = processes.argv(pid)
        if not argv or os.path.basename(argv[0]) != "codex" or (len(argv) > 1 and argv[1] in NOT_INTERACTIVE):
            continue
        if "--managed-daemon" in argv:
            continue
        if _codex_home(processes.environ(pid)) != codex_home:
            continue
        at = processes.stat(pid)
        if at is None or not _codex_of_ours(pid, at.ticks):
            continue
        try:
            cwd, exe = os.readlink(f"/proc/{pid}/cwd"), os.readlink(f"/proc/{pid}/exe")
        except OSError:
            continue
        found.append(Window(pid, processes.started(at.ticks), cwd, exe, codex_home))
    return found


def window_of(thread: Thread, others: Sequence[Thread], open_windows: Sequence[Window]) -> Window | None:
    """The window showing `thread`, among the open windows, with `others` the other live Codex threads gitmail
    knows: the newest thread takes the newest window that started before it in its work tree, and so on back (a
    window shows the thread it opened last)."""
    taken: set[int] = set()
    for candidate in sorted([thread, *others], key=lambda t: t.opened, reverse=True):
        mine = [
            w
            for w in open_windows
            if w.pid not in taken and _inside(w.cwd, candidate.top) and w.started <= candidate.opened + 1.0
        ]
        if not mine:
            continue
        chosen = max(mine, key=lambda w: w.started)
        if candidate.id == thread.id:
            return chosen
        taken.add(chosen.pid)
    return None


def window_showing(mailbox: StrPath, info: Info) -> Window | None:
    """The open Codex window that shows this session's thread, if any."""
    found = daemon(info.pid, info.ticks) if info.host == "codex" else None
    return _showing(mailbox, info, found) if found is not None else None


def routed(mailbox: StrPath, info: Info) -> Info:
    """The session as mail is routed to it: a thread of Codex's managed daemon that no open window shows has ended
    (its window closed without a session end; the daemon keeps the thread a while, but nobody is there to read)."""
    if info.host != "codex" or info.state == "ended":
        return info
    found = daemon(info.pid, info.ticks)
    if found is None or _showing(mailbox, info, found) is not None:
        return info
    return info._replace(state="ended", ended=info.active, end_reason=CLOSED)


def queue(window: Window, thread_id: str, text: str) -> tuple[bool, str]:
    """Ask that window's Codex to queue a user turn of `text` for the thread: (done, what Codex said). Its program is
    run only when no one but root and this user could have changed it."""
    problem = unsafe(window)
    if problem is not None:
        return False, problem
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),  # ours: what Codex runs by name is what we would run
        "HOME": _own_home(),  # ours, never the window's: Codex reads its user's files under it
        "CODEX_HOME": window.codex_home,  # the session's: its queue is there (a directory of ours, daemon() checked)
        "LANG": os.environ.get("LANG", "C.UTF-8"),  # ours: how Codex reads and says text
    }
    try:
        done = spawn([window.exe, "queue", "--thread", thread_id, "--message", text], env, timeout=QUEUE_TIMEOUT)
    except OSError as error:
        return False, str(error)
    said = (done.stdout + done.stderr).decode(errors="replace").strip()
    return done.returncode == 0, said.splitlines()[-1] if said else f"exit {done.returncode}"


def unsafe(window: Window) -> str | None:
    """Why `queue` will not run that window's program (None: it will)."""
    problem = processes.program_problem(window.exe)
    return f"its Codex program is not safe to run: {problem}" if problem is not None else None


def _showing(mailbox: StrPath, info: Info, found: Daemon) -> Window | None:
    """The window showing the thread of `found`. Its threads were opened after it started, and none in the future: a
    record's time is bounded by the process's own."""

    def since(opened: float) -> float:
        return min(max(opened, found.started), time.time())

    if not info.top:
        return None
    others = [
        Thread(i.id, i.top, since(i.opened))
        for i in sessions.listing(mailbox)
        if i.host == "codex"
        and i.id != info.id
        and i.state != "ended"
        and i.top
        and (i.pid, i.ticks) == (info.pid, info.ticks)
    ]
    return window_of(Thread(info.id, info.top, since(info.opened)), others, windows(found.codex_home))


def _codex_of_ours(pid: int, ticks: int) -> bool:
    """Whether that process (started at `ticks`) is a running Codex of this user, confined no more than we are."""
    found = processes.running(pid, ticks)
    return found is not None and found.comm == "codex" and processes.ours(pid) and not processes.confined(pid)


def _exe_problem(pid: int) -> str | None:
    try:
        return processes.program_problem(os.readlink(f"/proc/{pid}/exe"))
    except OSError as error:
        return error.strerror


def _own_home() -> str:
    if os.environ.get("HOME"):
        return os.environ["HOME"]
    import pwd

    return pwd.getpwuid(os.getuid()).pw_dir


def _inside(path: str, top: str) -> bool:
    path, top = os.path.realpath(path), os.path.realpath(top)
    return path == top or path.startswith(top.rstrip("/") + "/")


def _codex_home(environ: dict[str, str]) -> str | None:
    if environ.get("CODEX_HOME"):
        return os.path.realpath(environ["CODEX_HOME"])
    return os.path.realpath(os.path.join(environ["HOME"], ".codex")) if environ.get("HOME") else None
