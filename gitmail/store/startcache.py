"""Session starts that would show exactly what the last one showed, answered without Python.

A directed message is shown at every session start until it is done, so most session starts in a repository show
what the one before showed. When a showing changed nothing that the next one depends on (no broadcast handed
over, every receipt written, no concurrent change), its answer is kept here with the key it was made under
(`hookfiles.kept_key`), filed under the work tree it was made in. hook.sh compares that key with the current one
using shell built-ins, and on a match for a new session writes the session's record and prints the kept answer.
Any change to the mail, the names or the hook's environment makes a new key, and Python answers again.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from gitmail.store import hookfiles, stamps
from gitmail.store.files import read_line, write_atomically

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def key(mailbox: Path, stamps_line: str, *, watch: bool) -> str:
    return hookfiles.kept_key(stamps_line, stamps.claims(mailbox), watch=watch)


def keep(
    mailbox: Path,
    host: str,
    top: Path,
    *,
    key: str,
    record: dict[str, Any],
    answer: dict[str, Any] | None,
    due: float | None = None,
    config: Path | None = None,
    quiet: str = "",
    recording: list[str] | None = None,
) -> None:
    """Keep a settled session start's answer. The key goes last, so a reader that finds it finds the rest. With
    `due` (a remote syncs automatically), the answer is kept only until then: a `.due` file whose modification
    time is that moment, which hook.sh compares with the session record it has just written (`-nt`), and once it
    has passed Python answers again and starts the background sync. `config`: the repository's config file, named
    on the key's second line; once it is newer than the key (`git config gitmail.name` may have renamed the
    repository), Python answers again. `quiet`: the quiet line (hookfiles.quiet_line) hook.sh gives the session it
    answers, on the key's third line. `recording`: the repository's ref and the ids of the mail the answer shows for
    the first time, whose receipts the process hook.sh starts once it answered writes (none: nothing to write). Two
    writers of one work tree's answer take turns (a lock beside it), so a key never pairs with another's answer, and
    one whose key's stamps no longer hold writes nothing: made from older mail, it must not replace an answer made
    from newer (hook.sh reads the key, then the answer, without the lock)."""
    tree = hookfiles.tree_name(str(top))
    if tree is None:
        return  # a path hook.sh cannot spell: every start there is answered by Python
    files = hookfiles.kept(mailbox, host, tree)
    try:
        files.key.parent.mkdir(mode=0o700, exist_ok=True)
        turn = os.open(files.key.with_suffix(".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return
    try:
        fcntl.flock(turn, fcntl.LOCK_EX)
        if not key.startswith(_made_now(mailbox, key)):
            return  # the mail changed since it was read: the change's own answer, made after it, is the one to keep
        files.key.unlink(missing_ok=True)  # no reader pairs the old key with the new files
        receipts = files.recording
        if recording:
            write_atomically(receipts, "".join(f"{line}\n" for line in recording).encode(), durable=False)
        else:
            receipts.unlink(missing_ok=True)
        if due is None:
            files.due.unlink(missing_ok=True)
        else:
            write_atomically(files.due, b"", durable=False)
            os.utime(files.due, (due, due))
        text = json.dumps(answer, ensure_ascii=False) + "\n" if answer else ""
        write_atomically(files.answer, text.encode(), durable=False)
        write_atomically(files.record, (json.dumps(record, sort_keys=True) + "\n").encode(), durable=False)
        path = os.fsencode(config) if config is not None and b"\n" not in os.fsencode(config) else b""
        lines = (key + "\n").encode() + path + b"\n" + (quiet + "\n").encode()  # as hook.sh reads them
        write_atomically(files.key, lines, durable=False)
    except Exception:  # a cache that cannot be written costs only speed
        return
    finally:
        os.close(turn)


def _made_now(mailbox: Path, key: str) -> str:
    """The beginning of a key made now for the repository `key` names: its stamps and the claims' stamp."""
    ref = key.split(":", 1)[0]
    mine, everyone = (read_line(hookfiles.stamp_file(mailbox, name)) for name in (ref, None))
    return f"{hookfiles.stamps_line(ref, mine, everyone)}:{stamps.claims(mailbox)}:"


def forget_all(mailbox: Path) -> None:
    """No session start is answered from what was kept (what one must do changed: a remote was added, changed or
    removed)."""
    for kept in hookfiles.folder(mailbox, hookfiles.CACHE).glob("*.key"):
        kept.unlink(missing_ok=True)


def forget(mailbox: Path, host: str, top: Path) -> None:
    tree = hookfiles.tree_name(str(top))
    try:
        if tree is not None:
            hookfiles.kept(mailbox, host, tree).key.unlink()
    except OSError:
        pass
