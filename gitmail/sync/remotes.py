"""Sync remotes: their settings in the mailbox's config, the URLs gitmail accepts, and the names of what sync keeps
on a remote and here.

On a remote, refs/gitmail-sync/state holds every message's state and (through its parents) every message commit,
and refs/gitmail-sync/notes/<name> each of gitmail's notes refs (refs/notes/gitmail-*). Here,
refs/gitmail-remotes/<remote>/… hold what that remote held when last fetched or pushed: in gitmail/sync/fetch.git,
where sync fetches, and mirrored into the mailbox.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

from gitmail.errors import GitmailError, UsageError
from gitmail.store import gitconfig, startcache

if TYPE_CHECKING:
    from gitmail.store.repository import Store

REMOTE_ROOT = "refs/gitmail-sync/"  # on the remote
STATE = "state"
NOTES = "notes/"
TRACKING_ROOT = "refs/gitmail-remotes/"  # here: what each remote held when last fetched or pushed
NOTES_ROOT = "refs/notes/"
NOTES_PREFIX = "gitmail-"  # every refs/notes/gitmail-* is gitmail's, and merges as a union of lines
FORMAT_PATH = "gitmail-sync"  # a file in the state's tree: what it is and which format
FORMAT_TEXT = "gitmail sync state\nformat: 1\n"
SETTINGS = "gitmail-remote"  # [gitmail-remote "<name>"] url, auto, interval in the mailbox's config
DEFAULT_INTERVAL = 300  # seconds between automatic syncs
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}")
_TOKEN_USER = re.compile(r"(gh[pousr]_|github_pat_|glpat-)|[A-Za-z0-9_\-]{32,}$")


class SyncError(GitmailError):
    """A sync that could not be carried out: the remote is unreachable, refused it, or holds something else."""


class NotGitmail(SyncError):
    """The remote holds something other than gitmail's sync state: nothing of it may land here."""

    def __init__(self, remote: str, detail: str) -> None:
        super().__init__(f"{remote}: the remote holds something other than gitmail mail ({detail})")


class Remote(NamedTuple):
    name: str
    url: str
    auto: bool = False  # sync in the background: at session start (every `interval`) and after a send
    interval: int = DEFAULT_INTERVAL  # seconds


def name_problem(raw: str) -> str | None:
    if not _NAME.fullmatch(raw):
        return "use letters, digits, '-' and '_' (at most 63), starting with a letter or digit"
    return None


def url_problem(url: str) -> str | None:
    """Why a URL cannot be a sync remote; None when it can. Credentials in a URL are refused: git would store them
    in plain text in the mailbox's config and show them in messages."""
    from urllib.parse import urlsplit

    if not url or url != url.strip() or any(ord(c) < 32 for c in url):
        return "it is empty or holds spaces or control characters at its ends"
    if url.startswith("-"):
        return "it starts with '-'"
    if "://" in url:
        try:
            parts = urlsplit(url)
            password, user = parts.password, parts.username
        except ValueError as error:
            return f"it does not parse ({error})"
        if password is not None:
            return "it embeds a password in plain text; use ssh keys or a git credential helper instead"
        if user and parts.scheme.lower() in ("http", "https") and _TOKEN_USER.match(user):
            return "it embeds an access token in plain text; use a git credential helper instead"
    return None


def redact(url: str) -> str:
    """The URL with any password or token replaced, for messages."""
    return re.sub(r"://[^/@]*@", "://***@", url) if url_problem(url) and "://" in url else url


def configured(store: Store) -> list[Remote]:
    """The configured remotes, in the order they were added."""
    if not store.exists():
        return []
    return from_settings(store.settings())


def from_settings(settings: gitconfig.Config) -> list[Remote]:
    """The remotes a mailbox config names (as `git config` writes `[gitmail-remote "<name>"]` sections)."""
    return [
        Remote(
            name,
            values.get("url", ""),
            values.get("auto", "false").lower() in ("true", "yes", "on", "1"),
            _seconds(values.get("interval")),
        )
        for name, values in settings.subsections(SETTINGS).items()
        if not name_problem(name)
    ]


def _seconds(raw: str | None) -> int:
    try:
        return max(1, int(raw)) if raw is not None else DEFAULT_INTERVAL
    except ValueError:
        return DEFAULT_INTERVAL


def find(store: Store, name: str) -> Remote:
    for remote in configured(store):
        if remote.name == name:
            return remote
    known = ", ".join(r.name for r in configured(store))
    raise UsageError(
        f"no remote named {name!r}" + (f" (known: {known})" if known else " (add one: gitmail remote add)")
    )


def add_remote(store: Store, *, name: str, url: str, auto: bool = False, interval: int = DEFAULT_INTERVAL) -> Remote:
    """Record a remote to sync with. Nothing is sent until the first sync."""
    for problem, what in ((name_problem(name), f"remote name {name!r}"), (url_problem(url), "URL")):
        if problem:
            raise UsageError(f"invalid {what}: {problem}")
    if interval < 1:
        raise UsageError("the interval must be at least 1 second")
    with store.locked():
        if any(r.name == name for r in configured(store)):
            raise UsageError(f"a remote named {name!r} exists already (remove it first: gitmail remote remove {name})")
        _configure(store, name, url=url, auto=auto, interval=interval)
    return Remote(name, url, auto, interval)


def change_remote(store: Store, name: str, *, auto: bool | None = None, interval: int | None = None) -> Remote:
    if interval is not None and interval < 1:
        raise UsageError("the interval must be at least 1 second")
    find(store, name)  # an unknown name is refused before the lock (which would create the mailbox)
    with store.locked():
        remote = find(store, name)
        remote = remote._replace(
            auto=remote.auto if auto is None else auto, interval=remote.interval if interval is None else interval
        )
        _configure(store, name, auto=remote.auto, interval=remote.interval)
    return remote


def _configure(store: Store, name: str, *, url: str | None = None, auto: bool, interval: int) -> None:
    settings = {"url": url, "auto": "true" if auto else "false", "interval": str(interval)}
    for variable, value in settings.items():
        if value is not None:
            store.git("config", f"{SETTINGS}.{name}.{variable}", value)
    startcache.forget_all(store.path)  # a session start may have a sync to start now


def forget(store: Store, name: str) -> None:
    """Remove a remote's settings (sync.remove_remote also forgets what this mailbox knew of it)."""
    store.git("config", "--remove-section", f"{SETTINGS}.{name}")
    startcache.forget_all(store.path)
