"""Mail that sync archived or retracted here because a remote said another machine had: one JSON line per message in
`gitmail/moved-by-sync`, written before the move is made, so that `log` and `show` can say so ("done on machine
laptop, never shown here"). Archived beats pending wherever a remote says it: this record is what keeps such a
move from going unseen. It stays on this machine; sync never sends it.
"""

from __future__ import annotations

from gitmail.store.files import append_durably
from gitmail.values import jsontext
from gitmail.values.mail import Move

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from gitmail.store.repository import Store

FILE = "moved-by-sync"


def remember(store: Store, moves: Sequence[Move]) -> None:
    """Record these moves (synced to disk) before they are made: no crash leaves one unrecorded."""
    lines = "".join(jsontext.dumps(m._asdict(), ensure_ascii=False, sort_keys=True) + "\n" for m in moves)
    append_durably(store.own_dir / FILE, lines, where=store.path)


def load(store: Store) -> dict[str, Move]:
    """Every message recorded, by id (the latest record of each); lines that do not read are skipped."""
    try:
        text = (store.own_dir / FILE).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    found = {}
    for line in text.splitlines():
        try:
            raw = jsontext.loads(line)
            move = Move(
                id=str(raw["id"]),
                state=str(raw["state"]),
                remote=str(raw["remote"]),
                machine=str(raw.get("machine") or ""),
                at=float(raw["at"]),
                shown=raw["shown"] if isinstance(raw.get("shown"), bool) else None,
                to=str(raw.get("to") or ""),
                subject=str(raw.get("subject") or ""),
            )
        except (ValueError, KeyError, TypeError):
            continue
        found[move.id] = move
    return found
