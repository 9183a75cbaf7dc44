"""Register `gitmail mcp` with Claude Code (user scope) and Codex, and remove exactly that registration again.

- Claude Code keeps user-scope MCP servers in the `mcpServers` object at the top of `~/.claude.json`
  (`$CLAUDE_CONFIG_DIR/.claude.json` when that is set): the same place `claude mcp add --scope user` writes.
- Codex keeps them as `[mcp_servers.NAME]` tables in `$CODEX_HOME/config.toml` (default `~/.codex`).

The same guarantees as gitmail's hooks, planned as the same `settings.Change`s and written by the same engine: a
second install changes no byte; install then uninstall gives back the very same bytes; every other key, comment and
indentation stays as it was (the JSON is edited in place, the TOML with tomlkit); a file that does not parse is
refused untouched; an entry named gitmail that runs something else is refused, not overwritten.
"""

from __future__ import annotations

import json
import os
import sys
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomlkit

from gitmail.errors import GitmailError
from gitmail.install import jsonedit
from gitmail.install.codex_hooks import codex_home
from gitmail.install.settings import Change, Plan, backup_of, gitmail_made, load_json, read

if TYPE_CHECKING:
    from collections.abc import Sequence

NAME = "gitmail"
TOML_MARK = "# added by gitmail"
STARTUP_TIMEOUT = 30  # seconds Codex gives the server to start (it answers in a fraction of one, unless very busy)
# Codex (0.147 on) leaves an optional server's tools out of a turn if it has not started within about a second,
# which a loaded machine can make any server miss: `codex exec` would then not see gitmail's tools. A required
# server is waited for (up to the timeout), and one that cannot start is reported instead of silently missing.


def server_args() -> list[str]:
    """-P: clients start the server in the session's directory, which must not supply a `gitmail` of its own."""
    return ["-P", "-m", "gitmail", "mcp"]


def claude_entry(python: str | None = None) -> dict[str, Any]:
    return {"type": "stdio", "command": python or sys.executable, "args": server_args()}


def codex_entry(python: str | None = None) -> dict[str, Any]:
    return {
        "command": python or sys.executable,
        "args": server_args(),
        "startup_timeout_sec": STARTUP_TIMEOUT,
        "required": True,
    }


def claude_config(home: Path, environ: os._Environ[str] | dict[str, str] = os.environ) -> Path:
    return Path(environ.get("CLAUDE_CONFIG_DIR") or home) / ".claude.json"


def codex_config(home: Path) -> Path:
    return codex_home(home) / "config.toml"


def is_ours(entry: object) -> bool:
    """An MCP server entry that runs `gitmail mcp` (through any interpreter, or a gitmail script)."""
    if not isinstance(entry, dict):
        return False
    args = entry.get("args") or []
    command = str(entry.get("command", ""))
    return isinstance(args, list) and (
        args[-3:] == ["-m", "gitmail", "mcp"] or (Path(command).name == "gitmail" and args == ["mcp"])
    )


def plan(*, home: Path, hosts: Sequence[str], install: bool, python: str | None = None) -> Plan:
    changes: list[Change | None] = []
    notes: list[str] = []
    if "claude" in hosts:
        changes.append(_claude(claude_config(home), install, claude_entry(python)))
    if "codex" in hosts:
        changes.append(_codex(codex_config(home), install, codex_entry(python)))
    if install and hosts:
        notes.append("the MCP server starts with the next session; `gitmail mcp --print-config` shows it for others")
    return Plan([c for c in changes if c is not None], notes)


# -- Claude Code: ~/.claude.json ----------------------------------------------------------------------------------


def _claude(path: Path, install: bool, entry: dict[str, Any]) -> Change | None:
    before = read(path)
    if before is None and not install:
        return None
    data = load_json(path, before)
    current = _ours(path, data.get("mcpServers", {}), "'mcpServers' is not an object", f"an MCP server named {NAME!r}")
    if (current == entry) if install else (current is None):
        return Change(path, before, before) if before is not None else None
    text = before if before and before.strip() else "{}\n"
    wanted = json.loads(json.dumps(data))
    if install:
        wanted.setdefault("mcpServers", {})[NAME] = entry
        after = _claude_install(text, entry)
    else:
        del wanted["mcpServers"][NAME]
        after = _claude_uninstall(text, path)
        if not json.loads(after) and gitmail_made(path):
            return Change(path, before, None)  # gitmail made this file: uninstall removes it
    if _without_empty(json.loads(after), "mcpServers") != _without_empty(wanted, "mcpServers"):
        raise GitmailError(f"{path}: could not edit it safely; change gitmail's MCP server entry by hand")
    return Change(path, before, after)


def _ours(path: Path, servers: object, not_servers: str, named: str) -> Any:
    """gitmail's entry among a host's MCP servers (None when it has none); refuses a file whose servers are not a
    table of them, or whose server of gitmail's name runs something else."""
    if not isinstance(servers, dict):
        raise GitmailError(f"{path}: {not_servers}; fix it or move the file away")
    current = servers.get(NAME)
    if current is not None and not is_ours(current):
        raise GitmailError(
            f"{path} already has {named} that does not run `gitmail mcp`; "
            "rename or remove it first — nothing was changed"
        )
    return current


