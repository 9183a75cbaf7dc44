"""The log beside the mailbox (gitmail.log): problems gitmail worked around, and the tracebacks of failures nobody
foresaw. The one writer of it. Writing it never fails anything."""

from __future__ import annotations

import os
import time
from pathlib import Path

from gitmail.store.location import default_path, log_path


def problem(mailbox: Path, text: str) -> None:
    """A line saying what went wrong with the mailbox and what was done about it."""
    _append(log_path(mailbox), f"{mailbox}: {text}")


def failure(error: BaseException, where: str) -> str:
    """Log an unexpected failure with its traceback; the one line to show for it, naming the log when it was
    written there."""
    import traceback

    reason = (str(error).splitlines() or [type(error).__name__])[0]
    try:
        path = log_path(default_path())
    except Exception:  # an unusable GITMAIL_DIR, no home directory: the one line is enough
        return f"{reason}."
    detail = "".join(traceback.format_exception(error))
    if _append(path, f"{where}: {detail}"):
        return f"{reason} (details: {path})."
    return f"{reason}."


def _append(path: Path, text: str) -> bool:
    try:
        if not os.path.isdir(path.parent):
            return False
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} {text}\n")
        return True
    except OSError:
        return False
