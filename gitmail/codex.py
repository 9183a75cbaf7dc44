"""Codex's own processes, as gitmail needs them to wake an idle Codex session: which interactive Codex (its TUI)
shows a thread, and `codex queue`, which stores a user turn for a thread that the thread runs when it is next idle.

An interactive Codex keeps its threads in a managed app-server daemon, which runs the hooks; the daemon keeps a
thread loaded for about a minute after its window closed and would run a queued turn there unwatched, and a thread
no longer loaded would run it when someone resumes it. So a turn is queued only for a thread whose window is still
open: a TUI of the same CODEX_HOME working in the thread's work tree, matched to the thread by start time. Linux
(/proc) only; elsewhere nothing is found and nothing is queued.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import NamedTuple

from gitmail.store.gitcmd import spawn

# `codex SUBCOMMAND` that is not an interactive session.
NOT_INTERACTIVE = frozenset(
    "app-server queue exec e mcp mcp-server login logout features debug sandbox apply a completion archive delete "
    "unarchive doctor update cloud exec-server remote-control plugin migrate-rollouts migrate-nfs-db review help "
    "proto responses-api-proxy".split()
)
QUEUE_TIMEOUT = 10.0  # seconds: `codex queue` answers in a tenth of a second


class Window(NamedTuple):
    """An interactive Codex process."""

    pid: int
    started: float  # when it started (time.time() seconds)
    cwd: str
    exe: str  # the program it runs: the Codex that `codex queue` is asked of
    codex_home: str
    home: str


class Thread(NamedTuple):
    """A Codex session gitmail knows: its thread id, where it works, when its hooks first saw it."""

    id: str
    top: str
    started: float


def daemon_home(pid: int | None) -> str | None:
    """The CODEX_HOME of Codex's managed app-server daemon when `pid` is one (the process the hooks of an interactive
    session run under), else None (`codex exec`, a client's own app-server: their threads live in that process)."""
    if pid is None:
        return None
    argv = _argv(pid)
    if (
        len(argv) < 2
        or os.path.basename(argv[0]) != "codex"
        or "app-server" not in argv
        or "--managed-daemon" not in argv
    ):
        return None
    return _codex_home(_environ(pid))


def windows(codex_home: str) -> list[Window]:
    """The interactive Codex processes of this CODEX_HOME."""
    found = []
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []
    boot, tick = _boot_time(), os.sysconf("SC_CLK_TCK")
    for pid in pids:
        argv = _argv(pid)
        if not argv or os.path.basename(argv[0]) != "codex" or (len(argv) > 1 and argv[1] in NOT_INTERACTIVE):
            continue
        if "--managed-daemon" in argv:
            continue
        environ = _environ(pid)
        if _codex_home(environ) != codex_home:
            continue
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
                stat = handle.read()
            ticks = int(stat[stat.rindex(")") + 2 :].split()[19])
            cwd, exe = os.readlink(f"/proc/{pid}/cwd"), os.readlink(f"/proc/{pid}/exe")
        except (OSError, ValueError, IndexError):
            continue
        found.append(Window(pid, boot + ticks / tick, cwd, exe, codex_home, environ.get("HOME", "")))
    return found


def window_of(thread: Thread, others: Sequence[Thread], open_windows: Sequence[Window]) -> Window | None:
    """The window showing `thread`, among the open windows, with `others` the other live Codex threads gitmail
    knows: the newest thread takes the newest window that started before it in its work tree, and so on back (a
    window shows the thread it opened last)."""
    taken: set[int] = set()
    for candidate in sorted([thread, *others], key=lambda t: t.started, reverse=True):
        mine = [
            w
            for w in open_windows
            if w.pid not in taken and _inside(w.cwd, candidate.top) and w.started <= candidate.started + 1.0
        ]
        if not mine:
            continue
        chosen = max(mine, key=lambda w: w.started)
        if candidate.id == thread.id:
            return chosen
        taken.add(chosen.pid)
    return None


def queue(window: Window, thread_id: str, text: str) -> tuple[bool, str]:
    """Ask that window's Codex to queue a user turn of `text` for the thread: (done, what Codex said)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": window.home,
        "CODEX_HOME": window.codex_home,
        "LANG": os.environ.get("LANG", "C.UTF-8"),
    }
    try:
        done = spawn([window.exe, "queue", "--thread", thread_id, "--message", text], env, timeout=QUEUE_TIMEOUT)
    except OSError as error:
        return False, str(error)
    said = (done.stdout + done.stderr).decode(errors="replace").strip()
    return done.returncode == 0, said.splitlines()[-1] if said else f"exit {done.returncode}"


def _inside(path: str, top: str) -> bool:
    path, top = os.path.realpath(path), os.path.realpath(top)
    return path == top or path.startswith(top.rstrip("/") + "/")


def _codex_home(environ: dict[str, str]) -> str | None:
    if environ.get("CODEX_HOME"):
        return os.path.realpath(environ["CODEX_HOME"])
    return os.path.realpath(os.path.join(environ["HOME"], ".codex")) if environ.get("HOME") else None


def _argv(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _environ(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            raw = handle.read()
    except OSError:
        return {}
    pairs = (entry.decode(errors="replace").partition("=") for entry in raw.split(b"\0") if b"=" in entry)
    return {key: value for key, _, value in pairs}


def _boot_time() -> float:
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except OSError:
        pass
    return 0.0
