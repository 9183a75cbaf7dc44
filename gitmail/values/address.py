"""Addresses: a repository (`api`), or one session of it (`api#HANDLE`, where HANDLE is the session's chosen name,
its worktree's name, or a prefix of the host's id for it), or the person who runs the sessions (`@user`). Pure."""

from __future__ import annotations

from gitmail.errors import UsageError
from gitmail.values.names import PERSON, RepoName
from gitmail.values.patterns import spelled

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple
else:
    from gitmail.values.tuples import NamedTuple

HANDLE = spelled("A-Za-z0-9._-", 1, 128, first="A-Za-z0-9")
SESSION_ID = spelled("A-Za-z0-9_-", 1, 128)  # a session as messages record it: host:id, the host claude or codex


class Address(NamedTuple):
    repo: RepoName
    handle: str | None = None  # one session of the repo, or (None) the repo: every session of it

    def __str__(self) -> str:
        return f"{self.repo}#{self.handle}" if self.handle else str(self.repo)

    @classmethod
    def parse(cls, text: str) -> Address:
        """`api` or `api#handle`; a usage error for anything else."""
        repo, hash_sign, handle = text.partition("#")  # read one way only: no repo's name holds a "#"
        if not hash_sign:
            return cls(RepoName.parse(text))
        if RepoName.parse(repo).is_person:
            raise UsageError(f"{PERSON} is the person's address: it has no sessions to name (send to {PERSON})")
        if not HANDLE.fullmatch(handle):
            raise UsageError(
                f"invalid session handle {handle!r} in {text!r}: use a session's name, its worktree's name or the "
                "start of its id (letters, digits, '.', '_', '-')"
            )
        return cls(RepoName.parse(repo), handle)


def session_key(text: str) -> str | None:
    """`text` when it is a session as messages record it ("claude:5b0e8d1c-..."), else None."""
    host, colon, session = text.partition(":")
    return text if colon and host in ("claude", "codex") and SESSION_ID.fullmatch(session) else None
