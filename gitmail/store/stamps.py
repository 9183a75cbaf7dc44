"""Change stamps: one small file per repo (and one for broadcasts) that every new message for it rewrites.

A hook that fires on every tool call must know, without starting Python, whether anything arrived for its
repository since its session last looked. The stamp is that signal: hook.sh compares it with the stamps the session
last saw, using shell built-ins only (hookfiles.py defines the files and lines). A stamp holds the id of the latest
message written for that name; it is rewritten in place (not replaced by rename) so that a file watcher on it sees
a change. Stamps are hints, never the record: a stamp that is lost or garbled only costs one Python run that finds
nothing new.
"""

from __future__ import annotations

import os
import time

from gitmail.store import hookfiles
from gitmail.store.files import make_dir, read_line, write_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from _typeshed import StrPath

    from gitmail.values.names import RepoName


def directory(mailbox: StrPath) -> str:
    return hookfiles.folder(mailbox, hookfiles.STAMPS)


def path(mailbox: StrPath, repo: RepoName | None) -> str:
    """The stamp of a repo's directed mail, or (None) of broadcasts."""
    return hookfiles.stamp_file(mailbox, None if repo is None else repo.ref)


def fresh() -> str:
    """A stamp no earlier one held, for a change that is not a new message."""
    return f"{time.time_ns():x}"


def bump(mailbox: StrPath, names: Iterable[RepoName | None], value: str | None = None) -> None:
    """Mark a change in what these repos have pending (None: the broadcasts), with the new message's id or else a
    fresh value. Never fails the write it follows."""
    try:
        make_dir(directory(mailbox))
        for name in names:
            write_line(path(mailbox, name), value or fresh())
    except OSError:
        pass


def bump_claims(mailbox: StrPath) -> None:
    """Which repository uses which name changed: trust labels may read differently now."""
    try:
        make_dir(directory(mailbox))
        write_line(hookfiles.claims_stamp(mailbox), fresh())
    except OSError:
        pass


def read(mailbox: StrPath, repo: RepoName) -> str:
    """The line a session compares (`hookfiles.stamps_line`)."""
    return read_ref(mailbox, repo.ref)


def read_ref(mailbox: StrPath, ref: str) -> str:
    """`read`, for the repo its ref spelling names (as a kept answer's key begins)."""
    mine, everyone = (read_line(hookfiles.stamp_file(mailbox, name)) for name in (ref, None))
    return hookfiles.stamps_line(ref, mine, everyone)


def claims(mailbox: StrPath) -> str:
    return read_line(hookfiles.claims_stamp(mailbox))


def ensure(mailbox: StrPath, repo: RepoName) -> list[str]:
    """Both stamp files, created empty if missing (a file watcher needs something to watch)."""
    files = [path(mailbox, repo), path(mailbox, None)]
    try:
        make_dir(directory(mailbox))
        for file in files:
            if not os.path.exists(file):
                os.close(os.open(file, os.O_WRONLY | os.O_CREAT, 0o600))
    except OSError:
        return []
    return files
