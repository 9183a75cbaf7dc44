"""Which machine a message was written on, as a value: a name for people and an id that keeps machines apart when
their names are the same (two laptops called "laptop"). Pure; this machine's own id lives beside the mailbox
(`gitmail.store.machines`).

A message records its machine in its `machine` field ("laptop 4kq8m2x9ab"). Reading a message turns "written here"
into `machine=None`, so everything downstream knows one thing: None is this machine, anything else is another one.
"""

from __future__ import annotations

from gitmail.values.ids import ID_PATTERN
from gitmail.values.patterns import spelled

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple
else:
    from gitmail.values.tuples import NamedTuple

NAME_PATTERN = spelled("A-Za-z0-9._-", 1, 64, first="A-Za-z0-9")


class Machine(NamedTuple):
    """Where a message was written: a name for people and an id that tells machines apart."""

    name: str  # "" when not known
    id: str  # "" when not known

    def field(self) -> str:
        """The `machine` frontmatter field and commit trailer: "laptop 4kq8m2x9ab"."""
        return f"{self.name} {self.id}"

    @classmethod
    def parse(cls, text: str) -> Machine:
        """The machine a message names. A field gitmail did not write names an unknown machine, never this one."""
        name, _, machine_id = text.strip().partition(" ")
        if NAME_PATTERN.fullmatch(name) and ID_PATTERN.fullmatch(machine_id):
            return cls(name, machine_id)
        return ELSEWHERE


ELSEWHERE = Machine("", "")  # another machine that did not say which


def name_problem(raw: str) -> str | None:
    if not NAME_PATTERN.fullmatch(raw):
        return "use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit"
    return None
