"""Session starts that would show exactly what the last one showed, answered without Python.

A directed message is shown at every session start until it is done, so most session starts in a repository show
what the one before showed. When a showing changed nothing that the next one depends on (no broadcast handed
over, every receipt written, no concurrent change), its answer is kept here with the key it was made under: the
repository's change stamps, the claims' stamp, and the hook's own settings. `hook.sh session-start` compares that
key with the current one using shell built-ins, and on a match writes the session's record and prints the kept
answer. Any change to the mail, the names or the hook's environment makes a new key, and Python answers again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from gitmail import stamps
from gitmail.identity import RepoName
from gitmail.layout import OWN_DIR
from gitmail.lock import write_atomically

DIRECTORY = "cache"


def key(mailbox: Path, stamps_line: str, *, watch: bool) -> str:
    """What hook.sh computes too: `ref:stamp:stamp:claims:GITMAIL_WAKE:watch:PATH` (PATH decides the command the
    framing hands out, so it is part of what was shown)."""
    wake = os.environ.get("GITMAIL_WAKE", "")
    return f"{stamps_line}:{stamps.claims(mailbox)}:{wake}:{'watch' if watch else ''}:{os.environ.get('PATH', '')}"


def keep(
    mailbox: Path,
    host: str,
    repo: RepoName,
    *,
    key: str,
    record: dict[str, Any],
    answer: dict[str, Any] | None,
    due: float | None = None,
) -> None:
    """Keep a settled session start's answer. The key goes last, so a reader that finds it finds the rest. With
    `due` (a remote syncs automatically), the answer is kept only until then: a `.due` file whose modification
    time is that moment, which hook.sh compares with the session record it has just written (`-nt`), and once it
    has passed Python answers again and starts the background sync."""
    folder = mailbox / OWN_DIR / DIRECTORY
    base = folder / f"{host}-{repo.ref}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        base.with_suffix(".key").unlink(missing_ok=True)  # no reader pairs the old key with the new files
        deadline = base.with_suffix(".due")
        if due is None:
            deadline.unlink(missing_ok=True)
        else:
            write_atomically(deadline, b"", durable=False)
            os.utime(deadline, (due, due))
        write_atomically(
            base.with_suffix(".out"),
            (json.dumps(answer, ensure_ascii=False) + "\n" if answer else "").encode(),
            durable=False,
        )
        write_atomically(
            base.with_suffix(".record"), (json.dumps(record, sort_keys=True) + "\n").encode(), durable=False
        )
        write_atomically(base.with_suffix(".key"), (key + "\n").encode(), durable=False)
    except Exception:  # a cache that cannot be written costs only speed
        return


def forget_all(mailbox: Path) -> None:
    """No session start is answered from what was kept (what one must do changed: a remote was added, changed or
    removed)."""
    for kept in (mailbox / OWN_DIR / DIRECTORY).glob("*.key"):
        kept.unlink(missing_ok=True)


def forget(mailbox: Path, host: str, repo: RepoName) -> None:
    try:
        (mailbox / OWN_DIR / DIRECTORY / f"{host}-{repo.ref}.key").unlink()
    except OSError:
        pass
