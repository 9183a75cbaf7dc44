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

Expected failures raise `gitmail.errors.GitmailError` (a usage mistake is its subclass `UsageError`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from gitmail import delivery, mailbox, render
from gitmail.delivery import Delivery, Moment
from gitmail.errors import GitmailError, UsageError
from gitmail.mailbox import DoneResult, Entry, History
from gitmail.store import sessions
from gitmail.store.claims import claim, load_claims
from gitmail.store.lock import Deadline
from gitmail.store.opening import open_mailbox
from gitmail.store.repository import WRITE_WAIT, Store
from gitmail.values.machine import Machine
from gitmail.values.names import RepoName
from gitmail.values.verdict import Key
from gitmail.workspace import Actor, Session

if TYPE_CHECKING:
    from gitmail.store.keys import Survey
    from gitmail.sync.engine import Outcome
    from gitmail.sync.remotes import Remote, SyncError

__all__ = ["open_mailbox"]  # the entry point of the API, re-exported

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
) -> Sent:
    """Send to a repo (`to`), to every repo (`broadcast`), or in reply to a message (`reply_to`: to its sender,
    threaded, archiving it for the replier). A subject is needed except for a reply."""
    mode = one_of({"to": to, "broadcast": broadcast, "reply_to": reply_to})
    if subject is None and mode != "reply_to":
        raise UsageError("a subject is required")
    notes: list[str] = []
    if reply_to is not None:
        entry = mailbox.reply(box, sender=actor.repo, to_id=reply_to, subject=subject, body=body, when=when)
    elif broadcast:
        entry = mailbox.broadcast(box, sender=actor.repo, subject=subject or "", body=body, when=when)
    else:
        assert to is not None
        recipient = RepoName.parse(to)
        new_name = not mailbox.known(box, recipient)
        entry = mailbox.send(box, sender=actor.repo, to=recipient, subject=subject or "", body=body, when=when)
        if new_name:
            notes.append(
                f"no repo named {render.quote(recipient)} has used this mailbox yet; it gets the message when a "
                "session starts in a repository of that name"
            )
    if actor.here is not None:
        claim(box, repo=actor.repo, path=actor.here)
    from gitmail.sync import background

    background.after_send(box)
    return Sent(entry, tuple(notes))


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
    box: Store, actor: Actor, moment: Moment, *, continuing: bool = False, command: str = "gitmail"
) -> Delivery:
    """What a host's hook hands its session at a moment (delivery.py decides). A session start also starts a
    background sync when one is due. Receipts are left for the caller to write once it has answered
    (`Delivery.recording`, `record`)."""
    if moment is Moment.START:
        from gitmail.sync import background

        background.start_if_due(box)  # spawned, never waited for
    return delivery.deliver(
        box, actor, moment, deadline=Deadline(HOOK_WAIT), continuing=continuing, command=command, defer=True
    )


def session_ended(box: Store, session: Session) -> None:
    """A session ended: what it knew goes."""
    if box.exists():
        sessions.forget(box.path, session.host, session.id)


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


def log(
    box: Store,
    *,
    repo: RepoName | None = None,
    limit: int | None = 20,
    grep: str | None = None,
    thread: str | None = None,
    sent: bool = False,
) -> History:
    """History, newest first, each message with its receipts: a repo's mail, what it sent (`sent`), everyone's
    (`repo` None), or one conversation oldest first (`thread`)."""
    return mailbox.log(box, repo=repo, limit=limit, grep=grep, thread=thread, sent=sent)


# -- handling ----------------------------------------------------------------------------------------------------


def done(box: Store, actor: Actor, *, ids: Sequence[str] = (), everything: bool = False) -> DoneResult:
    """Archive directed mail without replying: the messages named, or (`everything`) the pending mail the actor's
    session was shown (outside a session: that any session of the repo was shown), never mail that arrived
    unseen."""
    if bool(ids) == everything:
        raise UsageError("name the messages to mark done, or ask for all of them (not both)")
    session = actor.session
    seen = sessions.shown(box.path, session.host, session.id) if everything and session is not None else None
    return mailbox.done(box, repo=actor.repo, ids=ids, everything=everything, seen=seen)


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
            signing.learn(box)
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
            signing.learn(box)
    return signing.allowed_signers(box) if box.exists() else ""


def _existing(box: Store) -> Store:
    if not box.exists():
        raise UsageError("there is no mailbox yet, so no key of another machine is known")
    return box
