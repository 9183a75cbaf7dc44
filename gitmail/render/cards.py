"""One message as a session or a person reads it: a header line gitmail writes, the body behind "> ", its
attachments, and the commands that answer it."""

from __future__ import annotations

from gitmail.render.senders import origin, vouched
from gitmail.render.states import standing
from gitmail.render.times import when
from gitmail.render.user_claims import CLAIM, speaks_for_the_user
from gitmail.render.words import quote, size, visible
from gitmail.store.gitcmd import quoted as shell_word
from gitmail.values import urgency as levels

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import NamedTuple

    from gitmail.values.mail import Entry
    from gitmail.values.message import Message
else:
    from gitmail.values.tuples import NamedTuple


class Voice(NamedTuple):
    """How a framing speaks to its reader."""

    command: str = "gitmail"  # the command that runs gitmail in the reader's shell, exactly as it must be typed
    new: bool = False  # the session already knows the rest of its mail: say "new"


PLAIN = Voice()
CARDS_KEPT = 4096  # cards kept by their inputs (a few MB at most)


def card(
    entry: Entry,
    *,
    claims: Mapping[str, str],
    summary: bool = False,
    state: bool = False,
    voice: Voice = PLAIN,
) -> str:
    """One message: a header line gitmail writes, the body behind "> ", and the commands that answer it."""
    return drawn(entry, vouched(entry, claims), summary=summary, state=state, voice=voice)


def drawn(entry: Entry, label: str, *, summary: bool = False, state: bool = False, voice: Voice = PLAIN) -> str:
    """The card of a message whose sender is labelled `label` (senders.vouched). Without its state, a card depends
    on nothing else, so the last CARDS_KEPT are kept: a long-lived process (the MCP server) measures every pending
    message against the budget at each inbox call, and they are nearly always the same."""
    if state:
        return _draw(entry, label, summary, state, voice)
    key = (entry.message, entry.verdict, label, summary, voice)
    try:
        return _cards[key]
    except KeyError:
        pass
    except TypeError:  # a field that cannot be a key: drawn anew
        return _draw(entry, label, summary, state, voice)
    if len(_cards) >= CARDS_KEPT:
        _cards.clear()
    text = _cards[key] = _draw(entry, label, summary, state, voice)
    return text


_cards: dict[tuple[object, ...], str] = {}


def drawn_size(entry: Entry, label: str, *, summary: bool = False, voice: Voice = PLAIN) -> int:
    """The UTF-8 size of `drawn(...)`, kept by the message object itself (held here, so its id stays its own): the
    MCP server's pending mail is the very same objects from one call to the next, and measuring 1,000 of them
    against the budget must cost less than hashing each."""
    m = entry.message
    held = _sizes.get((id(m), summary))
    if held is not None and held[0] is m and held[1] is entry.verdict and held[2] == label and held[3] == voice:
        return held[4]
    measured = size(drawn(entry, label, summary=summary, voice=voice))
    if len(_sizes) >= CARDS_KEPT:
        _sizes.clear()
    _sizes[(id(m), summary)] = (m, entry.verdict, label, voice, measured)
    return measured


_sizes: dict[tuple[int, bool], tuple[Message, object, str, Voice, int]] = {}


def least_size(entry: Entry, label: str, *, voice: Voice = PLAIN) -> int:
    """A bound from below on the UTF-8 size of the message's card, whole or summarised (without its state), from
    lengths alone: a card that cannot fit by this much is not drawn to be measured. Each text `_draw` quotes or
    escapes only grows, and a character takes at least one byte."""
    m = entry.message
    kind = _DIRECTED + len(m.address) if not m.is_broadcast else _BROADCAST
    done = _DONE + len(voice.command) + len(m.id) if not m.is_broadcast else 0
    header = _HEADER + len(m.id) + kind + len(m.sender) + len(label) + _WHEN + len(m.subject)
    return header + 1 + _REPLY + len(voice.command) + len(m.id) + done  # and a line of body, or its summary


_HEADER = size("--- message " + " · ".join(["id ", 'from "" ()', 'subject ""']) + " · " * 2)
_DIRECTED, _BROADCAST = size('directed to ""'), size("broadcast")
_WHEN = len("2025-01-01 00:00 ")  # `when` without a zone, the shortest it writes
_REPLY = size('\nReply:  send --reply-to  --message "..."')
_DONE = size("\nDone:   done ")


def _draw(entry: Entry, label: str, summary: bool, state: bool, voice: Voice) -> str:
    m = entry.message
    kind = "broadcast" if m.is_broadcast else f"directed to {quote(m.address)}"
    parts = [
        f"id {m.id}",
        *([f"urgency {quote(m.urgency)}"] if m.urgency != levels.NORMAL else []),
        kind,
        f"from {quote(m.sender)}{origin(entry)} ({label})",
        when(m.date),
        f"subject {quote(m.subject)}",
    ]
    if m.reply_to:
        parts.append(f"in reply to {m.reply_to}")
    if state:
        parts.append(standing(entry))
    lines = ["--- message " + " · ".join(parts)]
    if state and entry.moved is not None:
        lines.append(f"Note: {entry.moved.state} here by sync: {entry.moved.said()}.")
    if speaks_for_the_user(m.subject) or speaks_for_the_user(m.body):
        lines.append(CLAIM)
    if summary:
        lines.append(
            f"> ({len(m.body):,} characters: too long to show here; read it with `{voice.command} show {m.id}`)"
        )
    else:
        lines += quote_body(m.body)
    lines += attachment_lines(entry, voice)
    lines.append(f'Reply: {voice.command} send --reply-to {m.id} --message "..."')
    if not m.is_broadcast:
        lines.append(f"Done:  {voice.command} done {m.id}")
    return "\n".join(lines)


def attachment_lines(entry: Entry, voice: Voice = PLAIN) -> list[str]:
    """One line per attachment: its name (quoted), size and type (what the sender's gitmail recorded; a type is
    read only when it is a plain MIME token), and the command that writes it out; for a patch, the command that
    applies it. Never any of its content."""
    m = entry.message
    if not m.attachments:
        return []
    from gitmail.values.attachments import COMMITS, size_text

    lines = []
    for item in m.attachments:
        kind = f"patch of {'commits' if item.patch == COMMITS else 'uncommitted changes'}" if item.patch else item.type
        save = f"{voice.command} attachment {m.id} {shell_word(item.name)}"
        lines.append(f"Attachment: {quote(item.name)} · {size_text(item.size)} · {kind} · save: {save}")
        if item.patch:
            which = f" {shell_word(item.name)}" if _patches(m) > 1 else ""
            lines.append(f"Apply: {voice.command} apply {m.id}{which}")
    return lines


def _patches(message: Message) -> int:
    return sum(1 for item in message.attachments if item.patch)


def quote_body(body: str) -> list[str]:
    if not body.strip():
        return ["> (no body)"]
    return [f"> {visible(line, joiners=True)}".rstrip() for line in body.strip("\r\n").splitlines()]
