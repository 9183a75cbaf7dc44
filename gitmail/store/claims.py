"""Which local path first used each repo name (machine-local, never synced): what tells a repository's own mail
(PEER) from mail sent under a name another repository here uses, and what `doctor` reports when two share one."""

from __future__ import annotations

import os

from gitmail.store import stamps
from gitmail.store.files import read_text, write_atomically
from gitmail.store.lock import Deadline
from gitmail.store.repository import WRITE_WAIT, Store
from gitmail.values import jsontext
from gitmail.values.names import RepoName, nfc_keys

FILE = "claims.json"


def load_claims(store: Store) -> dict[str, str]:
    """Name -> the path of the repository that first used it."""
    text = read_text(os.path.join(store.own_root, FILE))
    try:
        data = jsontext.loads(text) if text is not None else {}
    except ValueError:
        return {}
    return nfc_keys({str(k): str(v) for k, v in data.items()}) if isinstance(data, dict) else {}


def save_claims(store: Store, claims: dict[str, str]) -> None:
    write_atomically(os.path.join(store.own_root, FILE), (jsontext.dumps(claims, sort_keys=True) + "\n").encode())
    stamps.bump_claims(store.root)  # trust labels may read differently now


def claim(store: Store, *, repo: RepoName, path: str | os.PathLike[str], timeout: float = WRITE_WAIT) -> str | None:
    """Record the first path that uses a repo name; return the recorded path when it is another one. A mailbox
    this process cannot write is read without recording anything."""
    here = os.path.realpath(path)
    first = load_claims(store).get(repo)
    if first is None:
        if not store.writable():
            return None
        with store.locked(deadline=Deadline(timeout)):
            claims = load_claims(store)
            first = claims.setdefault(repo, here)
            if first == here:
                save_claims(store, claims)
    return first if first != here else None
