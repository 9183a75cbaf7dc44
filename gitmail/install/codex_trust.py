"""Codex's hook trust, read and recorded the way Codex itself does it.

Codex runs a hook from a user's hooks.json only once it is trusted, and skips an untrusted one without a word (in
`codex exec` too). Trust lives in Codex's config.toml as `[hooks.state."<hooks.json>:<event>:<group>:<handler>"]`
with `trusted_hash = "sha256:…"`, where <event> is the event's name in snake case (`session_start`,
`post_tool_use`, …): the key is the hook's *position* among that event's hooks, the hash covers its normalised
entry. So a hook whose entry changed, or that moved because an earlier group of its event was removed, no longer
matches and stops running.

Codex is asked first: `codex app-server` lists each hook with its key, hash and trust status (`hooks/list`) and stores
trust as Codex's own /hooks review does (`config/batchWrite`). Where no Codex can be asked, the key and the hash are
computed as Codex's source computes them (`hook_key`, `command_hook_hash` and `version_for_toml`: SHA-256 over the
compact, key-sorted JSON of the entry's normalised identity).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import selectors
import shutil
import subprocess
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import tomlkit
from tomlkit.items import InlineTable, Table

if TYPE_CHECKING:
    from pathlib import Path

    from gitmail.install.hook_settings import Position

DEFAULT_TIMEOUT = 600  # seconds; what Codex assumes when an entry names none
APP_SERVER_DEADLINE = 20.0  # seconds for the whole conversation with `codex app-server`


class Listed(NamedTuple):
    """One hook as Codex lists it."""

    key: str
    command: str
    current_hash: str
    trust_status: str  # "trusted", "untrusted", "modified" or "managed"
    source_path: str


class Unavailable(Exception):
    """Codex's app-server could not be asked (no Codex, too old, or it failed)."""


