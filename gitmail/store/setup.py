"""Creating the mailbox repository and keeping gitmail's settings in its config, with pygit2 (the only module that
imports it: its import costs more than most commands may, so only creating and repairing a mailbox pay it)."""

from __future__ import annotations

import os

from gitmail.errors import MailboxError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from _typeshed import StrPath

MAILBOX_CONFIG = {
    "core.logAllRefUpdates": "false",  # no reflogs: every ref's moves are in refs/gitmail-moves
    "gc.auto": "0",  # gitmail packs itself (packing.py); no git command may do it behind its back
    "gc.reflogExpire": "never",  # the reflogs of a mailbox not yet migrated: what a repair goes back to
    "gc.reflogExpireUnreachable": "never",
    "notes.gitmail-seen.mergeStrategy": "cat_sort_uniq",  # seen-sets merge as a union on sync
    # 2: names in NFC, refs spelled so that case-insensitive file systems keep them apart; 3: the record of moves
    # in refs/gitmail-moves instead of a reflog per message ref; 4: the notes refs' moves there too, no reflog at all
    "gitmail.version": "4",
}


def init(path: StrPath) -> None:
    """A new bare mailbox repository at `path` (a fresh directory), configured."""
    pygit2 = _pygit2()
    _isolate()
    repo = pygit2.init_repository(os.fspath(path), bare=True)
    try:
        for key, value in MAILBOX_CONFIG.items():
            repo.config[key] = value
    finally:
        repo.free()


def configure(path: StrPath, settings: Mapping[str, str]) -> None:
    """Set these keys in the mailbox's config (under the caller's lock)."""
    pygit2 = _pygit2()
    _isolate()
    try:
        config = pygit2.Config(os.path.join(path, "config"))
        for key, value in settings.items():
            config[key] = value
    except (pygit2.GitError, OSError) as error:
        raise MailboxError(f"cannot write the mailbox's settings at {path}: {error}") from None


def _pygit2() -> Any:  # the module, whose import is the cost this module avoids elsewhere
    try:
        import pygit2
    except ImportError:
        raise MailboxError(
            "creating the mailbox needs the pygit2 package, which this Python lacks (pip install gitmail)"
        ) from None
    return pygit2


def _isolate() -> None:
    """libgit2 reads no user or system git config: a user's ~/.gitconfig must not change (or break) a write."""
    from pygit2 import settings
    from pygit2.enums import ConfigLevel

    for level in (ConfigLevel.SYSTEM, ConfigLevel.XDG, ConfigLevel.GLOBAL, ConfigLevel.PROGRAMDATA):
        settings.search_path[level] = ""
