"""The Model Context Protocol's wire, as `gitmail mcp` speaks it: JSON-RPC 2.0 over standard input and output, one
JSON message a line. Both eras of the protocol: the handshake one (`initialize`, then `notifications/initialized`;
2024-11-05 to 2025-11-25) and the 2026 one, where every request carries its protocol version, the client's name
and capabilities in its `_meta` (`server/discover` instead of a handshake). Only what serving needs is imported
(the SDK's type modules cost most of a second to import); the SDK's own client drives this in the tests.

Each request runs in a thread of its own, so the server keeps answering while a call waits for the mailbox's lock
or for the client's answer to a request of ours (`roots/list`). Every request gets an answer, or an error under its
id (the null id where it has none that can be written back), as JSON-RPC says; notifications get none.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO

from gitmail.values.names import has_surrogates

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS = ("2026-07-28",)
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_SERVER = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"


class WireError(Exception):
    """A JSON-RPC error answer: its code and its one line."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class Request:
    """One request as a handler sees it: its params, its era, and the client's capabilities."""

    def __init__(self, peer: Peer, ident: int | str, method: str, params: dict[str, Any]) -> None:
        self.peer, self.id, self.method, self.params = peer, ident, method, params
        meta = params.get("_meta")
        meta = meta if isinstance(meta, dict) else {}
        version = meta.get(META_VERSION)
        self.modern = isinstance(version, str) and version in MODERN_VERSIONS
        self.protocol_version = version if self.modern else peer.protocol_version
        given = meta.get(META_CAPABILITIES) if self.modern else peer.client_capabilities
        self.client_capabilities: dict[str, Any] = given if isinstance(given, dict) else {}


Handler = Callable[[Request], dict[str, Any] | None]  # None: the answer is sent later, or never (a stream)


