"""A pattern compiled at its first use answers as the compiled pattern does."""

from __future__ import annotations

import random
import re

import pytest

from gitmail.values import names, patterns
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


_SPELLED = [
    (patterns.spelled("A-Za-z0-9._-", 1, 64, first="A-Za-z0-9"), r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"),
    (patterns.spelled("0123456789abcdefghjkmnpqrstvwxyz", 10, 10), r"[0123456789abcdefghjkmnpqrstvwxyz]{10}"),
    (patterns.spelled("A-Za-z0-9_-", 1, 3), r"[A-Za-z0-9_-]{1,3}"),
]


@pytest.mark.parametrize(("pattern", "text"), _SPELLED, ids=lambda p: str(p)[:30])
def test_a_spelled_pattern_is_written_and_answers_as_its_regular_expression(
    pattern: patterns.Spelled, text: str
) -> None:
    assert pattern.pattern == text
    rng = random.Random(text)
    alphabet = "aZ09._-/ \n\tkil\u00e9\u0130\u212a\x00" + "0123456789abcdefghjkmnpqrstvwxyz"
    samples = ["", "a", "a\n", "\na", "-a", "a" * 63, "a" * 64, "a" * 65, "0" * 10, "0" * 9 + "\n", "0123456789"]
    samples += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(12))) for _ in range(3000)]
    compiled = re.compile(text)
    for sample in samples:
        assert pattern.fullmatch(sample) == (compiled.fullmatch(sample) is not None), repr(sample)
    assert pattern.search("/" + "0" * 10 + "/") is not None  # anything else: the compiled pattern's


def test_the_text_checks_answer_as_their_patterns_search_would() -> None:
    rng = random.Random(7)
    pool = "ab \t\n\x1b\x7f\x85\u00e9\u2028\u202e\u2066\ufffe\ud800\udfff\U0001f600"
    samples = ["", "plain", "caf\u00e9", "\udc80x"] + ["".join(rng.choice(pool) for _ in range(6)) for _ in range(3000)]
    for sample in samples:
        assert names.has_unsafe(sample) == (re.search(names.UNSAFE_TEXT.pattern, sample) is not None), repr(sample)
        assert names.has_surrogates(sample) == (re.search(names.NOT_UTF8.pattern, sample) is not None), repr(sample)
