"""Whether a message from another machine is vouched for by that machine's key, as values. Pure.

A commit's signature is checked once, and what it showed is kept by commit id (`Fact`; store/signatures.py keeps
them): the bytes of a commit never change, so neither does the fact. Whether the message is VERIFIED is decided each
time it is read (`judge`), from that fact, the keys this machine accepts for other machines (`Keys`, kept by
store/keys.py) and where the message was found. Trusting, revoking or a changed key therefore never leaves a stale
verdict behind.

VERIFIED means one thing: the commit is signed by a key this machine accepts for the very machine the message
names, and the signed bytes name the message id and recipient it was found under. Anything else is UNVERIFIED,
with the reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from gitmail.values.ids import BROADCAST
from gitmail.values.names import nfc

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from gitmail.values.message import Message

GOOD = "good"  # a good signature in namespace "git", by the key it names
UNSIGNED = "unsigned"
BAD = "bad"  # a signature that is damaged, for another namespace, or does not match
UNCHECKED = "unchecked"  # nothing in this process could check it (never kept: checked again where it can be)


class Fact(NamedTuple):
    """What a commit's signature showed, whoever made it."""

    kind: str  # GOOD, UNSIGNED, BAD or UNCHECKED
    key: str = ""  # GOOD and BAD: the fingerprint of the key the signature names ("" when it names none)
    reason: str = ""  # BAD: what is wrong

    def line(self) -> str:
        """One line of the cache: `good SHA256:...`, `unsigned`, `bad SHA256:... reason`."""
        key = self.key or ("-" if self.kind == BAD else "")
        return " ".join(part for part in (self.kind, key, self.reason) if part)

    @classmethod
    def parse(cls, text: str) -> Fact | None:
        kind, _, rest = text.partition(" ")
        if kind == UNSIGNED and not rest:
            return cls(UNSIGNED)
        if kind == GOOD and rest.startswith("SHA256:") and " " not in rest:
            return cls(GOOD, rest)
        if kind == BAD and rest:
            key, _, reason = rest.partition(" ")
            return cls(BAD, "" if key == "-" else key, reason)
        return None


PINNED = "pinned"  # accepted the first time this machine saw it published
TRUSTED = "trusted"  # accepted by the user (`gitmail keys trust`)
REVOKED = "revoked"  # refused by the user (`gitmail keys revoke`)
NEW = "new"  # published for a machine this machine already knew a key of, or with another at first sight: refused
ACCEPTED = (PINNED, TRUSTED)


class Key(NamedTuple):
    """A key another machine published, and what this machine makes of it."""

    machine: str  # the machine's id
    name: str  # the machine's name, as it published it
    fingerprint: str  # "SHA256:..."
    public: str  # "ssh-ed25519 AAAA...": as an allowed_signers line has it
    state: str  # PINNED, TRUSTED, REVOKED or NEW
    at: str = ""  # when it came to this state (ISO 8601)


class Keys:
    """Every key known of other machines."""

    def __init__(self, keys: Iterable[Key] = ()) -> None:
        self.all = list(keys)
        self._of: dict[str, list[Key]] = {}
        self._by: dict[str, list[Key]] = {}
        for key in self.all:
            self._of.setdefault(key.machine, []).append(key)
            self._by.setdefault(key.fingerprint, []).append(key)

    def of(self, machine: str) -> list[Key]:
        return list(self._of.get(machine, []))

    def by(self, fingerprint: str) -> list[Key]:
        return list(self._by.get(fingerprint, []))

    def machines(self) -> list[str]:
        return list(self._of)

    def __bool__(self) -> bool:
        return bool(self.all)


class Verdict(NamedTuple):
    """How a message from another machine stands: VERIFIED, or UNVERIFIED and why."""

    verified: bool
    reason: str = ""  # UNVERIFIED: why, in a few words
    machine: str = ""  # VERIFIED: the name of the machine whose key vouched for it
    key: str = ""  # the fingerprint of the key that signed it, when one did

    @property
    def label(self) -> str:
        return "VERIFIED" if self.verified else "UNVERIFIED"


def judge(fact: Fact | None, *, found_id: str, found_to: str | None, message: Message, keys: Keys) -> Verdict:
    """The verdict on a message from another machine, found under `found_id` in the inbox or archive of `found_to`
    (None: among the broadcasts)."""
    if fact is None:
        return Verdict(False, "its commit could not be read")
    if fact.kind == UNSIGNED:
        return Verdict(False, "not signed")
    if fact.kind == BAD:
        return Verdict(False, f"a bad signature ({fact.reason})", key=fact.key)
    if fact.kind == UNCHECKED:
        return Verdict(False, f"its signature could not be checked here ({fact.reason})", key=fact.key)
    where = BROADCAST if found_to is None else nfc(found_to)
    if message.id != found_id or nfc(message.to) != where:
        return Verdict(
            False,
            f"replayed: it was signed as message {message.id} to {_to(message.to)}, and found as {found_id} to "
            f"{_to(where)}",
            key=fact.key,
        )
    claimed = message.machine
    if claimed is None or not claimed.id:
        return Verdict(False, "signed, but it names no other machine", key=fact.key)
    name = f'"{claimed.name}"' if claimed.name else claimed.id
    mine = [k for k in keys.of(claimed.id) if k.fingerprint == fact.key]
    if mine and mine[0].state in ACCEPTED:
        return Verdict(True, machine=mine[0].name or claimed.name, key=fact.key)
    if mine and mine[0].state == REVOKED:
        return Verdict(False, f"signed with {fact.key}, a revoked key of machine {name}", key=fact.key)
    if mine:
        return Verdict(False, f"machine {name} has a new key, {fact.key}, not accepted here yet", key=fact.key)
    others = sorted({(k.name or k.machine, k.machine) for k in keys.by(fact.key) if k.state in ACCEPTED})
    if others and others[0][0] == claimed.name:  # the name is right, the id is not
        owner, owner_id = others[0]
        return Verdict(
            False,
            f'signed by the key of machine "{owner}" ({owner_id}), but it names machine id {claimed.id}',
            key=fact.key,
        )
    if others:
        return Verdict(False, f'signed by the key of machine "{others[0][0]}", not of machine {name}', key=fact.key)
    if not [k for k in keys.of(claimed.id) if k.state in ACCEPTED]:
        return Verdict(False, f"no key of machine {name} is known here (it was signed with {fact.key})", key=fact.key)
    return Verdict(False, f"signed with {fact.key}, which is not a key of machine {name}", key=fact.key)


def _to(recipient: str) -> str:
    return "every repo" if recipient == BROADCAST else f'"{recipient}"'


def accepted(keys: Sequence[Key]) -> list[Key]:
    return [k for k in keys if k.state in ACCEPTED]
