"""Opening the mailbox: the one place where a process first meets an existing mailbox, checks it, and brings a
mailbox of an older format up to date (migrate.py) before anything reads it."""

from __future__ import annotations

from gitmail.store.repository import Store
from gitmail.store.setup import MAILBOX_CONFIG

TYPE_CHECKING = False
if TYPE_CHECKING:
    import os

VERSION = MAILBOX_CONFIG["gitmail.version"]


def open_mailbox(path: str | os.PathLike[str] | None = None) -> Store:
    """The mailbox at `path`, or the default one (location.py). Nothing is created until the first write; a mailbox
    that exists is checked (MailboxError when it cannot be used) and, if of an older format, migrated."""
    store = Store(path)
    if store.exists() and store.settings().get("gitmail.version") != VERSION:
        from gitmail.store import migrate  # rarely needed: only a mailbox of another format loads it

        migrate.on_open(store)
    return store
