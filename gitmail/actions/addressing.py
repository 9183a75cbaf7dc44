"""Sessions as addresses: how each session of a repository is addressed (`repo#HANDLE`), which session a handle
names, who is here, the calling session, its name and card, and where a message sent `--to` an address goes."""

from __future__ import annotations

import os

from gitmail import mailbox, render
from gitmail.errors import GitmailError, UsageError
from gitmail.lazy import module
from gitmail.values.address import HANDLE, Address
from gitmail.values.message import clean_subject
from gitmail.values.names import RepoName, name_problem
from gitmail.values.patterns import spelled
from gitmail.values.phrase import Phrase
from gitmail.workspace import Actor, Session

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import NamedTuple

    from gitmail import codex, delivery, waking
    from gitmail.store import sessions
    from gitmail.store.repository import Store
    from gitmail.values.mail import Pending
    from gitmail.values.session_info import Info, SessionView
else:  # loaded at their first use: a send to a repository (the commonest) looks at no session
    from gitmail.values.tuples import NamedTuple

    codex, delivery, waking = module("gitmail.codex"), module("gitmail.delivery"), module("gitmail.waking")
    sessions = module("gitmail.store.sessions")

SESSION_NAME = spelled("A-Za-z0-9._-", 1, 40, first="A-Za-z0-9")
Places = dict[str, tuple[str | None, str | None]]  # work trees already looked at: (worktree name, branch)


def session_of(box: Store, key: str | None) -> SessionView | None:
    """The session a message names ("claude:5b0e..."), when this machine knows it."""
    found = Session.from_key(key) if key else None
    info = sessions.info(box.root, found.host, found.id) if found is not None else None
    return _repo_view(box, info) if info is not None else None


def _view(box: Store, info: Info, places: Places | None = None, *, wake: bool = True) -> SessionView:
    """How a session is shown; `places`: the work trees already looked at, shared by the sessions of one listing."""
    from gitmail.values.session_info import SessionView
    from gitmail.workspace import place

    info = codex.routed(box.root, info)
    places = {} if places is None else places
    if info.top not in places:
        where = place(info.top) if info.top and os.path.isdir(info.top) else None
        places[info.top] = (where.worktree, where.branch()) if where is not None else (None, None)
    worktree, branch = places[info.top]
    handle = info.name or worktree or info.id[:8]
    return SessionView(info, handle, worktree, branch, wakeable=wake and waking.wakeable(box, info))


def _answers(view: SessionView, handle: str) -> bool:
    """Whether a handle names this session, as `find_session` reads handles."""
    return handle in (view.info.name, view.worktree) or (len(handle) >= 4 and view.info.id.startswith(handle))


def _addressable(views: Sequence[SessionView]) -> list[SessionView]:
    """The sessions of one repo, each with a handle that `find_session` resolves to it alone: its name, else its
    worktree's name, else the shortest start of its id (8 characters or more) no other session of the repo shares."""

    def usable(handle: str, view: SessionView) -> bool:
        matches = [v for v in views if _answers(v, handle)]
        live = [v for v in matches if v.info.state != "ended"]
        return HANDLE.fullmatch(handle) is not None and (live or matches) == [view]

    def handle_of(view: SessionView) -> str:
        named = [h for h in (view.info.name, view.worktree) if h]
        starts = [view.info.id[:n] for n in range(min(8, len(view.info.id)), len(view.info.id) + 1)]
        return next((h for h in [*named, *starts] if usable(h, view)), view.info.id)

    return [v._replace(handle=handle_of(v)) for v in views]


def _repo_view(box: Store, info: Info, *, wake: bool = True) -> SessionView:
    """One session, addressed as its repo's listing addresses it (`wake`: whether it can be woken is asked too)."""
    views = _addressable([_view(box, i, wake=wake) for i in sessions.listing(box.root, info.repo)])
    return next((v for v in views if v.info.key == info.key), _view(box, info, wake=wake))


