"""What the person was shown whole at a terminal: `gitmail inbox` run with no session, in a repository (or the
person's own inbox), records the ids it printed whole, one file per repo (`gitmail/terminal/<repo ref>`, one id a
line). `gitmail done --all` outside a session may then archive exactly those. Each reading replaces the last: the
inbox at a terminal prints everything pending, so the latest reading is what the person saw. A lost or garbled file
only means `done --all` leaves mail pending, never that it archives mail unseen."""

from __future__ import annotations

import os

from gitmail.store.files import make_dir, read_text, write_atomically
from gitmail.store.location import OWN_DIR
from gitmail.values.ids import ID_PATTERN

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from _typeshed import StrPath

    from gitmail.values.names import RepoName

FOLDER = "terminal"


def _path(mailbox: StrPath, repo: RepoName) -> str:
    return os.path.join(mailbox, OWN_DIR, FOLDER, repo.ref)


def saw(mailbox: StrPath, repo: RepoName, ids: Iterable[str]) -> None:
    """The person was shown these messages of `repo` whole at a terminal (and nothing else of it since)."""
    path = _path(mailbox, repo)
    make_dir(os.path.dirname(path))
    write_atomically(path, "".join(f"{i}\n" for i in sorted(set(ids))).encode(), durable=False)


def shown(mailbox: StrPath, repo: RepoName) -> set[str]:
    """What the person was last shown whole of `repo` at a terminal."""
    text = read_text(_path(mailbox, repo))
    if text is None:
        return set()
    return {line for line in text.splitlines() if ID_PATTERN.fullmatch(line)}
