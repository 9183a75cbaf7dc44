"""What says the mailbox changed, at no process's cost: stat data (inode, time, size) of `packed-refs`, of each
loose ref under refs/gitmail/ and refs/notes/, and of the folder of session records. git writes a ref by renaming a
new file into place, so every write gives a new inode, even within one clock tick; archived refs are packed, so the
archive adds nothing. Readers that follow the mailbox (the web view's open pages) ask this, and never stat the
mailbox's files themselves."""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING, NamedTuple

from gitmail.store import hookfiles
from gitmail.store.location import OWN_DIR
from gitmail.values.layout import ROOT, SEEN_NOTES

if TYPE_CHECKING:
    from collections.abc import Mapping

    from gitmail.store.repository import Store


class RefFiles(NamedTuple):
    """Stat data of the files that hold the message refs and the seen-sets: git writes a ref by renaming a new
    file into place, so every write gives a new inode (and so a new value here) even within one clock tick."""

    packed: tuple[int, int, int] | None  # packed-refs: inode, mtime (ns), size
    loose: Mapping[str, tuple[int, int, int]]  # each loose ref under refs/gitmail/ and refs/notes/, by ref name
    sessions: tuple[int, int, int] | None = None  # the folder of session records (a record written, one gone)

    @property
    def token(self) -> str:
        digest = hashlib.blake2b(
            repr((self.packed, sorted(self.loose.items()), self.sessions)).encode(), digest_size=16
        )
        return digest.hexdigest()


def change_token(store: Store) -> str:
    """A string that changes whenever a message ref, a receipt or a seen-set moves, or a session starts, ends or is
    renamed. No process is started, and the archive adds nothing to the cost once it is packed (gitmail packs refs
    as it goes)."""
    files = ref_files(store)
    return files.token if files is not None else "absent"


def ref_files(store: Store) -> RefFiles | None:
    """None when there is no mailbox."""
    root = os.fspath(store.path)
    if not os.path.lexists(root):
        return None
    loose: dict[str, tuple[int, int, int]] = {}
    for top in (ROOT.rstrip("/"), SEEN_NOTES.rsplit("/", 1)[0]):
        for directory, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                path = os.path.join(directory, name)
                stamp = _stamp(path)
                if stamp is not None and not name.endswith(".lock"):
                    loose[os.path.relpath(path, root).replace(os.sep, "/")] = stamp
    sessions = _stamp(os.path.join(root, OWN_DIR, hookfiles.SESSIONS))
    return RefFiles(_stamp(os.path.join(root, "packed-refs")), loose, sessions)


def _stamp(path: str) -> tuple[int, int, int] | None:
    try:
        info = os.stat(path)
    except FileNotFoundError:  # moved while we looked: the next token differs anyway
        return None
    return (info.st_ino, info.st_mtime_ns, info.st_size)