def find_session(box: Store, address: Address) -> SessionView:
    """The one session of a repo a handle names: its chosen name, its worktree's name, or a unique prefix (at least
    4 characters) of its id. Several live sessions matching is refused with the candidates listed, never settled by
    choosing one; a handle that matches no live session may name an ended one (mail then waits for it)."""
    handle = address.handle or ""
    places: Places = {}
    mine = _addressable([_view(box, i, places) for i in sessions.listing(box.root, str(address.repo))])
    matches = [v for v in mine if _answers(v, handle)]
    live = [v for v in matches if v.info.state != "ended"]
    chosen = live or matches
    if len(chosen) == 1:
        return chosen[0]
    if not chosen:
        here = ", ".join(sorted(f"{render.quote(v.address)} ({v.info.state})" for v in mine)) or "none"
        raise UsageError(f"no session of {render.quote(address.repo)} answers to {handle!r} (its sessions: {here})")
    listed = ", ".join(
        f"{render.quote(v.address)} ({v.info.state}, "
        f"{'worktree ' + render.quote(v.worktree) if v.worktree else 'main work tree'})"
        for v in chosen
    )
    raise UsageError(
        f"{str(address)!r} names {len(chosen)} {'live ' if live else ''}sessions: {listed}; "
        "name one by a longer start of its id, or give sessions names (gitmail session --name)"
    )


class Destination(NamedTuple):
    """Where a message sent to an address goes."""

    repo: RepoName
    session: SessionView | None = None  # the one session it is for; None: every session of the repo
    handle: str | None = None  # how the sender named that session
    notes: tuple[str, ...] = ()  # what the sender should know


def destination(box: Store, actor: Actor, to: str, *, or_repo: bool = False) -> Destination:
    """Where mail `to` an address goes: a repository (every session of it), or one of its sessions (`repo#HANDLE`,
    read one way only: no repository's name holds a '#'). A session that has ended keeps its mail until it
    resumes, or (`or_repo`) gives it to its repo's sessions now. A linked worktree's folder name is no repository:
    it is refused, naming the repository and the worktree's sessions."""
    address = Address.parse(to)
    if address.repo.is_person:
        if actor.repo.is_person:
            raise UsageError("this is the person's own address: mail to oneself is never sent")
        return Destination(address.repo)
    if address.handle is None:
        return Destination(address.repo, notes=_new_name(box, actor, address.repo))
    target = find_session(box, address)
    me = actor.session.key if actor.session is not None else None
    if me is not None and target.info.key == me:
        raise UsageError(f"{render.quote(target.address)} is this very session, and a session never gets its own mail")
    if target.info.state != "ended":
        return Destination(address.repo, target, address.handle)
    ended = f"{render.quote(target.address)} ended {render.when_epoch(target.info.ended)}"
    if or_repo:
        note = f"{ended}; every session of {render.quote(address.repo)} gets the message instead"
        return Destination(address.repo, notes=(note,))
    waits = Phrase(
        "{ended}; the message waits for it to resume, and goes to every session of {repo} if it has not within a "
        "week ({or_repo} sends it to them now)",
        ended=ended,
        repo=render.quote(address.repo),
    )
    return Destination(address.repo, target, address.handle, (waits,))


def _new_name(box: Store, actor: Actor, repo: RepoName) -> tuple[str, ...]:
    """A note when no repository of this name has used the mailbox yet (the repo sending is no unknown name); an
    error when the name is a linked worktree's folder of a known repository."""
    if actor.here is not None and repo == actor.repo or mailbox.known(box, repo):
        return ()
    worktree_of = _worktree_folder(box, repo)
    if worktree_of is not None:
        raise UsageError(
            f"{render.quote(repo)} is a worktree of {render.quote(worktree_of)}, not a repository: send to "
            f"{render.quote(worktree_of)} (every session of it) or to {render.quote(f'{worktree_of}#{repo}')} "
            "(the session working there)"
        )
    return (
        f"no repo named {render.quote(repo)} has used this mailbox yet; it gets the message when a session starts "
        "in a repository of that name",
    )


def _worktree_folder(box: Store, name: RepoName) -> str | None:
    """The repository whose linked worktree's folder is called `name`, as this machine's sessions know it."""
    for info in sessions.listing(box.root):
        if info.top and info.repo and info.repo != name and os.path.basename(info.top) == name:
            if _view(box, info).worktree == name:
                return info.repo
    return None


