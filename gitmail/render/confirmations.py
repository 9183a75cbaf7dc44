"""What the commands that write mail confirm: a send, a retraction, a `done`."""

from __future__ import annotations

from gitmail.render.words import count, quote
from gitmail.values import urgency as levels
from gitmail.values.names import PERSON

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gitmail.values.mail import DoneResult, Entry


def sent(entry: Entry) -> str:
    """What `send` confirms, saying whether it went to one session or to a whole repository: "sent 7kq2m9x4ab to
    the repository "web"", "... to the session "web#fixer"", "... to every repo"."""
    m = entry.message
    level = f", urgency {m.urgency}" if m.urgency != levels.NORMAL else ""
    carrying = f" with {count(len(m.attachments), 'attachment')}" if m.attachments else ""
    if m.is_broadcast:
        to = "every repo"
    elif m.to_session is not None:
        to = f"the session {quote(m.address)}"
    elif m.to == PERSON:
        to = f"the person ({PERSON})"
    else:
        to = f"the repository {quote(m.to)}"
    return f"sent {m.id} to {to}{carrying}{level}"


def retracted(message_id: str, changed: bool) -> str:
    """What `send --retract` and the retract tool say."""
    return f"retracted {message_id}" if changed else f"{message_id} was already retracted"


def described(entry: Entry) -> str:
    return f"{entry.message.id} from {quote(entry.message.sender)}: {quote(entry.message.subject)}"


def done(result: DoneResult) -> list[str]:
    """What `done` says, one line each: what it archived, what it left alone, and why."""
    lines = [f"archived {described(e)}" for e in result.archived]
    if result.already:
        lines.append(f"nothing to do for {', '.join(result.already)}: already archived, or a broadcast")
    if result.set_aside:
        lines.append(
            f"set aside {', '.join(result.set_aside)}: stored but unreadable, so not archived; kept under "
            "refs/gitmail/_damaged/ (see `gitmail doctor`)"
        )
    if result.unshown:
        them = "it" if len(result.unshown) == 1 else "them"
        lines.append(
            f"left pending {', '.join(result.unshown)}: no session here was shown {them} whole yet "
            "(read it with `gitmail show ID`, then `gitmail done ID`)"
        )
    return lines or ["no pending mail"]