def _without_empty(data: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in data.items() if not (k == key and v == {})}


def _claude_install(text: str, entry: dict[str, Any]) -> str:
    root = jsonedit.parse(text)
    servers = root.get("mcpServers")
    if servers is None:
        return jsonedit.add_member(text, root, "mcpServers", {NAME: entry})
    node = servers.get(NAME)
    if node is not None:
        return jsonedit.replace(text, node, entry)
    return jsonedit.add_member(text, servers, NAME, entry)


def _claude_uninstall(text: str, path: Path) -> str:
    servers = jsonedit.parse(text).get("mcpServers")
    assert servers is not None
    text = jsonedit.remove_member(text, servers, NAME)
    root = jsonedit.parse(text)
    servers = root.get("mcpServers")
    if servers is not None and not servers.members and not _had_servers(path):
        text = jsonedit.remove_member(text, root, "mcpServers")  # an object only gitmail's entry needed
    return text


def _had_servers(path: Path) -> bool:
    """Whether the file had an `mcpServers` object before gitmail first changed it (its backup says)."""
    backup = read(backup_of(path))
    try:
        return backup is not None and "mcpServers" in json.loads(backup)
    except ValueError:
        return False


# -- Codex: $CODEX_HOME/config.toml -------------------------------------------------------------------------------


def _codex(path: Path, install: bool, entry: dict[str, Any]) -> Change | None:
    before = read(path)
    if before is None and not install:
        return None
    text = before or ""
    try:
        parsed = tomllib.loads(text)
        document = tomlkit.parse(text)
    except (tomllib.TOMLDecodeError, tomlkit.exceptions.TOMLKitError) as error:
        raise GitmailError(
            f"{path} is not valid TOML ({error}); fix it or move it away — nothing was changed"
        ) from None
    current = _ours(path, parsed.get("mcp_servers", {}), "'mcp_servers' is not a table", f"[mcp_servers.{NAME}]")
    if (current == entry) if install else (current is None):
        return Change(path, before, before) if before is not None else None
    wanted = json.loads(json.dumps(parsed, default=str))
    if install:
        wanted.setdefault("mcp_servers", {})[NAME] = entry
        after = _codex_install(text, document, current is not None, entry)
    else:
        del wanted["mcp_servers"][NAME]
        after = _codex_uninstall(text, document)
        if not after.strip() and gitmail_made(path):
            return Change(path, before, None)  # gitmail made this file: uninstall removes it
    got = json.loads(json.dumps(tomllib.loads(after), default=str))
    if _without_empty(got, "mcp_servers") != _without_empty(wanted, "mcp_servers"):
        raise GitmailError(f"{path}: could not edit it safely; edit [mcp_servers.{NAME}] by hand")
    return Change(path, before, after)


def _block(entry: dict[str, Any]) -> str:
    """Our table as tomlkit writes it, its header marked so uninstall can find it again."""
    table = tomlkit.table()
    for key, value in entry.items():
        table.add(key, value)
    rendered = tomlkit.dumps({"mcp_servers": {NAME: table}})
    header = f"[mcp_servers.{NAME}]"
    assert rendered.startswith(header + "\n"), rendered
    return f"{header} {TOML_MARK}\n" + rendered[len(header) + 1 :]


def _codex_install(text: str, document: tomlkit.TOMLDocument, present: bool, entry: dict[str, Any]) -> str:
    if present:  # ours, from another interpreter or an older gitmail: brought up to date where it stands
        table = document["mcp_servers"][NAME]
        for key, value in entry.items():
            table[key] = value
        return tomlkit.dumps(document)
    if not text:
        return _block(entry)
    # A new table at the end of the file is valid after anything except an inline `mcp_servers = {...}`;
    # the caller checks the result parses to exactly what is wanted.
    appended = (text if text.endswith("\n") else text + "\n") + "\n" + _block(entry)
    try:
        tomllib.loads(appended)
        return appended
    except tomllib.TOMLDecodeError:
        servers = document["mcp_servers"]
        table = tomlkit.inline_table()
        table.update(entry)
        servers[NAME] = table
        return tomlkit.dumps(document)


def _codex_uninstall(text: str, document: tomlkit.TOMLDocument) -> str:
    lines = text.splitlines(keepends=True)
    start = next(
        (i for i, line in enumerate(lines) if line.rstrip("\n").endswith(f"[mcp_servers.{NAME}] {TOML_MARK}")), None
    )
    if start is not None:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
        while end - 1 > start and not lines[end - 1].strip():
            end -= 1  # blank lines before the next table are the user's
        if start > 0 and lines[start - 1] == "\n":
            start -= 1  # the blank line install put before it
        return "".join(lines[:start] + lines[end:])
    servers = document["mcp_servers"]
    del servers[NAME]
    return tomlkit.dumps(document)
