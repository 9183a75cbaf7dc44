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
import os

from gitmail.store import hookfiles, stamps
from gitmail.store.files import make_dir, write_atomically
from gitmail.values import jsontext

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from _typeshed import StrPath


def key(mailbox: StrPath, stamps_line: str, *, watch: bool) -> str:
    return hookfiles.kept_key(stamps_line, stamps.claims(mailbox), watch=watch)


def keep(
    mailbox: StrPath,
    host: str,
    top: StrPath,
    *,
    key: str,
    record: dict[str, Any],
    answer: dict[str, Any] | None,
    due: float | None = None,
    config: StrPath | None = None,
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
    tree = hookfiles.tree_name(os.fspath(top))
    if tree is None:
        return  # a path hook.sh cannot spell: every start there is answered by Python
    files = hookfiles.kept(mailbox, host, tree)
    try:
        make_dir(os.path.dirname(files.key))
        turn = os.open(os.path.splitext(files.key)[0] + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return
    try:
        fcntl.flock(turn, fcntl.LOCK_EX)
        if not key.startswith(_made_now(mailbox, key)):
            return  # the mail changed since it was read: the change's own answer, made after it, is the one to keep
        _unlink(files.key)  # no reader pairs the old key with the new files
        receipts = files.recording
        if recording:
            write_atomically(receipts, "".join(f"{line}\n" for line in recording).encode(), durable=False)
        else:
            _unlink(receipts)
        if due is None:
            _unlink(files.due)
        else:
            write_atomically(files.due, b"", durable=False)
            os.utime(files.due, (due, due))
        text = jsontext.dumps(answer, ensure_ascii=False) + "\n" if answer else ""
        write_atomically(files.answer, text.encode(), durable=False)
        write_atomically(files.record, (jsontext.dumps(record, sort_keys=True) + "\n").encode(), durable=False)
        path = os.fsencode(config) if config is not None and b"\n" not in os.fsencode(config) else b""
        lines = (key + "\n").encode() + path + b"\n" + (quiet + "\n").encode()  # as hook.sh reads them
        write_atomically(files.key, lines, durable=False)
    except Exception:  # a cache that cannot be written costs only speed
        return
    finally:
        os.close(turn)


def _made_now(mailbox: StrPath, key: str) -> str:
    """The beginning of a key made now for the repository `key` names: its stamps and the claims' stamp."""
    return f"{stamps.read_ref(mailbox, key.split(':', 1)[0])}:{stamps.claims(mailbox)}:"


def forget_all(mailbox: StrPath) -> None:
    """No session start is answered from what was kept (what one must do changed: a remote was added, changed or
    removed)."""
    folder = hookfiles.folder(mailbox, hookfiles.CACHE)
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if name.endswith(".key"):
            _unlink(os.path.join(folder, name))


def forget(mailbox: StrPath, host: str, top: StrPath) -> None:
    tree = hookfiles.tree_name(os.fspath(top))
    try:
        if tree is not None:
            os.unlink(hookfiles.kept(mailbox, host, tree).key)
    except OSError:
        pass


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
