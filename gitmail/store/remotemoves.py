"""Mail that sync archived or retracted here because a remote said another machine had: one JSON line per message in
`gitmail/moved-by-sync`, written before the move is made, so that `log` and `show` can say so ("done on machine
laptop, never shown here"). Archived beats pending wherever a remote says it: this record is what keeps such a
move from going unseen. It stays on this machine; sync never sends it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import NamedTuple

from gitmail.store.files import append_durably
from gitmail.store.repository import Store
from gitmail.values.ids import BROADCAST
from gitmail.values.layout import State
from gitmail.values.machine import Machine

FILE = "moved-by-sync"


class Move(NamedTuple):
    id: str
    state: str  # what it became here: "archived" or "retracted"
    remote: str  # the remote that said so
    machine: str  # the machine the remote's state names as having made the move ("laptop 4kq8m2x9ab"); "" unknown
    at: float  # when it was moved here (time.time())
    shown: bool | None  # whether a session on this machine had been shown it (None: receipts are off, unknown)
    to: str = ""  # its recipient ("_broadcast" for a broadcast), for messages
    subject: str = ""  # for messages

    def said(self) -> str:
        """What the move amounts to: "done on machine "laptop" (as origin says), never shown here"."""
        machine = Machine.parse(self.machine) if self.machine else None
        where = f"on machine {json.dumps(machine.name)}" if machine is not None and machine.name else "elsewhere"
        text = f"{'done' if self.state == State.ARCHIVED.value else 'retracted'} {where} (as {self.remote} says)"
        return text + (", never shown here" if self.shown is False else "")

    def line(self) -> str:
        """The move in one line: "archived 7kq2m9x4ab (to web, "Please review"): done on machine ..."."""
        to = "a broadcast" if self.to == BROADCAST else f"to {self.to}"
        return f"{self.state} {self.id} ({to}, {json.dumps(self.subject, ensure_ascii=False)}): {self.said()}"


def remember(store: Store, moves: Sequence[Move]) -> None:
    """Record these moves (synced to disk) before they are made: no crash leaves one unrecorded."""
    lines = "".join(json.dumps(m._asdict(), ensure_ascii=False, sort_keys=True) + "\n" for m in moves)
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
            raw = json.loads(line)
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
