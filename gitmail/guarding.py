"""The lease policy where files are written: whether a session's tool call may write the files it names, and whether a
commit may take the staged files, given the leases of its repository. One place decides, for both hosts' PreToolUse
hooks and the git pre-commit guard alike:

- A file under another holder's exclusive lease: the edit is denied, the reason naming the file, the holder's address
  and card, when the lease ends and how to ask; a session's commit is refused the same way. A person's own commit
  (no session) is let through with a warning: leases keep sessions off each other's files, never in a person's way.
- A file under another holder's shared lease: allowed, with one line naming the holder.
- The holder's own files, and files under no lease: nothing to say.
- A shell command that cannot be read is allowed (the commit guard sees what it wrote).
"""

from __future__ import annotations

import os

from gitmail import render
from gitmail.mailbox import leasing
from gitmail.store import gitconfig, machines, sessions
from gitmail.values import edits
from gitmail.values import lease as leases

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any, NamedTuple

    from gitmail.store.repository import Store
    from gitmail.values.lease import Lease
    from gitmail.workspace import Actor, Place
else:
    from gitmail.values.tuples import NamedTuple


class Verdict(NamedTuple):
    deny: str | None = None  # why the write is refused; None: it may go on
    told: str | None = None  # one line for the writer: a shared lease of another holder covers what it writes


ALLOWED = Verdict()


def before_edit(store: Store, actor: Actor, tool: str, arguments: Mapping[str, Any], cwd: str) -> Verdict:
    """For a tool call a session is about to make: whether what it writes is another holder's."""
    if actor.place is None or not store.exists():
        return ALLOWED
    written = edits.of(tool, arguments)
    if not written.paths:
        return ALLOWED
    relative = [p for p in (_relative(str(actor.place.top), cwd, path) for path in written.paths) if p is not None]
    return _verdict(store, actor, relative, what="edit")


class CommitVerdict(NamedTuple):
    refused: str | None  # one line: why a session's commit may not go on
    warned: str | None  # one line: a person's commit touches another holder's lease


def before_commit(store: Store, actor: Actor, staged: Sequence[str]) -> CommitVerdict:
    """For a commit of these staged paths (relative to the top): whether another holder's exclusive lease covers
    any; a session's commit is refused, a person's warned."""
    if not store.exists():
        return CommitVerdict(None, None)
    verdict = _verdict(store, actor, list(staged), what="commit", every=True)
    if verdict.deny is None:
        return CommitVerdict(None, None)
    if actor.session is None:
        return CommitVerdict(None, verdict.deny)
    return CommitVerdict(verdict.deny, None)


def _verdict(store: Store, actor: Actor, paths: Sequence[str], *, what: str, every: bool = False) -> Verdict:
    """What another holder's leases say of writing these paths: the first denial (`every`: one line for each path
    denied), or else one line naming the shared leases' holders."""
    if not paths:
        return ALLOWED
    case_free = folded(actor.place)
    me = actor.session.key if actor.session is not None else ""
    here = machines.local_id(store)
    others = [
        s.lease
        for s in leasing.standing(store, actor.repo)
        if s.held and not (s.lease.holder == me and (s.lease.machine is None or s.lease.machine.id == here))
    ]
    told, denied = [], []
    for path in paths:
        for lease in others:
            if not any(leases.overlap(pattern, path, folded=case_free) for pattern in lease.paths):
                continue
            if lease.exclusive:
                denied.append(render.lease_refusal(path, lease, card=_card(store, lease)))
                break
            told.append(f"{render.quote(path)} is leased shared by {render.quote(render.lease_holder(lease))}")
        if denied and not every:
            break
    if denied:
        return Verdict(deny="\n".join(denied))
    if not told:
        return ALLOWED
    return Verdict(told="gitmail: " + "; ".join(dict.fromkeys(told)) + f" (your {what} goes on; tell them).")


def _relative(top: str, cwd: str, path: str) -> str | None:
    """A path a tool call names, relative to the work tree's top (symbolic links followed); None outside it."""
    joined = path if os.path.isabs(path) else os.path.join(cwd, path)
    real_top = os.path.realpath(top)
    for candidate in (os.path.realpath(joined), os.path.normpath(joined)):
        for base in (real_top, os.path.normpath(top)):
            found = leases.under(base, candidate)
            if found:
                return found
    return None


def folded(where: Place | None) -> bool:
    """Whether a repository's file system ignores case, as git recorded when it made the repository."""
    found = gitconfig.load(where.config) if where is not None else None
    return found is not None and found.flag("core.ignorecase", False)


def _card(store: Store, lease: Lease) -> str:
    host, _, session_id = lease.holder.partition(":")
    info = sessions.info(store.path, host, session_id) if session_id else None
    return info.card if info is not None else ""
