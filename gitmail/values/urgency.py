"""How urgent a message is, as its sender says: `now`, `normal` (the default) or `low`. What each level means for
delivery is decided in delivery.py; here are the names and their order. Pure."""

from __future__ import annotations

from gitmail.errors import UsageError

NOW, NORMAL, LOW = "now", "normal", "low"
LEVELS = (NOW, NORMAL, LOW)  # most urgent first


def parse(text: str | None) -> str:
    """A level as a sender gives it (any case); a usage error for anything else."""
    if text is None:
        return NORMAL
    level = text.strip().lower()
    if level not in LEVELS:
        raise UsageError(f"invalid urgency {text!r}: use now, normal or low")
    return level


def stored(text: str) -> str:
    """A level as a document records it: one gitmail does not know (a newer writer's) reads as normal."""
    return text if text in LEVELS else NORMAL


def rank(level: str) -> int:
    """0 for the most urgent: mail is shown in this order."""
    return LEVELS.index(level) if level in LEVELS else 1
