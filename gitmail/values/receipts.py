"""Receipts: what happened to a message after it was sent, so its sender can tell "waiting" from "ignored". Pure.

Receipts are notes on the message's commit in `refs/notes/gitmail-receipts`, one compact JSON record per line,
sorted and unique, so two copies merge as a union (`cat_sort_uniq`), like the broadcast seen-set:

    {"at":"2026-11-29T09:31:02+00:00","event":"delivered","host":"claude","moment":"session-start","repo":"web"}
    {"at":"2026-11-29T09:40:11+00:00","event":"replied","reply":"5tgh0a1b2c","repo":"web"}

A repo gets one "delivered" record per message: the first time the message was put in front of one of its
sessions (later showings add nothing). "done", "replied" and "reopened" record how it was handled; "retracted",
that its sender retracted a broadcast (in a notes commit signed like every commit gitmail writes); "applied" and
"apply-failed" that a repo applied the message's patch with `gitmail apply`, or tried to and git could not.
"""

from __future__ import annotations

from gitmail.values import jsontext
from gitmail.values.dates import datetime
from gitmail.values.names import nfc

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Sequence
    from typing import NamedTuple
else:
    from gitmail.values.tuples import NamedTuple

RECEIPTS_NOTES = "refs/notes/gitmail-receipts"

DELIVERED = "delivered"
DONE = "done"
REPLIED = "replied"
REOPENED = "reopened"
RETRACTED = "retracted"  # by the broadcast's sender: the signed record of a retraction
APPLIED = "applied"
APPLY_FAILED = "apply-failed"
_HANDLING = (DONE, REPLIED, REOPENED)


class Record(NamedTuple):
    event: str
    repo: str
    at: datetime
    host: str | None = None  # delivered: claude, codex, cli or mcp
    moment: str | None = None  # delivered: session-start, tool, prompt, stop, wake, inbox
    reply: str | None = None  # replied: the id of the reply
    machine: str | None = None  # the id of the machine where it happened (older records: unknown)

    def line(self) -> str:
        fields = {"event": self.event, "repo": self.repo, "at": self.at.isoformat()}
        optional = (("host", self.host), ("moment", self.moment), ("reply", self.reply), ("machine", self.machine))
        fields.update({k: v for k, v in optional if v})
        return jsontext.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def parse(lines: Iterable[str]) -> list[Record]:
    """The records in a note; lines that are not records (a hand edit, a newer format) are skipped."""
    records = []
    for line in lines:
        try:
            raw = jsontext.loads(line)
            at = datetime.fromisoformat(raw["at"])
            if at.tzinfo is None or not isinstance(raw["event"], str) or not isinstance(raw["repo"], str):
                continue
            records.append(
                Record(
                    event=raw["event"],
                    repo=nfc(raw["repo"]),
                    at=at,
                    host=_text(raw.get("host")),
                    moment=_text(raw.get("moment")),
                    reply=_text(raw.get("reply")),
                    machine=_text(raw.get("machine")),
                )
            )
        except (ValueError, KeyError, TypeError):
            continue
    return sorted(records, key=lambda r: r.at)


def written_on(records: Sequence[Record], machine: str | None, made_up: Collection[Record] = ()) -> list[Record]:
    """The records a machine wrote itself: what another machine wrote, or a remote made up (`made_up`: what sync
    brought in claiming this machine, store/syncedreceipts.py), says nothing of it."""
    return [record for record in records if record.machine == machine and record not in made_up]


def delivered(records: Sequence[Record], repo: str | None = None) -> list[Record]:
    """First showing per repo (or for one repo), oldest first."""
    first: dict[str, Record] = {}
    for record in records:
        if record.event == DELIVERED and (repo is None or record.repo == repo) and record.repo not in first:
            first[record.repo] = record
    return list(first.values())


def handled(records: Sequence[Record], repo: str) -> Record | None:
    """The latest of done, replied and reopened for this repo: how the message stands with it now."""
    latest = None
    for record in records:
        if record.event in _HANDLING and record.repo == repo:
            latest = record
    return latest


def applying(records: Sequence[Record]) -> list[Record]:
    """Every record of `gitmail apply` on the message (applied or failed), oldest first."""
    return [record for record in records if record.event in (APPLIED, APPLY_FAILED)]


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
