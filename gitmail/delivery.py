"""The one delivery policy: for a host and a moment, what a reader is shown, through which channel, within which
budget, whether a session may be woken or its turn continued, and what is recorded. The hooks, `gitmail inbox` and
the MCP inbox tool all ask `deliver` (through the action layer); they only translate their host's input and output.
`HOSTS` is the one table of which host event carries which moment: the installer and `doctor` read it too.

- At session start (and resume, fork, clear, compact) a session has lost what it knew: it is shown all its
  pending mail. At a tool call, the next prompt, the turn's end or an idle wake it is shown only mail that
  arrived since it last looked, once. Asked (`inbox`), it is shown everything.
- Message content goes only into channels the host labels as hook context or tool output. Where a host offers
  only a user turn (Codex's turn-end continuation, Claude Code's wake), gitmail's own fixed notice goes instead,
  and the session reads the mail with `gitmail inbox`.
- Whole messages within a byte budget that bounds both hosts' caps; what does not fit stays pending.
- Deliver first, record after: a broadcast is shown only once it is handed over (in the same single write as the
  receipts of what is shown with it); a receipt of directed mail may be written after the answer (`Recording`),
  and one that is not is written at a later showing. A busy mailbox never delays directed mail past the deadline.
- A turn is continued at most once per batch of new mail, never while a continuation is running, and at most
  `MAX_CONTINUATIONS` times per session; a session is woken at most `wake_limit` times per `wake_window`, never
  during a turn, and not at all when waking is switched off (GITMAIL_WAKE=0, or `gitmail.wake = false`).
"""

from __future__ import annotations

import os
import time

from gitmail import mailbox, render
from gitmail.errors import MailboxBusy, MailboxError, Unwritable
from gitmail.store import stamps
from gitmail.store.claims import claim, load_claims
from gitmail.store.files import refused
from gitmail.store.lock import Deadline
from gitmail.store.log import problem
from gitmail.values import urgency as levels
from gitmail.values.layout import leases_prefix
from gitmail.values.mail import Entry, Pending
from gitmail.values.names import RepoName, name_problem

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from enum import Enum
    from typing import Any, NamedTuple

    from gitmail.store import sessions
    from gitmail.store.repository import Store
    from gitmail.workspace import Actor
else:
    from gitmail.values.choices import Enum
    from gitmail.values.tuples import NamedTuple

MAX_CONTINUATIONS = 20  # turn ends continued per session, whatever arrives
WAKE_LIMIT = 10  # wakes per window per session
WAKE_LIMIT_NOW = 3  # more wakes per window for mail marked *now*
WAKE_WINDOW = 300.0  # seconds
NUDGE_PENDING = 600.0  # seconds a queued wake turn counts as outstanding when no hook of the session ran since


class Moment(Enum):
    START = "session-start"  # startup, resume, fork, clear, compact: the session lost what it knew
    TOOL = "tool"  # mid-turn, after a tool call
    PROMPT = "prompt"  # the user sent the next prompt
    STOP = "stop"  # the turn is about to end
    WAKE = "wake"  # the session sits idle
    END = "session-end"  # the session ended: what it knew goes
    EDIT = "edit"  # a tool call is about to run: what it writes may be another session's (guarding.py decides)
    INBOX = "inbox"  # someone asked: `gitmail inbox`, the MCP inbox tool


class Channel(Enum):
    CONTEXT = "context"  # hook context or tool output (system or developer role): may carry message content
    NOTICE = "notice"  # a user turn: only gitmail's own fixed notice
    NUDGE = "nudge"  # a user turn queued for an idle session (gitmail's notice), whose own hooks then show the mail


class Capability(NamedTuple):
    """How a host carries one moment."""

    event: str  # the host's hook event
    channel: Channel | None  # what reaches the model through it; None: nothing does
    hook: bool = True  # carried by a hook the installer writes (not: gitmail starts it from outside)


