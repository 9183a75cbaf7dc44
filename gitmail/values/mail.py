"""Mail as readers are handed it: a stored message and where it stands (`Entry`), what a repository has pending,
what a done did, a history, where a message stands as its sender sees it, and a move sync made here because a
remote said so. Pure values: the mail operations (mailbox.py) make them, text (render.py) and every adapter read
them."""

from __future__ import annotations

from gitmail.values import jsontext, receipts
from gitmail.values.ids import BROADCAST, ObjectId
from gitmail.values.layout import State
from gitmail.values.machine import Machine

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import NamedTuple

    from gitmail.values.dates import datetime
    from gitmail.values.message import Message
    from gitmail.values.names import RepoName
    from gitmail.values.verdict import Verdict
else:
    from gitmail.values.tuples import NamedTuple


class Move(NamedTuple):
    """A message sync archived or retracted here because a remote said another machine had (store/remotemoves.py
    keeps them)."""

    id: str
    state: str  # what it became here: "archived" or "retracted"
    remote: str  # the remote that said so
    machine: str  # the machine the remote's state names as having made the move ("laptop 4kq8m2x9ab"); "" unknown
    at: float  # when it was moved here (time.time())
    shown: bool | None  # whether a session on this machine had been shown it (None: receipts are off, unknown)
    to: str = ""  # its recipient ("_broadcast" for a broadcast), for messages
    subject: str = ""  # for messages

    def said(self) -> str:
        """What the move amounts to: "done on machine "laptop" (as origin says), never shown here"."""
        machine = Machine.parse(self.machine) if self.machine else None
        where = f"on machine {jsontext.dumps(machine.name)}" if machine is not None and machine.name else "elsewhere"
        text = f"{'done' if self.state == State.ARCHIVED.value else 'retracted'} {where} (as {self.remote} says)"
        return text + (", never shown here" if self.shown is False else "")

    def line(self) -> str:
        """The move in one line: "archived 7kq2m9x4ab (to web, "Please review"): done on machine ..."."""
        to = "a broadcast" if self.to == BROADCAST else f"to {self.to}"
        return f"{self.state} {self.id} ({to}, {jsontext.dumps(self.subject, ensure_ascii=False)}): {self.said()}"


class Entry(NamedTuple):
    """A stored message and where it stands."""

    message: Message
    state: State
    oid: ObjectId  # the message's commit
    recipient: RepoName | None  # whose inbox or archive holds it; None for broadcasts
    records: Sequence[receipts.Record] = ()  # its receipts, where the reader asked for them (log, show)
    moved: Move | None = None  # archived or retracted here because a remote said so (log, show)
    verdict: Verdict | None = None  # from another machine: whether that machine's key vouches for it; None: from here


class Receipted:
    """Which pending messages a session of the repo was already shown once, by id: known beforehand, or found when
    asked (`find` reads the receipts of the ids it is given), so a showing reads only those of what it shows."""

    def __init__(self, known: Iterable[str] = (), find: Callable[[Sequence[str]], Iterable[str]] | None = None) -> None:
        self._known = frozenset(known)
        self._find = find
        self._asked: set[str] = set()  # ids `find` was asked about

    def among(self, ids: Iterable[str]) -> frozenset[str]:
        """Those of `ids` that were shown."""
        ids = list(dict.fromkeys(ids))
        if self._find is not None:
            new = [i for i in ids if i not in self._asked]
            if new:
                self._known |= frozenset(self._find(new))
                self._asked.update(new)
        return self._known.intersection(ids)

    def __contains__(self, item: object) -> bool:
        return isinstance(item, str) and bool(self.among([item]))

    def __repr__(self) -> str:
        return f"Receipted({sorted(self._known)!r}{', ...' if self._find is not None else ''})"


NOT_RECEIPTED = Receipted()


class Pending(NamedTuple):
    """What a repo has to read: directed mail until done, broadcasts until handed over once."""

    repo: RepoName
    directed: Sequence[Entry] = ()  # oldest first
    broadcasts: Sequence[Entry] = ()  # oldest first
    unreadable: Sequence[str] = ()  # ids whose commit or document cannot be read
    claimed_by: str | None = None  # another path that uses the same repo name, when there is one
    receipted: Receipted = NOT_RECEIPTED  # ids already put in front of a session of this repo once


class DoneResult(NamedTuple):
    archived: Sequence[Entry] = ()
    already: Sequence[str] = ()  # already archived, or broadcasts (nothing to archive)
    unshown: Sequence[str] = ()  # `everything`: pending mail no session of this repo was shown yet, left alone
    set_aside: Sequence[str] = ()  # unreadable: moved under refs/gitmail/_damaged/ instead of archived


class History(list[Entry]):
    """What `log` found: its entries, the ids of messages it selected that could not be read, and what it could
    not record on the way (the history index, on a full disk), one line."""

    def __init__(
        self, entries: Iterable[Entry] = (), unreadable: Sequence[str] = (), unrecorded: str | None = None
    ) -> None:
        super().__init__(entries)
        self.unreadable = list(unreadable)
        self.unrecorded = unrecorded


class Status(NamedTuple):
    """Where a message stands as its sender sees it."""

    name: str  # pending (not yet shown), delivered (shown), done, replied, retracted
    at: datetime | None = None  # when it was first shown, or handled (None where unknown)
    reply: str | None = None  # replied: the reply's id
    reached: Sequence[receipts.Record] = ()  # the first showing to each repo, oldest first


def status(entry: Entry) -> Status:
    """From the message's ref and its receipts (`log` and `show` read them)."""
    if entry.state is State.RETRACTED:
        return Status("retracted", reached=receipts.delivered(entry.records))
    if entry.recipient is None:  # an active broadcast: delivered once any repo was shown it
        reached = receipts.delivered(entry.records)
        return Status("delivered", reached[0].at, reached=reached) if reached else Status("pending")
    reached = receipts.delivered(entry.records, str(entry.recipient))
    if entry.state is State.ARCHIVED:
        handled = receipts.handled(entry.records, str(entry.recipient))
        if handled is not None and handled.event == receipts.REPLIED:
            return Status("replied", handled.at, handled.reply, reached)
        return Status("done", handled.at if handled is not None else None, reached=reached)
    return Status("delivered", reached[0].at, reached=reached) if reached else Status("pending")


def ids_of(entries: Sequence[Entry]) -> list[str]:
    return [e.message.id for e in entries]
