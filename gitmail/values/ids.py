"""Message ids, and the address every repo shares (the broadcast's). Pure."""

from __future__ import annotations

import re

BROADCAST = "_broadcast"  # the `to` of a message for every repo; '_' names are reserved, so no repo has it
ID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32: no i, l, o, u to misread
ID_LENGTH = 10  # 50 random bits: unique across machines for any plausible mailbox
ID_PATTERN = re.compile(f"[{ID_ALPHABET}]{{{ID_LENGTH}}}")


def new_id() -> str:
    """Ten random characters of the alphabet (50 bits from the OS's random source; not `secrets`, whose import
    costs a send milliseconds)."""
    import os

    number = int.from_bytes(os.urandom(8), "big") >> (64 - 5 * ID_LENGTH)
    return "".join(ID_ALPHABET[(number >> (5 * i)) & 31] for i in range(ID_LENGTH))


def is_id(text: str) -> bool:
    return ID_PATTERN.fullmatch(text) is not None