HOSTS: dict[str, dict[Moment, Capability]] = {
    "claude": {
        Moment.START: Capability("SessionStart", Channel.CONTEXT),  # every source: startup, resume, fork, clear, ...
        Moment.TOOL: Capability("PostToolBatch", Channel.CONTEXT),  # once per batch of tool calls, after the results
        Moment.PROMPT: Capability("UserPromptSubmit", Channel.CONTEXT),
        Moment.STOP: Capability("Stop", Channel.CONTEXT),  # additionalContext continues the turn as a system reminder
        Moment.WAKE: Capability("FileChanged", Channel.NOTICE),  # asyncRewake: exit 2 starts a turn with stderr
        Moment.END: Capability("SessionEnd", None),
        Moment.EDIT: Capability("PreToolUse", Channel.CONTEXT),  # a deny, or a line after the tool's result
    },
    "codex": {
        Moment.START: Capability("SessionStart", Channel.CONTEXT),
        Moment.TOOL: Capability("PostToolUse", Channel.CONTEXT),
        Moment.PROMPT: Capability("UserPromptSubmit", Channel.CONTEXT),
        Moment.STOP: Capability("Stop", Channel.NOTICE),  # continues the turn as a user-role message
        Moment.WAKE: Capability("codex queue", Channel.NUDGE, hook=False),  # gitmail queues a turn (waking.py)
        Moment.END: Capability("SessionEnd", None),
        Moment.EDIT: Capability("PreToolUse", Channel.CONTEXT),  # a deny with its reason, or a developer message
    },
}
ASKED = Capability("", Channel.CONTEXT)  # `gitmail inbox` and MCP: the answer is tool output
# How much one showing may hold, per reader: hook context and a tool result land in a model's context, whose hosts
# cut or refuse long ones; a person at a terminal, a script and the page read everything.
BUDGETS: dict[str, int | None] = {"claude": render.BUDGET, "codex": render.BUDGET, "mcp": render.BUDGET}


def capability(via: str, moment: Moment) -> Capability | None:
    """How `via` carries `moment`; None when it does not."""
    if moment is Moment.INBOX:
        return ASKED
    return HOSTS.get(via, {}).get(moment)


class Recording(NamedTuple):
    """Receipts still to be written for a showing: directed mail shown for the first time."""

    repo: RepoName
    shown: Sequence[Entry]
    via: str
    moment: Moment


class Delivery(NamedTuple):
    text: str | None  # what to hand the reader; None when there is nothing to say
    mail: Pending  # everything pending for the repo
    shown: render.Selection  # the messages the text shows
    new: int = 0  # messages the session had not been told of
    settled: bool = False  # nothing this showing wrote changes what the next one shows: it may be repeated as is
    stamps: str = ""  # the change stamps the showing was made at
    record: dict[str, Any] | None = None  # the session's record as this showing left it
    recording: Recording | None = None  # receipts the caller is to write once it has answered (a showing it
    # keeps to repeat must be forgotten if that write fails, or the receipts would never be written)
    unrecorded: str | None = None  # one line: what this showing could not record (a full disk); the text ends with it
    generic: bool = True  # what any new session of the repo would be shown: nothing was this session's own
    quiet: tuple[str, ...] = ()  # the moments at which, while `stamps` hold, the session has nothing to do


NOTHING = render.Selection((), ())


QUIET = (Moment.TOOL, Moment.PROMPT, Moment.STOP, Moment.WAKE)  # with no new mail these have nothing to do


class _Read(NamedTuple):
    """What a delivery found before it decides: the mail, the stamps it was read at, and what it could not do."""

    mail: Pending
    stamps: str
    generic: bool  # nothing pending is this session's own (from it, or for it alone)
    busy: bool  # the mailbox was busy: nothing more is waited for
    unrecorded: list[tuple[str, str]]  # what this showing could not record, and why (a full disk)


