"""JSON as the standard library's `json` reads and writes it, without importing the `json` package: its modules
import `re` (with `enum`, `functools` and `collections` beneath it) to compile patterns its C accelerator never uses,
about 8 ms of the 11 ms an interpreter takes to start. The paths that run at every session start and every `send`,
`inbox` and `log` read and write JSON (hook payloads, session records, receipts, message headers), so they use the
accelerator `_json` directly, as `json` itself does, and fall back to `json` where it is missing or where an
option only `json` has is asked for (an indent).

`loads` and `dumps` answer what `json.loads` and `json.dumps` answer for the same arguments, byte for byte; a
document that is not JSON raises `NotJSON`, a `ValueError`.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

try:
    import _json
except ImportError:  # an interpreter without the accelerator: the package itself, patterns and all
    _json = None  # type: ignore[assignment]

_WHITESPACE = " \t\n\r"  # what json skips around a document


class NotJSON(ValueError):
    """A document that is not JSON (json's JSONDecodeError, without importing json to name it)."""


class _Reading:
    """What the accelerator's scanner asks of the decoder it scans for, set as `json.JSONDecoder()` sets it."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    @staticmethod
    def parse_constant(name: str) -> float:
        return {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}[name]


_scan: Callable[[str, int], tuple[Any, int]] | None = None


def loads(text: str | bytes) -> Any:
    """The value a JSON document (str, or bytes in UTF-8) holds, as `json.loads` reads it."""
    global _scan
    if isinstance(text, (bytes, bytearray)) and not text.startswith(b"\xef\xbb\xbf") and b"\0" not in text[:4]:
        text = text.decode("utf-8", "surrogatepass")  # what json takes bytes without a mark of another encoding for
    if _json is None or not isinstance(text, str):
        return _by_json(text)
    if _scan is None:
        _scan = _json.make_scanner(_Reading())  # type: ignore[arg-type]  # any object with the decoder's fields
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        value, end = _scan(text, start)
    except StopIteration:
        raise NotJSON(f"Expecting value: char {start}") from None
    except Exception:  # noqa: BLE001  # the accelerator raises json's own error, and finds it only once json is loaded
        return _by_json(text)
    if text[end:].strip(_WHITESPACE):
        raise NotJSON(f"Extra data: char {end}")
    return value


def _by_json(text: str | bytes) -> Any:
    import json

    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise NotJSON(str(error)) from None


def dumps(
    value: Any,
    *,
    ensure_ascii: bool = True,
    sort_keys: bool = False,
    separators: tuple[str, str] | None = None,
    indent: int | None = None,
    default: Callable[[Any], Any] | None = None,
) -> str:
    """`value` written as `json.dumps` writes it with the same options."""
    if _json is not None and indent is None:
        quote = _json.encode_basestring_ascii if ensure_ascii else _json.encode_basestring
        if isinstance(value, str):
            return str(quote(value))
        item, key = separators if separators is not None else (", ", ": ")
        try:
            encode = _json.make_encoder({}, default or _unserialisable, quote, None, key, item, sort_keys, False, True)
        except TypeError:  # an interpreter whose accelerator is made otherwise: json knows how
            pass
        else:
            return "".join(encode(value, 0))
    import json

    return json.dumps(
        value, ensure_ascii=ensure_ascii, sort_keys=sort_keys, separators=separators, indent=indent, default=default
    )


def _unserialisable(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
