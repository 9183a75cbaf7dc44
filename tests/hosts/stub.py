"""A local stand-in for the model services the hosts talk to: just enough of the Anthropic Messages API (streaming
and not) and the OpenAI Responses API (streaming) for Claude Code and Codex to run real turns against it.

It records every request, answers as each test scripts it ("answer this text", "call the shell tool with this
command, then answer"), and doubles as the hosts' HTTP(S) proxy so that any attempt to reach another machine is
refused and recorded, never made.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Request:
    """One request a host sent to the stub."""

    api: str  # "anthropic" or "openai"
    path: str
    body: dict[str, Any]
    at: float = field(default_factory=time.monotonic)  # when it arrived

    @property
    def shell_tool(self) -> dict[str, Any] | None:
        """The shell tool the host offers in this request, as the host declared it (None in side requests)."""
        return next((self.tool(name) for name in SHELL_TOOLS if self.tool(name)), None)

    def tool(self, name: str) -> dict[str, Any] | None:
        """The tool of this name the host offers in this request, as the host declared it."""
        for tool in self.body.get("tools") or []:
            if (tool.get("name") or tool.get("function", {}).get("name")) == name:
                return dict(tool)
        return None

    @property
    def after_tool_call(self) -> bool:
        """Whether this request carries the result of a tool call: the model's turn goes on after it."""
        if self.api == "anthropic":
            last = (self.body.get("messages") or [{}])[-1]
            content = last.get("content")
            return isinstance(content, list) and any(part.get("type") == "tool_result" for part in content)
        items = self.body.get("input") or []
        return bool(items) and items[-1].get("type") in ("function_call_output", "custom_tool_call_output")

    @property
    def tool_result(self) -> str:
        """What the last tool call gave back, as the host passed it to the model."""
        if self.api == "anthropic":
            parts = (self.body.get("messages") or [{}])[-1].get("content") or []
            results = [p for p in parts if isinstance(p, dict) and p.get("type") == "tool_result"]
            return "\n".join(_strings(results[-1].get("content"))) if results else ""
        items = [i for i in self.body.get("input") or [] if i.get("type", "").endswith("call_output")]
        return "\n".join(_strings(items[-1].get("output"))) if items else ""

    def text(self) -> str:
        """Every piece of text in the request, joined: for asserting what reached the model at all."""
        return "\n".join(_strings(self.body))


SHELL_TOOLS = ("Bash", "shell", "shell_command", "exec_command", "local_shell")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


# -- what the stub answers ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """Answer with text (or what `text` computes from the request: a test can act at that moment) and end the
    turn."""

    text: str | Callable[[Request], str] = "ok"


@dataclass(frozen=True)
class Shell:
    """Call the host's shell tool with `command` (or what `command` computes from the request), then, once the
    tool's result comes back, answer `then`."""

    command: str | Callable[[Request], str]
    then: str | Callable[[Request], str] = "done"


@dataclass(frozen=True)
class Call:
    """Call the host's tool `tool` with these arguments, then, once its result comes back, answer `then` (or take
    it as the next step: a call that needs another first). An MCP server's tool is `mcp__SERVER__TOOL`, which Codex
    declares inside a namespace of the server's and Claude Code by that very name; a freeform tool (Codex's
    apply_patch, for models it offers it to) takes its text as `{"input": TEXT}`."""

    tool: str
    arguments: dict[str, Any] | Callable[[Request], dict[str, Any]]  # or made from the request (a tool's result)
    then: str | Step = "done"


Step = Answer | Shell | Call
ToolCall = tuple[str, dict[str, Any]]  # a tool's name and its arguments
Then = str | Callable[[Request], str] | Step


@dataclass
class Lane:
    """Steps for the conversations `picks` chooses (None: every other), with the step each awaits after a tool call
    of its own: a subagent's conversation and its parent's go on side by side, each taking its own steps."""

    picks: Callable[[Request], bool] | None
    steps: deque[Step] = field(default_factory=deque)
    pending: Then | None = None


