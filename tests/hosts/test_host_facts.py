"""What each host hands a hook and a session's shell, checked with the real hosts: gitmail's designs rest on these
facts (which session a hook serves, where a plugin may keep state, what a session's shell can run), so a host
release that changes one fails here first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gitmail.install import codex_trust
from tests.hosts.harness import ClaudeCode, Codex, World
from tests.hosts.stub import Shell

pytestmark = pytest.mark.hosts


def probe(world: World, name: str) -> tuple[Path, Path]:
    """A hook command that records its environment and its payload, one pair of files per run."""
    out = world.root / f"probe-{name}"
    script = world.root / f"{name}.sh"
    script.write_text(f"#!/bin/sh\nmkdir -p {out}\nenv > {out}/env.$$\ncat > {out}/payload.$$\n")
    script.chmod(0o755)
    return script, out


def runs(out: Path) -> list[tuple[dict[str, str], dict[str, Any]]]:
    """(environment, payload) of each run, oldest first."""
    found = []
    for payload in sorted(out.glob("payload.*"), key=lambda p: p.stat().st_mtime_ns):
        env_file = out / payload.name.replace("payload", "env")
        env = dict(line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)
        found.append((env, json.loads(payload.read_text())))
    return found


def hook_group(command: Path) -> dict[str, Any]:
    return {"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": str(command)}]}]}}


def shell_env(result: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in result.splitlines() if "=" in line and not line.startswith(" "))


def test_claude_code_names_the_session_in_the_hooks_and_the_shells_environment(world: World) -> None:
    web = world.repo("web")
    script, out = probe(world, "claude")
    settings = world.home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(hook_group(script)))
    claude = ClaudeCode(world)
    world.stub.script(Shell("env | sort", then="seen"))
    turn = claude.run(web, "Show me the environment.")
    [(env, payload)] = runs(out)
    assert list(payload) == ["session_id", "transcript_path", "cwd", "hook_event_name", "source"]
    assert env["CLAUDE_CODE_SESSION_ID"] == payload["session_id"] == turn.session_id
    assert env["CLAUDE_PROJECT_DIR"] == str(web) and env["CLAUDECODE"] == "1"
    assert shell_env(turn.requests[1].tool_result)["CLAUDE_CODE_SESSION_ID"] == turn.session_id
    claude.run(web, "Again.", resume=turn.session_id)
    (_, resumed) = runs(out)[1]
    assert resumed["source"] == "resume"
    assert list(resumed) == [  # the keys a resume adds come after the others
        *payload,
        "seconds_since_last_response",
        "context_tokens",
        "prompt_cache_likely_expired",
        "estimated_cache_write_usd",
    ]


def test_codex_names_the_session_in_the_shells_environment_but_not_the_hooks(world: World) -> None:
    web = world.repo("web")
    script, out = probe(world, "codex")
    (world.codex_home / "hooks.json").write_text(json.dumps(hook_group(script)))
    codex = Codex(world)
    listed = codex_trust.list_hooks(world.root, codex=str(codex.binary), env=world.env())
    codex_trust.trust({h.key: h.current_hash for h in listed}, world.root, codex=str(codex.binary), env=world.env())
    world.stub.script(Shell("env | sort", then="seen"))
    turn = codex.run(web, "Show me the environment.")
    codex.run(web, "Again.", resume=turn.session_id)
    [(env, payload), (_, resumed)] = runs(out)
    order = ["session_id", "transcript_path", "cwd", "hook_event_name", "model", "permission_mode", "source"]
    assert list(payload) == order and list(resumed) == order  # serialised from a struct: always this order
    assert (payload["source"], resumed["source"]) == ("startup", "resume")
    assert payload["session_id"] == turn.session_id
    assert not [name for name, value in env.items() if turn.session_id in value], "a hook cannot tell its session"
    assert env["CODEX_HOME"] == str(world.codex_home)
    shell = shell_env(turn.requests[1].tool_result)
    assert shell["CODEX_THREAD_ID"] == shell["CODEX_SESSION_ID"] == turn.session_id


def test_a_claude_code_plugin_gets_a_data_directory_and_its_bin_on_the_shells_path(world: World) -> None:
    web = world.repo("web")
    plugin = world.root / "probe-plugin"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text('{"name": "probe", "version": "0.0.1"}')
    script, out = probe(world, "plugin")
    (plugin / "hooks").mkdir()
    (plugin / "hooks" / "hooks.json").write_text(json.dumps(hook_group(script)))
    (plugin / "bin").mkdir()
    (plugin / "bin" / "probe-tool").write_text("#!/bin/sh\necho probe-tool ran\n")
    (plugin / "bin" / "probe-tool").chmod(0o755)

    class WithPlugin(ClaudeCode):
        def args(self) -> list[str]:
            return [*super().args(), "--plugin-dir", str(plugin)]

    world.stub.script(Shell("command -v probe-tool; probe-tool", then="seen"))
    turn = WithPlugin(world).run(web, "Run the plugin's tool.")
    [(env, _)] = runs(out)
    assert env["CLAUDE_PLUGIN_ROOT"] == str(plugin)
    data = world.home / ".claude" / "plugins" / "data" / "probe-inline"  # kept per plugin, outside the plugin
    assert env["CLAUDE_PLUGIN_DATA"] == str(data) and data.is_dir()
    assert turn.requests[1].tool_result == f"{plugin}/bin/probe-tool\nprobe-tool ran"
