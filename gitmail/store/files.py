"""gitmail's own small files beside the mailbox: written whole or not at all, read a line at a time, and the one
line that says why the file system refused a write. Standard library only: the hooks and the quick sync path use it.
"""

from __future__ import annotations

import errno
import os
import time

from gitmail.errors import Unwritable

TYPE_CHECKING = False  # typing's own costs an import; only annotations need this
if TYPE_CHECKING:
    from collections.abc import Iterable


def write_atomically(
    path: str | os.PathLike[str],
    data: bytes | Iterable[bytes],
    *,
    durable: bool = True,
    mode: int | None = None,
    keep_mode: bool = False,
) -> None:
    """Replace `path` with `data` (bytes, or pieces of it written as they come: a file too large to hold whole): a
    reader sees the old content or the new, never a part. `durable` syncs the file and its directory to disk (a
    record that must survive power loss); without it a crash may lose the write, never tear it (caches, hints).
    The file is private to its owner (0600, less the umask) unless `mode` sets its permissions exactly (a file
    written for the user to share: 0o644); `keep_mode` gives a file that exists the permissions it had, so someone
    else's file (a host's settings) stays as readable as its owner made it. Raises Unwritable (a MailboxError), in
    one line, when the file system refuses."""
    target = os.fspath(path)
    directory, name = os.path.split(target)
    directory = directory or "."
    if keep_mode:
        try:
            mode = os.stat(target).st_mode & 0o7777
        except OSError:
            pass  # none to keep (no such file), or the write below says why not
    temporary = os.path.join(directory, f".{name}.{os.getpid()}.{time.monotonic_ns()}")
    try:  # not tempfile: the hooks write with this, and importing tempfile costs them milliseconds
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError as error:
        raise unwritable(directory, error) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            for piece in (data,) if isinstance(data, bytes) else data:
                handle.write(piece)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException as error:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        if isinstance(error, OSError):
            raise unwritable(directory, error) from None
        raise
    if durable:
        sync_directory(directory)


def append_durably(path: str | os.PathLike[str], text: str, *, where: str | os.PathLike[str]) -> None:
    """Add `text` at the end of a journal file and sync it to disk before returning: a record written before the
    change it announces, so that no crash leaves the change unrecorded. Raises Unwritable, naming `where`."""
    if not text:
        return
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as error:
        raise unwritable(where, error) from None


def sync_directory(directory: str | os.PathLike[str]) -> None:
    """Make the names in a directory (a file just created or renamed there) survive power loss."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dir(path: str | os.PathLike[str], mode: int = 0o700) -> None:
    """A directory, unless one is there (what Path.mkdir(mode, exist_ok=True) does, without pathlib's import)."""
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        if not os.path.isdir(path):
            raise


def touch(path: str | os.PathLike[str]) -> None:
    """Mark a file's time as now, creating it empty if missing (Path.touch, without pathlib's import)."""
    try:
        os.utime(path)
    except FileNotFoundError:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o666))


def read_line(path: str | os.PathLike[str]) -> str:
    """The first line of a small file, stripped; "" when it is missing or unreadable (the files read this way are
    hints, never the record). Read as the file system spells paths (UTF-8, any other byte kept), as hook.sh compares
    them."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:
            return handle.readline().strip()
    except OSError:
        return ""


def write_line(path: str | os.PathLike[str], line: str) -> None:
    """One line, rewritten in place (not renamed: a file watcher on it sees the change), for a reader of `read_line`
    or of hook.sh's `read -r`."""
    with open(path, "w", encoding="utf-8", errors="surrogateescape") as handle:
        handle.write(line + "\n")


def read_text(path: str | os.PathLike[str]) -> str | None:
    """A small file's whole text; None when it is missing or unreadable."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def unwritable(where: str | os.PathLike[str], error: OSError) -> Unwritable:
    """One line for a write the file system refused: read-only, full, over a size limit, not permitted."""
    return Unwritable(os.fspath(where), refused(error))


def refused(error: OSError) -> str:
    """Why the file system refused a write, in a few words ("the disk is full")."""
    reasons = {
        errno.EROFS: "the file system is read-only",
        errno.ENOSPC: "the disk is full",
        errno.EDQUOT: "the disk quota is used up",
        errno.EFBIG: "a file size limit was reached",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
    }
    return reasons.get(error.errno or 0, error.strerror or str(error))
