"""Change stamps: one small file per repo (and one for broadcasts) that every new message for it rewrites.

A hook that fires on every tool call must know, without starting Python, whether anything arrived for its
repository since its session last looked. The stamp is that signal: `hooks/quiet` compares it with the stamps the
session last saw, using shell built-ins only. A stamp holds the id of the latest message written for that name;
it is rewritten in place (not replaced by rename) so that a file watcher on it sees a change. Stamps are hints,
never the record: a stamp that is lost or garbled only costs one Python run that finds nothing new.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from gitmail.identity import RepoName
from gitmail.layout import OWN_DIR

DIRECTORY = "stamps"
BROADCAST_STAMP = "_broadcast"  # '_' names are reserved, so no repo has this one
CLAIMS = RepoName("_claims")  # which repository uses which name changed (trust labels may read differently)


def directory(mailbox: Path) -> Path:
    return mailbox / OWN_DIR / DIRECTORY


def path(mailbox: Path, repo: RepoName | None) -> Path:
    """The stamp of a repo's directed mail, or (None) of broadcasts."""
    return directory(mailbox) / (BROADCAST_STAMP if repo is None else repo.ref)


def bump(mailbox: Path, names: Iterable[RepoName | None], value: str) -> None:
    """Mark a change in what these repos have pending (None: the broadcasts). Never fails the write it follows."""
    try:
        directory(mailbox).mkdir(mode=0o700, exist_ok=True)
        for name in names:
            with open(path(mailbox, name), "w", encoding="ascii") as handle:
                handle.write(value + "\n")
    except OSError:
        pass


def read(mailbox: Path, repo: RepoName) -> str:
    """What a session compares: the repo (as written in file names), its stamp and the broadcasts' stamp, as
    one line `ref:stamp:stamp` (empty where there is no stamp yet). Naming the repo keeps a session that changed
    directory from comparing another repository's stamps with its own."""
    return f"{repo.ref}:{_read(path(mailbox, repo))}:{_read(path(mailbox, None))}"


def claims(mailbox: Path) -> str:
    return _read(path(mailbox, CLAIMS))


def ensure(mailbox: Path, repo: RepoName) -> list[Path]:
    """Both stamp files, created empty if missing (a file watcher needs something to watch)."""
    files = [path(mailbox, repo), path(mailbox, None)]
    try:
        directory(mailbox).mkdir(mode=0o700, exist_ok=True)
        for file in files:
            if not file.exists():
                os.close(os.open(file, os.O_WRONLY | os.O_CREAT, 0o600))
    except OSError:
        return []
    return files


def _read(file: Path) -> str:
    try:
        with open(file, encoding="ascii", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return ""