@dataclass
class Stub:
    """The server's state: what it recorded and what it has yet to answer."""

    requests: list[Request] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # every attempt to go anywhere but the stub
    lanes: list[Lane] = field(default_factory=lambda: [Lane(None)])  # the main lane last
    commands: list[str] = field(default_factory=list)  # shell commands the stub asked a host to run
    port: int = 0
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _arrived: threading.Condition = field(init=False)
    _ids: Iterator[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self._arrived = threading.Condition(self._lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def script(self, *steps: Step, picks: Callable[[Request], bool] | None = None) -> None:
        """Queue answers for the host's next model turns. Each request that offers the shell tool (the host's
        main conversation, Claude Code's compaction summary included) takes the next step; side requests and an
        empty queue get "ok". With `picks`, the steps are for the requests it picks (a subagent's), in a lane of
        their own."""
        with self._lock:
            lane = next((lane for lane in self.lanes if lane.picks is picks), None)
            if lane is None:
                lane = Lane(picks)
                self.lanes.insert(0, lane)
            lane.steps.extend(steps)

    def decide(self, request: Request) -> tuple[str, ToolCall | None]:
        """(text, tool call or None) for this request."""
        with self._lock:
            self.record(request)
            if request.shell_tool is None:
                return "ok", None
            lane = next(lane for lane in self.lanes if lane.picks is None or lane.picks(request))
            step: Step
            if request.after_tool_call and lane.pending is not None:
                then, lane.pending = lane.pending, None
                if not isinstance(then, Answer | Shell | Call):
                    return (then(request) if callable(then) else then), None
                step = then
            else:
                step = lane.steps.popleft() if lane.steps else Answer()
            if isinstance(step, Answer):
                return (step.text(request) if callable(step.text) else step.text), None
            lane.pending = step.then
            if isinstance(step, Call):
                arguments = step.arguments(request) if callable(step.arguments) else step.arguments
                return "", (step.tool, arguments)
            command = step.command(request) if callable(step.command) else step.command
            self.commands.append(command)
            tool = request.shell_tool
            return "", (tool["name"] if "name" in tool else tool["function"]["name"], _shell_input(tool, command))

    def record(self, request: Request) -> None:
        with self._arrived:
            self.requests.append(request)
            self._arrived.notify_all()

    def next_request(self, after: int, timeout: float) -> Request | None:
        """The first request of the host's main conversation after the first `after` requests, once it arrives; None
        if none does within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while True:
                found = [r for r in self.requests[after:] if r.shell_tool is not None]
                if found:
                    return found[0]
                if not self._arrived.wait(deadline - time.monotonic()) and time.monotonic() >= deadline:
                    return None

    def next_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):04d}"


# -- the wire formats ---------------------------------------------------------------------------------------------


def _shell_input(tool: dict[str, Any], command: str) -> dict[str, Any]:
    """The shell tool's arguments, shaped by the schema the host declared for it."""
    schema = tool.get("input_schema") or tool.get("parameters") or tool.get("function", {}).get("parameters") or {}
    properties = schema.get("properties", {})
    if "cmd" in properties:
        return {"cmd": command}
    if properties.get("command", {}).get("type") == "array":
        return {"command": ["bash", "-lc", command]}
    return {"command": command}


def _anthropic_content(stub: Stub, text: str, call: ToolCall | None) -> list[dict[str, Any]]:
    if call is None:
        return [{"type": "text", "text": text}]
    return [{"type": "tool_use", "id": stub.next_id("toolu"), "name": call[0], "input": call[1]}]


def _anthropic_events(stub: Stub, request: Request, text: str, call: ToolCall | None) -> Iterator[tuple[str, Any]]:
    content = _anthropic_content(stub, text, call)
    usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    message = {
        "id": stub.next_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": request.body.get("model", "stub"),
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    yield "message_start", {"type": "message_start", "message": message}
    for index, block in enumerate(content):
        if block["type"] == "text":
            yield (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": {**block, "text": ""}},
            )
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            yield (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}},
            )
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    stop = "tool_use" if call is not None else "end_turn"
    yield (
        "message_delta",
        {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 5}},
    )
    yield "message_stop", {"type": "message_stop"}


