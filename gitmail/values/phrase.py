"""Text that names a caller's options, said in each caller's own words.

The action layer checks every rule once, and its errors and notes name the options they are about (`--or-repo` on
the command line is `or_repo` in MCP and the Python API, and a field on the page). It writes them as a `Phrase`
with the option's neutral name (the action layer's parameter name) in braces; each adapter says it with its own
table of words (`spoken`). As a plain string a phrase reads in the Python API's words. Pure."""

from __future__ import annotations

TYPE_CHECKING = False  # the quick command-line paths load this: no typing import for the annotations
if TYPE_CHECKING:
    from collections.abc import Mapping

    Words = Mapping[str, str]  # an adapter's spelling of the action layer's option names


class Term(str):
    """An option's neutral name inside a phrase."""


class Phrase(str):
    """A text of the action layer's; `parts` keep which pieces name options."""

    parts: tuple[str, ...]

    def __new__(cls, template: str, /, **literal: object) -> Phrase:
        """`template` names options as {name} (a template holds no other braces); a field given in `literal` is
        text said as it is (a user's input is always passed so, never written into the template)."""
        parts: list[str] = []
        rest = template
        while "{" in rest:
            text, _, rest = rest.partition("{")
            field, _, rest = rest.partition("}")
            parts += [text, str(literal[field]) if field in literal else Term(field)]
        parts.append(rest)
        made = super().__new__(cls, "".join(parts))
        made.parts = tuple(parts)
        return made

    def said(self, words: Words) -> str:
        return "".join(words.get(p, p) if isinstance(p, Term) else p for p in self.parts)


def spoken(text: object, words: Words) -> str:
    """Any text, with the options a phrase names in these words."""
    return text.said(words) if isinstance(text, Phrase) else str(text)


def listed(names: list[str]) -> str:
    """ "{a}", "{a} or {b}", "{a}, {b} or {c}": a template naming options."""
    fields = [f"{{{name}}}" for name in names]
    return fields[0] if len(fields) == 1 else f"{', '.join(fields[:-1])} or {fields[-1]}"
