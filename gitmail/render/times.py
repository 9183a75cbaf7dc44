"""Times as texts write them: a message's date, a moment recorded as seconds, when a lease ends."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from datetime import datetime


def when(date: datetime) -> str:
    return date.strftime("%Y-%m-%d %H:%M %z")


def when_epoch(seconds: float | None) -> str:
    """A time.time() value as `when` writes dates, in local time ("at an unknown time" for None)."""
    if not seconds:
        return "at an unknown time"
    from gitmail.values.dates import datetime as clock

    return "at " + when(clock.fromtimestamp(seconds).astimezone())


def until(seconds: float) -> str:
    """A time as leases say when they end: "14:32" today, else with its date, in local time."""
    from gitmail.values.dates import datetime as clock

    moment = clock.fromtimestamp(seconds).astimezone()
    today = clock.now().astimezone().date()
    return moment.strftime("%H:%M" if moment.date() == today else "%Y-%m-%d %H:%M %z")
