"""A pattern compiled at its first use answers as the compiled pattern does."""

from __future__ import annotations

import re

from gitmail.values import patterns
from gitmail.values.names import UNSAFE_TEXT


def test_a_lazy_pattern_answers_as_the_compiled_one() -> None:
    text, flags = r"(?P<word>[a-z]+)-(\d+)", re.IGNORECASE
    real, lazy = re.compile(text, flags), patterns.lazy(text, flags)
    assert lazy.pattern == real.pattern and lazy.flags == flags
    for probe in ("abc-12", "ABC-1 x", "-3", ""):
        assert bool(lazy.fullmatch(probe)) == bool(real.fullmatch(probe))
        assert lazy.sub("_", probe) == real.sub("_", probe)
        found, expected = lazy.search(probe), real.search(probe)
        assert (found and found.groupdict()) == (expected and expected.groupdict())


def test_a_lazy_pattern_compiles_only_when_used() -> None:
    unused = patterns.lazy("[")  # not a valid expression: nothing is compiled yet
    assert unused.pattern == "["
    try:
        unused.search("x")
    except re.error:
        pass
    else:
        raise AssertionError("the pattern was not compiled at its first use")
    assert UNSAFE_TEXT.search("a\x1b[2Jb") is not None and UNSAFE_TEXT.search("plain") is None


def test_its_ignorecase_is_re_s() -> None:
    assert patterns.IGNORECASE == re.IGNORECASE
