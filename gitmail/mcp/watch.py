"""Watching one repository's mail for the MCP server: the stamp files every new message for the repo (or any
broadcast) rewrites are watched with inotify (watchfiles, the `mcp` extra) where it can be had, else looked at every
POLL seconds; a change in what they say calls back once. Runs in a thread of its own until stopped."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from gitmail.store import stamps
from gitmail.store.repository import Store
from gitmail.values.names import RepoName

STEP_MS = 20  # watchfiles: how long a burst of changes may go quiet before it is reported
DEBOUNCE_MS = 200  # watchfiles: the longest a change waits to be reported
RECHECK_MS = 5_000  # the stamps are read again this often even without an event: a change made while a watch was
# being set up (before inotify listened) is noticed by then
POLL = 0.5  # seconds between looks where there is no watchfiles


class Watcher:
    def __init__(self, store: Store, repo: RepoName, changed: Callable[[], None]) -> None:
        self.store, self.repo, self.changed = store, repo, changed
        self.stopping = threading.Event()
        self.seen = stamps.read(store.path, repo)  # read before the caller is answered: later changes are news
        self.thread = threading.Thread(target=self._run, name=f"watch {repo}", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()

    def _run(self) -> None:
        while not self.stopping.is_set():
            folder = Path(stamps.directory(self.store.root))
            try:  # the stamps' folder, or while there is no mailbox yet, the nearest folder above it
                _next_change(folder if folder.is_dir() else _nearest_existing(folder), self.stopping)
            except Exception:  # the folder went away or could not be watched: look again shortly
                self.stopping.wait(1)
            now = stamps.read(self.store.path, self.repo)
            if now != self.seen and not self.stopping.is_set():
                self.seen = now
                self.changed()


def _next_change(path: Path, stop: threading.Event) -> None:
    """Return once anything in `path` (one folder, not below it) may have changed."""
    try:
        from watchfiles import watch
    except ImportError:
        stop.wait(POLL)
        return
    for _ in watch(
        path,
        watch_filter=None,
        recursive=False,
        step=STEP_MS,
        debounce=DEBOUNCE_MS,
        stop_event=stop,
        rust_timeout=RECHECK_MS,
        yield_on_timeout=True,
        raise_interrupt=False,
    ):
        return


def _nearest_existing(path: Path) -> Path:
    for folder in path.parents:
        if folder.is_dir():
            return folder
    return Path(os.sep)
