"""Syncing in the background, for remotes marked to sync by themselves: a session start starts a sync when one is
due, and a send asks for one. Both cost a read of the config, a stat and a spawn; neither ever waits or fails what
asked for it. The sync itself runs detached (`gitmail sync --auto`, engine.run_background)."""

from __future__ import annotations

import os
import sys
import time

from gitmail.store.files import make_dir, touch, write_atomically
from gitmail.store.log import problem

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from gitmail.store.repository import Store
    from gitmail.sync.remotes import Remote

SETTINGS = "gitmail-remote"  # the config section of a remote (remotes.py)

FOLDER = "sync"  # sync's own files in the mailbox's own folder
LAST_ATTEMPT = "last-attempt"  # touched when a sync starts: when the next one is due
WANTED = "wanted"  # a token rewritten by each request: a running sync goes again when it changed


def automatic(store: Store) -> list[Remote]:
    """The remotes marked to sync by themselves."""
    if not store.exists() or not store.settings().subsections(SETTINGS):
        return []  # every session start asks: without loading remotes.py when there are none
    from gitmail.sync.remotes import configured

    return [r for r in configured(store) if r.auto]


def folder(store: Store) -> str:
    where = os.path.join(store.own_root, FOLDER)
    make_dir(where)
    return where


def next_due(store: Store, auto: Sequence[Remote]) -> float:
    """When a session start must next start a background sync of these automatic remotes (a time.time() value;
    0 when one is due now)."""
    try:
        last = os.stat(os.path.join(store.own_root, FOLDER, LAST_ATTEMPT)).st_mtime
    except FileNotFoundError:
        return 0.0
    return last + min(r.interval for r in auto) if auto else 0.0


def touch_attempt(store: Store) -> None:
    touch(os.path.join(folder(store), LAST_ATTEMPT))


def start_if_due(store: Store, auto: Sequence[Remote] | None = None) -> float | None:
    """For a session start: start a background sync of the automatic remotes when the last one is older than their
    interval. When the next one is due (None: no remote syncs by itself)."""
    try:
        auto = automatic(store) if auto is None else auto
        if not auto:
            return None
        if time.time() >= next_due(store, auto):
            touch_attempt(store)
            _start(store)
        return next_due(store, auto)
    except Exception as error:  # a background sync must never cost a session anything
        problem(store.root, f"could not start a background sync: {error}")
        return None


def after_send(store: Store) -> bool:
    """After a send: push the new message in the background when a remote syncs automatically."""
    try:
        return bool(automatic(store)) and _start(store)
    except Exception as error:
        problem(store.root, f"could not start a background sync: {error}")
        return False


def request(store: Store) -> None:
    """Ask for a background sync: a running one sees the request when it is done and goes again."""
    write_atomically(os.path.join(folder(store), WANTED), os.urandom(8).hex().encode(), durable=False)


def wanted(store: Store) -> str:
    try:
        with open(os.path.join(store.own_root, FOLDER, WANTED)) as file:
            return file.read()
    except OSError:
        return ""


def _start(store: Store) -> bool:
    """Ask for a background sync and start one (which leaves at once if another runs: that one goes again)."""
    import subprocess

    request(store)
    subprocess.Popen(
        [sys.executable, "-P", "-m", "gitmail", "sync", "--auto"],  # -P: no folder of the cwd shadows gitmail
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd="/",
        env={**os.environ, "GITMAIL_DIR": store.root},
        start_new_session=True,  # detached: no terminal to prompt on, not killed with the session's process group
    )
    return True
