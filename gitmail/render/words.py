"""How gitmail writes the words of its texts: counts and plurals, quoted strings, escaped text, JSON, sizes."""

from __future__ import annotations

from gitmail.values import jsontext
from gitmail.values.names import INVISIBLE, JOINERS, UNSAFE_TEXT
from gitmail.values.patterns import characters

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def size(text: str) -> int:
    """What a host counts, bounded from above: UTF-8 bytes."""
    return len(text.encode("utf-8", "surrogatepass"))


def visible(text: str, *, joiners: bool = False) -> str:
    """Control characters (terminal escapes, bidi overrides) and invisible format characters (a zero-width space
    in a name) shown as escapes instead of acting; with `joiners`, the zero-width joiners emoji and some scripts
    need are kept (a body's text)."""
    text = text.replace("\t", "    ")
    if text.isascii() and text.isprintable():  # most text: nothing to escape, and no table to make
        return text
    return text.translate(_escapes("body" if joiners else "text"))


_TABLES: dict[str, dict[int, str]] = {}


def _escapes(form: str) -> dict[int, str]:
    """Each form's table, made once."""
    table = _TABLES.get(form)
    if table is None:
        table = _TABLES[form] = _table(form)
    return table


def _table(form: str) -> dict[int, str]:
    """What `visible`, `quote` and `dumps` escape, as a translation table (made in microseconds where a pattern
    this size takes a millisecond to compile, at every hook that shows mail): "text" escapes as Python writes
    escapes, "body" keeps the joiners, "json" escapes as JSON does (a character past the first plane as its
    surrogate pair), "layout" is "json" without the C0 controls (json.dumps escapes those in strings itself, and
    a raw line break in its output is the layout's)."""
    codes = list(map(ord, characters(UNSAFE_TEXT.pattern[1:-1] + INVISIBLE)))
    if form == "body":
        kept = set(map(ord, characters(JOINERS)))
        codes = [code for code in codes if code not in kept]
    if form in ("text", "body"):  # as Python's unicode_escape writes them
        short = {9: "\\t", 10: "\\n", 13: "\\r"}
        return {
            code: short.get(code)
            or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
            for code in codes
        }
    table = {code: f"\\u{code:04x}" for code in codes if code <= 0xFFFF and (code >= 0x20 or form == "json")}
    for code in codes:  # JSON escapes a character beyond the first plane as its UTF-16 surrogate pair
        if code > 0xFFFF:
            table[code] = f"\\u{0xD800 + ((code - 0x10000) >> 10):04x}\\u{0xDC00 + ((code - 0x10000) & 0x3FF):04x}"
    return table


def dumps(value: Any) -> str:
    """JSON for `--json`: text as written, except what a terminal or a JavaScript reader would act on or hide (C1
    controls, bidi overrides, line separators, zero-width and other format characters), escaped as \\uXXXX. They
    only occur inside strings, so the JSON means the same."""
    return jsontext.dumps(value, ensure_ascii=False, indent=2).translate(_escapes("layout"))


def quote(text: str) -> str:
    """A JSON string literal that stays on one line and shows control and invisible characters instead of obeying
    or hiding them."""
    quoted = jsontext.dumps(str(text), ensure_ascii=False)
    return quoted if quoted.isascii() and quoted.isprintable() else quoted.translate(_escapes("json"))


def count(n: int, noun: str) -> str:
    """'1 message', '2 messages'."""
    return f"{n} {noun}" + ("" if n == 1 or noun in ("directed",) else "s")
