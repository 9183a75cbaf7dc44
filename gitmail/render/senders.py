"""Who a message is from, as a reader is told: the sender's label (PERSON, PEER, VERIFIED, UNVERIFIED), what
vouched for it, and the machine it came from."""

from __future__ import annotations

import os

from gitmail.render.words import quote, visible
from gitmail.values.names import PERSON

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from gitmail.values.machine import Machine
    from gitmail.values.mail import Entry
    from gitmail.values.verdict import Verdict

PERSON_LABEL = "PERSON"  # the sender label of mail the person wrote: no repository's name can be `@user`


def trust(
    sender: str, claims: Mapping[str, str], machine: Machine | None = None, verdict: Verdict | None = None
) -> str:
    """PERSON: from the person (`@user`), written on this machine or vouched for by another's key.
    PEER: written on this machine, under a name that a repository here, which still exists, has used.
    VERIFIED: written on another machine, whose key this machine accepts signed it (`verdict`). Otherwise anyone
    could be it (claims are this machine's own: they say nothing about another)."""
    if sender == PERSON:  # written by gitmail for the person (the page, or a terminal outside any session)
        return PERSON_LABEL if machine is None or (verdict is not None and verdict.verified) else "UNVERIFIED"
    if machine is not None:
        return "VERIFIED" if verdict is not None and verdict.verified else "UNVERIFIED"
    path = claims.get(sender)
    return "PEER" if path and os.path.exists(os.path.join(path, ".git")) else "UNVERIFIED"


def vouched(entry: Entry, claims: Mapping[str, str]) -> str:
    """The label of a message's sender, and for mail from another machine what decided it: "PEER", "VERIFIED by
    the key SHA256:... of machine "laptop"", "UNVERIFIED: not signed"."""
    m = entry.message
    label = trust(m.sender, claims, m.machine, entry.verdict)
    if m.machine is None:
        return label
    if entry.verdict is None:
        return f"{label}: its signature was not checked"
    if entry.verdict.verified:
        return f"{label} by the key {entry.verdict.key} of machine {quote(entry.verdict.machine)}"
    return f"{label}: {visible(entry.verdict.reason)}"


def origin(entry: Entry) -> str:
    """Which machine mail from another machine came from: ' on machine "laptop"'. VERIFIED, the name is the one
    the vouching key's machine goes by here, and the name the message gives itself follows only when it differs
    (' on machine "evil" (claims "laptop")'); otherwise the message's own claim is all there is."""
    claimed, name = entry.message.machine, machine_name(entry)
    if claimed is None:
        return ""
    said = f" on machine {quote(name)}" if name else " on another machine"
    return said + (f" (claims {quote(claimed.name)})" if claimed.name and name != claimed.name else "")


def machine_name(entry: Entry) -> str:
    """The name of the machine mail from another machine came from: the one its vouching key goes by here when
    VERIFIED, else the name the message gives ("" where it gives none)."""
    verdict, claimed = entry.verdict, entry.message.machine
    if verdict is not None and verdict.verified and verdict.machine:
        return verdict.machine
    return claimed.name if claimed is not None else ""
