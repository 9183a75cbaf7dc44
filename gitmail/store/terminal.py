"""What the person was shown whole at a terminal: `gitmail inbox` run with no session, in a repository (or the
person's own inbox), records the ids it printed whole, one file per repo (`gitmail/terminal/<repo ref>`, one id a
line). `gitmail done --all` outside a session may then archive exactly those. Each reading replaces the last: the
inbox at a terminal prints everything pending, so the latest reading is what the person saw. A lost or garbled file
only means `done --all` leaves mail pending, never that it archives mail unseen."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from gitmail.store.files import write_atomically
from gitmail.store.location import OWN_DIR
from gitmail.values.ids import ID_PATTERN
from gitmail.values.names import RepoName

FOLDER = "terminal"


def _path(mailbox: Path, repo: RepoName) -> Path:
    return mailbox / OWN_DIR / FOLDER / repo.ref


def saw(mailbox: Path, repo: RepoName, ids: Iterable[str]) -> None:
    """The person was shown these messages of `repo` whole at a terminal (and nothing else of it since)."""
    path = _path(mailbox, repo)
    path.parent.mkdir(mode=0o700, exist_ok=True)
    write_atomically(path, "".join(f"{i}\n" for i in sorted(set(ids))).encode(), durable=False)


def shown(mailbox: Path, repo: RepoName) -> set[str]:
    """What the person was last shown whole of `repo` at a terminal."""
    try:
        text = _path(mailbox, repo).read_text(errors="replace")
    except OSError:
        return set()
    return {line for line in text.splitlines() if ID_PATTERN.fullmatch(line)}
