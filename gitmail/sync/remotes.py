"""Sync remotes: their settings in the mailbox's config, the URLs gitmail accepts, and the names of what sync keeps
on a remote and here.

On a remote, refs/gitmail-sync/state holds every message's state and (through its parents) every message commit,
and refs/gitmail-sync/notes/gitmail-seen, …/gitmail-receipts and …/gitmail-keys gitmail's notes refs
(refs/notes/gitmail-seen, refs/notes/gitmail-receipts, refs/notes/gitmail-keys: the machines' public keys), and
refs/gitmail-sync/leases the leases each machine holds (leasestate.py): those five (quick.SYNCED) and nothing else a
remote holds are listed, fetched or pushed. Here, refs/gitmail-remotes/
<remote>/… hold what that remote held when last fetched or pushed: in gitmail/sync/fetch.git, where sync fetches,
and mirrored into the mailbox.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from gitmail.errors import GitmailError, UsageError
from gitmail.store import gitconfig, startcache
from gitmail.values.patterns import spelled

if TYPE_CHECKING:
    from gitmail.store.repository import Store

REMOTE_ROOT = "refs/gitmail-sync/"  # on the remote
STATE = "state"
NOTES = "notes/"
TRACKING_ROOT = "refs/gitmail-remotes/"  # here: what each remote held when last fetched or pushed
NOTES_ROOT = "refs/notes/"
FORMAT_PATH = "gitmail-sync"  # a file in the state's tree: what it is and which format
FORMAT_TEXT = "gitmail sync state\nformat: 1\n"
SETTINGS = "gitmail-remote"  # [gitmail-remote "<name>"] url, auto, interval in the mailbox's config
DEFAULT_INTERVAL = 300  # seconds between automatic syncs
_NAME = spelled("A-Za-z0-9_-", 1, 63, first="A-Za-z0-9")


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
    """Why a URL cannot be a sync remote; None when it can. Credentials in a URL are refused in every spelling git
    would pass on (a password, a percent-encoded one, a token as the user name, a token in a query or fragment):
    git would store them in plain text in the mailbox's config and show them in messages. So are the transports
    that run a command or talk through file descriptors (`ext::`, `fd::`)."""
    from urllib.parse import unquote, urlsplit

    if not url or url != url.strip() or any(ord(c) < 32 or ord(c) == 127 for c in url):
        return "it is empty or holds spaces or control characters at its ends"
    if url.startswith("-"):
        return "it starts with '-'"
    for marker in ("::", "://"):
        transport, found, _ = url.partition(marker)
        if found and transport.lower() in _COMMAND_TRANSPORTS:
            return (
                f"it uses git's {transport.lower()} transport, which runs commands or opens files on this machine; "
                "use a path, ssh or https"
            )
    if "://" in url:
        try:
            parts = urlsplit(url)
            user, password = parts.username, parts.password
        except ValueError as error:
            return f"it does not parse ({error})"
        if password is not None or (user is not None and ":" in unquote(user)):
            return "it embeds a password in plain text; use ssh keys or a git credential helper instead"
        if parts.query or parts.fragment or "?" in url or "#" in url:
            return (
                "it holds a query (?...) or a fragment (#...), where access tokens are passed; a git remote needs "
                "neither (use a git credential helper instead)"
            )
        if user and _token_like(unquote(user)):
            return _TOKEN_PROBLEM
    else:
        user = _scp_user(url)
        if user is not None and ":" in unquote(user):
            return "it embeds a password in plain text; use ssh keys or a git credential helper instead"
        if user is not None and _token_like(unquote(user)):
            return _TOKEN_PROBLEM
    return None


_COMMAND_TRANSPORTS = ("ext", "fd")
_TOKEN_PROBLEM = "it embeds an access token in plain text; use a git credential helper instead"
_TOKEN_PREFIXES = tuple(  # GitHub, GitLab, Bitbucket, Atlassian, Hugging Face, OpenAI, Slack, JWT, npm, PyPI
    "ghp_ gho_ ghu_ ghs_ ghr_ github_pat_ glpat- gloas- glrt- glptt- gldt- glft- glsoat- atbb atatt hf_ sk- xox eyj "
    "npm_ pypi-".split()
)
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _token_like(user: str) -> bool:
    """Whether a URL's user name is an access token rather than a name: a known token's prefix, or a long run
    of letters and digits as tokens are written (a name such as "git" or "me.myself" is neither)."""
    if user.lower().startswith(_TOKEN_PREFIXES):
        return True
    if not set(user) <= _TOKEN_CHARS or len(user) < 20:
        return False
    mixed = any(c.isupper() for c in user) and any(c.islower() for c in user) and any(c.isdigit() for c in user)
    return len(user) >= 32 or mixed


def _scp_user(url: str) -> str | None:
    """The user name of an scp-like URL (`user@host:path`, which git reaches over ssh); None for anything else."""
    colon, slash = url.find(":"), url.find("/")
    if colon < 0 or 0 <= slash < colon:
        return None  # a path
    user, at, _ = url[:colon].rpartition("@")
    return user if at else None


def redact(url: str) -> str:
    """The URL with what it must not show (a password, a token, a query, a fragment) replaced, for messages."""
    if not url_problem(url):
        return url
    if "://" in url:
        scheme, _, rest = url.partition("://")
        ends = [i for i in (rest.find(c) for c in "/?#") if i >= 0]
        authority, tail = (rest[: min(ends)], rest[min(ends) :]) if ends else (rest, "")
        if "@" in authority:
            authority = "***@" + authority.rpartition("@")[2]
        for mark in "?#":
            if mark in tail:
                tail = tail[: tail.index(mark)] + mark + "***"
        return f"{scheme}://{authority}{tail}"
    user = _scp_user(url)
    return "***@" + url[len(user) + 1 :] if user is not None else url


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
