"""This machine's processes, as gitmail asks about them (from /proc: Linux only; elsewhere nothing is known): what
one is called, when it started, whether it still runs, and whose it is.

Anything a session can write (its record, its `.live` file) may name any process, and anyone on the machine may
start a process with any name. So a process is taken for one of ours only when the kernel says it is: its owner,
its start time, its state.
"""

from __future__ import annotations

import os
from typing import NamedTuple


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


def _status(pid: int | str) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return {}
    pairs = (line.partition(":") for line in lines)
    return {key: value.strip() for key, _, value in pairs}
