"""Where a message stands for its sender, in a few words: pending, delivered, done, replied, retracted, and the
latest `gitmail apply` of its patch."""

from __future__ import annotations

from gitmail.render.words import quote
from gitmail.values import receipts
from gitmail.values.mail import Entry, status


def standing(entry: Entry) -> str:
    """pending · delivered 11-29 09:31 · delivered to 3 · done 11-29 10:02 · replied 5tgh0a1b2c · retracted"""
    now = status(entry)
    if now.name == "replied":
        said = f"replied {now.reply}"
    elif now.name == "delivered" and entry.message.is_broadcast:
        said = f"delivered to {len(now.reached)}"
    elif now.name == "delivered" and now.reached and now.reached[0].machine is not None:
        said = f"delivered elsewhere {now.at.strftime('%m-%d %H:%M')}" if now.at else "delivered elsewhere"
    else:
        said = f"{now.name} {now.at.strftime('%m-%d %H:%M')}" if now.at else now.name
    return said + _applied(entry)


def _applied(entry: Entry) -> str:
    """· applied 11-29 10:02 · apply failed 11-29 10:02 (by "x" when it was not the recipient): the latest
    `gitmail apply` of its patch."""
    tries = receipts.applying(entry.records)
    if not tries:
        return ""
    last = tries[-1]
    who = "" if last.repo == entry.message.to else f" by {quote(last.repo)}"
    said = "applied" if last.event == receipts.APPLIED else "apply failed"
    return f" · {said}{who} {last.at.strftime('%m-%d %H:%M')}"
