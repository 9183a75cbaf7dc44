"""The files hook.sh shares with Python, and their one-line formats: the one definition of that small protocol.
hook.sh reads and writes them with shell built-ins alone (it must decide, without starting Python, whether anything
is new for a session); the tests check its copy against this one.

Inside the mailbox's own folder (`gitmail/`):

| file | line |
|---|---|
| stamps/<repo ref>, stamps/_broadcast | the id of the latest message written for that repo (all repos' broadcasts) |
| stamps/_claims | changes when which repository uses which name changes |
| sessions/<host>-<session>.stamps | `quiet_line`: the stamps the session last saw, and when nothing is to be done |
| sessions/<host>-<session>.top | the work tree the session's repository was found for (its top folder) |
| sessions/<host>-<session>.turn | the last moment a hook of the session saw (`in_turn` says what it means) |
| sessions/<host>-<session>.live | `pid ticks`: the host process and its start time (written at session start) |
| sessions/<host>-<session>.json | the session's record (sessions.py); hook.sh copies a kept one in |
| cache/<host>-<work tree>.key | `kept_key`; the repository's config file; the `quiet_line` of the session it answers |
| cache/<host>-<work tree>.record, .out | the session record and the answer to use when the key matches |
| cache/<host>-<work tree>.due | when the kept answer stops holding (a sync due, a lease ending): its mtime |
| cache/<host>-<work tree>.recording | the repo's ref, then ids whose first showing's receipts are still to write |

hook.sh decides nothing itself: Python writes what it compares (the quiet line, the kept answer and its key), and
all hook.sh writes is what it saw (the moment, the host process) and copies of what Python kept. hook.sh never
names a repository itself: Python does (a worktree's name is its repository's, gitmail.name may
choose another), and the stamps line it writes starts with the repo's ref (`RepoName.ref`), which hook.sh reads back
when the session is still in the work tree `.top` names. Kept answers are filed under their work tree's path,
spelled by `tree_name` (hook.sh spells it the same way, and leaves any other path to Python). A session id gitmail
uses as a file name is made of `SESSION_CHARS` only.
"""

from __future__ import annotations

import os

from gitmail.store.location import OWN_DIR

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import NamedTuple

    from _typeshed import StrPath
else:
    from gitmail.values.tuples import NamedTuple

STAMPS = "stamps"
SESSIONS = "sessions"
CACHE = "cache"
BROADCAST_STAMP = "_broadcast"  # '_' names are reserved, so no repo has this one
CLAIMS_STAMP = "_claims"
UNNOTED = "wake"  # the one moment hook.sh does not note in .turn: a wake is gitmail's, not the session's doing
TURN = frozenset({"tool", "prompt"})  # last seen, one of these: the session is in a turn (until its end, or a start)
SESSION_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
MAX_SESSION_ID = 128


def folder(mailbox: StrPath, name: str) -> str:
    return os.path.join(mailbox, OWN_DIR, name)


def stamp_file(mailbox: StrPath, ref: str | None) -> str:
    """The stamp of a repo's directed mail (by its ref spelling), or (None) of the broadcasts."""
    return os.path.join(folder(mailbox, STAMPS), BROADCAST_STAMP if ref is None else ref)


def claims_stamp(mailbox: StrPath) -> str:
    return os.path.join(folder(mailbox, STAMPS), CLAIMS_STAMP)


def stamps_line(ref: str, mine: str, everyone: str) -> str:
    """What a session compares: the repo it is in, its stamp and the broadcasts' stamp. Naming the repo keeps a
    session that changed directory from comparing another repository's stamps with its own."""
    return f"{ref}:{mine}:{everyone}"


def in_turn(last_moment: str) -> bool:
    """Whether a session whose hooks last saw this moment is in a turn."""
    return last_moment in TURN


def quiet_line(stamps: str, moments: Iterable[str]) -> str:
    """`stamps moment moment ...`: while a session's stamps read `stamps`, its hooks at these moments have nothing
    to do, and hook.sh starts no Python."""
    return " ".join([stamps, *moments])


def seen_stamps(line: str) -> str:
    """The stamps of a quiet line."""
    return line.partition(" ")[0]


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
    record: str  # .json
    stamps: str  # .stamps
    turn: str  # .turn
    top: str  # .top
    live: str  # .live


def session_files(mailbox: StrPath, stem: str) -> SessionFiles:
    where = folder(mailbox, SESSIONS)
    return SessionFiles(
        *(os.path.join(where, f"{stem}.{suffix}") for suffix in ("json", "stamps", "turn", "top", "live"))
    )


_TREE_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def tree_name(top: str) -> str | None:
    """A work tree's path as a file name: '/' as %2F, letters, digits, '.', '-' and '_' as they are; None for a
    path with any other character (hook.sh leaves those to Python)."""
    if not set(top) <= _TREE_CHARS | {"/"}:
        return None
    return top.replace("/", "%2F")


class Kept(NamedTuple):
    key: str
    record: str
    answer: str
    due: str
    recording: str  # the repository's ref, then the ids whose receipts the answer leaves to write


def kept(mailbox: StrPath, host: str, tree: str) -> Kept:
    """The kept answer's files for a work tree (by `tree_name`)."""
    where = folder(mailbox, CACHE)
    return Kept(
        *(os.path.join(where, f"{host}-{tree}.{suffix}") for suffix in ("key", "record", "out", "due", "recording"))
    )


def kept_key(stamps: str, claims: str, *, watch: bool) -> str:
    """`ref:stamp:stamp:claims:GITMAIL_WAKE:watch:PATH`, as hook.sh computes it: the answer depends on the mail,
    the names, the wake switch, whether the session start watches for wakes, and PATH (which decides the command
    the framing hands out)."""
    wake = os.environ.get("GITMAIL_WAKE", "")
    return f"{stamps}:{claims}:{wake}:{'watch' if watch else ''}:{os.environ.get('PATH', '')}"


def renewal_path(mailbox: StrPath, holder: str) -> str | None:
    """A session's `.renew` (store/lease_refs.py writes it): when its leases are next renewed, and which they are."""
    host, _, session_id = holder.partition(":")
    stem = session_key(host, session_id) if session_id else None
    return os.path.join(folder(mailbox, SESSIONS), f"{stem}.renew") if stem else None


def tracked_leases(mailbox: StrPath, holder: str) -> tuple[str, list[str]] | None:
    """The repository (its ref) and the leases a session's `.renew` lists; None without one (a session holding no
    lease: nothing about leases need be loaded)."""
    path = renewal_path(mailbox, holder)
    return listed_leases(path) if path is not None else None


def listed_leases(path: str) -> tuple[str, list[str]] | None:
    """What a `.renew` file lists: its repository's ref, then lease ids; None when it cannot be read or is empty."""
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            lines = [line.strip() for line in handle.read(64 * 1024).splitlines() if line.strip()]
    except OSError:
        return None
    return (lines[0], [line for line in lines[1:] if line.isalnum()]) if lines else None
