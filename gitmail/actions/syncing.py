"""Syncing with other machines' mailboxes through git remotes: the remotes a mailbox syncs with, and a sync."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gitmail.store.repository import Store
    from gitmail.sync.engine import Outcome
    from gitmail.sync.remotes import Remote, SyncError


def remotes(box: Store) -> list[Remote]:
    """The remotes this mailbox syncs with, in the order they were added."""
    from gitmail.sync.remotes import configured

    return configured(box)


def add_remote(box: Store, *, name: str, url: str, auto: bool = False, interval: int | None = None) -> Remote:
    """Record a remote to sync with (nothing is sent until the first sync); `interval`: seconds between automatic
    syncs (default 300)."""
    from gitmail.sync import remotes as settings

    return settings.add_remote(box, name=name, url=url, auto=auto, interval=interval or settings.DEFAULT_INTERVAL)


def change_remote(box: Store, name: str, *, auto: bool | None = None, interval: int | None = None) -> Remote:
    from gitmail.sync import remotes as settings

    return settings.change_remote(box, name, auto=auto, interval=interval)


def remove_remote(box: Store, name: str) -> None:
    """Stop syncing with a remote; nothing there or in this mailbox's mail is deleted."""
    from gitmail.sync import engine

    engine.remove_remote(box, name)


def sync(box: Store, name: str | None = None, *, wait: float = 120.0) -> list[Outcome | SyncError]:
    """Sync with one remote or with every remote: one Outcome, or the SyncError that stopped it, per remote."""
    from gitmail.sync import engine

    return engine.sync_all(box, name, wait=wait)
