"""`gitmail doctor`'s two steps and its text: `examine` runs every check in order, `repair` makes the safe repairs
(store/repair.py) and says what they did, `describe` and `as_json` write the report."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gitmail.doctor.environment as environment
import gitmail.doctor.key_findings as key_findings
import gitmail.doctor.store_findings as store_findings
from gitmail.doctor.findings import Finding, Level, Report, entries, listed
from gitmail.errors import MailboxError
from gitmail.render.words import count
from gitmail.store import migrate
from gitmail.store import repair as mending
from gitmail.store.log import problem

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from gitmail.store.repair import Mended
    from gitmail.store.repository import Store
    from gitmail.values.layout import Located
    from gitmail.workspace import Place


def examine(store: Store, *, here: Place | None, home: Path, repaired: Sequence[str] = ()) -> Report:
    """Every check, for the mailbox, the repository of the work tree `here` (if any) and the hosts in `home`."""
    findings, usable = store_findings.mailbox(store)
    messages: list[Located] = []
    if usable:
        migrate.on_open(store)  # an older format is brought up to date first, as any opening does
        findings += store_findings.journal(store)
        findings += store_findings.locks(store)
        findings += store_findings.files(store)
        found, inventory = store_findings.inventory(store)
        findings += found
        findings += store_findings.outside_layout(store)
        findings += store_findings.oversized(store)
        messages = inventory.readable()
        findings += _guarded("keys", lambda: key_findings.findings(store))
        findings += _guarded("leases", lambda: environment.leases(store))
    findings += environment.repository(store, here, messages)
    findings += _guarded("guard", lambda: environment.guard(store, here)) if usable else []
    findings += environment.hooks(home)
    findings += _guarded("wake", lambda: environment.waking(store)) if usable else []
    findings += environment.notifications(store)
    return Report(store.path, findings, list(repaired))


def _guarded(topic: str, check: Callable[[], list[Finding]]) -> list[Finding]:
    """A check that reads the mailbox through git: where git cannot read it (a packed-refs line that is no ref,
    which the refs finding names with its repair), it says it could not look instead of ending the report."""
    try:
        return check()
    except MailboxError as error:
        if getattr(error, "packed_refs", False):
            return [Finding(topic, Level.NOTE, "not checked: git cannot read the refs until packed-refs is mended")]
        return [Finding(topic, Level.NOTE, f"not checked: {error}")]


def repair(store: Store, *, here: Place | None) -> list[str]:
    """Make the safe repairs, under the lock; what was done, one line each. A mailbox that cannot be used at all
    (someone else's, not gitmail's) is left alone: its findings say what to do."""
    if not mending.usable(store):
        return []
    done = [said(mended) for mended in mending.repair(store)]
    done += environment.end_lapsed(store)
    done += environment.reclaim(store, here)
    for line in done:
        problem(store.path, f"doctor: {line}")
    return done


REPAIRED: dict[str, Callable[[Mended], str]] = {
    mending.KEY_REPLACED: lambda m: (
        f"made a new signing key for this machine ({m.items[0]}) at {m.subject} and "
        f"published it; the damaged one is kept as {m.other}"
    ),
    mending.JOURNAL_SET_ASIDE: lambda m: f"set aside the change a killed writer left ({m.subject}): {m.other}",
    mending.JOURNAL_FINISHED: lambda m: "finished the change a killed writer left",
    mending.LOCK_REMOVED: lambda m: f"removed {m.subject}: left behind by a git process that is gone",
    mending.SETTINGS_RESTORED: lambda m: f"restored gitmail's settings: {', '.join(m.items)}",
    mending.PACKED_LINES_LEFT_OUT: lambda m: (
        f"left {count(m.number, 'line')} git could not read out of packed-refs (kept whole as {m.subject})"
    ),
    mending.REF_FILE_MOVED: lambda m: f"moved {m.subject} aside to {m.other}: it held no object id",
    mending.REF_GIVEN_BACK: lambda m: f"gave {m.subject} back {m.other}, the commit its reflog last gave it",
    mending.REF_LOST: lambda m: f"set aside {m.subject} as {m.other}: what it held is lost",
    mending.OBJECTS_MOVED: lambda m: (
        f"moved {count(len(m.items), 'damaged object file')} git could not read to {m.subject}: {listed(m.items)}"
    ),
    mending.MESSAGE_SET_ASIDE: lambda m: f"set aside {m.subject} ({m.other}) as {m.items[0]}",
    mending.LEFTOVER_REMOVED: lambda m: f"removed {m.subject}: {m.other} is {m.items[0]} ({m.items[1]})",
    mending.LEFTOVER_SET_ASIDE: lambda m: f"set aside {m.subject}: {m.other} is {m.items[0]} ({m.items[1]})",
    mending.RECORD_GIVEN: lambda m: f"gave {m.subject} a record of what was lost ({m.other})",
    mending.NOTES_MENDED: lambda m: f"mended {m.subject}: {m.other} holds every note still whole",
    mending.NOTES_REMOVED: lambda m: f"removed {m.subject}: no commit of it is left whole",
    mending.RECORD_MENDED: lambda m: (
        f"mended the record of moves ({m.subject}): {count(m.number, 'commit')} still whole kept, now under {m.other}"
    ),
    mending.REFLOG_DROPPED: lambda m: (
        f"dropped {m.number} {entries(m.number)} naming lost commits from the reflog of {m.subject}"
    ),
}


def said(mended: Mended) -> str:
    """One repair, in a line."""
    return REPAIRED[mended.kind](mended)


def describe(report: Report) -> str:
    """The report for people: what was repaired, one line per finding (a problem with its remedy), a verdict."""
    lines = [f"gitmail doctor: {report.mailbox}"]
    lines += [f"repaired  {line}" for line in report.repaired]
    for finding in report.findings:
        text = f"{finding.level.value:<8}  {finding.topic}: {finding.text}"
        if finding.remedy:
            text += f" -- fix: {finding.remedy}" if finding.level is Level.PROBLEM else f" -- {finding.remedy}"
        lines.append(text)
    problems = len(report.problems)
    lines.append(f"{count(problems, 'problem')} found." if problems else "No problems found.")
    return "\n".join(lines) + "\n"


def as_json(report: Report) -> dict[str, Any]:
    return {
        "mailbox": str(report.mailbox),
        "healthy": not report.problems,
        "repaired": report.repaired,
        "findings": [
            {"topic": f.topic, "level": f.level.value, "text": f.text, "remedy": f.remedy, "items": list(f.items)}
            for f in report.findings
        ],
    }
