"""What this machine makes of the keys other machines published: pinned on first sight, trusted, revoked, or new
and not accepted (values/verdict.py), in gitmail/keys/pins.json, machine-local and never synced. Read at every
reading of mail from another machine, so this module stays small; changed only under the mailbox lock (keys.py).
"""

from __future__ import annotations

import os

from gitmail.store import stamps
from gitmail.store.files import make_dir, read_text, unwritable, write_atomically
from gitmail.values import jsontext

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from gitmail.store.repository import Store
    from gitmail.values.verdict import Key, Keys

FOLDER = "keys"  # gitmail/keys/: this machine's own key, what it published, and these pins
FILE = "pins.json"


def known(store: Store) -> Keys:
    """The keys of other machines this machine knows, and what it makes of each."""
    from gitmail.values.verdict import Keys

    return Keys(load(store)[1])


def load(store: Store) -> tuple[str | None, list[Key]]:
    """(the refs/notes/gitmail-keys commit last taken in, the keys); a damaged file reads as empty (doctor says so)."""
    from gitmail.values.verdict import Key

    text = read_text(os.path.join(store.own_root, FOLDER, FILE))
    try:
        data = jsontext.loads(text) if text else {}
        learned = data.get("learned")
        keys = [Key(**{f: str(k[f]) for f in Key._fields}) for k in data.get("keys", [])]
    except (ValueError, TypeError, KeyError, AttributeError):
        return None, []
    return (learned if isinstance(learned, str) else None), keys


def save(store: Store, learned: str | None, keys: Sequence[Key]) -> None:
    data = {"learned": learned, "keys": [k._asdict() for k in keys]}
    try:
        make_dir(os.path.join(store.own_root, FOLDER))
    except OSError as error:
        raise unwritable(store.own_root, error) from None
    write_atomically(os.path.join(store.own_root, FOLDER, FILE), (jsontext.dumps(data) + "\n").encode())
    stamps.bump_claims(store.root)  # trust labels may read differently now