def deliver(
    store: Store,
    actor: Actor,
    moment: Moment,
    *,
    deadline: Deadline,
    peek: bool = False,
    continuing: bool = False,
    command: str = "gitmail",
    defer: bool = False,
    watch: bool = False,
) -> Delivery:
    """Decide and carry out one delivery. `continuing`: the host says this turn end was already continued once.
    `watch`: the session start asks to be woken when mail arrives.
    `defer`: receipts of directed mail are returned (`Delivery.recording`) for the caller to write after it has
    answered, instead of being written before. The text keeps within its reader's budget (BUDGETS)."""
    carried = capability(actor.via, moment)
    if carried is None or carried.channel is None or moment is Moment.EDIT or not store.exists():
        return Delivery(None, Pending(actor.repo), NOTHING)
    if moment is Moment.WAKE and not wake_enabled(store):
        return Delivery(None, Pending(actor.repo), NOTHING)
    found = _read(store, actor, moment, deadline, peek)
    leased = _leased(store, actor) if moment in (Moment.START, Moment.INBOX) else ""
    budget = BUDGETS.get(actor.via)
    budget = budget - render.size(leased) if budget is not None else None
    show = _Showing(
        store, actor, moment, carried.channel, deadline, found.busy, budget, peek, command, defer, found.unrecorded,
    )  # fmt: skip
    session = actor.session
    if session is None or peek:
        return _noting(_with(show(found.mail, None), leased), found.unrecorded)
    from gitmail.store import sessions  # a session's record: not loaded for a reader outside any session

    with sessions.record(store.root, session.host, session.id, deadline) as record:
        if record is None:  # no record to be had: behave as a session that knows nothing yet
            return _noting(_with(show(found.mail, None), leased), found.unrecorded)
        _begin(store, actor, moment, record, watch)
        delivery = _in_session(store, moment, record, found.mail, show, carried.channel, continuing)
        if moment not in (Moment.STOP, Moment.WAKE) or (
            delivery.text is not None and carried.channel is not Channel.NUDGE
        ):
            record.set("stamps", found.stamps)  # a queued turn's own hooks must see the mail as new: not after a nudge
        settled = delivery.settled and stamps.read(store.root, actor.repo) == found.stamps
        delivery = delivery._replace(
            settled=settled, stamps=found.stamps, record=dict(record.data), generic=found.generic, quiet=record.quiet
        )
    if record.unsaved is not None:  # the record is written once the block is over
        found.unrecorded.append(("what this session was shown", refused(record.unsaved)))
    return _noting(_with(delivery, leased), found.unrecorded)


def _leased(store: Store, actor: Actor) -> str:
    """What a reader is told before work starts of the leases others hold in its repository ("" when none)."""
    if not store.refs_under(leases_prefix(actor.repo)):
        return ""  # no lease: what reads and judges them is not loaded
    from gitmail.mailbox import leasing

    me = actor.session.key if actor.session is not None else ""
    others = [s.lease for s in leasing.standing(store, actor.repo) if s.held and s.lease.holder != me]
    return render.leases_held(others) if others else ""


def _with(delivery: Delivery, leased: str) -> Delivery:
    """The delivery, with the leases others hold after the mail (or alone, when no mail is shown)."""
    if not leased:
        return delivery
    text = f"{delivery.text}\n{leased}" if delivery.text else leased
    return delivery._replace(text=text)


class Preview(NamedTuple):
    """What a new session of a repository would be shown at its start, worked out beforehand (no write made)."""

    text: str | None
    stamps: str  # the change stamps it was made at
    record: dict[str, Any]  # the new session's record once shown it
    receipts: tuple[str, ...]  # ids of the directed mail it shows for the first time: receipts still to write
    quiet: tuple[str, ...]  # the moments at which, while the stamps hold, the session has nothing to do


