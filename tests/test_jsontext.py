"""values/jsontext.py reads and writes JSON as the standard library's json does, byte for byte, without importing it."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from typing import Any

import pytest

from gitmail.values import jsontext

_TEXTS = ["", "plain", 'quote " and \\ back', "ctrl \x00\x01\x1f\x7f", "tab\tnew\nline\r", "é ü ß", "日本語",
          "emoji 😀", "lone \ud800 surrogate", "\u2028\u2029", "</script>", "\ufeffmark"]  # fmt: skip


def _value(rng: random.Random, depth: int = 0) -> Any:
    kinds = ["str", "int", "float", "bool", "none"] + (["list", "dict"] if depth < 4 else [])
    kind = rng.choice(kinds)
    if kind == "str":
        return rng.choice(_TEXTS) + str(rng.randrange(1000))
    if kind == "int":
        return rng.choice([0, -1, 7, 2**63, -(2**70), rng.randrange(-(10**9), 10**9)])
    if kind == "float":
        return rng.choice([0.0, -0.0, 1.5, 1e300, 1e-300, 3.141592653589793, rng.random()])
    if kind == "bool":
        return rng.choice([True, False])
    if kind == "none":
        return None
    if kind == "list":
        return [_value(rng, depth + 1) for _ in range(rng.randrange(5))]
    return {rng.choice(_TEXTS) + str(i): _value(rng, depth + 1) for i in range(rng.randrange(5))}


OPTIONS: list[dict[str, Any]] = [
    {},
    {"ensure_ascii": False},
    {"sort_keys": True},
    {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": False},
    {"indent": 1, "sort_keys": True},
    {"indent": 2, "ensure_ascii": False},
    {"default": str},
]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(sorted(o)) or "defaults")
def test_writes_what_json_writes_and_reads_it_back(options: dict[str, Any]) -> None:
    rng = random.Random(29)
    for _ in range(400):
        value = _value(rng)
        written = jsontext.dumps(value, **options)
        assert written == json.dumps(value, **options)
        assert jsontext.loads(written) == json.loads(written)
        encoded = written.encode("utf-8", "surrogatepass")
        assert jsontext.loads(encoded) == json.loads(encoded)


def test_writes_keys_and_values_json_converts() -> None:
    value = {1: "int key", 2.5: "float key", None: "null key", False: (1, 2), "nan": float("nan"), "inf": -float("inf")}
    assert jsontext.dumps(value) == json.dumps(value)
    assert jsontext.dumps(value, default=str) == json.dumps(value, default=str)


@pytest.mark.parametrize("value", [{1, 2}, b"bytes", object(), {"a": [{"deep": {1j}}]}])
def test_refuses_what_json_refuses(value: Any) -> None:
    with pytest.raises(TypeError) as ours:
        jsontext.dumps(value)
    with pytest.raises(TypeError) as theirs:
        json.dumps(value)
    assert str(ours.value) == str(theirs.value)


def test_refuses_a_circular_value() -> None:
    value: list[Any] = []
    value.append(value)
    with pytest.raises(ValueError):
        jsontext.dumps(value)


@pytest.mark.parametrize(
    "text",
    ["", "   ", "{", "[1,]", '{"a" 1}', "nul", "01", '"\x01"', '"\\x"', "{} {}", "[] x", "\ufeff{}", "NaNa", b"\xff\xfe", '"unterminated'],
)  # fmt: skip
def test_refuses_what_json_refuses_to_read(text: str | bytes) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        jsontext.loads(text)


@pytest.mark.parametrize(
    "text",
    [" {} ", '\n\t{"a": [1, 2.5e3, -0, true, false, null]}\r\n', "NaN", "-Infinity", '"\\ud83d\\ude00"',
     '{"a": 1, "a": 2}', "  7", b'{"b": "\xc3\xa9"}', b"\xef\xbb\xbf{}",
     '{"big": 1e400}'],
)  # fmt: skip
def test_reads_what_json_reads(text: str | bytes) -> None:
    ours, theirs = jsontext.loads(text), json.loads(text)
    assert repr(ours) == repr(theirs)


def test_imports_neither_json_nor_re() -> None:
    probe = (
        "import sys\n"
        "from gitmail.values import jsontext\n"
        "jsontext.loads(jsontext.dumps({'a': [1, 'é', None]}, ensure_ascii=False, sort_keys=True))\n"
        "print(' '.join(m for m in ('json', 're', 'enum') if m in sys.modules))\n"
        "for text in ('{', '[1,]', '\"\\\\x\"', '{} x', '[' * 100000):\n"
        "    try:\n"
        "        jsontext.loads(text)\n"
        "    except (jsontext.NotJSON, RecursionError) as error:\n"
        "        print(type(error).__name__)\n"
    )
    done = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, check=True,
                          env={"PYTHONPATH": ":".join(p for p in sys.path if p)})  # fmt: skip
    assert done.stdout.split("\n") == ["", "NotJSON", "NotJSON", "NotJSON", "NotJSON", "RecursionError", ""]
