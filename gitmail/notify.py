"""Notifications, only for what needs the person: mail to the person (`@user`), and `now` mail that no session of
its recipient can be handed soon (none live, none that can be woken). Shown on this machine where a notification
can be (the freedesktop notification service on Linux, through `notify-send` or `gdbus`; Notification Center on
macOS, through `osascript`), and pushed to a URL the person sets (`git config --global gitmail.notifyUrl URL`: an
ntfy-style POST, the title naming the sender, the subject as the message, the body only with `gitmail.notifyBody
true`). Never the body on the desktop; at most `CAP` notifications per `WINDOW` seconds; `gitmail.notify false` turns
every channel off.

What sends decides only whether a message may need the person (`wanted`: two field comparisons), and if so starts
the notifier detached (`after_write`): nothing here ever slows or fails a send.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from gitmail.store.location import OWN_DIR
from gitmail.store.log import problem
from gitmail.store.repository import Store
from gitmail.values import urgency as levels
from gitmail.values.names import PERSON

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from gitmail.values.mail import Entry
    from gitmail.values.message import Message

CAP = 10  # notifications at most ...
WINDOW = 300.0  # ... per this many seconds, every channel together
PUSH_TIMEOUT = 5.0  # seconds a push may take
_SENT = "notified"  # gitmail/notified: when each of the last notifications went out, one time a line
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


def wanted(message: Message) -> bool:
    """Whether a message may need the person (the notifier then asks whether a session can take it)."""
    if message.to == PERSON:
        return message.sender != PERSON
    return message.urgency == levels.NOW and not message.is_broadcast


def after_write(store: Store, entries: Iterable[Entry]) -> None:
    """Start the notifier, detached, for the messages just written that may need the person; never fails."""
    ids = [e.message.id for e in entries if wanted(e.message)]
    if ids:
        from gitmail.arrivals import notify_person

        notify_person(store, ids)


class Settings(NamedTuple):
    enabled: bool  # gitmail.notify (default true)
    url: str | None  # gitmail.notifyUrl
    body: bool  # gitmail.notifyBody (default false)


def settings() -> Settings:
    """The person's notification settings, from their global git config."""
    found: dict[str, str] = {}
    try:
        out = subprocess.run(
            ["git", "config", "--global", "--get-regexp", r"^gitmail\.notify"],
            capture_output=True,
            timeout=10,
            check=False,
        ).stdout.decode(errors="replace")
    except (OSError, subprocess.SubprocessError):
        out = ""
    for line in out.splitlines():
        key, _, value = line.partition(" ")
        found[key.lower()] = value
    return Settings(
        enabled=not _false(found.get("gitmail.notify", "true")),
        url=found.get("gitmail.notifyurl") or None,
        body=_true(found.get("gitmail.notifybody", "false")),
    )


def _true(value: str) -> bool:
    return value.strip().lower() in ("true", "yes", "on", "1")


def _false(value: str) -> bool:
    return value.strip().lower() in ("false", "no", "off", "0")


