"""What `gitmail doctor` finds, and the tables it finds it by: each `Rule` is a condition on the facts a check
gathered, the line it says when the condition holds, and the remedy. Also the few grammar helpers its lines need
beside `render.count`."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Generic, NamedTuple, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from pathlib import Path

LISTED = 10  # ids or files named in one line before "and N more"

T = TypeVar("T")


class Level(Enum):
    OK = "ok"
    NOTE = "note"  # worth knowing; nothing is broken
    PROBLEM = "problem"  # mail is lost, stuck or at risk until the remedy is applied


class Finding(NamedTuple):
    topic: str  # what was looked at: mailbox, messages, journal, locks, repository, claude, codex, ...
    level: Level
    text: str  # one line saying what was found
    remedy: str = ""  # what to do about it
    items: tuple[str, ...] = ()  # every ref, id or file it concerns (the text names the first few)


class Report(NamedTuple):
    mailbox: Path
    findings: list[Finding]
    repaired: list[str]  # what `repair` did, one line each

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.level is Level.PROBLEM]


def _nothing(_: object) -> tuple[str, ...]:
    return ()


@dataclass(frozen=True)
class Rule(Generic[T]):
    """One row of a table of findings: when `condition` holds of the facts, a finding of this topic and level."""

    topic: str
    level: Level
    condition: Callable[[T], object]
    text: Callable[[T], str]
    remedy: Callable[[T], str] | str = ""
    items: Callable[[T], Iterable[str]] = _nothing

    def finding(self, facts: T) -> Finding:
        remedy = self.remedy if isinstance(self.remedy, str) else self.remedy(facts)
        return Finding(self.topic, self.level, self.text(facts), remedy, tuple(self.items(facts)))


def judged(table: Sequence[Rule[T]], facts: T) -> list[Finding]:
    """The findings of every row of `table` whose condition holds of `facts`, in the table's order."""
    return [rule.finding(facts) for rule in table if rule.condition(facts)]


def each(table: Sequence[Rule[T]], facts: Iterable[T]) -> list[Finding]:
    """The findings of `table` for each of several facts (each key, each notes ref, ...)."""
    return [finding for one in facts for finding in judged(table, one)]


def always(_: object) -> bool:
    return True


# -- grammar ----------------------------------------------------------------------------------------------------


def listed(items: Sequence[str]) -> str:
    more = len(items) - LISTED
    return ", ".join(items[:LISTED]) + (f" and {more:,} more" if more > 0 else "")


def was(n: int) -> str:
    return "was" if n == 1 else "were"


def is_(n: int) -> str:
    return "is" if n == 1 else "are"


def them(n: int) -> str:
    return "it" if n == 1 else "them"


def holds(n: int) -> str:
    return "holds" if n == 1 else "hold"


def points(n: int) -> str:
    return "points" if n == 1 else "point"


def entries(n: int) -> str:
    return "entry" if n == 1 else "entries"
