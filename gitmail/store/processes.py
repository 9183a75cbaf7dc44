"""This machine's processes, as gitmail asks about them (from /proc: Linux only; elsewhere nothing is known): what
one is called, when it started, whether it still runs, whose it is, whether it is confined more than this process
is, and whether a program file or a directory could have been changed by anyone but root and this user.

Anything a session can write (its record, its `.live` file) may name any process, and anyone on the machine may
start a process with any name, arguments and environment. So a process is taken for one of ours only when the
kernel says it is: its owner, its start time, its state, its confinement, its executable.
"""

from __future__ import annotations

import os
import stat as modes
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple
else:
    from gitmail.values.tuples import NamedTuple

OTHERS_WRITE = modes.S_IWGRP | modes.S_IWOTH


class Stat(NamedTuple):
    """What /proc/PID/stat says of a process."""

    comm: str  # its command name (the kernel's, at most 15 bytes)
    state: str  # R, S, D, T, ...; Z for a zombie (it has exited, its parent has not reaped it)
    parent: int
    ticks: int  # when it started, in clock ticks since boot


def stat(pid: int) -> Stat | None:
    """The process's command name, state, parent and start time; None when there is no such process (or no /proc).
    The name may hold anything, ')' too: the fields are those after the last ')'."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return None
    comm = text[text.find("(") + 1 : text.rfind(")")]
    fields = text[text.rfind(")") + 2 :].split()
    try:
        return Stat(comm, fields[0], int(fields[1]), int(fields[19]))
    except (IndexError, ValueError):
        return None


def running(pid: int, ticks: int) -> Stat | None:
    """The process of this pid that started at these ticks (a reused pid has another start), unless it has exited
    (a zombie is only waiting to be reaped)."""
    found = stat(pid)
    return found if found is not None and found.ticks == ticks and found.state not in ("Z", "X") else None


def ours(pid: int) -> bool:
    """Whether the process runs as this user: its real and effective uid are ours."""
    uids = _status(pid).get("Uid", "").split()
    return len(uids) >= 2 and uids[0] == uids[1] == str(os.getuid())


def confined(pid: int) -> bool:
    """Whether the process is confined more than this one, as a command in a host's sandbox is: it may not gain
    privileges, or it runs under a seccomp filter, where this process does not; or it sees other processes or
    other files (another pid or mount namespace: the paths it names are not ours). A process that cannot be asked
    counts as confined."""
    theirs, mine = _status(pid), _status("self")
    if not theirs or not mine:
        return True
    for field in ("NoNewPrivs", "Seccomp"):
        if theirs.get(field, "0") != "0" and mine.get(field, "0") == "0":
            return True
    try:
        return any(os.readlink(f"/proc/{pid}/ns/{ns}") != os.readlink(f"/proc/self/ns/{ns}") for ns in ("pid", "mnt"))
    except OSError:
        return True


def sandboxed() -> bool:
    """Whether this process runs confined, as a command in a host's sandbox does (it may not gain privileges, or runs
    under a seccomp filter). Codex's sandbox also gives it a pid namespace of its own, in which its host is pid 1."""
    mine = _status("self")
    return any(mine.get(field, "0") != "0" for field in ("NoNewPrivs", "Seccomp"))


def started(ticks: int) -> float:
    """A start in clock ticks since boot, as time.time() seconds."""
    return _boot_time() + ticks / os.sysconf("SC_CLK_TCK")


def argv(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def environ(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            raw = handle.read()
    except OSError:
        return {}
    pairs = (entry.decode(errors="replace").partition("=") for entry in raw.split(b"\0") if b"=" in entry)
    return {key: value for key, _, value in pairs}


def program_problem(path: str) -> str | None:
    """Why the program at `path` is not safe for this user to run (None: it is): it, the directory it is in, and
    every directory above must be owned by root or by this user and writable by no one else. A sticky directory
    above it (/tmp) may be writable by all, since no one else can rename or remove what is ours in it; the
    program's own directory may not."""
    real = os.path.realpath(path)
    try:
        found = os.stat(real)
    except OSError as error:
        return f"{real}: {error.strerror}"
    if not modes.S_ISREG(found.st_mode):
        return f"{real} is not a file"
    problem = _owned_problem(real, found)
    folder, first = os.path.dirname(real), True
    while problem is None:
        try:
            above = os.stat(folder)
        except OSError as error:
            return f"{folder}: {error.strerror}"
        problem = _owned_problem(folder, above, sticky_ok=not first)
        if folder == os.path.dirname(folder):
            break
        folder, first = os.path.dirname(folder), False
    return problem


def home_problem(path: str) -> str | None:
    """Why `path` is not a directory of this user's own that no one else may write (None: it is)."""
    real = os.path.realpath(path)
    try:
        found = os.stat(real)
    except OSError as error:
        return f"{real}: {error.strerror}"
    if not modes.S_ISDIR(found.st_mode):
        return f"{real} is not a directory"
    if found.st_uid != os.getuid():
        return f"{real} is not this user's"
    return f"{real} is writable by others" if found.st_mode & OTHERS_WRITE else None


def _owned_problem(path: str, found: os.stat_result, *, sticky_ok: bool = False) -> str | None:
    if found.st_uid not in (0, os.getuid()):
        return f"{path} belongs to another user (uid {found.st_uid})"
    if found.st_mode & OTHERS_WRITE and not (sticky_ok and found.st_mode & modes.S_ISVTX):
        return f"{path} is writable by others"
    return None


def _status(pid: int | str) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return {}
    pairs = (line.partition(":") for line in lines)
    return {key: value.strip() for key, _, value in pairs}


def _boot_time() -> float:
    """When this machine booted, as time.time() seconds: now, less its uptime (to a hundredth of a second; the btime
    of /proc/stat is in whole seconds, too coarse to tell a window's start from a thread's)."""
    try:
        with open("/proc/uptime", encoding="ascii") as handle:
            return time.time() - float(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
