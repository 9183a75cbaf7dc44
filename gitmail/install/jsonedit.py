"""Edit a JSON document in place: insert, replace or remove one value and leave every other byte as it was, so
someone else's settings file keeps its layout, indentation and key order. Pure."""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


class Node(NamedTuple):
    """Where a value sits in the text. Objects list (key, key start, value) members; arrays list items."""

    start: int
    end: int
    members: list[tuple[str, int, Node]]  # objects only
    items: list[Node]  # arrays only
    kind: str  # "object", "array" or "scalar"

    def get(self, key: str) -> Node | None:
        return next((node for name, _, node in self.members if name == key), None)

    def value(self, text: str) -> Any:
        return json.loads(text[self.start : self.end])


def parse(text: str) -> Node:
    """The position tree of a valid JSON document (validate it with json.loads first)."""
    node, _ = _value(text, _skip(text, 0))
    return node


def append_item(text: str, array: Node, value: Any) -> str:
    if array.items:
        last = array.items[-1]
        return _insert(text, last.end, "," + _separator(text, array) + _render(value, text, last.start))
    return _into_empty(text, array, _render_nested(value, text, array))


def add_member(text: str, obj: Node, key: str, value: Any) -> str:
    if obj.members:
        _, key_start, last = obj.members[-1]
        member = json.dumps(key) + ": " + _render(value, text, key_start)
        return _insert(text, last.end, "," + _separator(text, obj) + member)
    return _into_empty(text, obj, json.dumps(key) + ": " + _render_nested(value, text, obj))


def replace(text: str, node: Node, value: Any) -> str:
    return text[: node.start] + _render(value, text, node.start) + text[node.end :]


def remove(text: str, container: Node, index: int) -> str:
    """Remove the index-th item (array) or member (object), with the comma and space that joined it."""
    spans = [(key_start, node.end) for _, key_start, node in container.members] or [
        (node.start, node.end) for node in container.items
    ]
    start, end = spans[index]
    if len(spans) == 1:
        return text[: container.start + 1] + text[container.end - 1 :]
    if index > 0:
        return text[: spans[index - 1][1]] + text[end:]
    return text[:start] + text[spans[1][0] :]


def remove_member(text: str, obj: Node, key: str) -> str:
    return remove(text, obj, [name for name, _, _ in obj.members].index(key))


# -- rendering in the document's own style ---------------------------------------------------------------------


def _separator(text: str, container: Node) -> str:
    """The whitespace the container puts between its entries (after the comma)."""
    starts = [key_start for _, key_start, _ in container.members] or [node.start for node in container.items]
    if len(starts) >= 2:
        previous_end = container.members[0][2].end if container.members else container.items[0].end
        between = text[previous_end : starts[1]]
        return between[between.index(",") + 1 :] if "," in between else " "
    return text[container.start + 1 : starts[0]] or " "


def _indent_unit(text: str) -> str:
    found = re.search(r"^([ \t]+)\S", text, re.MULTILINE)
    return found.group(1) if found else "  "


def _line_indent(text: str, position: int) -> str:
    line_start = text.rfind("\n", 0, position) + 1
    return re.match(r"[ \t]*", text[line_start:]).group()  # type: ignore[union-attr]


def _render(value: Any, text: str, at: int) -> str:
    """`value` as JSON placed at `at`: spread over lines indented like that line, or on one line if the
    surrounding document keeps that spot on one line."""
    line_start = text.rfind("\n", 0, at) + 1
    if text[line_start:at].strip():  # something precedes it on its line: an inline layout
        return json.dumps(value, ensure_ascii=False)
    rendered = json.dumps(value, indent=_indent_unit(text), ensure_ascii=False)
    return rendered.replace("\n", "\n" + _line_indent(text, at))


def _render_nested(value: Any, text: str, container: Node) -> str:
    inner = _line_indent(text, container.start) + _indent_unit(text)
    rendered = json.dumps(value, indent=_indent_unit(text), ensure_ascii=False)
    return rendered.replace("\n", "\n" + inner)


def _into_empty(text: str, container: Node, inside: str) -> str:
    inner = _line_indent(text, container.start) + _indent_unit(text)
    closing = "\n" + _line_indent(text, container.start)
    return text[: container.start + 1] + "\n" + inner + inside + closing + text[container.end - 1 :]


def _insert(text: str, at: int, piece: str) -> str:
    return text[:at] + piece + text[at:]


# -- scanning -----------------------------------------------------------------------------------------------------


def _skip(text: str, i: int) -> int:
    return _SPACE.match(text, i).end()  # type: ignore[union-attr]


def _value(text: str, i: int) -> tuple[Node, int]:
    char = text[i]
    if char == "{":
        return _object(text, i)
    if char == "[":
        return _array(text, i)
    _, end = _DECODER.raw_decode(text, i)  # a string, number, true, false or null
    return Node(i, end, [], [], "scalar"), end


def _object(text: str, start: int) -> tuple[Node, int]:
    members: list[tuple[str, int, Node]] = []
    i = _skip(text, start + 1)
    while text[i] != "}":
        key_start = i
        key, after_key = _DECODER.raw_decode(text, i)
        colon = _skip(text, after_key)
        node, i = _value(text, _skip(text, colon + 1))
        members.append((key, key_start, node))
        i = _skip(text, i)
        if text[i] == ",":
            i = _skip(text, i + 1)
    return Node(start, i + 1, members, [], "object"), i + 1


def _array(text: str, start: int) -> tuple[Node, int]:
    items: list[Node] = []
    i = _skip(text, start + 1)
    while text[i] != "]":
        node, i = _value(text, i)
        items.append(node)
        i = _skip(text, i)
        if text[i] == ",":
            i = _skip(text, i + 1)
    return Node(start, i + 1, [], items, "array"), i + 1
