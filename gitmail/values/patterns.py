"""Regular expressions compiled at their first use, not at import: the value modules every command loads name a few
each, and most runs use few of them. `lazy(pattern)` stands for `re.compile(pattern)`; its `pattern` is there
without compiling, and everything else a compiled pattern has is the compiled pattern's."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from typing import Any

IGNORECASE = 2  # re.IGNORECASE, spelt without importing re (a test checks the two agree)


class _Lazy:
    __slots__ = ("pattern", "flags", "_compiled")

    def __init__(self, pattern: str, flags: int) -> None:
        self.pattern, self.flags = pattern, flags
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:
        if self._compiled is None:
            import re

            self._compiled = re.compile(self.pattern, self.flags)
        return getattr(self._compiled, name)

    def __repr__(self) -> str:
        return f"lazy({self.pattern!r})"


def lazy(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return _Lazy(pattern, flags)  # type: ignore[return-value]  # it answers as the compiled pattern does


class Spelled(_Lazy):
    """A pattern that is a character class repeated (its first character of a class of its own, if given): its
    `fullmatch`, which is how names and ids are checked at every command, is answered with string methods, so
    checking them never compiles a pattern nor imports re. Anything else it is asked is the compiled pattern's."""

    __slots__ = ("_first", "_rest", "_fewest", "_most")

    def __init__(self, rest: str, fewest: int, most: int, first: str | None) -> None:
        if first is None:
            count = f"{{{fewest}}}" if fewest == most else f"{{{fewest},{most}}}"
            super().__init__(f"[{rest}]{count}", 0)
        else:
            super().__init__(f"[{first}][{rest}]{{{fewest - 1},{most - 1}}}", 0)
        self._rest = characters(rest)
        self._first = self._rest if first is None else characters(first)
        self._fewest, self._most = fewest, most

    def fullmatch(self, text: str) -> bool:
        return self._fewest <= len(text) <= self._most and text[0] in self._first and not text[1:].strip(self._rest)

    def __repr__(self) -> str:
        return f"spelled({self.pattern!r})"


def spelled(rest: str, fewest: int, most: int, *, first: str | None = None) -> Spelled:
    """The pattern of `fewest` to `most` characters of the class body `rest` ("A-Za-z0-9._-"), the first of them
    of the class body `first` when given; at least one character."""
    assert 1 <= fewest <= most
    return Spelled(rest, fewest, most, first)


def characters(body: str) -> str:
    """The characters a regular expression's character class body names ("a-z" and single characters; a '-'
    first or last stands for itself)."""
    found: list[str] = []
    at = 0
    while at < len(body):
        if at + 2 < len(body) and body[at + 1] == "-":
            found += map(chr, range(ord(body[at]), ord(body[at + 2]) + 1))
            at += 3
        else:
            found.append(body[at])
            at += 1
    return "".join(found)
