"""Message ids, and the address every repo shares (the broadcast's). Pure."""

from __future__ import annotations

from gitmail.values.patterns import spelled

TYPE_CHECKING = False  # the hooks load this: no typing import for the annotations
if TYPE_CHECKING:
    from typing import TypeGuard

BROADCAST = "_broadcast"  # the `to` of a message for every repo; '_' names are reserved, so no repo has it
ID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32: no i, l, o, u to misread
ID_LENGTH = 10  # 50 random bits: unique across machines for any plausible mailbox
ID_PATTERN = spelled(ID_ALPHABET, ID_LENGTH, ID_LENGTH)


def new_id() -> str:
    """Ten random characters of the alphabet (50 bits from the OS's random source; not `secrets`, whose import
    costs a send milliseconds)."""
    import os

    number = int.from_bytes(os.urandom(8), "big") >> (64 - 5 * ID_LENGTH)
    return "".join(ID_ALPHABET[(number >> (5 * i)) & 31] for i in range(ID_LENGTH))


def is_id(text: str) -> bool:
    return ID_PATTERN.fullmatch(text)


class ObjectId(str):
    """A git object's id in the mailbox, as git spells it: 40 lower-case hexadecimal digits (the mailbox's objects
    are SHA-1). Not a message id: a message's commit has one of these, its id is the ten letters above."""

    __slots__ = ()

    @classmethod
    def of(cls, text: str) -> ObjectId | None:
        """`text` as an object id; None for anything else."""
        return cls(text) if is_oid(text) else None


_HEX = frozenset("0123456789abcdef")


def is_oid(text: object) -> TypeGuard[str]:
    """Whether `text` is an object id as git spells them in the mailbox (the one rule every reader uses)."""
    return isinstance(text, str) and len(text) == 40 and set(text) <= _HEX
