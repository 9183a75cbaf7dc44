"""The log beside the mailbox (gitmail.log): problems gitmail worked around, and the tracebacks of failures nobody
foresaw, each with the versions it happened under. The one writer of it. Writing it never fails anything, and it
never grows past LIMIT: a full log becomes gitmail.log.1 (the one before that goes), so hooks that append to it at
every session for years keep it small."""

from __future__ import annotations

import os
import time

from gitmail.store.location import log_path, mailbox_path, spelled

LIMIT = 1 << 20  # bytes a log grows to before it is set aside as gitmail.log.1

TYPE_CHECKING = False  # the quick paths load this: no typing (nor pathlib) import for the annotations
if TYPE_CHECKING:
    from collections.abc import Callable

    from _typeshed import StrPath

_hearers: list[Callable[[str], None]] = []  # who hears `tell`: the edge of a command line (its standard error)
_told: set[str] = set()


def heard_by(hearer: Callable[[str], None]) -> None:
    """Who hears what `tell` says from now on (the edge of the command line, the MCP server and sync, as each
    starts its work): each thing once."""
    _hearers[:] = [hearer]
    _told.clear()


def tell(mailbox: StrPath, text: str) -> None:
    """A problem gitmail works around that the one who runs it should know of and can fix: logged, and said once
    per process to whoever hears (a hook has nobody: the log alone)."""
    if text in _told:
        return
    _told.add(text)
    problem(mailbox, text)
    for hearer in _hearers:
        hearer(text)


def problem(mailbox: StrPath, text: str) -> None:
    """A line saying what went wrong with the mailbox and what was done about it."""
    _append(log_path(mailbox), f"{mailbox}: {text}")


def failure(error: BaseException, where: str) -> str:
    """Log an unexpected failure with its traceback and the versions of what ran (gitmail, Python, git, and the
    host when `where` names one); the one line to show for it, naming the log when it was written there."""
    import traceback

    reason = (str(error).splitlines() or [type(error).__name__])[0]
    try:
        path = log_path(spelled(mailbox_path()))
    except Exception:  # an unusable GITMAIL_DIR, no home directory: the one line is enough
        return f"{reason}."
    detail = "".join(traceback.format_exception(error))
    if _append(path, f"{where}: {versions()}\n{detail}"):
        return f"{reason} (details: {path})."
    return f"{reason}."


def versions() -> str:
    """What a report of a failure needs first: "gitmail 0.1.0, Python 3.11.7, git 2.39.5"."""
    import platform
    import subprocess

    from gitmail import __version__

    try:
        said = subprocess.run(["git", "--version"], capture_output=True, text=True, timeout=5).stdout.split()
        git = said[2] if len(said) > 2 else "unknown"
    except (OSError, subprocess.SubprocessError):
        git = "not found"
    return f"gitmail {__version__}, Python {platform.python_version()}, git {git}"


def _append(path: str, text: str) -> bool:
    try:
        if not os.path.isdir(os.path.dirname(path)):
            return False
        try:
            if os.stat(path).st_size >= LIMIT:
                os.replace(path, path + ".1")  # two at once: one log is set aside, not both
        except FileNotFoundError:
            pass
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} {text}\n")
        return True
    except OSError:
        return False