def preview_start(store: Store, actor: Actor, *, command: str, watch: bool) -> Preview | None:
    """What a new session of the actor's repository (on its host, in its work tree) would be shown at its start,
    as `deliver` would show it, without writing anything; None where that showing would have to write before it
    may be made (a broadcast is shown only once it is handed over), or says something only its own start knows
    (another path's claim on the name)."""
    if actor.session is None or actor.place is None or not store.exists():
        return None
    claimed = load_claims(store).get(actor.repo)
    if claimed is not None and os.path.realpath(claimed) != os.path.realpath(actor.place.home):
        return None
    found = _read(store, actor, Moment.START, Deadline(0), True)
    if found.mail.broadcasts or not found.generic:
        return None
    leased = _leased(store, actor)
    budget = BUDGETS.get(actor.via)
    budget = budget - render.size(leased) if budget is not None else None
    show = _Showing(store, actor, Moment.START, Channel.CONTEXT, Deadline(0), True, budget, True, command, False, [])
    delivery = _with(show(found.mail, None), leased)
    known = {e.message.id for e in found.mail.directed}  # told of: shown, or counted in "showing N of M"
    summarised = delivery.shown.summarised
    shown = [e.message.id for e in delivery.shown.directed if e.message.id not in summarised]
    record: dict[str, Any] = {
        "known": sorted(known),
        "shown": sorted(shown),
        "stamps": found.stamps,
        "repo": str(actor.repo),
        "watch": watch,
    }
    ids = [e.message.id for e in delivery.shown.directed]
    before = found.mail.receipted.among(ids) if store.flag("receipts") else frozenset()
    unreceipted = tuple(i for i in ids if i not in before)
    quiet = tuple(m.value for m in QUIET)  # a new session is told of all its mail: none is held for the next prompt
    return Preview(delivery.text, found.stamps, record, unreceipted if store.flag("receipts") else (), quiet)


def _read(store: Store, actor: Actor, moment: Moment, deadline: Deadline, peek: bool) -> _Read:
    """The claim on the repo's name (when a reader starts or asks), the stamps, and the mail for the session."""
    busy = False
    claimed_by = None
    unrecorded: list[tuple[str, str]] = []
    if actor.here is not None and moment in (Moment.START, Moment.INBOX) and not peek:
        try:
            claimed_by = claim(store, repo=actor.repo, path=actor.here, timeout=deadline.left())
        except MailboxBusy:
            busy = True  # recording who uses the name can wait for the next reader
        except Unwritable as error:
            unrecorded.append(("which repository uses this name", error.reason))
    seen_stamps = stamps.read(store.root, actor.repo)  # before reading: a later send is then noticed next time
    mail = mailbox.pending(
        store, repo=actor.repo, also=aliases(store, actor), deadline=Deadline(0) if busy else deadline
    )
    me = actor.session.key if actor.session is not None else None
    generic = not any(me in (e.message.from_session, e.message.to_session) for e in [*mail.directed, *mail.broadcasts])
    mail = for_session(store, actor, mail)._replace(claimed_by=claimed_by)
    return _Read(mail, seen_stamps, generic, busy, unrecorded)


def _begin(store: Store, actor: Actor, moment: Moment, record: sessions.Record, watch: bool) -> None:
    """What the moment itself changes in the session's record: a start forgets what the session knew."""
    from gitmail.store import sessions

    session = actor.session
    assert session is not None
    record.set("repo", str(actor.repo))
    if actor.place is not None:
        record.top = str(actor.place.top)
    if session.transcript is not None:
        record.set("transcript", session.transcript)
    if moment is Moment.START:
        record.know(set(), reset=True)
        record.set("shown", [])
        sessions.resumed(record)
        sessions.note_live(store.root, session.host, session.id)
        record.set("watch", watch)
    else:
        sessions.note_live(store.root, session.host, session.id, unless_known=True)
    if moment is not Moment.WAKE:  # a wake is gitmail's doing, not the session's
        record.moment = moment.value
        record.data.pop("nudged_at", None)  # a turn of its own ran: a wake queued for it was used up


