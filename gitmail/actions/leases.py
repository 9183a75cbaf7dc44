"""Leases: taking a lease on files of the caller's repository (for its session, or for the person at a terminal),
renewing and releasing it, and listing who holds what. Paths are read as the caller gave them (relative to where
it works, or to the repository's top) and kept relative to the top, which every worktree of the repository shares;
nothing outside the repository can be leased."""

from __future__ import annotations

import os
import time
from pathlib import Path

from gitmail import guarding, render
from gitmail.actions.written import after_writing
from gitmail.errors import GitmailError, UsageError
from gitmail.mailbox import leasing
from gitmail.store import machines
from gitmail.values import lease as leases
from gitmail.values.names import RepoName
from gitmail.values.phrase import Phrase
from gitmail.workspace import Actor, current_directory

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any, NamedTuple

    from gitmail.store.repository import Store
    from gitmail.values.lease import Lease, Standing
else:
    from gitmail.values.tuples import NamedTuple


class LeaseView(NamedTuple):
    """A lease as people and clients are shown it."""

    lease: Lease
    holder: str  # the holder's address (`api#front`), or how the person is named
    name: str  # the holding session's chosen name ("" when none, or for the person)
    card: str  # its card
    here: bool  # taken on this machine


class Leased(NamedTuple):
    taken: Lease | None  # the new lease (None when every path asked for was the caller's already)
    renewed: tuple[Lease, ...] = ()  # the caller's own leases on paths asked for again, renewed


def holder_of(actor: Actor) -> str:
    """Who a lease is for: the calling session, or (outside one) "", the person at the terminal."""
    return actor.session.key if actor.session is not None else ""


def lease(
    box: Store,
    actor: Actor,
    paths: Sequence[str],
    *,
    duration: str | None = None,
    shared: bool = False,
    note: str | None = None,
    base: str | os.PathLike[str] | None = None,
) -> Leased:
    """Take a lease on these paths or globs of the actor's repository (`base`: the directory relative paths are
    read from, default the current one). Refused (exit 1) where another holder's lease stands; never takes one
    over."""
    top = _top(actor)
    if not paths:
        raise UsageError(Phrase("name the files to lease ({paths})"))
    seconds = leases.duration(duration) if duration is not None else leases.DEFAULT_FOR
    patterns = [_pattern(top, given, base) for given in paths]
    if leases.WHOLE in patterns and not shared:
        raise UsageError(Phrase("the whole repository ('**') can only be leased {shared}: others must go on working"))
    for pattern in patterns:
        if leases.is_glob(pattern) and not _matches_any(top, pattern):
            raise UsageError(
                f"{render.quote(pattern)} matches no file of the repository; lease files by name to claim ones not "
                "made yet"
            )
    box.create()
    holder, handle = holder_of(actor), _handle(box, actor)
    try:
        taken = leasing.take(
            box, repo=actor.repo, holder=holder, handle=handle, paths=list(dict.fromkeys(patterns)),
            mode=leases.SHARED if shared else leases.EXCLUSIVE, duration=seconds,
            note=leases.clean_note(note or ""), folded=_folded(top),
        )  # fmt: skip
    except leasing.Refused as refused:
        raise GitmailError(render.lease_refusal(refused.wanted, refused.standing)) from None
    after_writing(box, actor, arrived=())
    return Leased(taken.lease, taken.renewed)


def renew(box: Store, actor: Actor) -> list[Lease]:
    """Renew every lease the caller holds in its repository, each for its own duration from now."""
    if not box.exists():
        return []
    renewed = leasing.renew(box, repo=actor.repo, holder=holder_of(actor))
    after_writing(box, actor, arrived=())
    return renewed


def release(
    box: Store, actor: Actor, paths: Sequence[str] = (), *, base: str | os.PathLike[str] | None = None
) -> list[Lease]:
    """End the caller's leases (on these paths only, when given). Asking to release a path the caller holds no
    lease on is an error naming who does, if anyone: nothing is said to be released that was not."""
    if not box.exists():
        if paths:
            raise GitmailError(f"you hold no lease on {render.quote(paths[0])}")
        return []
    wanted = [_pattern(_top(actor), given, base) for given in paths] if paths else None
    holder = holder_of(actor)
    if wanted is not None:
        running = [s.lease for s in leasing.standing(box, actor.repo) if s.held]
        held = {p for lease in running if lease.holder == holder for p in lease.paths}
        for pattern in wanted:
            if pattern not in held:
                owner = next((lease for lease in running if pattern in lease.paths), None)
                whose = f" (it is {render.quote(render.lease_holder(owner))}'s)" if owner is not None else ""
                raise GitmailError(f"you hold no lease on {render.quote(pattern)}{whose}")
    released = leasing.release(box, repo=actor.repo, holder=holder, paths=wanted)
    if holder:
        from gitmail.store import lease_refs

        still = [s.lease for s in leasing.standing(box, actor.repo) if s.held and s.lease.holder == holder]
        gone = [lease.id for lease in released if lease.id not in {kept.id for kept in still}]
        lease_refs.told(box, holder, gone, still=still)
    after_writing(box, actor, arrived=())
    return released


