"""Sending: a message to a repository or one of its sessions, to every repository, or in reply to a message; and
taking back one's own broadcast."""

from __future__ import annotations

from contextlib import contextmanager

from gitmail import mailbox, render
from gitmail.actions.addressing import destination, session_of
from gitmail.actions.rules import needs, one_of
from gitmail.actions.written import after_writing
from gitmail.errors import UsageError
from gitmail.values import urgency as levels
from gitmail.values.phrase import Phrase

TYPE_CHECKING = False
if TYPE_CHECKING:
    import os
    from collections.abc import Iterator, Sequence
    from datetime import datetime
    from typing import NamedTuple

    from _typeshed import StrPath

    from gitmail.store.repository import Store
    from gitmail.values.mail import Entry
    from gitmail.values.outgoing import Outgoing
    from gitmail.workspace import Actor
else:
    from gitmail.values.tuples import NamedTuple


class Sent(NamedTuple):
    entry: Entry  # the message as written
    notes: tuple[str, ...] = ()  # what the sender should know (a recipient no repo has used yet, ...)


class Draft:
    """What every kind of send shares, checked."""

    __slots__ = ("sender", "subject", "body", "when", "urgency", "attachments")

    def __init__(
        self,
        sender: Actor,
        subject: str | None,
        body: bytes | str,
        when: datetime | None,
        urgency: str,
        attachments: Sequence[Outgoing],
    ) -> None:
        self.sender, self.subject, self.body, self.when = sender, subject, body, when
        self.urgency, self.attachments = urgency, attachments

    @property
    def session(self) -> str | None:
        return self.sender.session.key if self.sender.session is not None else None


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
    base: StrPath | None = None,
    within: StrPath | None = None,
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
        raise UsageError(Phrase("a subject is required: give one with {subject}"))
    if or_repo and mode != "to":
        needs("or_repo", "to", " REPO#SESSION")
    with _carried(box, actor, attach=attach, patch=patch, base=base, within=within) as (outgoing, notes):
        draft = Draft(actor, subject, body, when, level, outgoing)
        if reply_to is not None:
            sent = _reply(box, draft, reply_to)
        elif to is not None:
            sent = _directed(box, draft, to, or_repo)
        else:
            sent = _broadcast(box, draft)
    after_writing(box, actor, arrived=[sent.entry])
    return sent._replace(notes=(*notes, *sent.notes))


@contextmanager
def _carried(
    box: Store,
    actor: Actor,
    *,
    attach: Sequence[str | os.PathLike[str]],
    patch: str | None,
    base: StrPath | None,
    within: StrPath | None,
) -> Iterator[tuple[Sequence[Outgoing], tuple[str, ...]]]:
    """What the send carries, and what its sender should know of it; attaching.py is loaded only for a send that
    carries something."""
    if not attach and patch is None:
        yield (), ()
        return
    from gitmail.actions.attaching import gathered

    with gathered(box, actor, attach=attach, patch=patch, base=base, within=within) as carried:
        yield carried.outgoing, carried.notes


def _directed(box: Store, draft: Draft, to: str, or_repo: bool) -> Sent:
    where = destination(box, draft.sender, to, or_repo=or_repo)
    for_session = where.session.info.key if where.session is not None else None
    entry = mailbox.send(
        box, sender=draft.sender.repo, to=where.repo, subject=draft.subject or "", body=draft.body, when=draft.when,
        from_session=draft.session, to_session=for_session, to_handle=where.handle if for_session else None,
        attachments=draft.attachments, urgency=draft.urgency,
    )  # fmt: skip
    return Sent(entry, where.notes)


def _broadcast(box: Store, draft: Draft) -> Sent:
    entry = mailbox.broadcast(
        box, sender=draft.sender.repo, subject=draft.subject or "", body=draft.body, when=draft.when,
        from_session=draft.session, attachments=draft.attachments, urgency=draft.urgency,
    )  # fmt: skip
    return Sent(entry)


def _reply(box: Store, draft: Draft, reply_to: str) -> Sent:
    """Back to the original's sender: to the very session that asked, while this machine knows it."""
    asked = mailbox.show(box, reply_to).message
    me, repo = draft.session, draft.sender.repo
    follow_up = asked.sender == repo and (asked.from_session is None or asked.from_session == me)
    asking = session_of(box, asked.from_session) if not follow_up else None
    entry = mailbox.reply(
        box, sender=repo, to_id=reply_to, subject=draft.subject, body=draft.body, when=draft.when, from_session=me,
        to_handle=asking.handle if asking is not None else None, attachments=draft.attachments,
        urgency=draft.urgency,
    )  # fmt: skip
    if asking is None or asking.info.state != "ended":
        return Sent(entry)
    note = (
        f"the session that asked ({render.quote(asking.address)}) has ended: every session of "
        f"{render.quote(entry.message.to)} gets the reply"
    )
    return Sent(entry, (note,))


class Retracted(NamedTuple):
    id: str
    changed: bool  # False: it was retracted already


def retract(box: Store, actor: Actor, message_id: str) -> Retracted:
    """Stop handing out a broadcast of the actor's (repos that were handed it keep it)."""
    changed = mailbox.retract(box, sender=actor.repo, message_id=message_id)
    if changed:
        after_writing(box, actor)
    return Retracted(message_id, changed)