def _in_session(
    store: Store,
    moment: Moment,
    record: sessions.Record,
    mail: Pending,
    show: _Showing,
    channel: Channel,
    continuing: bool,
) -> Delivery:
    """Whether this moment shows the session what it has not been told of, and what that leaves to record: the
    wakes and continuations it used, and the moments at which, until more arrives, there is nothing to do."""
    delivery = Delivery(None, mail, NOTHING)
    everything = [*mail.directed, *mail.broadcasts]
    unseen = [e for e in everything if e.message.id not in record.known]
    only_low = bool(unseen) and all(e.message.urgency == levels.LOW for e in unseen)
    charged = _wake_counter(store, record, unseen, channel) if moment is Moment.WAKE else None
    if moment is Moment.STOP and (continuing or record.count("continued") >= MAX_CONTINUATIONS):
        pass  # the turn ends; what arrived is shown at the next prompt or tool call
    elif moment in (Moment.TOOL, Moment.STOP, Moment.WAKE) and only_low:
        pass  # low-urgency mail alone never interrupts: it waits for the next prompt (or comes with other mail)
    elif moment is Moment.WAKE and (record.turn or charged is None):
        pass  # mid-turn mail reaches it at the next tool call or turn end; or woken often enough lately
    else:
        delivery = show(mail, record)
        if delivery.text is not None and moment is Moment.STOP:
            record.add("continued")
        if delivery.text is not None and charged is not None:
            most = wake_limits(store)[2] if charged == "wakes_now" else wake_limits(store)[0]
            record.set(charged, [*record.times(charged), time.time()][-max(most, 1) :])
    held = any(e.message.urgency == levels.LOW and e.message.id not in record.known for e in everything)
    # Low mail held back is shown with the next prompt: that moment is not quiet while it waits.
    record.quiet = tuple(m.value for m in QUIET if not (held and m is Moment.PROMPT))
    return delivery


def _noting(delivery: Delivery, unrecorded: Sequence[tuple[str, str]]) -> Delivery:
    """The delivery with one line saying what it could not record, at the end of its text (not kept to be
    repeated: the next showing records it)."""
    if not unrecorded:
        return delivery
    line = render.unrecorded([thing for thing, _ in unrecorded], [reason for _, reason in unrecorded])
    text = f"{delivery.text}\nNote: {line}.\n" if delivery.text is not None else None
    return delivery._replace(text=text, settled=False, unrecorded=line)


def for_session(store: Store, actor: Actor, mail: Pending) -> Pending:
    """What of a repo's pending mail is for the actor's session: never what that session sent itself, and of mail
    for one session of the repo only its own; except that nothing is stranded: a reply to a session that has ended
    goes to every session of its repo (a Codex thread whose window is closed has ended: codex.py), and so does mail
    for a session whose record is forgotten (a week unheard of); other mail for an ended session waits for it to
    resume. Outside a session (a person at a terminal, a client), everything pending for the repo."""
    if actor.session is None:
        return mail
    me = actor.session.key
    states: dict[str, str | None] = {}

    def state(key: str) -> str | None:
        if key not in states:  # mail for one session: whether it still runs is read (and what reads it loaded)
            from gitmail import codex
            from gitmail.store import sessions

            host, _, session_id = key.partition(":")
            found = sessions.info(store.root, host, session_id)
            states[key] = codex.routed(store.root, found).state if found is not None else None
        return states[key]

    def visible(entry: Entry) -> bool:
        m = entry.message
        if m.from_session == me:
            return False
        if m.to_session is None or m.to_session == me:
            return True
        now = state(m.to_session)
        return now is None or (now == "ended" and m.reply_to is not None)

    return mail._replace(
        directed=[e for e in mail.directed if visible(e)], broadcasts=[e for e in mail.broadcasts if visible(e)]
    )


def aliases(store: Store, actor: Actor) -> list[RepoName]:
    """Other names the actor's work tree still receives mail under: a linked worktree went by its folder's name
    before worktrees were named after their repository, and mail sent to that name (its claim records this work
    tree) is delivered to its sessions too."""
    found = actor.place
    if found is None or found.worktree is None or found.worktree == actor.repo or name_problem(found.worktree):
        return []
    old = RepoName(found.worktree)
    recorded = load_claims(store).get(old)
    same = recorded is not None and os.path.realpath(recorded) == os.path.realpath(found.top)
    return [old] if same else []


def record(store: Store, recording: Recording, *, deadline: Deadline) -> None:
    """Write the receipts a deferred showing left (`Delivery.recording`)."""
    mailbox.record_shown(
        store,
        repo=recording.repo,
        shown=recording.shown,
        host=recording.via,
        moment=recording.moment.value,
        deadline=deadline,
    )


