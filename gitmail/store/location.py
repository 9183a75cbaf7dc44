"""Where the mailbox is: ~/.gitmail/mail.git, or the absolute path $GITMAIL_DIR names. The one place that says so
for Python (hook.sh keeps a copy in shell, checked against this one by the tests). Standard library only."""

from __future__ import annotations

import os

from gitmail.errors import UsageError

TYPE_CHECKING = False  # pathlib costs every command an import; only `default_path` needs it
if TYPE_CHECKING:
    from pathlib import Path

    from _typeshed import StrPath

MAILBOX_ENV = "GITMAIL_DIR"
DEFAULT = (".gitmail", "mail.git")  # below the home directory
OWN_DIR = "gitmail"  # gitmail's own files inside the repository: lock, journal, claims, stamps, sessions
LOG_NAME = "gitmail.log"  # beside the mailbox


def mailbox_path() -> str:
    """~/.gitmail/mail.git, or the absolute path $GITMAIL_DIR names (a relative one is refused)."""
    configured = os.environ.get(MAILBOX_ENV)
    if not configured:
        return os.path.join(os.path.expanduser("~"), *DEFAULT)
    path = os.path.expanduser(configured)
    if not os.path.isabs(path):
        raise UsageError(
            f"{MAILBOX_ENV} must be an absolute path (it is {configured!r}): a relative one would make a separate "
            "mailbox in every directory"
        )
    return path


def spelled(path: str | os.PathLike[str]) -> str:
    """A path as Path(path).expanduser() spells it: no trailing or doubled separator, no `.` component."""
    given = os.path.expanduser(os.fspath(path))
    start = "//" if given.startswith("//") and not given.startswith("///") else "/" if given.startswith("/") else ""
    parts = [part for part in given.split("/") if part not in ("", ".")]
    return start + "/".join(parts) if parts or start else "."


def default_path() -> Path:
    from pathlib import Path

    return Path(mailbox_path())


def log_path(mailbox: StrPath) -> str:
    return os.path.join(os.path.dirname(os.fspath(mailbox)), LOG_NAME)
