"""Leases as people and sessions are told of them: `gitmail leases` lines and JSON, what `lease` confirms, why
a lease or an edit is refused, the leases others hold."""

from __future__ import annotations

from gitmail.render.times import until, when_epoch
from gitmail.render.words import quote

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any


def lease_line(view: Any) -> str:
    """One lease in `gitmail leases` (`view` is an actions.leases.LeaseView): its patterns, mode, holder (quoted:
    a session names itself), when it was taken and ends, and its note and the holder's card, quoted."""
    lease = view.lease
    parts = [
        ", ".join(quote(p) for p in lease.paths),
        lease.mode,
        f"held by {quote(view.holder)}" + (f" ({quote(view.name)})" if view.name else ""),
        f"taken {when_epoch(lease.taken)}",
        f"until {until(lease.expires)}",
    ]
    if not view.here:
        parts.append("from another machine")
    line = " · ".join(parts)
    line += f"\n    note {quote(lease.note)}" if lease.note else ""
    return line + (f"\n    card {quote(view.card)}" if view.card else "")


def lease_json(view: Any) -> dict[str, Any]:
    lease = view.lease
    return {
        "id": lease.id,
        "repo": lease.repo,
        "paths": list(lease.paths),
        "mode": lease.mode,
        "holder": view.holder,
        "session": lease.holder or None,
        "name": view.name or None,
        "card": view.card or None,
        "taken": lease.taken,
        "renewed": lease.renewed,
        "expires": lease.expires,
        "note": lease.note or None,
        "here": view.here,
        "machine": lease.machine.name if lease.machine is not None else None,
    }


def leased(lease: Any) -> str:
    """What `lease` confirms: "leased "src/orders.py" (exclusive) until 14:32 for "api#front"."""
    who = quote(lease.handle) if lease.handle else "the person at this terminal"
    paths = ", ".join(quote(p) for p in lease.paths)
    return f"leased {paths} ({lease.mode}) until {until(lease.expires)} for {who}"


def lease_holder(lease: Any) -> str:
    """Who holds a lease, for people: its session's address, or the person at a terminal (of which machine)."""
    if lease.handle:
        return str(lease.handle)
    where = f" on {lease.machine.name}" if lease.machine is not None and lease.machine.name else ""
    return f"the person at a terminal{where}"


def lease_refusal(path: str, lease: Any, *, card: str = "") -> str:
    """Why a lease is refused, or an edit denied: the path, who holds it (and its card), until when, how to ask."""
    if lease.handle:
        ask = f'ask its holder: gitmail send --to {lease.handle} -s "..."'
    else:
        ask = "only that person can release it"
    note = f" ({quote(lease.note)})" if lease.note else ""
    said = f", whose card reads {quote(card)}" if card else ""
    holder = quote(lease_holder(lease))
    return f"{quote(path)} is leased {lease.mode} by {holder}{said}{note} until {until(lease.expires)}; {ask}"


def leases_held(held: Sequence[Any]) -> str:
    """The leases other sessions hold in the reader's repository, as a session is told before its work starts."""
    lines = [
        "Leases others hold in this repository (gitmail denies your edits of a file under an exclusive one until it "
        "is released; `gitmail leases` lists them, `gitmail send --to ADDRESS` asks a holder):"
    ]
    for lease in held:
        paths = ", ".join(quote(p) for p in lease.paths)
        note = f" ({quote(lease.note)})" if lease.note else ""
        lines.append(f"- {paths} {lease.mode}, by {quote(lease_holder(lease))}{note}, until {until(lease.expires)}")
    return "\n".join(lines) + "\n"