class _Showing:
    """One showing: what to show of the mail, and what it records."""

    def __init__(
        self,
        store: Store,
        actor: Actor,
        moment: Moment,
        channel: Channel,
        deadline: Deadline,
        busy: bool,
        budget: int | None,
        peek: bool,
        command: str,
        defer: bool,
        unrecorded: list[tuple[str, str]],
    ) -> None:
        self.store, self.actor, self.moment, self.channel = store, actor, moment, channel
        self.unrecorded = unrecorded
        self.deadline, self.busy, self.budget, self.peek, self.defer = deadline, busy, budget, peek, defer
        self.voice = render.Voice(command=command, new=moment not in (Moment.START, Moment.INBOX))

    def __call__(self, mail: Pending, record: sessions.Record | None) -> Delivery:
        asked = self.moment is Moment.INBOX  # asked for: everything, whatever the session knows
        known = record.known if record is not None and not asked else set()
        fresh = Pending(
            mail.repo,
            [e for e in mail.directed if e.message.id not in known],
            [e for e in mail.broadcasts if e.message.id not in known],
            mail.unreadable if self.moment in (Moment.START, Moment.INBOX) else (),
            mail.claimed_by,
            mail.receipted,
        )
        new = len(fresh.directed) + len(fresh.broadcasts)
        if not (new or fresh.unreadable):
            return Delivery(None, mail, NOTHING, settled=True)
        if self.channel is Channel.NUDGE:
            # The queued turn's own hooks show the mail: nothing is known yet, only this batch is not nudged for again.
            ids = {e.message.id for e in [*mail.directed, *mail.broadcasts]}
            if record is not None:
                nudged = set(record.get("nudged") or []) & ids
                record.set("nudged", sorted(nudged | {e.message.id for e in [*fresh.directed, *fresh.broadcasts]}))
                record.set("nudged_at", time.time())
            return Delivery(render.notice(mail.repo, new, voice=self.voice, nudge=True), mail, NOTHING, new)
        if self.channel is Channel.NOTICE:
            # Nothing is shown, so nothing is handed over or receipted: `gitmail inbox` does that when it is run.
            if record is not None:
                record.know({e.message.id for e in [*fresh.directed, *fresh.broadcasts]})
            return Delivery(render.notice(mail.repo, new, voice=self.voice), mail, NOTHING, new)
        here = str(self.actor.here) if self.actor.here else None
        claims = load_claims(self.store)
        chosen = render.select(fresh, claims=claims, budget=self.budget, here=here, voice=self.voice)
        handed: list[Entry] = list(chosen.broadcasts) if self.peek else []
        note, recorded, recording = None, True, None
        receipts = self.store.flag("receipts")
        unreceipted = []  # directed mail shown, never before to a session of the repo: its receipts to write
        if receipts and not self.peek:  # only what is shown has its receipts read (mail.receipted)
            before = mail.receipted.among(e.message.id for e in chosen.directed)
            unreceipted = [e for e in chosen.directed if e.message.id not in before]
        if not self.peek and chosen.broadcasts:
            handed, note, recorded = self._record(unreceipted, chosen.broadcasts)
        elif not self.peek and unreceipted and self.defer:
            recording = Recording(mail.repo, unreceipted, self.actor.via, self.moment)  # the caller writes it
        elif not self.peek and unreceipted:
            handed, note, recorded = self._record(unreceipted, ())
        shown = render.Selection(chosen.directed, handed, chosen.summarised)
        withheld = {e.message.id for e in chosen.broadcasts} - {e.message.id for e in handed}
        fresh = fresh._replace(broadcasts=[e for e in fresh.broadcasts if e.message.id not in withheld])  # the note
        if record is not None:  # told of: every directed message (shown, or counted in "showing N of M"), and
            record.know({e.message.id for e in [*fresh.directed, *handed]})  # the broadcasts it was handed
            record.show({e.message.id for e in [*shown.directed, *handed] if e.message.id not in shown.summarised})
        # Shown the same way next time, unless a broadcast was handed over (it is not pending next time) or could not
        # be, or a receipt is still to be written.
        settled = recorded and not chosen.broadcasts and note is None
        if not (shown.directed or shown.broadcasts or fresh.unreadable or note):
            return Delivery(None, mail, NOTHING, new, settled)
        text = render.framing(fresh, shown, claims=claims, here=here, note=note, voice=self.voice)
        return Delivery(text, mail, shown, new, settled, recording=recording)

    def _record(self, directed: Sequence[Entry], casts: Sequence[Entry]) -> tuple[list[Entry], str | None, bool]:
        """Hand over the broadcasts and write the receipts in one write: what was handed over, a note when that
        could not be done, and whether it was. When it cannot be done now, directed mail is still shown (its
        receipt is written at a later showing) and the broadcasts wait for the next reader."""
        store = self.store
        reason = "the mailbox was busy" if self.busy else None
        if not self.busy and store.writable():
            try:
                handed = mailbox.record_shown(
                    store,
                    repo=self.actor.repo,
                    shown=directed,
                    broadcasts=casts,
                    host=self.actor.via,
                    moment=self.moment.value,
                    deadline=self.deadline,
                )
                return handed, None, True
            except MailboxBusy:
                reason = "the mailbox was busy"
            except MailboxError as error:
                problem(store.root, f"could not record a showing to {self.actor.repo}: {error}")
                reason = "the mailbox could not be written"
                if directed:  # directed mail is shown all the same: say what was not recorded
                    why = error.reason if isinstance(error, Unwritable) else str(error)
                    self.unrecorded.append(("that this mail was shown", why))
        elif not self.busy:
            reason = "the mailbox is read-only here"
        if not casts:
            return [], None, False
        count = render.count(len(casts), "new broadcast")
        note = f"{reason}, so {count} could not be handed over yet; they stay unread and come at a later showing."
        return [], note, False