def label(event: str) -> str:
    """Codex's name for an event in trust keys and hashes: `SessionStart` is `session_start`."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()


def key(hooks_json: Path, position: Position) -> str:
    """The trust key Codex gives the handler at this position in this hooks.json."""
    event, group, handler = position
    return f"{hooks_json}:{label(event)}:{group}:{handler}"


def entry_hash(entry: Mapping[str, Any], matcher: str | None, event: str) -> str:
    """The hash Codex computes for a command handler of this event: its normalised identity (defaults filled in,
    unset fields left out), as compact JSON with sorted keys."""
    handler: dict[str, Any] = {
        "type": "command",
        "command": entry["command"],
        "timeout": max(1, int(entry.get("timeout") or DEFAULT_TIMEOUT)),
        "async": bool(entry.get("async", False)),
    }
    for name in ("statusMessage", "additionalContextLimit"):
        if entry.get(name) is not None:
            handler[name] = entry[name]
    identity: dict[str, Any] = {"event_name": label(event), "hooks": [handler]}
    if matcher is not None:
        identity["matcher"] = matcher
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


# -- asking Codex -------------------------------------------------------------------------------------------------


def codex_binary() -> str | None:
    return shutil.which("codex")


def list_hooks(cwd: Path, *, codex: str | None = None, env: Mapping[str, str] | None = None) -> list[Listed]:
    """Every hook Codex sees from `cwd`, with its key, hash and trust status."""
    with AppServer(codex or _required_codex(), cwd, env) as server:
        return _hooks(server, cwd)


def trust(
    keys: Mapping[str, str], cwd: Path, *, codex: str | None = None, env: Mapping[str, str] | None = None
) -> list[Listed]:
    """Record trust for these keys (key -> hash Codex listed) through Codex, as its /hooks review does; return the
    hooks as Codex lists them afterwards."""
    with AppServer(codex or _required_codex(), cwd, env) as server:
        value = {name: {"trusted_hash": digest} for name, digest in keys.items()}
        edit = {"keyPath": "hooks.state", "value": value, "mergeStrategy": "upsert"}
        server.request("config/batchWrite", {"edits": [edit], "reloadUserConfig": True})
        return _hooks(server, cwd)


def _required_codex() -> str:
    found = codex_binary()
    if found is None:
        raise Unavailable("no codex on PATH")
    return found


def _hooks(server: AppServer, cwd: Path) -> list[Listed]:
    result = server.request("hooks/list", {"cwds": [str(cwd)]})
    try:
        return [
            Listed(h["key"], h.get("command") or "", h["currentHash"], h["trustStatus"], h.get("sourcePath") or "")
            for entry in result["data"]
            for h in entry["hooks"]
        ]
    except (KeyError, TypeError) as error:
        raise Unavailable(f"codex app-server answered hooks/list in an unknown shape ({error!r})") from None


class AppServer:
    """A short conversation with `codex app-server` (JSON-RPC, one JSON object per line on stdio)."""

    def __init__(self, codex: str, cwd: Path, env: Mapping[str, str] | None = None) -> None:
        self.deadline = time.monotonic() + APP_SERVER_DEADLINE
        self.next_id = 0
        self.buffer = b""
        try:
            self.process = subprocess.Popen(
                [codex, "app-server"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                cwd=cwd if cwd.is_dir() else None,
                env=env,
            )
        except OSError as error:
            raise Unavailable(f"could not start {codex} app-server: {error.strerror or error}") from None

    def __enter__(self) -> AppServer:
        from gitmail import __version__

        try:
            self.request("initialize", {"clientInfo": {"name": "gitmail", "title": "gitmail", "version": __version__}})
            self._send({"method": "initialized"})
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, params: Mapping[str, Any]) -> Any:
        self.next_id += 1
        self._send({"id": self.next_id, "method": method, "params": params})
        while True:
            message = self._receive()
            if message.get("id") != self.next_id or "method" in message:
                continue  # a notification, or a request from the server that this client does not serve
            if "error" in message:
                error = message["error"]
                detail = error.get("message") if isinstance(error, dict) else error
                raise Unavailable(f"codex app-server refused {method}: {detail}")
            return message.get("result")

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.close()
                self.process.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()

    def _send(self, message: Mapping[str, Any]) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(message).encode() + b"\n")
            self.process.stdin.flush()
        except OSError:
            raise Unavailable("codex app-server exited early") from None

    def _receive(self) -> dict[str, Any]:
        stdout = self.process.stdout
        assert stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            while b"\n" not in self.buffer:
                left = self.deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    raise Unavailable(f"codex app-server did not answer within {APP_SERVER_DEADLINE:.0f} s")
                chunk = os.read(stdout.fileno(), 65536)
                if not chunk:
                    raise Unavailable("codex app-server exited early")
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError:
            return {}
        return message if isinstance(message, dict) else {}


# -- the trust state in config.toml -------------------------------------------------------------------------------

_KEY = re.compile(r"^(?P<path>.+):(?P<event>[a-z_]+):(?P<group>\d+):(?P<handler>\d+)$")


def _positions(state: Table | InlineTable, hooks_json: Path) -> dict[tuple[str, int, int], str]:
    """The trust keys of this hooks.json, by (event label, group, handler)."""
    found = {}
    for name in state:
        matched = _KEY.match(name)
        if matched and _same_file(matched["path"], hooks_json):
            found[(matched["event"], int(matched["group"]), int(matched["handler"]))] = name
    return found


def _labelled(position: Position) -> tuple[str, int, int]:
    event, group, handler = position
    return label(event), group, handler


def _same_file(recorded: str, hooks_json: Path) -> bool:
    return recorded == str(hooks_json) or os.path.realpath(recorded) == os.path.realpath(hooks_json)


def _state(document: tomlkit.TOMLDocument) -> Table | InlineTable | None:
    hooks = document.get("hooks")
    state = hooks.get("state") if isinstance(hooks, Table | InlineTable) else None
    return state if isinstance(state, Table | InlineTable) else None


def trusted_hash(text: str, hooks_json: Path, position: Position) -> str | None:
    """The hash config.toml trusts for the handler at this position, if any."""
    state = _state(tomlkit.parse(text))
    name = _positions(state, hooks_json).get(_labelled(position)) if state is not None else None
    value = state.get(name) if state is not None and name is not None else None
    found = value.get("trusted_hash") if isinstance(value, Mapping) else None
    return found if isinstance(found, str) else None


def moved(text: str, hooks_json: Path, moves: Mapping[Position, Position | None]) -> str:
    """config.toml with the trust of each moved handler carried to its new position (None: its trust is dropped).
    Every other key, comment and table stays as it was."""
    document = tomlkit.parse(text)
    state = _state(document)
    if state is None:
        return text
    by_position = _positions(state, hooks_json)
    carried = []
    for old, new in sorted(moves.items()):
        name = by_position.get(_labelled(old))
        if name is None or old == new:
            continue
        carried.append((new, state[name]))
        del state[name]
    for new, value in carried:  # re-added in their old order, each under its new key
        if new is None:
            continue
        stale = _positions(state, hooks_json).get(_labelled(new))
        if stale is not None:
            del state[stale]
        state[key(hooks_json, new)] = value
    return tomlkit.dumps(document)


def with_trust(text: str, hooks_json: Path, position: Position, digest: str) -> str:
    """config.toml trusting the handler at this position with this hash, as Codex records it."""
    document = tomlkit.parse(text)
    hooks = document.setdefault("hooks", tomlkit.table(is_super_table=True))
    state = hooks.setdefault("state", tomlkit.table(is_super_table=True)) if isinstance(hooks, Table) else None
    if not isinstance(state, Table | InlineTable):
        raise ValueError("its `hooks.state` is not a table")
    name = _positions(state, hooks_json).get(_labelled(position))
    if name is not None and isinstance(state[name], Table | InlineTable):
        state[name]["trusted_hash"] = digest  # in place: an `enabled` beside it stays as the user set it
    else:
        entry = tomlkit.table()
        entry["trusted_hash"] = digest
        state[key(hooks_json, position)] = entry
    return tomlkit.dumps(document)
