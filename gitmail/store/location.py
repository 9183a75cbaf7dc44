"""Where the mailbox is: ~/.gitmail/mail.git, or the absolute path $GITMAIL_DIR names. The one place that says so
for Python (hook.sh keeps a copy in shell, checked against this one by the tests). Standard library only."""

from __future__ import annotations

import os
from pathlib import Path

from gitmail.errors import UsageError

MAILBOX_ENV = "GITMAIL_DIR"
DEFAULT = (".gitmail", "mail.git")  # below the home directory
OWN_DIR = "gitmail"  # gitmail's own files inside the repository: lock, journal, claims, stamps, sessions
LOG_NAME = "gitmail.log"  # beside the mailbox


def default_path() -> Path:
    """~/.gitmail/mail.git, or the absolute path $GITMAIL_DIR names (a relative one is refused)."""
    configured = os.environ.get(MAILBOX_ENV)
    if not configured:
        return Path.home().joinpath(*DEFAULT)
    path = Path(configured).expanduser()
    if not path.is_absolute():
        raise UsageError(
            f"{MAILBOX_ENV} must be an absolute path (it is {configured!r}): a relative one would make a separate "
            "mailbox in every directory"
        )
    return path


def log_path(mailbox: Path) -> Path:
    return mailbox.parent / LOG_NAME
