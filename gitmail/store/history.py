"""The history index: for each repo (and for everyone), the messages that concern it in the order they reached
this mailbox, so `gitmail log -n 20` reads the end of one small file instead of sorting every ref git has.

A message ref is one of many thousands; asking git for a repo's newest twenty means listing and dating all of
them (half a second at 100,000). The index is a cache beside the mailbox, never its record: every writer appends
to it under the lock for each message ref it creates (`Store.writing`), it is rebuilt from the refs when it is
missing, and what it names is looked up in the refs again when read. One line per message and file:

    <unix time> <id> <recipient's ref name, or _broadcast> <sender's ref name>
"""

from __future__ import annotations

import os

from gitmail.store.files import make_dir, touch
from gitmail.store.location import OWN_DIR

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import NamedTuple

    from _typeshed import StrPath
else:
    from gitmail.values.tuples import NamedTuple

DIRECTORY = "history"
EVERYONE = "_everyone"  # the file every message is in
BROADCAST = "_broadcast"
UNKNOWN = "_unknown"  # the sender of a commit gitmail did not write
COMPLETE = ".complete"  # written once the files hold every message the refs did


class Line(NamedTuple):
    time: int
    id: str
    recipient: str  # a repo's ref name, or _broadcast
    sender: str  # a repo's ref name

    def text(self) -> str:
        return f"{self.time} {self.id} {self.recipient} {self.sender}\n"


def directory(mailbox: StrPath) -> str:
    return os.path.join(mailbox, OWN_DIR, DIRECTORY)


def complete(mailbox: StrPath) -> bool:
    return os.path.exists(os.path.join(directory(mailbox), COMPLETE))


def forget(mailbox: StrPath) -> None:
    """Mark the index incomplete: the next reader rebuilds it from the refs."""
    try:
        os.unlink(os.path.join(directory(mailbox), COMPLETE))
    except FileNotFoundError:
        pass


def append(mailbox: StrPath, lines: Iterable[Line]) -> None:
    """Add lines to the files of everyone they concern (the caller holds the mailbox lock)."""
    by_file: dict[str, list[str]] = {}
    for line in lines:
        for name in {EVERYONE, line.recipient, line.sender}:
            by_file.setdefault(name, []).append(line.text())
    if not by_file:
        return
    folder = directory(mailbox)
    make_dir(folder)
    for name, texts in by_file.items():
        fd = os.open(os.path.join(folder, name), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, "".join(texts).encode())
        finally:
            os.close(fd)


def rebuild(mailbox: StrPath, lines: Sequence[Line]) -> None:
    """Replace every file with what the refs say (the caller holds the lock), then mark the index complete."""
    folder = directory(mailbox)
    make_dir(folder)
    for entry in os.scandir(folder):
        os.unlink(entry.path)
    append(mailbox, sorted(lines))
    touch(os.path.join(folder, COMPLETE))


def newest(mailbox: StrPath, names: Sequence[str], wanted: int) -> list[Line]:
    """The `wanted` newest distinct messages of these files (fewer if there are no more), newest first."""
    found: dict[str, Line] = {}
    for name in names:
        for line in _tail(os.path.join(directory(mailbox), name), wanted):
            if line.id not in found or found[line.id].time < line.time:
                found[line.id] = line
    return sorted(found.values(), key=lambda line: (line.time, line.id), reverse=True)[:wanted]


def _tail(path: str, wanted: int) -> list[Line]:
    """The last lines of a file that hold `wanted` distinct ids, read backwards in blocks."""
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        return []
    with handle:
        end = handle.seek(0, os.SEEK_END)
        block, data = 16384, b""
        while True:
            start = max(0, end - block)
            handle.seek(start)
            data = handle.read(end - start)
            lines = _parse(data if start == 0 else data.split(b"\n", 1)[-1])
            if start == 0 or len({line.id for line in lines}) >= wanted:
                return lines
            block *= 4


def _parse(data: bytes) -> list[Line]:
    lines = []
    for raw in data.decode(errors="replace").splitlines():
        parts = raw.split(" ")
        if len(parts) == 4 and parts[0].isdigit():
            lines.append(Line(int(parts[0]), parts[1], parts[2], parts[3]))
    return lines
