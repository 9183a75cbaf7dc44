"""The hooks gitmail installs, as a host's settings hold them: the moments it answers (see MOMENTS), the host event
that carries each (from delivery.py's table of hosts), the command line for each, and the entry around it.

Each command names this interpreter and hook.sh, so no virtualenv needs to be active, and ends in a mark
(`# gitmail:<moment>`) by which gitmail knows its own entries again: uninstall removes exactly them, and `doctor`
reads which moments are installed from them.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitmail import delivery
from gitmail.delivery import Moment
from gitmail.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Sequence

MOMENTS = ("start", "tool", "prompt", "stop", "wake", "end", "edit")  # what `--moments` names, in this order
_NAMED = {
    Moment.START: "start", Moment.TOOL: "tool", Moment.PROMPT: "prompt", Moment.STOP: "stop", Moment.WAKE: "wake",
    Moment.END: "end", Moment.EDIT: "edit",
}  # fmt: skip
# The host event that carries each moment, from delivery.py's table of hosts: a moment a host carries without a hook
# (Codex's wake: gitmail queues a turn) or lacks is not here.
EVENTS = {
    host: {_NAMED[moment]: carried.event for moment, carried in table.items() if carried.hook}
    for host, table in delivery.HOSTS.items()
}
QUIET = ("start", "tool", "prompt", "stop", "wake", "edit")  # through hook.sh: no Python when nothing changed
TIMEOUT = 10  # seconds; the hook itself waits at most a few for a busy mailbox
END_TIMEOUT = 3  # Codex runs SessionEnd hooks for at most 3 s, and hashes the entry as if it said so


def _hook_name(moment: str) -> str:
    """`gitmail hook`'s name for a moment."""
    return {"start": "session-start", "end": "session-end"}.get(moment, moment)


def marker(moment: str) -> str:
    """The shell comment that ends gitmail's command for this moment: how uninstall knows its own entries."""
    return f"# gitmail:{_hook_name(moment)}"


MARK = marker("start")  # the session-start entry's mark, the same as the first releases wrote
_MARKED = re.compile(r"# gitmail:([a-z-]+)\s*$")


def marked_moment(command: str) -> str | None:
    """The moment whose mark ends this command, as `--moments` names it; None for a command that is not gitmail's."""
    found = _MARKED.search(command)
    return {"session-start": "start", "session-end": "end"}.get(found.group(1), found.group(1)) if found else None


def is_ours(entry: object) -> bool:
    """A host's hook entry that gitmail installed."""
    return isinstance(entry, dict) and marked_moment(str(entry.get("command", ""))) is not None


def moment_of(entry: object) -> str:
    """The moment gitmail's entry answers ("" for an entry that is not gitmail's)."""
    return (marked_moment(str(entry.get("command", ""))) if isinstance(entry, dict) else None) or ""


def parse_moments(text: str) -> tuple[str, ...]:
    """`--moments start,tool,…` as a tuple in MOMENTS order; a usage error for anything else."""
    chosen = {word.strip() for word in text.split(",") if word.strip()}
    unknown = sorted(chosen - set(MOMENTS))
    if unknown or not chosen:
        raise UsageError(f"--moments takes a comma-separated list of {', '.join(MOMENTS)} (got {text!r})")
    if "wake" in chosen and "start" not in chosen:
        raise UsageError("--moments: wake needs start (a session is woken through the files its start watches)")
    return tuple(m for m in MOMENTS if m in chosen)


def hook_script() -> Path:
    """hook.sh as installed with this gitmail (package data beside the hook adapter, gitmail/hooks.py)."""
    return Path(__file__).resolve().parent.parent / "hook.sh"


def command(moment: str, host: str, *, python: str | None = None, watch: bool = False) -> str:
    """The installed command for one moment. It names this interpreter, so no virtualenv needs to be active.
    Session start and the moments inside a session run hook.sh, which starts Python only when something may have
    changed (a session start that would repeat the last one is answered from what that one kept); session end runs
    Python directly, falling back to `gitmail` on PATH. None fails a session: all but the wake end in `true` (a wake
    must pass on its exit status 2, which is how Claude Code is asked to start a turn)."""
    interpreter = shlex.quote(python or sys.executable)
    name = _hook_name(moment)
    if moment in QUIET:
        run = f"sh {shlex.quote(str(hook_script()))} {name} {host} {interpreter}" + (" --watch" if watch else "")
        if moment == "start":  # hook.sh itself gone (gitmail moved): the gitmail on PATH, if any
            run += f" || gitmail hook {name} --host {host}" + (" --watch" if watch else "")
        return f"{run} {marker(moment)}" if moment == "wake" else f"{run} || true {marker(moment)}"
    arguments = f"hook {name} --host {host}" + (" --watch" if watch else "")
    # -P: never import a `gitmail` from the session's directory (hooks run there; a repository could hold one).
    return f"{interpreter} -P -m gitmail {arguments} || gitmail {arguments} || true {marker(moment)}"


def hook_command(python: str | None = None, *, host: str = "claude", watch: bool = False) -> str:
    """The session-start command."""
    return command("start", host, python=python, watch=watch)


def entries(host: str, moments: Sequence[str] = MOMENTS, *, python: str | None = None) -> dict[str, dict[str, Any]]:
    """Host event -> gitmail's entry, for the chosen moments this host has."""
    chosen = [m for m in moments if m in EVENTS[host]]
    found = {}
    for moment in chosen:
        entry: dict[str, Any] = {
            "type": "command",
            "command": command(moment, host, python=python, watch=moment == "start" and "wake" in chosen),
            "timeout": END_TIMEOUT if moment == "end" else TIMEOUT,
        }
        if moment == "wake":
            entry["asyncRewake"] = True  # runs beside the session; exit 2 starts a turn with its stderr
        found[EVENTS[host][moment]] = entry
    return found
