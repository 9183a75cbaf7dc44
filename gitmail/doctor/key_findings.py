"""What doctor says of the keys: the one this machine signs with (or why it cannot), whether it is published, the
record of what this machine accepts, and the keys of other machines: a changed key is a problem until the user
trusts it or revokes the machine (its mail reads UNVERIFIED meanwhile), and so are two accepted machines of one
name (the mail of either reads as that name's)."""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING, NamedTuple

from gitmail.doctor.findings import Finding, Level, Rule, always, each, judged, listed
from gitmail.render.words import count
from gitmail.store import keys
from gitmail.values.verdict import ACCEPTED, NEW, REVOKED

if TYPE_CHECKING:
    from pathlib import Path

    from gitmail.store.repository import Store
    from gitmail.values.verdict import Key

REPAIR = "gitmail doctor --repair"


class Keys(NamedTuple):
    own: keys.Signer | None  # the key this machine signs with (None: none yet, or it cannot be used)
    refused: keys.SigningKeyError | None  # why it cannot be used
    unpublished: bool  # this machine's key (or name) is not published yet
    pins: Path  # the record of what this machine accepts
    pins_unreadable: str  # why that record cannot be read
    known: list[Key]  # every key other machines published, and what this machine makes of each
    fresh: int  # keys other machines published that are not taken in yet
    same_named: dict[str, list[str]]  # names more than one accepted machine goes by, with their ids

    @property
    def accepted(self) -> list[str]:
        return sorted({f"{k.name} ({k.machine})" for k in self.known if k.state in ACCEPTED})


def _which(found: Keys) -> str:
    own = found.own
    assert own is not None
    return f"gitmail's own key {own.path}" if own.own else f"your key {own.path} (gitmail.{keys.SETTING})"


OWN: list[Rule[Keys]] = [
    Rule(
        "keys",
        Level.PROBLEM,
        lambda k: isinstance(k.refused, keys.DamagedKey),
        lambda k: f"{k.refused}; other machines read that mail as UNVERIFIED",
        f"{REPAIR} sets it aside and makes a new key, published at once (other machines see a changed key, to "
        "accept with `gitmail keys trust` as any other)",
    ),
    Rule(
        "keys",
        Level.PROBLEM,
        lambda k: k.refused is not None and not isinstance(k.refused, keys.DamagedKey),
        lambda k: f"no mail can be written: {k.refused}",
    ),
    Rule(
        "keys",
        Level.OK,
        lambda k: k.own is None and k.refused is None,
        lambda k: "no signing key yet: the first write makes one",
    ),
    Rule(
        "keys",
        Level.OK,
        lambda k: k.own is not None,
        lambda k: f"signs with {k.own.kind} {k.own.fingerprint}: {_which(k)}" if k.own else "",
    ),
    Rule(
        "keys",
        Level.NOTE,
        lambda k: k.own is not None and k.unpublished,
        lambda k: "this machine's key is not published yet, so other machines cannot verify its mail",
        "the next write publishes it; `gitmail keys init` does it now",
    ),
    Rule(
        "keys",
        Level.PROBLEM,
        lambda k: k.pins_unreadable,
        lambda k: (
            f"{k.pins} cannot be read ({k.pins_unreadable}): every machine's key would be taken on first sight again"
        ),
        lambda k: f"restore it from a backup, or remove it to pin the keys published now ({shlex.quote(str(k.pins))})",
    ),
]

OTHERS: list[Rule[Key]] = [
    Rule(
        "keys",
        Level.PROBLEM,
        lambda key: key.state == NEW,
        lambda key: (
            f'machine "{key.name}" ({key.machine}) published a key this machine does not accept: '
            f"{key.fingerprint}; its mail signed with it reads UNVERIFIED"
        ),
        lambda key: (
            f"if you expect it (compare with `gitmail keys` on that machine): gitmail keys trust "
            f"{key.machine} {key.fingerprint}; if not: gitmail keys revoke {key.machine}"
        ),
        lambda key: (key.machine, key.fingerprint),
    ),
    Rule(
        "keys",
        Level.NOTE,
        lambda key: key.state == REVOKED,
        lambda key: (
            f'the key {key.fingerprint} of machine "{key.name}" ({key.machine}) is revoked: its mail reads UNVERIFIED'
        ),
    ),
]

SAME_NAME: list[Rule[tuple[str, list[str]]]] = [
    Rule(
        "keys",
        Level.PROBLEM,
        always,
        lambda named: (
            f'{count(len(named[1]), "accepted machine")} go by the name "{named[0]}" '
            f'({", ".join(named[1])}): mail of each reads as from "{named[0]}", so a label cannot tell them apart'
        ),
        lambda named: (
            "compare `gitmail keys` on each machine; revoke the one you do not know: gitmail keys revoke "
            f"{named[1][-1]} (or give one another name: git config gitmail.machine NAME in its mailbox)"
        ),
        lambda named: named[1],
    ),
]

AFTER: list[Rule[Keys]] = [
    Rule(
        "keys",
        Level.OK,
        lambda k: k.accepted,
        lambda k: f"keys accepted for {count(len(k.accepted), 'other machine')}: " + listed(k.accepted),
    ),
    Rule(
        "keys",
        Level.NOTE,
        lambda k: k.fresh,
        lambda k: f"{count(k.fresh, 'key')} published by other machines not taken in yet (the next sync does it)",
        "`gitmail keys` takes them in now",
    ),
]


def gather(store: Store) -> Keys:
    from gitmail.store import machines, pins

    own, refused = None, None
    try:
        own = keys.signer(store, create=False)
    except keys.SigningKeyError as error:
        refused = error
    here = machines.current(store) if own is not None and store.writable() else None
    unpublished = here is not None and own is not None and keys.published_mark(store) != keys.mark(own, here)
    record = store.own_dir / keys.FOLDER / pins.FILE
    unreadable = ""
    try:
        json.loads(record.read_text(encoding="utf-8")) if record.exists() else None
    except (OSError, ValueError) as error:
        unreadable = str(error)
    known = pins.known(store).all
    own_id = machines.local_id(store)
    taken = {(k.machine, k.fingerprint) for k in known}
    fresh = {(p.machine, p.fingerprint) for p in keys.publications(store).found if p.machine != own_id} - taken
    return Keys(own, refused, unpublished, record, unreadable, known, len(fresh), keys.same_named(store))


def findings(store: Store) -> list[Finding]:
    found = gather(store)
    return (
        judged(OWN, found)
        + each(OTHERS, found.known)
        + each(SAME_NAME, found.same_named.items())
        + judged(AFTER, found)
    )
