"""The files hook.sh shares with Python, and their one-line formats: the one definition of that small protocol.
hook.sh reads and writes them with shell built-ins alone (it must decide, without starting Python, whether anything
is new for a session); the tests check its copy against this one.

Inside the mailbox's own folder (`gitmail/`):

| file | line |
|---|---|
| stamps/<repo ref>, stamps/_broadcast | the id of the latest message written for that repo (all repos' broadcasts) |
| stamps/_claims | changes when which repository uses which name changes |
| sessions/<host>-<session>.stamps | `stamps_line` as the session last saw it |
| sessions/<host>-<session>.turn | "busy" from a prompt or a tool call until the turn ends, else "idle" |
| sessions/<host>-<session>.json | the session's record (sessions.py); hook.sh copies a kept one in |
| cache/<host>-<repo ref>.key | `kept_key`: the key a kept session-start answer was made under |
| cache/<host>-<repo ref>.record, .out | the session record and the answer to use when the key matches |
| cache/<host>-<repo ref>.due | when an automatic sync is due (its modification time) |

A repo's ref is its name as refs spell it (`RepoName.ref`); hook.sh spells the names made of ASCII letters,
digits, '.', '-' and '_' itself and leaves every other name to Python. A session id gitmail uses as a file name is
made of `SESSION_CHARS` only.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from gitmail.store.location import OWN_DIR

STAMPS = "stamps"
SESSIONS = "sessions"
CACHE = "cache"
BROADCAST_STAMP = "_broadcast"  # '_' names are reserved, so no repo has this one
CLAIMS_STAMP = "_claims"
BUSY, IDLE = "busy", "idle"
SESSION_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
MAX_SESSION_ID = 128


def folder(mailbox: Path, name: str) -> Path:
    return mailbox / OWN_DIR / name


def stamp_file(mailbox: Path, ref: str | None) -> Path:
    """The stamp of a repo's directed mail (by its ref spelling), or (None) of the broadcasts."""
    return folder(mailbox, STAMPS) / (BROADCAST_STAMP if ref is None else ref)


def claims_stamp(mailbox: Path) -> Path:
    return folder(mailbox, STAMPS) / CLAIMS_STAMP


def stamps_line(ref: str, mine: str, everyone: str) -> str:
    """What a session compares: the repo it is in, its stamp and the broadcasts' stamp. Naming the repo keeps a
    session that changed directory from comparing another repository's stamps with its own."""
    return f"{ref}:{mine}:{everyone}"


def session_key(host: str, session_id: str) -> str | None:
    """The file name stem of a session's files; None for an id gitmail will not use as one."""
    if (
        not session_id
        or len(session_id) > MAX_SESSION_ID
        or not set(session_id) <= SESSION_CHARS
        or not set(host) <= SESSION_CHARS
    ):
        return None
    return f"{host}-{session_id}"


class SessionFiles(NamedTuple):
    record: Path  # .json
    stamps: Path  # .stamps
    turn: Path  # .turn


def session_files(mailbox: Path, stem: str) -> SessionFiles:
    base = folder(mailbox, SESSIONS) / stem
    return SessionFiles(
        base.with_name(f"{stem}.json"), base.with_name(f"{stem}.stamps"), base.with_name(f"{stem}.turn")
    )


class Kept(NamedTuple):
    key: Path
    record: Path
    answer: Path
    due: Path


def kept(mailbox: Path, host: str, ref: str) -> Kept:
    where = folder(mailbox, CACHE)
    return Kept(*(where / f"{host}-{ref}.{suffix}" for suffix in ("key", "record", "out", "due")))


def kept_key(stamps: str, claims: str, *, watch: bool) -> str:
    """`ref:stamp:stamp:claims:GITMAIL_WAKE:watch:PATH`, as hook.sh computes it: the answer depends on the mail,
    the names, the wake switch, whether the session start watches for wakes, and PATH (which decides the command
    the framing hands out)."""
    wake = os.environ.get("GITMAIL_WAKE", "")
    return f"{stamps}:{claims}:{wake}:{'watch' if watch else ''}:{os.environ.get('PATH', '')}"
