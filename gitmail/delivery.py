"""The one delivery policy: what a reader is shown, at which moment, through which channel, within which budget,
what is handed over and what is recorded. The session-start hook, the hooks that reach running sessions, `gitmail
inbox` and the MCP inbox tool all ask `deliver`; they only translate their host's input and output.

- At session start (and resume, fork, clear, compact) a session has lost what it knew: it is shown all its
  pending mail. At a tool call, the next prompt, the turn's end or an idle wake it is shown only mail that
  arrived since it last looked, once.
- Message content goes only into channels the host labels as hook context or tool output. Where a host offers
  only a user turn (Codex's turn-end continuation, Claude Code's wake), gitmail's own fixed notice goes instead,
  and the session reads the mail with `gitmail inbox`.
- Whole messages within a byte budget that bounds both hosts' caps; what does not fit stays pending.
- Deliver first, record after: a broadcast is shown only once it is handed over, and a receipt is written for
  every message shown for the first time, in the same single write; a busy mailbox never delays delivery of
  directed mail past the reader's deadline.
- A turn is continued at most once per batch of new mail, never while a continuation is running, and at most
  `MAX_CONTINUATIONS` times per session; a session is woken at most `wake_limit` times per `wake_window`.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Any, NamedTuple

from gitmail import mailbox, render
from gitmail.errors import MailboxBusy, MailboxError
from gitmail.mailbox import Entry, Pending
from gitmail.store import sessions, stamps
from gitmail.store.claims import load_claims
from gitmail.store.lock import Deadline
from gitmail.store.log import problem
from gitmail.store.repository import Store
from gitmail.values.names import RepoName

MAX_CONTINUATIONS = 20  # turn ends continued per session, whatever arrives
WAKE_LIMIT = 10  # wakes per window per session
WAKE_WINDOW = 300.0  # seconds


class Moment(Enum):
    START = "session-start"  # startup, resume, fork, clear, compact: the session lost what it knew
    TOOL = "tool"  # mid-turn, after a tool call
    PROMPT = "prompt"  # the user sent the next prompt
    STOP = "stop"  # the turn is about to end
    WAKE = "wake"  # the session sits idle
    INBOX = "inbox"  # someone asked: `gitmail inbox`, the MCP inbox tool


class Channel(Enum):
    CONTEXT = "context"  # hook context or tool output (system or developer role): may carry message content
    NOTICE = "notice"  # a user turn: only gitmail's own fixed notice


class Reader(NamedTuple):
    """Who reads, from where, through what."""

    repo: RepoName
    here: Path | None  # the repository's toplevel, when known (records and checks the name's claim)
    host: str  # claude, codex, cli, mcp, api
    session: str | None = None  # the host's session id: what this session already knows is remembered
    voice: render.Voice = render.PLAIN


class Delivery(NamedTuple):
    text: str | None  # what to hand the reader; None when there is nothing to say
    mail: Pending  # everything pending for the repo
    shown: render.Selection  # the messages the text shows
    new: int = 0  # messages the session had not been told of
    settled: bool = False  # nothing this showing wrote changes what the next one shows: it may be repeated as is
    stamps: str = ""  # the change stamps the showing was made at
    record: dict[str, Any] | None = None  # the session's record as this showing left it


NOTHING = render.Selection((), ())


def deliver(
    store: Store,
    reader: Reader,
    moment: Moment,
    *,
    channel: Channel = Channel.CONTEXT,
    deadline: Deadline,
    budget: int | None = render.BUDGET,
    peek: bool = False,
    continuing: bool = False,
    wake_limit: int = WAKE_LIMIT,
    wake_window: float = WAKE_WINDOW,
) -> Delivery:
    """Decide and carry out one delivery. `continuing`: the host says this turn end was already continued once."""
    empty = Delivery(None, Pending(reader.repo), NOTHING)
    if not store.exists():
        return empty
    busy = False
    claimed_by = None
    if reader.here is not None and moment in (Moment.START, Moment.INBOX) and not peek:
        try:
            claimed_by = mailbox.claim(store, repo=reader.repo, path=reader.here, timeout=deadline.left())
        except MailboxBusy:
            busy = True  # recording who uses the name can wait for the next reader
    seen_stamps = stamps.read(store.path, reader.repo)  # before reading: a later send is then noticed next time
    mail = mailbox.pending(store, repo=reader.repo, deadline=Deadline(0) if busy else deadline)
    mail = mail._replace(claimed_by=claimed_by)
    if reader.session is None or peek:
        return _show(store, reader, moment, channel, mail, None, deadline, busy, budget, peek)
    with sessions.record(store.path, reader.host, reader.session, deadline) as record:
        if record is None:  # no record to be had: behave as a session that knows nothing yet
            return _show(store, reader, moment, channel, mail, None, deadline, busy, budget, peek)
        if moment is Moment.START:
            record.know(set(), reset=True)
            record.set("shown", [])
            record.turn = False
        elif moment in (Moment.TOOL, Moment.PROMPT):
            record.turn = True
        if moment is Moment.STOP:
            record.turn = False
        delivery = empty._replace(mail=mail)
        if moment is Moment.STOP and (continuing or record.count("continued") >= MAX_CONTINUATIONS):
            pass  # the turn ends; what arrived is shown at the next prompt or tool call
        elif moment is Moment.WAKE and (record.turn or not _may_wake(record, wake_limit, wake_window)):
            pass  # mid-turn mail reaches it at the next tool call or turn end; or woken often enough lately
        else:
            delivery = _show(store, reader, moment, channel, mail, record, deadline, busy, budget, peek)
            if delivery.text is not None and moment is Moment.STOP:
                record.add("continued")
            if delivery.text is not None and moment is Moment.WAKE:
                record.set("wakes", [*record.times("wakes"), time.time()][-wake_limit:])
        if moment not in (Moment.STOP, Moment.WAKE) or delivery.text is not None:
            record.set("stamps", seen_stamps)
        settled = delivery.settled and stamps.read(store.path, reader.repo) == seen_stamps
        return delivery._replace(settled=settled, stamps=seen_stamps, record=dict(record.data))


def _show(
    store: Store,
    reader: Reader,
    moment: Moment,
    channel: Channel,
    mail: Pending,
    record: sessions.Record | None,
    deadline: Deadline,
    busy: bool,
    budget: int | None,
    peek: bool,
) -> Delivery:
    known = record.known if record is not None else set()
    fresh = Pending(
        mail.repo,
        [e for e in mail.directed if e.message.id not in known],
        [e for e in mail.broadcasts if e.message.id not in known],
        mail.unreadable if moment in (Moment.START, Moment.INBOX) else (),
        mail.claimed_by,
        mail.receipted,
    )
    new = len(fresh.directed) + len(fresh.broadcasts)
    if not (new or fresh.unreadable):
        return Delivery(None, mail, NOTHING, settled=True)
    if channel is Channel.NOTICE:
        # Nothing is shown, so nothing is handed over or receipted: `gitmail inbox` does that when it is run.
        if record is not None:
            record.know({e.message.id for e in [*fresh.directed, *fresh.broadcasts]})
        return Delivery(render.notice(mail.repo, new, voice=reader.voice), mail, NOTHING, new)
    voice = reader.voice._replace(new=moment not in (Moment.START, Moment.INBOX))
    here = str(reader.here) if reader.here else None
    claims = load_claims(store)
    chosen = render.select(fresh, claims=claims, budget=budget, here=here, voice=voice)
    handed: list[Entry] = list(chosen.broadcasts) if peek else []
    note = None
    recorded = True
    unreceipted = [e for e in chosen.directed if e.message.id not in mail.receipted] if store.flag("receipts") else []
    if not peek and (chosen.broadcasts or unreceipted):
        handed, note, recorded = _record(store, reader, moment, unreceipted, chosen.broadcasts, deadline, busy)
    shown = render.Selection(chosen.directed, handed, chosen.summarised)
    withheld = {e.message.id for e in chosen.broadcasts} - {e.message.id for e in handed}
    fresh = fresh._replace(broadcasts=[e for e in fresh.broadcasts if e.message.id not in withheld])  # the note
    if record is not None:  # told of: every directed message (shown, or counted in "showing N of M"), and
        record.know({e.message.id for e in [*fresh.directed, *handed]})  # the broadcasts it was handed
        record.show({e.message.id for e in [*shown.directed, *handed]})
    # Shown the same way next time, unless a broadcast was handed over (it is not pending next time) or could not
    # be, or a receipt is still to be written.
    settled = recorded and not chosen.broadcasts and note is None
    if not (shown.directed or shown.broadcasts or fresh.unreadable or note):
        return Delivery(None, mail, NOTHING, new, settled)
    text = render.framing(fresh, shown, claims=claims, here=here, note=note, voice=voice)
    return Delivery(text, mail, shown, new, settled)


def _record(
    store: Store,
    reader: Reader,
    moment: Moment,
    directed: Sequence[Entry],
    casts: Sequence[Entry],
    deadline: Deadline,
    busy: bool,
) -> tuple[list[Entry], str | None, bool]:
    """Hand over the broadcasts and write the receipts in one write: what was handed over, a note when that could
    not be done, and whether it was. When it cannot be done now, directed mail is still shown (its receipt is
    written at a later showing) and the broadcasts wait for the next reader."""
    reason = "the mailbox was busy" if busy else None
    if not busy and store.writable():
        try:
            handed = mailbox.record_shown(
                store,
                repo=reader.repo,
                shown=directed,
                broadcasts=casts,
                host=reader.host,
                moment=moment.value,
                deadline=deadline,
            )
            return handed, None, True
        except MailboxBusy:
            reason = "the mailbox was busy"
        except MailboxError as error:
            problem(store.path, f"could not record a showing to {reader.repo}: {error}")
            reason = "the mailbox could not be written"
    elif not busy:
        reason = "the mailbox is read-only here"
    if not casts:
        return [], None, False
    count = render.count(len(casts), "new broadcast")
    note = f"{reason}, so {count} could not be handed over yet; they stay unread and come at a later showing."
    return [], note, False


def own_command() -> str:
    """How the session's shell runs this gitmail: `gitmail` when that is what PATH finds, else its full path
    (a virtualenv that is not active, the plugin's own copy)."""
    chosen = os.environ.get("GITMAIL_COMMAND")
    if chosen:
        return chosen
    import shlex

    script = os.path.join(os.path.dirname(sys.executable), "gitmail")
    if not os.path.exists(script):
        return f"{shlex.quote(sys.executable)} -m gitmail"
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        found = os.path.join(folder or ".", "gitmail")
        if os.path.exists(found):
            try:
                return "gitmail" if os.path.samefile(found, script) else shlex.quote(script)
            except OSError:
                break
    return shlex.quote(script)


def _may_wake(record: sessions.Record, limit: int, window: float) -> bool:
    recent = [t for t in record.times("wakes") if time.time() - t < window]
    return len(recent) < limit
