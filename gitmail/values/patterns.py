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