def url_problem(url: str) -> str | None:
    """Why a push URL is refused, in one line: only https, or http to this machine's loopback."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
    except ValueError:
        return f"gitmail.notifyUrl {url!r} is not a URL"
    if parts.scheme == "https" and host:
        return None
    if parts.scheme == "http" and (host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")):
        return None
    return f"gitmail.notifyUrl {url!r} is refused: only https, or http to 127.0.0.1, localhost or [::1]"


class Note(NamedTuple):
    """One notification: what it says, and where the message is on the page."""

    title: str
    text: str  # the subject, and the body only where the person asked for it
    urgent: bool
    link: str | None  # the message on `gitmail view`, when one is serving


def note_for(message: Message, *, body: bool, link: str | None) -> Note:
    from gitmail.render.words import visible

    sender = visible(message.sender)
    if message.to == PERSON:
        title = f"{sender} is waiting on you" if message.urgency == levels.NOW else f"{sender} wrote to you"
    else:
        title = f"urgent mail from {sender} to {visible(message.address)}: no session can take it"
    text = visible(message.subject)
    if body and message.body.strip():
        text += "\n\n" + message.body[:2000]
    return Note(f"gitmail: {title}", text, message.urgency == levels.NOW, link)


def needs_person(store: Store, message: Message) -> bool:
    """Mail to the person always does; `now` mail does when no session of its recipient is live or can be woken."""
    if message.to == PERSON:
        return True
    from gitmail import waking
    from gitmail.store import sessions

    for info in sessions.listing(store.path, message.to):
        if message.to_session is not None and info.key != message.to_session:
            continue
        if info.state == "live" or waking.wakeable(store, info):
            return False
    return True


def main(argv: list[str]) -> int:
    """The notifier: `MAILBOX ID...`."""
    store = Store(Path(argv[0]).absolute())
    try:
        notify(store, argv[1:])
    except Exception as error:
        problem(store.path, f"could not notify: {error}")
    return 0


def notify(store: Store, ids: Sequence[str], *, channels: Sequence[str] | None = None) -> list[Note]:
    """Notify of each message that needs the person, within the cap; returns the notes that went out."""
    from gitmail import mailbox

    chosen = settings()
    if not chosen.enabled:
        return []
    link_base = _page(store)
    sent: list[Note] = []
    for message_id in ids:
        message = mailbox.show(store, message_id).message
        if not needs_person(store, message):
            continue
        link = f"{link_base}/thread/{message.id}#m-{message.id}" if link_base else None
        note = note_for(message, body=False, link=link)
        if not _within_cap(store):
            problem(store.path, f"notification of {message.id} left out: {CAP} went out in the last 5 minutes")
            continue
        for channel in channels if channels is not None else desktop_channels():
            _show(store, channel, note)
        if chosen.url is not None:
            refused = url_problem(chosen.url)
            if refused:
                problem(store.path, refused)
            else:
                push(store, chosen.url, note_for(message, body=chosen.body, link=link))
        sent.append(note)
    return sent


def _within_cap(store: Store) -> bool:
    """Take one of the CAP notifications of the last WINDOW seconds, if one is left (across processes)."""
    path = store.path / OWN_DIR / _SENT
    now = time.time()
    with open(path, "a+") as file:
        fcntl.flock(file, fcntl.LOCK_EX)
        file.seek(0)
        times = [float(t) for t in file.read().split() if _number(t) and now - float(t) < WINDOW]
        if len(times) >= CAP:
            return False
        times.append(now)
        file.seek(0)
        file.truncate()
        file.write("".join(f"{t:.3f}\n" for t in times))
    return True


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _page(store: Store) -> str | None:
    """Where `gitmail view` serves this mailbox now (it writes gitmail/view while it runs), without its token."""
    try:
        text = (store.path / OWN_DIR / "view").read_text().strip()
    except OSError:
        return None
    return text if text.startswith("http://127.0.0.1:") and text[17:].isdigit() else None


def desktop_channels() -> list[str]:
    """The ways a notification can be shown on this machine: none where there is no desktop session."""
    if sys.platform == "darwin":
        return ["osascript"] if shutil.which("osascript") else []
    if not os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
        return []
    return [name for name in ("notify-send", "gdbus") if shutil.which(name)][:1]


def _show(store: Store, channel: str, note: Note) -> None:
    text = note.text + (f"\n{note.link}" if note.link else "")
    if channel == "notify-send":
        command = ["notify-send", "--app-name=gitmail", "-u", "critical" if note.urgent else "normal"]
        command += ["--", note.title, _markup(text)]
    elif channel == "gdbus":
        command = [
            "gdbus", "call", "--session", "--dest", "org.freedesktop.Notifications",
            "--object-path", "/org/freedesktop/Notifications", "--method", "org.freedesktop.Notifications.Notify",
            "'gitmail'", "uint32 0", "''", _variant(note.title), _variant(_markup(text)), "@as []",
            "{'urgency': <byte 2>}" if note.urgent else "@a{sv} {}", "int32 -1",
        ]  # fmt: skip
    elif channel == "osascript":
        script = ["on run argv", "display notification (item 2 of argv) with title (item 1 of argv)", "end run"]
        command = ["osascript", *[part for line in script for part in ("-e", line)], note.title, text]
    else:
        return
    try:
        done = subprocess.run(command, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError) as error:
        problem(store.path, f"{channel} could not show a notification: {error}")
        return
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip()[:200]
        problem(store.path, f"{channel} could not show a notification: {said}")


def _markup(text: str) -> str:
    """Notification servers read the text as a little markup: every character stays a character."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _variant(text: str) -> str:
    """A GVariant string literal, as gdbus reads its arguments."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def push(store: Store, url: str, note: Note) -> bool:
    """An ntfy-style POST: the title, a priority, a link, the text as the body."""
    import urllib.request

    headers = {
        "Title": _header(note.title),
        "Priority": "5" if note.urgent else "3",
        "Tags": "gitmail",
        "Content-Type": "text/plain; charset=utf-8",
    }
    if note.link:
        headers["Click"] = note.link
    request = urllib.request.Request(url, data=note.text.encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=PUSH_TIMEOUT) as answer:  # noqa: S310 (checked: url_problem)
            return bool(200 <= answer.status < 300)
    except Exception as error:  # urllib raises many types: a push that fails is logged, never retried
        problem(store.path, f"the push to gitmail.notifyUrl failed: {error}")
        return False


def _header(text: str) -> str:
    """A header value: ASCII as it is, anything else in RFC 2047's encoding (which ntfy reads)."""
    if text.isascii():
        return text
    from email.header import Header

    return Header(text, "utf-8").encode()


def notify_status(store: Store | None = None) -> list[str]:
    """For `gitmail doctor`: which channel works here, one line each."""
    chosen = settings()
    lines = []
    if not chosen.enabled:
        return ["notifications are off (gitmail.notify false)"]
    channels = desktop_channels()
    if channels:
        lines.append(f"desktop notifications through {channels[0]}")
    elif sys.platform == "darwin":
        lines.append("no desktop notifications: osascript is not on PATH")
    elif not os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
        lines.append("no desktop notifications: no desktop session bus here (DBUS_SESSION_BUS_ADDRESS is unset)")
    else:
        lines.append("no desktop notifications: neither notify-send nor gdbus is on PATH")
    if chosen.url is None:
        lines.append("no push (set one with git config --global gitmail.notifyUrl URL)")
    else:
        refused = url_problem(chosen.url)
        lines.append(refused or f"pushes to {chosen.url}" + (" with the body" if chosen.body else ""))
    return lines
