"""The action layer: everything a person, a session or a client can ask of gitmail, as functions that take typed
arguments and return typed results (what was written, and notes for the user). The command line, the hooks, the
MCP server and the web view only translate their input into these calls and format what comes back. This is also
gitmail's Python API:

    from gitmail import actions
    from gitmail.values.names import RepoName
    from gitmail.workspace import Actor

    box = actions.open_mailbox()                      # ~/.gitmail/mail.git, or $GITMAIL_DIR, or a path
    api, web = Actor(RepoName("api")), Actor(RepoName("web"))
    sent = actions.send(box, api, to="web", subject="Schema v2 is live", body="Orders have a status column.")
    mail = actions.inbox(box, web)                    # .text (framed as a session sees it), .shown, .mail
    actions.send(box, web, reply_to=sent.entry.message.id, body="Switched.")
    actions.done(box, api, ids=[...])
    # files read from the current directory, and a patch of the repository there (docs/attachments.md)
    actions.send(box, api, to="web", subject="The fix", attach=["fixture.json"], patch="HEAD~1")
    actions.save_attachment(box, "7kq2", "fixture.json")   # into the current directory
    actions.apply(box, Actor(RepoName("web"), Path.home() / "src" / "web"), "7kq2")   # into that repository

Expected failures raise `gitmail.errors.GitmailError` (a usage mistake is its subclass `UsageError`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from gitmail import arrivals, delivery, mailbox, render, waking
from gitmail.delivery import Delivery, Moment
from gitmail.errors import GitmailError, UsageError
from gitmail.mailbox import DoneResult, Entry, History, Pending
from gitmail.store import sessions, stamps
from gitmail.store.claims import claim, load_claims
from gitmail.store.lock import Deadline
from gitmail.store.opening import open_mailbox
from gitmail.store.repository import WRITE_WAIT, Store
from gitmail.values import urgency as levels
from gitmail.values.address import HANDLE, Address
from gitmail.values.machine import Machine
from gitmail.values.message import clean_subject
from gitmail.values.names import RepoName, name_problem
from gitmail.workspace import Actor, Session, current_directory, toplevel

if TYPE_CHECKING:
    from gitmail.project import Applied, Gathered
    from gitmail.store.keys import Survey
    from gitmail.sync.engine import Outcome
    from gitmail.sync.remotes import Remote, SyncError
    from gitmail.values.attachments import Attachment
    from gitmail.values.outgoing import Outgoing
    from gitmail.values.verdict import Key

__all__ = ["open_mailbox"]  # the entry point of the API, re-exported

SESSION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")
HOOK_WAIT = 1.5  # seconds one hook run may wait for the mailbox, all waits together


# -- sending -----------------------------------------------------------------------------------------------------


class Sent(NamedTuple):
    entry: Entry  # the message as written
    notes: tuple[str, ...] = ()  # what the sender should know (a recipient no repo has used yet, ...)


def one_of(options: Mapping[str, object]) -> str:
    """The one option given among options that exclude each other, named as the caller spells them (`--to` on the
    command line, `to` in MCP); a usage error naming them when none or several were given."""
    given = [name for name, value in options.items() if value not in (None, False, (), [])]
    if len(given) != 1:
        names = list(options)
        listed = f"{', '.join(names[:-1])} or {names[-1]}"
        raise UsageError(f"give exactly one of {listed}" + (f" (got {' and '.join(given)})" if given else ""))
    return given[0]


UNCOMMITTED = ""  # `send(patch=UNCOMMITTED)`: the uncommitted changes against HEAD, not commits


def send(
    box: Store,
    actor: Actor,
    *,
    to: str | None = None,
    broadcast: bool = False,
    reply_to: str | None = None,
    subject: str | None = None,
    body: bytes | str = "",
    when: datetime | None = None,
    or_repo: bool = False,
    urgency: str | None = None,
    attach: Sequence[str | os.PathLike[str]] = (),
    patch: str | None = None,
    base: Path | None = None,
    within: Path | None = None,
) -> Sent:
    """Send to a repo or one session of it (`to`: `web`, `web#HANDLE`), to every repo (`broadcast`), or in reply to
    a message (`reply_to`: to its sender, to the very session that asked when one did, threaded, archiving it for
    the replier). A subject is needed except for a reply. Sent from inside a session, the message is never shown to
    that session. `or_repo`: when the session addressed has ended, every session of its repo gets it instead.
    `urgency`: now, normal (the default) or low; delivery.py says what each does.

    `attach`: files to carry in the message (any bytes), read relative to `base` (default: the current directory).
    `patch`: a revision range whose commits are attached as `git format-patch` writes them, or UNCOMMITTED for the
    uncommitted changes against HEAD; made in the actor's work tree. `within`: a directory files must lie in
    (through links too), which is then also where the patch is made (the MCP server's client's work tree)."""
    mode = one_of({"to": to, "broadcast": broadcast, "reply_to": reply_to})
    level = levels.parse(urgency)
    if subject is None and mode != "reply_to":
        raise UsageError("a subject is required")
    me = actor.session.key if actor.session is not None else None
    notes: list[str] = []
    gathered = gather(box, actor, attach=attach, patch=patch, base=base, within=within)
    outgoing = [g.outgoing for g in gathered]
    notes += [note for g in gathered for note in g.notes]
    try:
        if reply_to is not None:
            asked = mailbox.show(box, reply_to).message
            follow_up = asked.sender == actor.repo and (asked.from_session is None or asked.from_session == me)
            asking = session_of(box, asked.from_session) if not follow_up else None
            handle = asking.handle if asking is not None else None
            entry = mailbox.reply(
                box, sender=actor.repo, to_id=reply_to, subject=subject, body=body, when=when, from_session=me,
                to_handle=handle, attachments=outgoing, urgency=level,
            )  # fmt: skip
            if asking is not None and asking.info.state == "ended":
                notes.append(
                    f"the session that asked ({render.quote(asking.address)}) has ended: every session of "
                    f"{render.quote(entry.message.to)} gets the reply"
                )
        elif broadcast:
            entry = mailbox.broadcast(
                box, sender=actor.repo, subject=subject or "", body=body, when=when, from_session=me,
                attachments=outgoing, urgency=level,
            )  # fmt: skip
        else:
            assert to is not None
            address = Address.parse(to)
            if address.handle is not None and not name_problem(to) and mailbox.known(box, RepoName(to)):
                address = Address(RepoName(to))  # a repo whose very name holds a '#' (its folder's) is that repo
            target = find_session(box, address) if address.handle else None
            if target is not None and me is not None and target.info.key == me:
                raise UsageError(
                    f"{render.quote(target.address)} is this very session, and a session never gets its own mail"
                )
            to_session = target.info.key if target is not None else None
            if target is not None and target.info.state == "ended":
                ended = f"{render.quote(target.address)} ended {render.when_epoch(target.info.ended)}"
                if or_repo:
                    to_session = None
                    notes.append(f"{ended}; every session of {render.quote(address.repo)} gets the message instead")
                else:
                    notes.append(
                        f"{ended}; the message waits for it to resume, and goes to every session of "
                        f"{render.quote(address.repo)} if it has not within a week (send with --or-repo for them now)"
                    )
            own = actor.here is not None and address.repo == actor.repo  # the repo sending is no unknown name
            new_name = target is None and not own and not mailbox.known(box, address.repo)
            entry = mailbox.send(
                box, sender=actor.repo, to=address.repo, subject=subject or "", body=body, when=when,
                from_session=me, to_session=to_session, to_handle=address.handle if to_session else None,
                attachments=outgoing, urgency=level,
            )  # fmt: skip
            if new_name:
                notes.append(
                    f"no repo named {render.quote(address.repo)} has used this mailbox yet; it gets the message "
                    "when a session starts in a repository of that name"
                )
    finally:
        _close(outgoing)
    if actor.here is not None:
        claim(box, repo=actor.repo, path=actor.here)
    from gitmail.sync import background

    background.after_send(box)
    arrivals.after_arrival(box, None if entry.message.is_broadcast else [entry.message.to])
    return Sent(entry, tuple(notes))


def gather(
    box: Store,
    actor: Actor,
    *,
    attach: Sequence[str | os.PathLike[str]] = (),
    patch: str | None = None,
    base: Path | None = None,
    within: Path | None = None,
) -> list[Gathered]:
    """The attachments a send carries, each checked, named and measured before anything is written: the files
    opened (closed by the caller), the patch made, names made safe and unique, and the mailbox's limits on their
    number and total size kept (each refusal names the file and the limit)."""
    if not attach and patch is None:
        return []
    from gitmail import project
    from gitmail.values import attachments

    limit, most = _limits(box)
    if len(attach) + (patch is not None) > most:
        raise UsageError(
            f"{len(attach) + (patch is not None)} attachments; a message may carry at most {most} "
            f"(gitmail.{attachments.COUNT_SETTING} in the mailbox's config)"
        )
    found: list[Gathered] = []
    try:
        total = 0
        for given in attach:
            found.append(project.read_file(given, base=base, within=within))
            total = _within_limit(found[-1].outgoing, total, limit)
        if patch is not None:
            work_tree = actor.place.top if actor.place is not None else actor.here
            top = within or work_tree or toplevel(base or current_directory())
            if top is None:
                raise UsageError("--patch needs a git repository: run it inside one")
            found.append(project.make_patch(top, patch))
            total = _within_limit(found[-1].outgoing, total, limit)
        names = attachments.unique([g.outgoing.name for g in found])
        for index, (gathered, name) in enumerate(zip(found, names, strict=True)):
            if name != gathered.outgoing.name:
                first, second = project.quoted(gathered.outgoing.name), project.quoted(name)
                note = f"another attachment named {first} is attached as {second}"
                found[index] = gathered._replace(outgoing=gathered.outgoing._replace(name=name))
                found[index] = found[index]._replace(notes=(*gathered.notes, note))
    except BaseException:
        _close([g.outgoing for g in found])
        raise
    return found


def _limits(box: Store) -> tuple[int, int]:
    """The total size and the number of attachments one message may carry (the mailbox's config may change them)."""
    from gitmail.values import attachments

    limit, most = attachments.DEFAULT_LIMIT, attachments.DEFAULT_COUNT
    if not box.exists():
        return limit, most
    for setting in (attachments.LIMIT_SETTING, attachments.COUNT_SETTING):
        text = box.setting(setting)
        if text is None:
            continue
        value = attachments.parse_size(text)
        if value is None or value < 1:
            example = "25m" if setting == attachments.LIMIT_SETTING else "20"
            raise GitmailError(
                f"gitmail.{setting} in the mailbox's config is {text!r}, not a number of at least 1 (e.g. {example})"
            )
        if setting == attachments.LIMIT_SETTING:
            limit = value
        else:
            most = value
    return limit, most


def _within_limit(item: Outgoing, total: int, limit: int) -> int:
    from gitmail.values.attachments import LIMIT_SETTING, size_text

    total += item.size
    if total > limit:
        said = (
            f"{item.label} is {size_text(item.size)}"
            if total == item.size
            else (f"{item.label} ({size_text(item.size)}) brings them to {size_text(total)}")
        )
        raise UsageError(
            f"{said}: a message's attachments may take at most {size_text(limit)} together "
            f"(gitmail.{LIMIT_SETTING} in the mailbox's config; nothing was sent)"
        )
    return total


def _close(outgoing: Sequence[Outgoing]) -> None:
    for item in outgoing:
        if item.source is not None:
            item.source.close()


# -- sessions ------------------------------------------------------------------------------------------------------


class SessionView(NamedTuple):
    """A session as people and clients are shown it."""

    info: sessions.Info
    handle: str  # how to address it: its name, else its worktree's name, else the start of its id
    worktree: str | None  # its worktree's name, when it works in a linked worktree
    branch: str | None
    pending: int | None = None  # messages pending for it (None when not counted)
    wakeable: bool = False  # whether mail can start a turn in it while it waits for its user (waking.py)

    @property
    def address(self) -> str:
        return f"{self.info.repo}#{self.handle}"


def session_of(box: Store, key: str | None) -> SessionView | None:
    """The session a message names ("claude:5b0e..."), when this machine knows it."""
    found = Session.from_key(key) if key else None
    info = sessions.info(box.path, found.host, found.id) if found is not None else None
    return _repo_view(box, info) if info is not None else None


def _view(
    box: Store, info: sessions.Info, places: dict[str, tuple[str | None, str | None]] | None = None
) -> SessionView:
    """How a session is shown; `places`: the work trees already looked at (worktree name, branch), shared by the
    sessions of one listing."""
    from gitmail.workspace import place

    places = {} if places is None else places
    if info.top not in places:
        where = place(info.top) if info.top and os.path.isdir(info.top) else None
        places[info.top] = (where.worktree, where.branch()) if where is not None else (None, None)
    worktree, branch = places[info.top]
    handle = info.name or worktree or info.id[:8]
    return SessionView(info, handle, worktree, branch, wakeable=waking.wakeable(box, info))


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


def _repo_view(box: Store, info: sessions.Info) -> SessionView:
    """One session, addressed as its repo's listing addresses it."""
    views = _addressable([_view(box, i) for i in sessions.listing(box.path, info.repo)])
    return next((v for v in views if v.info.key == info.key), _view(box, info))


def find_session(box: Store, address: Address) -> SessionView:
    """The one session of a repo a handle names: its chosen name, its worktree's name, or a unique prefix (at least
    4 characters) of its id. Several live sessions matching is refused with the candidates listed, never settled by
    choosing one; a handle that matches no live session may name an ended one (mail then waits for it)."""
    handle = address.handle or ""
    places: dict[str, tuple[str | None, str | None]] = {}
    mine = _addressable([_view(box, i, places) for i in sessions.listing(box.path, str(address.repo))])
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


def sessions_here(box: Store, repo: RepoName | None) -> list[SessionView]:
    """The sessions the hooks have seen on this machine (of one repo, or of every repo), each with the mail pending
    for it: the live ones first, then the ended ones still kept."""
    places: dict[str, tuple[str | None, str | None]] = {}
    views = [_view(box, i, places) for i in sessions.listing(box.path, repo)]
    repos = sorted({v.info.repo for v in views})
    found = [v for r in repos for v in _addressable([w for w in views if w.info.repo == r])]
    counted = []
    pending: dict[str, Pending] = {}
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


def this_session(box: Store, actor: Actor) -> SessionView:
    """The session a command runs in (the host names it in the environment); an error outside one."""
    if actor.session is None:
        raise UsageError(
            "not inside a Claude Code or Codex session (the host names its session to the commands it runs)"
        )
    info = sessions.info(box.path, actor.session.host, actor.session.id)
    if info is None:  # it started before the mailbox existed, so no hook could record it: this command does
        if not box.exists():
            box.create()
        top = str(actor.place.top) if actor.place is not None else None
        sessions.introduce(box.path, actor.session.host, actor.session.id, repo=str(actor.repo), top=top)
        info = sessions.info(box.path, actor.session.host, actor.session.id)
    if info is None:
        raise GitmailError(f"cannot record session {actor.session.key} in {box.path}")
    return _repo_view(box, info)


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
    sessions.describe(box.path, actor.session.host, actor.session.id, name=name, card=text)
    return this_session(box, actor)


class Retracted(NamedTuple):
    id: str
    changed: bool  # False: it was retracted already


def retract(box: Store, actor: Actor, message_id: str) -> Retracted:
    """Stop handing out a broadcast of the actor's (repos that were handed it keep it)."""
    changed = mailbox.retract(box, sender=actor.repo, message_id=message_id)
    return Retracted(message_id, changed)


# -- reading -----------------------------------------------------------------------------------------------------


def inbox(
    box: Store, actor: Actor, *, peek: bool = False, budget: int | None = None, command: str = "gitmail"
) -> Delivery:
    """Everything pending for the actor's repo, framed as a session receives it (`budget`: within that many bytes,
    as the MCP tool answers). Unless `peek`, the broadcasts shown are handed over and receipts are written."""
    return delivery.deliver(
        box, actor, Moment.INBOX, deadline=Deadline(WRITE_WAIT), budget=budget, peek=peek, command=command
    )


def at_moment(
    box: Store,
    actor: Actor,
    moment: Moment,
    *,
    continuing: bool = False,
    command: str = "gitmail",
    watch: bool = False,
) -> Delivery:
    """What a host's hook hands its session at a moment (delivery.py decides). A session start also starts a
    background sync when one is due. Receipts are left for the caller to write once it has answered
    (`Delivery.recording`, `record`)."""
    if moment is Moment.START:
        from gitmail.sync import background

        background.start_if_due(box)  # spawned, never waited for
    return delivery.deliver(
        box, actor, moment, deadline=Deadline(HOOK_WAIT), continuing=continuing, command=command, defer=True,
        watch=watch,
    )  # fmt: skip


def session_ended(box: Store, session: Session, reason: str = "") -> None:
    """A session ended: its record stays a while, marked ended. Replies waiting for it now reach its repo's other
    sessions, so the repo's stamp changes: their hooks look again, and no kept session-start answer still holds."""
    if not box.exists():
        return
    repo = sessions.ended(box.path, session.host, session.id, reason)
    if repo is not None and not name_problem(repo):
        stamps.bump(box.path, [RepoName(repo)])


def record(box: Store, recording: delivery.Recording) -> None:
    """Write what a showing left to record (its receipts)."""
    delivery.record(box, recording, deadline=Deadline(WRITE_WAIT))


class Shown(NamedTuple):
    entry: Entry
    claims: dict[str, str]  # who uses which name here: what the PEER/UNVERIFIED label is decided by


def show(box: Store, actor: Actor | None, message_id: str) -> Shown:
    """One message whole, with its receipts. Read whole inside a session, it counts as shown to that session."""
    entry = mailbox.show(box, message_id)
    if actor is not None and actor.session is not None and entry.recipient == actor.repo:
        sessions.saw(box.path, actor.session.host, actor.session.id, {entry.message.id})
    return Shown(entry, load_claims(box))


class Saved(NamedTuple):
    entry: Entry
    attachment: Attachment
    path: Path | None  # where it was written; None: to standard output


def save_attachment(
    box: Store,
    message_id: str,
    name: str | None = None,
    *,
    output: str | os.PathLike[str] | None = None,
    force: bool = False,
) -> Saved:
    """Write one of a message's attachments out: into the current directory under its own (safe) name, or to
    `output` (a file, a directory to put it in, or "-" for standard output). An existing file is replaced only with
    `force`; the file appears whole or not at all."""
    from gitmail import project

    entry = mailbox.show(box, message_id)
    item = mailbox.attachment(entry, name)
    if output is not None and os.fspath(output) == "-":
        from gitmail.store.gitcmd import GitFailed

        try:
            mailbox.write_attachment(box, entry, item, 1)
        except GitFailed as error:
            if error.returncode == -13:  # SIGPIPE: the reader went away (`| head`), as a reader may
                raise BrokenPipeError from None
            raise
        return Saved(entry, item, None)
    if output is None:  # its own name here: never followed into a directory or through a link
        target = Path(current_directory()) / item.name
    else:
        target = Path(output).expanduser()
        if target.is_dir():
            target = target / item.name
        elif os.fspath(output).endswith(os.sep):
            raise UsageError(f"{os.fspath(output)} is no directory")
    project.write_out(target, lambda fd: mailbox.write_attachment(box, entry, item, fd), force=force)
    return Saved(entry, item, target)


class Patched(NamedTuple):
    entry: Entry
    attachment: Attachment
    top: Path  # the work tree it was applied to
    kind: str  # commits (applied with git am) or uncommitted (git apply)
    result: Applied
    note: str | None = None  # a receipt that could not be written


APPLY_OUTSIDE = "gitmail apply works on the git work tree you are in: run it inside one"


def apply(box: Store, actor: Actor, message_id: str, name: str | None = None) -> Patched:
    """Apply a message's patch to the actor's repository (`git am --3way` for commits, `git apply --index --3way`
    for uncommitted changes) and record on the message whether it applied. Refused, with nothing changed, in a
    repository with uncommitted changes to tracked files or in the middle of another git operation."""
    from gitmail import project
    from gitmail.values.attachments import COMMITS, UNCOMMITTED

    top = actor.place.top if actor.place is not None else actor.here
    if top is None:
        raise UsageError(APPLY_OUTSIDE)
    entry = mailbox.show(box, message_id)
    if name is None:
        patches = [a for a in entry.message.attachments if a.patch is not None]
        if len(patches) != 1:
            listed = ", ".join(render.quote(a.name) for a in entry.message.attachments) or "none"
            raise UsageError(
                f"message {entry.message.id} carries {len(patches) or 'no'} patch{'es' if len(patches) > 1 else ''} "
                f"sent with --patch; name the attachment to apply (its attachments: {listed})"
            )
        item = patches[0]
    else:
        item = mailbox.attachment(entry, name)
    data = mailbox.attachment_content(box, entry, item)
    kind = item.patch or (COMMITS if data.startswith(b"From ") else UNCOMMITTED)
    result = project.apply_patch(top, data, kind)
    note = None
    try:
        mailbox.record_applied(box, repo=actor.repo, entry=entry, applied=result.ok)
    except GitmailError as error:
        note = f"the receipt for {entry.message.id} could not be written: {error}"
    return Patched(entry, item, top, kind, result, note)


def log(
    box: Store,
    *,
    repo: RepoName | None = None,
    limit: int | None = 20,
    grep: str | None = None,
    thread: str | None = None,
    sent: bool = False,
    handle: str | None = None,
) -> History:
    """History, newest first, each message with its receipts: a repo's mail, what it sent (`sent`), everyone's
    (`repo` None), or one conversation oldest first (`thread`). With `handle`, only the mail to or from that
    session of `repo` (read from the repo's whole history: the index knows repos, not sessions)."""
    if grep is not None and "\0" in grep:
        raise UsageError("a search cannot hold a NUL character")
    if handle is None or repo is None:
        return mailbox.log(box, repo=repo, limit=limit, grep=grep, thread=thread, sent=sent)
    key = find_session(box, Address(repo, handle)).info.key
    found = mailbox.log(box, repo=repo, limit=None, grep=grep, sent=sent)
    theirs = [e for e in found if key in (e.message.from_session, e.message.to_session)]
    return History(theirs[:limit], found.unreadable)


# -- handling ----------------------------------------------------------------------------------------------------


def done(box: Store, actor: Actor, *, ids: Sequence[str] = (), everything: bool = False) -> DoneResult:
    """Archive directed mail without replying: the messages named, or (`everything`) the pending mail the actor's
    session was shown whole (outside a session: that a session of the repo on this machine was shown whole), never
    mail that arrived unseen, or that a session only saw summarised, or that a receipt from elsewhere says was
    shown."""
    if bool(ids) == everything:
        raise UsageError("name the messages to mark done, or ask for all of them (not both)")
    seen: set[str] = set()
    among: set[str] | None = None
    also = delivery.aliases(box, actor)
    if everything and actor.session is not None:
        seen = sessions.shown(box.path, actor.session.host, actor.session.id)
        mine = delivery.for_session(box, actor, mailbox.pending(box, repo=actor.repo, also=also))
        among = {e.message.id for e in mine.directed}  # not what was for another session, nor its own
    elif everything:
        for found in sessions.listing(box.path):
            if found.repo == actor.repo:
                seen |= sessions.shown(box.path, found.host, found.id)
    return mailbox.done(box, repo=actor.repo, also=also, ids=ids, everything=everything, seen=seen, among=among)


def reopen(box: Store, actor: Actor, message_id: str) -> Entry:
    """Undo a done (or a reply's archiving): the message is pending again for the actor's repo."""
    return mailbox.reopen(box, repo=actor.repo, message_id=message_id)


def known(box: Store, repo: RepoName) -> bool:
    """Whether any repository of this name has used the mailbox."""
    return mailbox.known(box, repo)


# -- sync --------------------------------------------------------------------------------------------------------


def remotes(box: Store) -> list[Remote]:
    """The remotes this mailbox syncs with, in the order they were added."""
    from gitmail.sync.remotes import configured

    return configured(box)


def add_remote(box: Store, *, name: str, url: str, auto: bool = False, interval: int | None = None) -> Remote:
    """Record a remote to sync with (nothing is sent until the first sync); `interval`: seconds between automatic
    syncs (default 300)."""
    from gitmail.sync import remotes as settings

    return settings.add_remote(box, name=name, url=url, auto=auto, interval=interval or settings.DEFAULT_INTERVAL)


def change_remote(box: Store, name: str, *, auto: bool | None = None, interval: int | None = None) -> Remote:
    from gitmail.sync import remotes as settings

    return settings.change_remote(box, name, auto=auto, interval=interval)


def remove_remote(box: Store, name: str) -> None:
    """Stop syncing with a remote; nothing there or in this mailbox's mail is deleted."""
    from gitmail.sync import engine

    engine.remove_remote(box, name)


def sync(box: Store, name: str | None = None, *, wait: float = 120.0) -> list[Outcome | SyncError]:
    """Sync with one remote or with every remote: one Outcome, or the SyncError that stopped it, per remote."""
    from gitmail.sync import engine

    return engine.sync_all(box, name, wait=wait)


# -- signing keys ------------------------------------------------------------------------------------------------


def keys(box: Store) -> Survey:
    """This machine's key and the keys of other machines, taking in any published since last time."""
    from gitmail.store import keys as signing
    from gitmail.store import machines, pins

    if not box.exists():
        raise UsageError("there is no mailbox yet (the first message sent creates it, or `gitmail keys init`)")
    if box.writable():
        with box.locked():
            signing.learn(box, listing=True)
    here = machines.current(box) if box.writable() else _machine_read_only(box)
    own = signing.signer(box, create=False)
    published = own is not None and signing.published_mark(box) == signing.mark(own, here)
    return signing.Survey(here, own, published, pins.known(box).all)


def _machine_read_only(box: Store) -> Machine:
    from gitmail.store import machines

    return Machine(machines.configured_name(box) or machines.host_name(), machines.local_id(box) or "")


def init_key(box: Store) -> Survey:
    """Make this machine's key now (it is otherwise made at the first write) and publish it."""
    _publish(box)
    return keys(box)


def use_key(box: Store, path: str) -> Survey:
    """Sign with the user's own SSH key from now on: a private key file, or the public key file of a key an
    ssh-agent holds. Checked by signing with it before anything changes; then published."""
    from gitmail.store import keys as signing
    from gitmail.store import signatures
    from gitmail.values import sshsig

    chosen = os.path.abspath(os.path.expanduser(path))
    key = signing.load(Path(chosen))
    probe = b"gitmail: can this key sign?"
    fact = signatures.check(probe, key.sign(probe, sshsig.KEYS), sshsig.KEYS)
    if fact.kind != "good" or fact.key != key.fingerprint:
        raise GitmailError(f"{chosen} did not make a good signature ({fact.reason or fact.key})")
    box.create()
    with box.locked():
        box.git("config", f"gitmail.{signing.SETTING}", chosen)
    _publish(box)
    return keys(box)


def _publish(box: Store) -> None:
    from gitmail.store.writer import writing

    with writing(box, actor=RepoName("gitmail")) as writer:
        writer.signing_key()
        writer.apply([], "gitmail: publish this machine's key")


def trust_key(box: Store, machine: str, fingerprint: str) -> Key:
    """Accept this key for that machine (its name or id): for a key compared out of band, a changed key the user
    expects, or a machine revoked before."""
    from gitmail.store import keys as signing

    return signing.trust(_existing(box), machine, fingerprint)


def revoke_key(box: Store, machine: str) -> list[Key]:
    """Stop accepting any key of that machine (its name or id): its mail reads UNVERIFIED."""
    from gitmail.store import keys as signing

    return signing.revoke(_existing(box), machine)


def allowed_signers(box: Store) -> str:
    """git's allowed_signers file: this machine's key and every key accepted for another machine."""
    from gitmail.store import keys as signing

    if box.exists() and box.writable():
        with box.locked():
            signing.learn(box, listing=True)
    return signing.allowed_signers(box) if box.exists() else ""


def _existing(box: Store) -> Store:
    if not box.exists():
        raise UsageError("there is no mailbox yet, so no key of another machine is known")
    return box
