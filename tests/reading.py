"""Reading a repo's mail the way production does (actions.inbox, the delivery policy's INBOX moment), for tests
that only care what a read shows and hands over."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import NamedTuple

from gitmail import actions
from gitmail.store.repository import Store
from gitmail.values.mail import Entry
from gitmail.values.names import RepoName
from gitmail.workspace import Actor


class Read(NamedTuple):
    directed: Sequence[Entry]  # every pending directed message, oldest first
    broadcasts: Sequence[Entry]  # the broadcasts this read handed over (with peek: those it would)
    claimed_by: str | None  # another path that uses the repo's name, when there is one
    text: str | None  # the framing


def inbox(
    box: Store, *, repo: str, peek: bool = False, path: str | os.PathLike[str] | None = None, host: str = "api"
) -> Read:
    actor = Actor(RepoName.parse(repo), os.fspath(path) if path is not None else None, host)
    shown = actions.inbox(box, actor, peek=peek)
    return Read(shown.shown.directed, shown.shown.broadcasts, shown.mail.claimed_by, shown.text)