def _anthropic_message(stub: Stub, request: Request, text: str, call: ToolCall | None) -> dict[str, Any]:
    return {
        "id": stub.next_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": request.body.get("model", "stub"),
        "content": _anthropic_content(stub, text, call),
        "stop_reason": "tool_use" if call is not None else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def _openai_events(stub: Stub, request: Request, text: str, call: ToolCall | None) -> Iterator[tuple[str, Any]]:
    response_id = stub.next_id("resp")
    yield "response.created", {"type": "response.created", "response": {"id": response_id}}
    if call is None:
        item: dict[str, Any] = {
            "type": "message",
            "role": "assistant",
            "id": stub.next_id("msg"),
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
    elif (request.tool(call[0]) or {}).get("type") == "custom":  # a freeform tool (Codex's apply_patch): its text
        item = {
            "type": "custom_tool_call",
            "id": stub.next_id("ctc"),
            "call_id": stub.next_id("call"),
            "name": call[0],
            "input": str(call[1].get("input", "")),
        }
    else:
        namespace, name = _namespaced(request, call[0])
        item = {
            "type": "function_call",
            "id": stub.next_id("fc"),
            "call_id": stub.next_id("call"),
            "name": name,
            "arguments": json.dumps(call[1]),
        }
        if namespace is not None:
            item["namespace"] = namespace
    yield "response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item}
    yield "response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 15,
    }
    yield "response.completed", {"type": "response.completed", "response": {"id": response_id, "usage": usage}}


def _namespaced(request: Request, name: str) -> tuple[str | None, str]:
    """(namespace, function) for a tool the request declares inside a namespace as `NAMESPACE__FUNCTION` (Codex's
    MCP tools); (None, name) for any other."""
    for tool in request.body.get("tools") or []:
        if tool.get("type") == "namespace":
            for inner in tool.get("tools") or []:
                if f"{tool['name']}__{inner.get('name')}" == name:
                    return tool["name"], inner["name"]
    return None, name


# -- the server ---------------------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def do_CONNECT(self) -> None:  # noqa: N802 - the HTTP method's name
        self.server.stub.refused.append(f"CONNECT {self.path}")
        self._send(403, b"the test stub reaches nothing outside this machine\n", "text/plain")

    def do_GET(self) -> None:  # noqa: N802
        if self._foreign():
            return
        self._body()
        self.server.stub.record(Request("other", f"GET {self.path}", {}))
        self._send(404, b'{"error": {"type": "not_found", "message": "not in the stub"}}', "application/json")

    def do_HEAD(self) -> None:  # noqa: N802
        if self._foreign():
            return
        self._send(404, b"", "text/plain")

    def do_POST(self) -> None:  # noqa: N802
        if self._foreign():
            return
        raw = self._body()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {"unparsed": raw.decode(errors="replace")}
        path = urlsplit(self.path).path
        stub = self.server.stub
        if path.endswith("/messages/count_tokens"):
            stub.record(Request("anthropic", path, body))
            self._send(200, json.dumps({"input_tokens": 100}).encode(), "application/json")
        elif path.endswith("/messages"):
            request = Request("anthropic", path, body)
            text, call = stub.decide(request)
            if body.get("stream"):
                self._stream(_anthropic_events(stub, request, text, call))
            else:
                self._send(200, json.dumps(_anthropic_message(stub, request, text, call)).encode(), "application/json")
        elif path.endswith("/responses"):
            request = Request("openai", path, body)
            text, call = stub.decide(request)
            self._stream(_openai_events(stub, request, text, call))
        else:
            stub.record(Request("other", f"POST {path}", body))
            self._send(404, b'{"error": {"type": "not_found", "message": "not in the stub"}}', "application/json")

    def _foreign(self) -> bool:
        """A proxied request for another host (an absolute URL): refuse it, record it."""
        target = urlsplit(self.path)
        if target.scheme and target.netloc and target.netloc != f"127.0.0.1:{self.server.stub.port}":
            self.server.stub.refused.append(f"{self.command} {self.path}")
            self._body()
            self._send(403, b"the test stub reaches nothing outside this machine\n", "text/plain")
            return True
        return False

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _stream(self, events: Iterator[tuple[str, Any]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for name, data in events:
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, stub: Stub) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.stub = stub
        stub.port = self.server_address[1]


class Running:
    """A stub serving on 127.0.0.1 until closed."""

    def __init__(self) -> None:
        self.stub = Stub()
        self._server = _Server(self.stub)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