def standing(box: Store, repo: RepoName) -> list[LeaseView]:
    """The leases in force in a repository, oldest first."""
    if not box.exists():
        return []
    from gitmail.actions.addressing import session_of

    here = machines.local_id(box)
    views = []
    for state in leasing.standing(box, repo):
        if not state.held:
            continue
        found = session_of(box, state.lease.holder) if state.lease.holder else None
        views.append(
            LeaseView(
                state.lease,
                found.address if found is not None else render.lease_holder(state.lease),
                found.info.name if found is not None else "",
                found.info.card if found is not None else "",
                state.lease.machine is None or state.lease.machine.id == here,
            )
        )
    return views


def everywhere(box: Store) -> list[LeaseView]:
    """The leases in force in every repository of the mailbox."""
    from gitmail.store import lease_refs

    return [view for repo in lease_refs.repos(box) for view in standing(box, repo)]


def lapsed(box: Store, repo: RepoName, holder: str) -> list[Standing]:
    """The holder's stored leases that no longer stand (expired, ended with its session, displaced)."""
    return [s for s in leasing.standing(box, repo) if not s.held and s.lease.holder == holder]


# -- paths ---------------------------------------------------------------------------------------------------------


def _top(actor: Actor) -> Path:
    top = actor.place.top if actor.place is not None else actor.here
    if top is None:
        raise UsageError("a lease is taken on files of a git repository: run it inside one")
    return Path(top)


def _pattern(top: Path, given: str, base: str | os.PathLike[str] | None) -> str:
    """A path or glob as the caller gave it, relative to the repository's top; a usage error for one that leads
    outside it (`..`, an absolute path elsewhere, a symbolic link out)."""
    if "\0" in given or "\n" in given or "\r" in given:
        raise UsageError(f"{given!r} holds a line break or NUL: name files by their paths")
    real_top = os.path.realpath(top)
    start = os.path.realpath(os.fspath(base) if base is not None else current_directory())
    joined = given if os.path.isabs(given) else os.path.join(start, given)
    relative = leases.under(real_top, os.path.normpath(joined))
    if relative is None:
        relative = leases.under(os.path.normpath(os.fspath(top)), os.path.normpath(joined))
    if relative is None:
        raise UsageError(f"{given!r} is outside the repository at {top}")
    if not relative:  # the top itself: everything in it
        return leases.WHOLE
    folder = given.endswith("/") or (not leases.is_glob(relative) and os.path.isdir(os.path.join(real_top, relative)))
    pattern = leases.normal(relative + ("/" if folder else ""))
    fixed = pattern.split("*", 1)[0].split("?", 1)[0].rstrip("/")
    resolved = os.path.realpath(os.path.join(real_top, fixed)) if fixed else real_top
    if leases.under(real_top, resolved) is None:
        raise UsageError(f"{given!r} leads outside the repository through a symbolic link")
    return pattern


