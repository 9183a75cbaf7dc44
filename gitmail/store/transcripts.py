"""Reading a session's transcript from where its host keeps it, on this machine. The path comes from a hook's
payload, so it is input: only a regular file inside the hosts' own folders is read (Claude Code's
~/.claude/projects, Codex's $CODEX_HOME/sessions or ~/.codex/sessions), after symlinks are resolved, and only its
last TAIL bytes."""

from __future__ import annotations

import os
import stat

from gitmail.errors import GitmailError

TAIL = 1 << 20  # bytes read from a transcript's end: its last turns are all that is shown


def folders() -> list[str]:
    home = os.path.expanduser("~")
    codex = os.environ.get("CODEX_HOME") or os.path.join(home, ".codex")
    found = [
        os.path.join(home, ".claude", "projects"),
        os.path.join(codex, "sessions"),
        os.path.join(home, ".codex", "sessions"),
    ]
    return [os.path.realpath(folder) for folder in found]


def tail(path: str) -> list[bytes]:
    """The whole lines of the transcript's last TAIL bytes; GitmailError (one line) when it may not be read."""
    real = os.path.realpath(path)
    if not any(os.path.commonpath([real, folder]) == folder for folder in folders() if os.path.isabs(real)):
        raise GitmailError(f"the transcript {path!r} is not inside a host's own folder; it is not read")
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        raise GitmailError(f"cannot read the transcript {path!r}: {error.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise GitmailError(f"the transcript {path!r} is not a regular file; it is not read")
        start = max(0, info.st_size - TAIL)
        data = os.pread(fd, TAIL, start)
    except OSError as error:
        raise GitmailError(f"cannot read the transcript {path!r}: {error.strerror}") from None
    finally:
        os.close(fd)
    lines = data.split(b"\n")
    return lines[1:] if start else lines