class Peer:
    """The connection: reads requests, hands each to its handler in a thread, writes the answers."""

    def __init__(self, handlers: Mapping[str, Handler], notices: Mapping[str, Callable[[dict[str, Any]], None]],
                 server_info: dict[str, str], reader: BinaryIO | None = None,
                 writer: BinaryIO | None = None) -> None:  # fmt: skip
        self.handlers, self.notices, self.server_info = handlers, notices, server_info
        self.reader = reader or sys.stdin.buffer
        self.writer = writer or sys.stdout.buffer
        self.protocol_version: str | None = None  # settled by the handshake, on a handshake-era connection
        self.client_capabilities: dict[str, Any] = {}
        self.gone = threading.Event()  # the client has gone: nothing more is written
        self._writing = threading.Lock()
        self._asked: dict[int, tuple[threading.Event, list[dict[str, Any]]]] = {}
        self._next = 0
        self._workers: list[threading.Thread] = []

    # -- writing --------------------------------------------------------------------------------------------------

    def send(self, message: dict[str, Any]) -> None:
        line = json.dumps({"jsonrpc": "2.0", **message}, separators=(",", ":")).encode() + b"\n"
        with self._writing:
            if self.gone.is_set():
                return
            try:
                self.writer.write(line)
                self.writer.flush()
            except (BrokenPipeError, ConnectionResetError, ValueError, OSError):
                self.gone.set()

    def answer(self, request: Request, result: dict[str, Any]) -> None:
        if request.modern:
            result = {**result, "resultType": result.get("resultType", "complete"), "_meta": {
                **result.get("_meta", {}), META_SERVER: self.server_info}}  # fmt: skip
        self.send({"id": request.id, "result": result})

    def fail(self, ident: int | str | None, code: int, text: str) -> None:
        self.send({"id": ident, "error": {"code": code, "message": f"gitmail: error: {text}"}})

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        self.send({"method": method, **({"params": params} if params is not None else {})})

    def ask(self, method: str, params: dict[str, Any] | None, timeout: float) -> dict[str, Any]:
        """Send a request of ours and wait for the client's result; TimeoutError, or WireError for an error."""
        with self._writing:
            self._next += 1
            ident = self._next
            waiting: tuple[threading.Event, list[dict[str, Any]]] = (threading.Event(), [])
            self._asked[ident] = waiting
        self.send({"id": ident, "method": method, **({"params": params} if params is not None else {})})
        try:
            if not waiting[0].wait(timeout):
                raise TimeoutError(method)
        finally:
            self._asked.pop(ident, None)
        answer = waiting[1][0]
        if "error" in answer:
            error = answer["error"] if isinstance(answer["error"], dict) else {}
            raise WireError(int(error.get("code", INTERNAL_ERROR)), str(error.get("message", "")))
        result = answer.get("result")
        return result if isinstance(result, dict) else {}

    # -- reading --------------------------------------------------------------------------------------------------

    def serve(self) -> None:
        """Answer until the client closes its end, then wait for the calls under way to finish."""
        try:
            for line in self.reader:
                if line.strip():
                    self._take(line)
        except (OSError, ValueError):
            pass  # the client's end went away
        for worker in self._workers:
            worker.join()

    def _take(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
            return self.fail(None, PARSE_ERROR, "the request could not be read")
        if isinstance(message, list):
            return self.fail(None, INVALID_REQUEST, "batches of requests are not taken; send one request a line")
        if not isinstance(message, dict):
            return None
        if "method" not in message and "id" in message:
            return self._answered(message)
        method = message.get("method")
        if not isinstance(method, str):
            return None  # names nothing to answer
        if "id" not in message:
            return self._notified(method, message)
        ident = message["id"]
        if isinstance(ident, bool) or not isinstance(ident, int | str) or has_surrogates(str(ident)):
            return self.fail(
                None, INVALID_REQUEST, "the request's id is not a number or a string that can be written back"
            )
        if holds_surrogate(message):
            text = "the request holds text that is not valid Unicode (a lone surrogate such as \\ud800)"
            return self.fail(ident, INVALID_PARAMS, text)
        if message.get("jsonrpc") != "2.0":
            return self.fail(ident, INVALID_REQUEST, 'the request is not JSON-RPC 2.0 (it needs "jsonrpc": "2.0")')
        params = message.get("params", {})
        if not isinstance(params, dict):
            return self.fail(
                ident, INVALID_REQUEST, "the request's params are not an object (MCP takes named params only)"
            )
        handler = self.handlers.get(method)
        if handler is None:
            return self.fail(ident, METHOD_NOT_FOUND, f"no method {json.dumps(method[:60])}")
        request = Request(self, ident, method, params)
        worker = threading.Thread(target=self._run, args=(handler, request), name=f"mcp {method}")
        self._workers = [w for w in self._workers if w.is_alive()] + [worker]
        worker.start()
        return None

    def _run(self, handler: Handler, request: Request) -> None:
        from gitmail import edge

        try:
            result = handler(request)
        except WireError as error:
            return self.send({"id": request.id, "error": {"code": error.code, "message": str(error)}})
        except Exception as error:  # a bug: one line to the client, the traceback in the log
            text = f"gitmail: {edge.described(error, f'mcp {request.method}')}"
            return self.send({"id": request.id, "error": {"code": INTERNAL_ERROR, "message": text}})
        if result is not None:
            self.answer(request, result)
        return None

    def _answered(self, message: dict[str, Any]) -> None:
        ident = message.get("id")
        waiting = self._asked.get(ident) if isinstance(ident, int) and not isinstance(ident, bool) else None
        if waiting is not None:
            waiting[1].append(message)
            waiting[0].set()

    def _notified(self, method: str, message: dict[str, Any]) -> None:
        notice = self.notices.get(method)
        params = message.get("params")
        if notice is not None and not holds_surrogate(message):
            notice(params if isinstance(params, dict) else {})


def negotiated(asked: object) -> str:
    """The handshake's answer to the version a client asks for: that one when spoken here, else the newest."""
    return asked if isinstance(asked, str) and asked in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]


def holds_surrogate(value: object, depth: int = 0) -> bool:
    if isinstance(value, str):
        return has_surrogates(value)
    if depth > 100:
        return False
    if isinstance(value, dict):
        return any(holds_surrogate(k, depth + 1) or holds_surrogate(v, depth + 1) for k, v in value.items())
    if isinstance(value, list):
        return any(holds_surrogate(v, depth + 1) for v in value)
    return False
