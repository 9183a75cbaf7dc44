"""An attachment about to be written: what a send has measured and named, and where the content comes from. Pure
(its own module: reading mail never needs it)."""

from __future__ import annotations

from gitmail.values.attachments import Attachment

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, NamedTuple
else:
    from gitmail.values.tuples import NamedTuple


class Outgoing(NamedTuple):
    """An attachment about to be written: its name, size and type, and where its content comes from (bytes held in
    memory, or an open file read to its end when the blob is written)."""

    name: str
    size: int
    type: str
    data: bytes | None = None
    source: IO[bytes] | None = None
    label: str = ""  # how the sender named it (the path given), for errors
    patch: str | None = None
    base: str | None = None

    def stored(self, blob: str) -> Attachment:
        return Attachment(self.name, self.size, blob, self.type, self.patch, self.base)
