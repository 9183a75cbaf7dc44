"""The rules every caller's request is held to before anything is read or written, checked here once for every
adapter. Each speaks of options by the action layer's neutral names (values/phrase.py), so the command line says
`--all` where MCP says `all`."""

from __future__ import annotations

from gitmail.errors import UsageError
from gitmail.values.phrase import Phrase, listed

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


def given(value: object) -> bool:
    return value not in (None, False, (), [])


def one_of(options: Mapping[str, object]) -> str:
    """The one option given among options that exclude each other (by their neutral names); a usage error naming
    them when none or several were given."""
    chosen = [name for name, value in options.items() if given(value)]
    if len(chosen) != 1:
        got = f" (got {' and '.join('{' + name + '}' for name in chosen)})" if chosen else ""
        raise UsageError(Phrase(f"give exactly one of {listed(list(options))}{got}"))
    return chosen[0]


def without(option: str, others: Mapping[str, object]) -> None:
    """`option` was given: none of `others` may be (`--everyone` takes no `--repo`)."""
    clashing = [name for name, value in others.items() if given(value)]
    if clashing:
        raise UsageError(Phrase(f"{{{option}}} takes no {listed(clashing)}"))


def needs(option: str, partner: str, what: str = "") -> None:
    """`option` was given without the one it goes with."""
    raise UsageError(Phrase(f"{{{option}}} goes with {{{partner}}}{what}"))
