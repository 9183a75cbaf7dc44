"""A host's session transcript (JSONL, one event a line) read as turns: who spoke (the prompt, the reply) and each
tool call as one line. Claude Code writes `{"type": "user" | "assistant", "message": {"content": ...}}` lines;
Codex writes `{"type": "response_item", "payload": {"type": "message" | "function_call" | ...}}` lines. Anything
else (summaries, hook events, the host's own context) is passed over, as is a line that is not JSON."""

from __future__ import annotations

from typing import Any, NamedTuple

from gitmail.values import jsontext

TOOL_ARGS = 120  # characters of a tool call's arguments shown on its line


class Turn(NamedTuple):
    speaker: str  # "prompt", "reply" or "tool"
    text: str


def turns(lines: list[bytes]) -> list[Turn]:
    found: list[Turn] = []
    for line in lines:
        try:
            event = jsontext.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(event, dict):
            found += _claude(event) if event.get("type") in ("user", "assistant") else _codex(event)
    return found


def last(found: list[Turn], count: int) -> list[Turn]:
    """The last `count` turns: a turn starts at a prompt, and holds the replies and tool calls after it."""
    starts = [i for i, turn in enumerate(found) if turn.speaker == "prompt"]
    if len(starts) <= count:
        return found
    return found[starts[-count] :]


def _claude(event: dict[str, Any]) -> list[Turn]:
    message = event.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    user = event.get("type") == "user"
    if isinstance(content, str):
        return [Turn("prompt" if user else "reply", content)] if content.strip() else []
    found = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and isinstance(part.get("text"), str) and part["text"].strip():
            found.append(Turn("prompt" if user else "reply", part["text"]))
        elif part.get("type") == "tool_use":
            found.append(Turn("tool", _call(part.get("name"), part.get("input"))))
    return found


def _codex(event: dict[str, Any]) -> list[Turn]:
    payload = event.get("payload")
    if event.get("type") != "response_item" or not isinstance(payload, dict):
        return []
    kind = payload.get("type")
    if kind == "message" and payload.get("role") in ("user", "assistant"):
        parts = payload.get("content")
        texts = [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)] if isinstance(
            parts, list) else []  # fmt: skip
        text = "\n".join(texts)
        if not text.strip() or (payload["role"] == "user" and text.lstrip().startswith(("<", "# AGENTS.md"))):
            return []  # the host's own context (environment, instructions), not the person's prompt
        return [Turn("prompt" if payload["role"] == "user" else "reply", text)]
    if kind in ("function_call", "custom_tool_call", "local_shell_call"):
        arguments = payload.get("arguments", payload.get("input", payload.get("action")))
        return [Turn("tool", _call(payload.get("name", "shell"), arguments))]
    return []


def _call(name: object, arguments: object) -> str:
    if isinstance(arguments, str):
        try:
            arguments = jsontext.loads(arguments)
        except ValueError:
            pass
    if isinstance(arguments, dict) and len(arguments) == 1:
        arguments = next(iter(arguments.values()))
    said = arguments if isinstance(arguments, str) else jsontext.dumps(arguments, ensure_ascii=False)
    said = " ".join(said.split())
    said = said if len(said) <= TOOL_ARGS else said[: TOOL_ARGS - 1] + "…"
    return f"{name if isinstance(name, str) else 'tool'}: {said}"