def _matches_any(top: Path, pattern: str) -> bool:
    """Whether a glob covers any file of the work tree (tracked, or untracked and not ignored)."""
    import subprocess

    try:
        listed = subprocess.run(
            ["git", "-C", str(top), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True, timeout=30, check=True, env=_git_env(),
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return True  # git cannot say: let the lease be taken rather than refuse it for nothing
    folded = _folded(top)
    return any(leases.matches(pattern, name, folded=folded) for name in listed.decode(errors="replace").split("\0"))


def _folded(top: Path) -> bool:
    """Whether the repository's file system ignores case (git records it in its config: core.ignorecase)."""
    from gitmail.workspace import place

    return guarding.folded(place(top))


def _git_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}


def _handle(box: Store, actor: Actor) -> str:
    """How the holder is addressed: the session's address, or "" for the person."""
    if actor.session is None:
        return ""
    from gitmail.actions.addressing import this_session

    return this_session(box, actor, wake=False).address


def before_edit(box: Store, actor: Actor, tool: str, arguments: Mapping[str, Any], cwd: str) -> guarding.Verdict:
    """Whether a session's tool call may write what it names (guarding.py decides). A repository whose lease
    index hook.sh has not been given yet gets one, so that its next edits start no Python."""
    from gitmail.store import lease_refs

    if box.exists() and not Path(lease_refs.index_path(box, actor.repo)).exists():
        lease_refs.write_index(box, actor.repo, [s.lease for s in leasing.standing(box, actor.repo) if s.held])
    return guarding.before_edit(box, actor, tool, arguments, cwd)


def before_commit(box: Store, actor: Actor, staged: Sequence[str]) -> guarding.CommitVerdict:
    """Whether a commit of these staged paths may go on (guarding.py decides). The lease index guard.sh reads is
    written when there is none, and rewritten when it lists a lease that no longer stands, so that the next commit
    where nobody else holds a lease starts no Python."""
    from gitmail.store import lease_refs

    if box.exists():
        states = leasing.standing(box, actor.repo)
        if not Path(lease_refs.index_path(box, actor.repo)).exists() or not all(s.held for s in states):
            lease_refs.write_index(box, actor.repo, [s.lease for s in states if s.held])
    return guarding.before_commit(box, actor, staged)


def keep_up(box: Store, actor: Actor) -> str | None:
    """At a session's own moment: renew its leases that are past half their time, and tell it, in gitmail's words,
    of any of its leases that ended without it (expired, ended with its session, displaced by an earlier one from
    another machine): which files, since when, and who holds them now. None when there is nothing to say."""
    if actor.session is None or not box.exists():
        return None
    from gitmail.store import lease_refs

    holder = actor.session.key
    found = lease_refs.tracked(box, holder)
    if found is None:
        return None
    try:
        repo = RepoName.from_ref(found[0])
    except UsageError:
        return None
    states = leasing.standing(box, repo)
    mine = [s.lease for s in states if s.held and s.lease.holder == holder]
    now = time.time()
    if any(now >= lease.due() for lease in mine):
        mine = leasing.renew(box, repo=repo, holder=holder)
    gone = [i for i in found[1] if i not in {lease.id for lease in mine}]
    lines = []
    for lease_id in gone:
        ended = next((s for s in states if s.lease.id == lease_id and not s.held), None)
        record = (
            ended.lease._replace(ended=ended.why) if ended is not None else lease_refs.ended_record(box, repo, lease_id)
        )
        if record is None or record.ended == leases.RELEASED:
            continue
        lines.append(_lapse(record, ended.by if ended is not None else None, states))
    if any(not s.held for s in states):
        leasing.sweep(box, repo)
    lease_refs.told(box, holder, gone, still=mine)
    return "\n".join(lines) + "\n" if lines else None


def _lapse(record: Lease, by: Lease | None, states: Sequence[Standing]) -> str:
    """One line telling a holder its lease ended without it."""
    why = {
        leases.EXPIRED: f"it ran out at {render.until(record.expires)} without being renewed",
        leases.SESSION_ENDED: "your session was found to have ended",
        leases.DISPLACED: "an earlier lease on the same files, taken on another machine while the two were apart, "
        "stands",
    }.get(record.ended, f"it ended ({record.ended})")
    now_held = [
        s.lease
        for s in states
        if s.held and s.lease.id != record.id and any(leases.overlap(p, q) for p in record.paths for q in s.lease.paths)
    ]
    holder = by or (now_held[0] if now_held else None)
    after = f"now held by {render.quote(render.lease_holder(holder))}" if holder else "nobody holds them now"
    paths = ", ".join(render.quote(p) for p in record.paths)
    return f"gitmail: your lease on {paths} ended: {why}; {after} (`gitmail lease` takes it again where it is free)."


def end_with_session(box: Store, repo: RepoName, holder: str) -> None:
    """A session ended: its leases in its repository end too (it is not told: it is gone)."""
    from gitmail.store import lease_refs

    found = lease_refs.tracked(box, holder)
    if found is None:
        return
    ended = leasing.release(box, repo=repo, holder=holder, why=leases.SESSION_ENDED)
    lease_refs.told(box, holder, [*found[1], *(lease.id for lease in ended)])