def sessions_here(
    box: Store, repo: RepoName | None, *, all_repos: bool = False, named: str | None = None
) -> list[SessionView]:
    """The sessions the hooks have seen on this machine (of one repo, or `all_repos`), each with the mail pending
    for it: the live ones first, then the ended ones still kept. `named`: a repo the caller named, which
    `all_repos` takes none of."""
    if all_repos:
        from gitmail.actions.rules import without

        without("all_repos", {"repo": named})
        repo = None
    places: Places = {}
    views = [_view(box, i, places) for i in sessions.listing(box.root, repo)]
    repos = sorted({v.info.repo for v in views})
    found = [v for r in repos for v in _addressable([w for w in views if w.info.repo == r])]
    counted = []
    pending: dict[str, Pending] = {}
    held = _leases_by_holder(box, {v.info.repo for v in found})
    found = [v._replace(leases=held.get(v.info.key, ())) for v in found]
    for view in found:
        repo_name = RepoName(view.info.repo) if view.info.repo and not name_problem(view.info.repo) else None
        if repo_name is None or view.info.state == "ended":
            counted.append(view)
            continue
        if repo_name not in pending:
            pending[repo_name] = mailbox.pending(box, repo=repo_name)
        actor = Actor(repo_name, None, view.info.host, Session(view.info.host, view.info.id))
        visible = delivery.for_session(box, actor, pending[repo_name])
        counted.append(view._replace(pending=len(visible.directed) + len(visible.broadcasts)))
    return sorted(counted, key=lambda v: (v.info.state == "ended", v.info.repo, -v.info.active))


def _leases_by_holder(box: Store, repos: set[str]) -> dict[str, tuple[str, ...]]:
    """What each session holds leases on, in these repositories."""
    from gitmail.mailbox import leasing

    found: dict[str, list[str]] = {}
    for repo in sorted(repos):
        if not repo or name_problem(repo):
            continue
        for state in leasing.standing(box, RepoName(repo)):
            if state.held and state.lease.holder:
                found.setdefault(state.lease.holder, []).extend(f"{p} ({state.lease.mode})" for p in state.lease.paths)
    return {holder: tuple(paths) for holder, paths in found.items()}


def this_session(box: Store, actor: Actor, *, wake: bool = True) -> SessionView:
    """The session a command runs in (the host names it in the environment); an error outside one. `wake`: ask
    whether it can be woken (a look at the host's processes), which only a listing needs."""
    if actor.session is None:
        raise UsageError(
            "not inside a Claude Code or Codex session (the host names its session to the commands it runs)"
        )
    info = sessions.info(box.root, actor.session.host, actor.session.id)
    if info is None:  # it started before the mailbox existed, so no hook could record it: this command does
        if not box.exists():
            box.create()
        top = str(actor.place.top) if actor.place is not None else None
        sessions.introduce(box.root, actor.session.host, actor.session.id, repo=str(actor.repo), top=top)
        info = sessions.info(box.root, actor.session.host, actor.session.id)
    if info is None:
        raise GitmailError(f"cannot record session {actor.session.key} in {box.root}")
    return _repo_view(box, info, wake=wake)


def name_session(box: Store, actor: Actor, *, name: str | None = None, card: str | None = None) -> SessionView:
    """Name the calling session (unique among its repo's live sessions) and/or set its one-line card."""
    me = this_session(box, actor)
    if name is not None:
        if not SESSION_NAME.fullmatch(name):
            raise UsageError(f"invalid session name {name!r}: use 1 to 40 letters, digits, '.', '_' or '-'")
        taken = [
            v
            for v in sessions_here(box, RepoName(me.info.repo))
            if v.info.state != "ended" and v.info.key != me.info.key and _answers(v, name)
        ]
        if taken:
            raise UsageError(
                f"the name {name!r} already names {render.quote(taken[0].address)} ({taken[0].info.key}): "
                "choose another"
            )
    text = clean_subject(card, what="card") if card is not None else None
    assert actor.session is not None
    sessions.describe(box.root, actor.session.host, actor.session.id, name=name, card=text)
    return this_session(box, actor)


class Peeked(NamedTuple):
    view: SessionView
    turns: list[tuple[str, str]]  # (speaker, text), oldest first: the last N


def peek_session(box: Store, address: str, *, count: int) -> Peeked:
    """The last `count` turns of a session of this machine, from the transcript its host named to the hooks."""
    from gitmail.store import transcripts
    from gitmail.values.transcript import last, turns

    if count < 1 or count > 100:
        raise UsageError("-n must be between 1 and 100")
    found = [v for v in sessions_here(box, None, all_repos=True) if v.address == address]
    if not found:
        raise GitmailError(f"no session {render.quote(address)} on this machine (see `gitmail sessions --all`)")
    view = found[0]
    path = sessions.transcript(box.root, view.info.host, view.info.id)
    if path is None:
        raise GitmailError(f"the hooks of {render.quote(address)} were never told where its transcript is")
    chosen = last(turns(transcripts.tail(path)), count)
    return Peeked(view, [(t.speaker, t.text) for t in chosen])