def wake_enabled(store: Store) -> bool:
    """The kill switch for waking idle sessions: GITMAIL_WAKE=0 in the environment, or `gitmail.wake = false` in the
    mailbox's config."""
    if os.environ.get("GITMAIL_WAKE", "").strip().lower() in ("0", "false", "no", "off"):
        return False
    return store.flag("wake")


def wake_limits(store: Store) -> tuple[int, float, int]:
    """At most this many wakes per this many seconds per session, and at most that many more for mail marked *now*:
    `gitmail.wakeLimit`, `gitmail.wakeWindow` and `gitmail.wakeLimitNow` in the mailbox's config, else the
    defaults."""
    try:
        limit = max(0, int(store.setting("wakeLimit") or WAKE_LIMIT))
        window = max(0.0, float(store.setting("wakeWindow") or WAKE_WINDOW))
        urgent = max(0, int(store.setting("wakeLimitNow") or WAKE_LIMIT_NOW))
    except ValueError:
        return WAKE_LIMIT, WAKE_WINDOW, WAKE_LIMIT_NOW
    return limit, window, urgent


def _wake_counter(
    store: Store, record: sessions.Record, unseen: Sequence[Entry], channel: Channel | None
) -> str | None:
    """Which wake count a wake for this mail is charged to, or None when the session is not to be woken: low mail
    never wakes; mail marked *now* has a count of its own (so chatter cannot use up an urgent wake, and a sender
    who marks everything *now* gets few wakes out of it); everything else shares the normal count. A wake that
    only queues a turn (Codex) is queued once per batch of new mail and never while one is outstanding."""
    if channel is Channel.NUDGE:
        started = record.get("nudged_at")
        if isinstance(started, (int, float)) and time.time() - started < NUDGE_PENDING:
            return None
        nudged = set(record.get("nudged") or [])
        unseen = [e for e in unseen if e.message.id not in nudged]
    loud = {e.message.urgency for e in unseen} - {levels.LOW}
    if not loud:
        return None
    limit, window, urgent = wake_limits(store)

    def room(name: str, most: int) -> bool:
        return len([t for t in record.times(name) if time.time() - t < window]) < most

    if levels.NOW in loud and room("wakes_now", urgent):
        return "wakes_now"
    return "wakes" if room("wakes", limit) else None
