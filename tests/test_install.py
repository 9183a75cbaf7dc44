from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path

import pytest

from gitmail import codex_trust, jsonedit, mailbox
from gitmail import install as installer
from gitmail.install import MARK, hook_command
from gitmail.store import Store
from tests.conftest import CliRunner, RepoFactory

CLAUDE_SETTINGS = """\
{
    "model": "opus",
    "permissions": {"allow": ["Bash(git status)", "Read(~/notes/**)"]},
    "env": {"GREETING": "héllo ✓"},
    "hooks": {
        "SessionStart": [
            {"matcher": "startup", "hooks": [{"type": "command", "command": "echo hello"}]}
        ],
        "Stop": [
            {
                "hooks": [
                    {"type": "command", "command": "notify-send done", "timeout": 5}
                ]
            }
        ]
    },
    "statusLine": {"type": "command", "command": "~/bin/status"}
}
"""

VARIANTS = {
    "realistic": CLAUDE_SETTINGS,
    "no hooks yet": '{\n  "model": "sonnet",\n  "theme": "dark"\n}\n',
    "hooks without SessionStart": '{\n\t"hooks": {\n\t\t"Stop": []\n\t}\n}',
    "empty object": "{}\n",
    "one line": '{"model": "opus", "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": []}]}}',
}


@pytest.fixture
def path_without_hosts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A PATH with no real `claude` or `codex` on it; tests put fakes in the returned directory."""
    fake = tmp_path / "fake-bin"
    fake.mkdir()
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}/usr/bin{os.pathsep}/bin")
    return fake


def fake_codex(directory: Path, version: str) -> None:
    script = directory / "codex"
    script.write_text(f"#!/bin/sh\necho 'codex-cli {version}'\n")
    script.chmod(0o755)


def settings(home: Path) -> Path:
    return home / ".claude" / "settings.json"


def ours(document: dict[str, object]) -> list[dict[str, object]]:
    groups = document.get("hooks", {}).get("SessionStart", [])  # type: ignore[attr-defined]
    return [entry for group in groups for entry in group["hooks"] if str(entry["command"]).endswith(MARK)]


@pytest.mark.parametrize("name", list(VARIANTS))
def test_install_twice_then_uninstall_gives_back_the_very_same_bytes(
    cli: CliRunner, home: Path, path_without_hosts: Path, name: str
) -> None:
    original = VARIANTS[name]
    settings(home).parent.mkdir()
    settings(home).write_text(original)
    assert cli("install", "--claude").code == 0
    installed = settings(home).read_text()
    after = json.loads(installed)
    assert ours(after) == [{"type": "command", "command": hook_command(), "timeout": 10}]
    group = next(g for g in after["hooks"]["SessionStart"] if g["hooks"] and g["hooks"][0] in ours(after))
    assert group == {"hooks": ours(after)}  # no matcher: every way a session starts (fork too) gets the mail
    before = json.loads(original)
    for key in before:  # every unrelated setting kept
        if key != "hooks":
            assert after[key] == before[key]
    for event, groups in before.get("hooks", {}).items():
        assert after["hooks"][event][: len(groups)] == groups
    assert cli("install", "--claude").code == 0
    assert settings(home).read_text() == installed  # a second install changes no byte
    assert (home / ".claude" / "settings.json.gitmail-backup").read_text() == original
    assert cli("uninstall", "--claude").code == 0
    assert settings(home).read_text() == original


def test_uninstall_prunes_the_containers_it_emptied(cli: CliRunner, home: Path, path_without_hosts: Path) -> None:
    settings(home).parent.mkdir()
    settings(home).write_text('{"hooks": {"SessionStart": []}, "model": "opus"}\n')
    cli("install", "--claude")
    cli("uninstall", "--claude")
    assert settings(home).read_text() == '{"model": "opus"}\n'


def test_uninstall_without_our_entries_changes_nothing(cli: CliRunner, home: Path, path_without_hosts: Path) -> None:
    settings(home).parent.mkdir()
    settings(home).write_text('{"hooks": {"SessionStart": []}}')
    result = cli("uninstall")
    assert result.code == 0 and f"{settings(home)}: unchanged" in result.err
    assert settings(home).read_text() == '{"hooks": {"SessionStart": []}}'


def test_the_edit_keeps_the_users_layout(cli: CliRunner, home: Path, path_without_hosts: Path) -> None:
    settings(home).parent.mkdir()
    settings(home).write_text(CLAUDE_SETTINGS)
    cli("install", "--claude")
    text = settings(home).read_text()
    assert text.startswith(CLAUDE_SETTINGS.split('            {"matcher": "startup"')[0])
    assert '            {"matcher": "startup", "hooks": [{"type": "command", "command": "echo hello"}]},\n' in text
    assert '"GREETING": "héllo ✓"' in text
    assert text.endswith('    "statusLine": {"type": "command", "command": "~/bin/status"}\n}\n')


def test_without_a_settings_file_install_creates_it_and_uninstall_removes_it(
    cli: CliRunner, home: Path, path_without_hosts: Path
) -> None:
    assert cli("install", "--claude").code == 0
    assert ours(json.loads(settings(home).read_text()))
    assert not (home / ".claude" / "settings.json.gitmail-backup").exists()
    result = cli("uninstall", "--claude")
    assert "removed (gitmail had created it)" in result.err
    assert not settings(home).exists()


def test_a_stale_entry_is_updated_where_it_stands_and_duplicates_dropped(
    cli: CliRunner, home: Path, path_without_hosts: Path
) -> None:
    old = {"type": "command", "command": f"/gone/venv/bin/python -m gitmail hook session-start {MARK}"}
    document = {
        "hooks": {
            "SessionStart": [
                {"matcher": "startup|resume|clear|compact", "hooks": [old]},
                {"matcher": "startup", "hooks": [{"type": "command", "command": "echo mine"}]},
                {"matcher": "resume", "hooks": [old, {"type": "command", "command": "gitmail hook session-start"}]},
            ]
        }
    }
    settings(home).parent.mkdir()
    settings(home).write_text(json.dumps(document, indent=2))
    cli("install", "--claude")
    groups = json.loads(settings(home).read_text())["hooks"]["SessionStart"]
    assert groups == [
        {"hooks": [{"type": "command", "command": hook_command(), "timeout": 10}]},  # its old matcher left out fork
        {"matcher": "startup", "hooks": [{"type": "command", "command": "echo mine"}]},
        {"matcher": "resume", "hooks": [{"type": "command", "command": "gitmail hook session-start"}]},  # unmarked
    ]


def test_an_entry_in_a_group_shared_with_the_users_hooks_gets_a_group_of_its_own(
    cli: CliRunner, home: Path, path_without_hosts: Path
) -> None:
    old = {"type": "command", "command": f"/gone/venv/bin/python -m gitmail hook session-start {MARK}"}
    mine = {"type": "command", "command": "echo mine"}
    settings(home).parent.mkdir()
    settings(home).write_text(json.dumps({"hooks": {"SessionStart": [{"matcher": "startup", "hooks": [mine, old]}]}}))
    cli("install", "--claude")
    groups = json.loads(settings(home).read_text())["hooks"]["SessionStart"]
    assert groups == [
        {"matcher": "startup", "hooks": [mine]},  # the user's matcher is the user's: gitmail's entry leaves it
        {"hooks": [{"type": "command", "command": hook_command(), "timeout": 10}]},
    ]


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ('{"hooks": {', "is not valid JSON"),
        ("[1, 2]", "does not hold a JSON object"),
        ('{"hooks": []}', "'hooks' is not a dict"),
        ('{"hooks": {"SessionStart": {}}}', "'SessionStart' is not a list"),
    ],
)
def test_a_settings_file_that_does_not_parse_is_refused_untouched(
    cli: CliRunner, home: Path, path_without_hosts: Path, content: str, error: str
) -> None:
    settings(home).parent.mkdir()
    settings(home).write_text(content)
    (home / ".codex").mkdir()
    result = cli("install")
    assert result.code == 1 and result.err.startswith("gitmail: error: ") and result.err.count("\n") == 1
    assert error in result.err
    assert settings(home).read_text() == content
    assert sorted(p.name for p in (home / ".claude").iterdir()) == ["settings.json"]
    assert not list((home / ".codex").iterdir())  # nothing written for the other host either


def test_dry_run_shows_the_diff_and_writes_nothing(cli: CliRunner, home: Path, path_without_hosts: Path) -> None:
    settings(home).parent.mkdir()
    settings(home).write_text(CLAUDE_SETTINGS)
    result = cli("install", "--claude", "--dry-run")
    assert result.code == 0
    assert f"--- {settings(home)} (now)\n+++ {settings(home)} (after)\n" in result.out
    added = f"""\
+            {{
+                "hooks": [
+                    {{
+                        "type": "command",
+                        "command": {json.dumps(hook_command(), ensure_ascii=False)},
+                        "timeout": 10
+                    }}
+                ]
+            }}
"""
    assert added in result.out
    assert settings(home).read_text() == CLAUDE_SETTINGS
    assert not (home / ".claude" / "settings.json.gitmail-backup").exists()


def test_hosts_default_to_those_found(cli: CliRunner, home: Path, path_without_hosts: Path) -> None:
    result = cli("install")
    assert result.code == 1 and "found neither Claude Code (~/.claude) nor Codex (~/.codex)" in result.err
    (home / ".codex").mkdir()
    assert cli("install").code == 0
    assert (home / ".codex" / "hooks.json").exists() and not settings(home).exists()


CODEX_CONFIG = '# my Codex settings\nmodel = "gpt-5"  # the default\n\n[features]\n# experiments\nweb_search = true\n'

FAKE_APP_SERVER = """\
import json, os, sys
if sys.argv[1:] == ["--version"]:
    print("codex-cli 0.171.0")
    sys.exit(0)
if sys.argv[1:] != ["app-server"]:
    sys.exit(2)
log = os.environ["FAKE_CODEX_LOG"]
hooks_json = os.path.join(os.environ.get("CODEX_HOME") or os.path.expanduser("~/.codex"), "hooks.json")
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    if message["method"] == "initialize":
        result = {"userAgent": "fake"}
    elif message["method"] == "hooks/list":
        trusted = os.path.exists(log)
        hooks = [
            {"key": f"{hooks_json}:session_start:{g}:{h}", "command": entry["command"], "currentHash": "sha256:from-codex",
             "trustStatus": "trusted" if trusted else "untrusted", "sourcePath": hooks_json}
            for g, group in enumerate(json.load(open(hooks_json))["hooks"]["SessionStart"])
            for h, entry in enumerate(group["hooks"])
        ]
        result = {"data": [{"cwd": message["params"]["cwds"][0], "hooks": hooks, "warnings": [], "errors": []}]}
    elif message["method"] == "config/batchWrite":
        with open(log, "a") as handle:
            handle.write(json.dumps(message["params"]) + "\\n")
        result = {"status": "ok"}
    print(json.dumps({"id": message["id"], "result": result}), flush=True)
"""


def codex_dir(home: Path) -> Path:
    return home / ".codex"


def trust_state(config: Path) -> dict[str, dict[str, object]]:
    return dict(tomllib.loads(config.read_text()).get("hooks", {}).get("state", {}))


def test_old_codex_gets_its_feature_flag_and_loses_it_on_uninstall(
    cli: CliRunner, home: Path, path_without_hosts: Path
) -> None:
    fake_codex(path_without_hosts, "0.120.3")
    config = codex_dir(home) / "config.toml"
    config.parent.mkdir()
    config.write_text(CODEX_CONFIG)
    result = cli("install", "--codex", "--no-trust")
    assert result.code == 0
    assert config.read_text() == CODEX_CONFIG + "codex_hooks = true # added by gitmail\n"
    assert ours(json.loads((codex_dir(home) / "hooks.json").read_text()))
    cli("install", "--codex", "--no-trust")
    assert config.read_text().count("codex_hooks") == 1
    cli("uninstall", "--codex")
    assert config.read_text() == CODEX_CONFIG
    assert not (codex_dir(home) / "hooks.json").exists()


@pytest.mark.parametrize(
    ("original", "installed"),
    [
        ('model = "o3"', 'model = "o3"\n\n[features] # added by gitmail\ncodex_hooks = true # added by gitmail\n'),
        ("", "[features] # added by gitmail\ncodex_hooks = true # added by gitmail\n"),
        (
            'features.web_search = true\nmodel = "x"\n',
            'features.web_search = true\nfeatures.codex_hooks = true # added by gitmail\nmodel = "x"\n',
        ),
        (
            "features = { web_search = true }\n",
            "features = { web_search = true, codex_hooks = true} # gitmail added codex_hooks\n",  # tomlkit's spacing,
        ),
        (
            "[features]\nweb_search = true\n\n[features.extra]\nx = 1\n",
            "[features]\nweb_search = true\ncodex_hooks = true # added by gitmail\n\n[features.extra]\nx = 1\n",
        ),
    ],
)
def test_the_feature_flag_fits_any_shape_of_features_table(
    cli: CliRunner, home: Path, path_without_hosts: Path, original: str, installed: str
) -> None:
    fake_codex(path_without_hosts, "0.99.0")
    config = codex_dir(home) / "config.toml"
    config.parent.mkdir()
    config.write_text(original)
    assert cli("install", "--codex", "--no-trust").code == 0
    assert config.read_text() == installed
    assert tomllib.loads(config.read_text())["features"]["codex_hooks"] is True
    cli("install", "--codex", "--no-trust")
    assert config.read_text() == installed
    cli("uninstall", "--codex")
    assert config.read_text() == (original if original.endswith("\n") or not original else original + "\n")


@pytest.mark.parametrize(
    ("version", "config", "note"),
    [
        ("0.152.1", CODEX_CONFIG, None),
        ("0.120.0", "[features]\nhooks = false\n", "turns Codex hooks off"),
        (None, CODEX_CONFIG, "Codex was not found to ask its version"),
    ],
)
def test_codex_config_is_left_alone_when_no_flag_is_needed(
    cli: CliRunner, home: Path, path_without_hosts: Path, version: str | None, config: str, note: str | None
) -> None:
    if version:
        fake_codex(path_without_hosts, version)
    path = codex_dir(home) / "config.toml"
    path.parent.mkdir()
    path.write_text(config)
    result = cli("install", "--codex", "--no-trust")
    assert result.code == 0 and path.read_text() == config
    assert (note in result.err) if note else ("note: Codex was not found" not in result.err)


def test_invalid_codex_config_is_refused(cli: CliRunner, home: Path, path_without_hosts: Path) -> None:
    fake_codex(path_without_hosts, "0.120.0")
    path = codex_dir(home) / "config.toml"
    path.parent.mkdir()
    path.write_text("[features\n")
    result = cli("install", "--codex")
    assert result.code == 1 and "is not valid TOML" in result.err
    assert path.read_text() == "[features\n" and not (codex_dir(home) / "hooks.json").exists()


def test_codex_home_is_where_codex_looks(
    cli: CliRunner, home: Path, path_without_hosts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "codex-settings"
    elsewhere.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(elsewhere))
    result = cli("install")  # found through $CODEX_HOME alone
    assert result.code == 0, result.err
    assert ours(json.loads((elsewhere / "hooks.json").read_text()))
    assert trust_state(elsewhere / "config.toml")
    assert not codex_dir(home).exists() and not settings(home).exists()
    cli("uninstall")
    assert not (elsewhere / "hooks.json").exists() and not (elsewhere / "config.toml").exists()


def test_without_a_codex_to_ask_the_hook_is_trusted_with_the_hash_codex_computes(
    cli: CliRunner, home: Path, path_without_hosts: Path
) -> None:
    config, hooks = codex_dir(home) / "config.toml", codex_dir(home) / "hooks.json"
    config.parent.mkdir()
    config.write_text(CODEX_CONFIG)
    result = cli("install", "--codex")
    assert result.code == 0
    digest = codex_trust.entry_hash({"type": "command", "command": hook_command(), "timeout": 10}, None)
    assert (
        config.read_text() == CODEX_CONFIG + f'\n[hooks.state."{hooks}:session_start:0:0"]\ntrusted_hash = "{digest}"\n'
    )
    assert f"{config}: trusted gitmail's hook for Codex with the hash Codex computes (no codex on PATH)" in result.err
    assert "Codex skips an untrusted hook without a word, in `codex exec` too" in result.err
    assert "--no-trust" in result.err and result.err.count("\n") == 3  # hooks.json, config.toml's flag note, trust
    again = cli("install", "--codex")
    assert config.read_text().count("trusted_hash") == 1 and f"{config}: Codex already trusts" in again.err
    cli("uninstall", "--codex")
    assert config.read_text() == CODEX_CONFIG and not hooks.exists()


def test_the_hash_is_the_one_codex_lists() -> None:
    # What Codex 0.171.0's app-server listed (hooks/list "currentHash") for an entry with only a command.
    entry = {"type": "command", "command": "/tmp/explore/c1/hook.sh"}
    assert (
        codex_trust.entry_hash(entry, None) == "sha256:f41f821ae7d32ee6d86c54bdb5e224ecadab37f895585898065f0b2e3db13c0e"
    )


def test_codex_itself_is_asked_first(
    cli: CliRunner, home: Path, path_without_hosts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = path_without_hosts / "codex"
    script.write_text(f"#!{sys.executable}\n{FAKE_APP_SERVER}")
    script.chmod(0o755)
    log = tmp_path / "batch-writes.jsonl"
    monkeypatch.setenv("FAKE_CODEX_LOG", str(log))
    hooks = codex_dir(home) / "hooks.json"
    result = cli("install", "--codex")
    assert result.code == 0
    assert "trusted gitmail's hook for Codex through Codex's app-server, as its /hooks review does" in result.err
    edit = {"keyPath": "hooks.state", "value": {f"{hooks}:session_start:0:0": {"trusted_hash": "sha256:from-codex"}}}
    assert json.loads(log.read_text()) == {"edits": [{**edit, "mergeStrategy": "upsert"}], "reloadUserConfig": True}
    assert not (codex_dir(home) / "config.toml").exists()  # Codex wrote trust (here: a fake that only logs it)
    again = cli("install", "--codex")
    assert "Codex already trusts gitmail's hook" in again.err and len(log.read_text().splitlines()) == 1


def codex_files(home: Path, groups: Sequence[object], state: str) -> tuple[Path, Path]:
    hooks, config = codex_dir(home) / "hooks.json", codex_dir(home) / "config.toml"
    hooks.parent.mkdir(exist_ok=True)
    hooks.write_text(json.dumps({"hooks": {"SessionStart": groups, "Stop": [{"hooks": [command("notify")]}]}}))
    config.write_text(state.replace("{H}", str(hooks)))
    return hooks, config


def command(text: str) -> dict[str, object]:
    return {"type": "command", "command": text}


STATE = """\
model = "gpt-5"

[hooks.state]

[hooks.state."{H}:session_start:0:0"]
trusted_hash = "sha256:a"

[hooks.state."{H}:session_start:1:0"]
trusted_hash = "sha256:gitmail"

[hooks.state."{H}:session_start:2:0"]
trusted_hash = "sha256:b0" # reviewed
enabled = false

[hooks.state."{H}:session_start:2:1"]
trusted_hash = "sha256:b1"

[hooks.state."{H}:stop:0:0"]
trusted_hash = "sha256:stop"

[hooks.state."/elsewhere/hooks.json:session_start:2:0"]
trusted_hash = "sha256:another-file"
"""


def test_uninstall_carries_the_users_trust_with_their_hooks_and_drops_its_own(
    cli: CliRunner, home: Path, path_without_hosts: Path
) -> None:
    gitmail = {"type": "command", "command": hook_command(), "timeout": 10}
    groups = [{"hooks": [command("a")]}, {"hooks": [gitmail]}, {"hooks": [command("b0"), command("b1")]}]
    hooks, config = codex_files(home, groups, STATE)
    assert cli("uninstall", "--codex").code == 0
    assert json.loads(hooks.read_text())["hooks"]["SessionStart"] == [groups[0], groups[2]]
    assert trust_state(config) == {
        f"{hooks}:session_start:0:0": {"trusted_hash": "sha256:a"},
        f"{hooks}:session_start:1:0": {"trusted_hash": "sha256:b0", "enabled": False},
        f"{hooks}:session_start:1:1": {"trusted_hash": "sha256:b1"},
        f"{hooks}:stop:0:0": {"trusted_hash": "sha256:stop"},
        "/elsewhere/hooks.json:session_start:2:0": {"trusted_hash": "sha256:another-file"},
    }
    assert 'trusted_hash = "sha256:b0" # reviewed\nenabled = false\n' in config.read_text()
    assert config.read_text().startswith('model = "gpt-5"\n\n[hooks.state]\n\n')


def test_install_carries_trust_when_it_takes_its_entry_out_of_a_shared_group(
    cli: CliRunner, home: Path, path_without_hosts: Path
) -> None:
    stale = command(f"/gone/python -m gitmail hook session-start {MARK}")
    groups = [{"hooks": [stale, command("a")]}, {"hooks": [command("b")]}]
    state = '[hooks.state."{H}:session_start:0:0"]\ntrusted_hash = "sha256:old-gitmail"\n\n'
    state += '[hooks.state."{H}:session_start:0:1"]\ntrusted_hash = "sha256:a"\n\n'
    state += '[hooks.state."{H}:session_start:1:0"]\ntrusted_hash = "sha256:b"\n'
    hooks, config = codex_files(home, groups, state)
    assert cli("install", "--codex").code == 0
    entry = {"type": "command", "command": hook_command(), "timeout": 10}
    assert json.loads(hooks.read_text())["hooks"]["SessionStart"] == [
        {"hooks": [command("a")]},
        {"hooks": [command("b")]},
        {"hooks": [entry]},
    ]
    assert trust_state(config) == {
        f"{hooks}:session_start:0:0": {"trusted_hash": "sha256:a"},
        f"{hooks}:session_start:1:0": {"trusted_hash": "sha256:b"},
        f"{hooks}:session_start:2:0": {"trusted_hash": codex_trust.entry_hash(entry, None)},
    }


def test_no_trust_says_plainly_what_codex_will_do(cli: CliRunner, home: Path, path_without_hosts: Path) -> None:
    result = cli("install", "--codex", "--no-trust")
    assert result.code == 0 and not (codex_dir(home) / "config.toml").exists()
    assert (
        "note: Codex skips an untrusted hook without a word, in `codex exec` too: open /hooks in Codex and trust "
        f"gitmail's hook (/hooks lists it under {codex_dir(home) / 'hooks.json'})." in result.err
    )
    dry = cli("install", "--codex", "--dry-run")
    assert "note: would trust gitmail's hook for Codex, as its /hooks review does (--no-trust" in dry.err


def test_status_reports_install_command_and_trust(home: Path, path_without_hosts: Path) -> None:
    assert [(s.host, s.installed, s.runs, s.trust) for s in installer.status(home)] == [
        ("claude", False, None, None),
        ("codex", False, None, None),
    ]
    everything = installer.plan(home=home, hosts=installer.HOSTS, install=True)
    installer.apply(everything.changes, everything.trust)
    found = installer.status(home)
    assert [(s.host, s.installed, s.runs, s.trust) for s in found] == [
        ("claude", True, True, None),
        ("codex", True, True, "trusted"),
    ]
    assert found[0].command == hook_command() and "runs (" in found[0].detail
    hooks = codex_dir(home) / "hooks.json"
    hooks.write_text(hooks.read_text().replace('"timeout": 10', '"timeout": 20'))
    assert installer.status(home, ["codex"])[0].trust == "modified"
    (codex_dir(home) / "config.toml").unlink()
    assert installer.status(home, ["codex"])[0].trust == "untrusted"
    gone = installer.plan(home=home, hosts=["claude"], install=True, command=hook_command("/gone/venv/bin/python"))
    installer.apply(gone.changes)
    claude = installer.status(home, ["claude"])[0]
    assert claude.runs is False and "no longer finds gitmail" in claude.detail


def run_installed_hook(command: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """What a host does with the installed entry: run it through a shell, the JSON payload on stdin."""
    payload = json.dumps({"session_id": "s", "cwd": str(cwd), "hook_event_name": "SessionStart", "source": "startup"})
    return subprocess.run(["sh", "-c", command], input=payload.encode(), capture_output=True, cwd="/")


def test_the_installed_command_delivers_mail_from_any_directory(
    cli: CliRunner, home: Path, repos: RepoFactory, path_without_hosts: Path
) -> None:
    web = repos("web")
    mailbox.send(Store(), sender="api", to="web", subject="via the installed hook")
    cli("install", "--claude")
    command = ours(json.loads(settings(home).read_text()))[0]["command"]
    assert isinstance(command, str)
    done = run_installed_hook(command, web)
    assert done.returncode == 0
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "via the installed hook" in context


def test_a_vanished_interpreter_falls_back_to_path_and_never_fails(
    home: Path, repos: RepoFactory, path_without_hosts: Path
) -> None:
    web = repos("web")
    mailbox.send(Store(), sender="api", to="web", subject="fallback")
    command = hook_command("/gone/venv/bin/python")
    assert run_installed_hook(command, web).returncode == 0  # nothing on PATH either: still exit 0
    shim = path_without_hosts / "gitmail"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m gitmail "$@"\n')
    shim.chmod(0o755)
    done = run_installed_hook(command, web)
    assert done.returncode == 0 and b"fallback" in done.stdout


@pytest.mark.parametrize(
    "text",
    ['{"a": 1}', '{\n  "a": [\n    1,\n    2\n  ]\n}', "[]", '{"a": {"b": []}, "c": "d"}', '{ "x" : [ {"y": null} ] }'],
)
def test_json_edits_touch_only_what_they_change(text: str) -> None:
    root = jsonedit.parse(text)
    assert json.loads(text) == root.value(text)
    if root.kind == "object":
        added = jsonedit.add_member(text, root, "new", {"k": [1]})
        assert json.loads(added) == {**json.loads(text), "new": {"k": [1]}}
        assert jsonedit.remove(added, jsonedit.parse(added), len(root.members)) == text
    else:
        appended = jsonedit.append_item(text, root, 5)
        assert json.loads(appended) == [5]


ROOT = Path(__file__).parent.parent


def test_the_plugin_manifest_hooks_and_skill_are_well_formed() -> None:
    manifest = json.loads((ROOT / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "gitmail" and manifest["version"] and manifest["description"]
    market = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text())
    assert market["plugins"][0]["name"] == "gitmail" and market["plugins"][0]["source"] == "./"
    hooks = json.loads((ROOT / "hooks" / "hooks.json").read_text())["hooks"]
    moments = {"SessionStart": "session-start", "PostToolBatch": "tool", "UserPromptSubmit": "prompt"}
    moments |= {"Stop": "stop", "FileChanged": "wake", "SessionEnd": "session-end"}
    assert set(hooks) == set(moments)
    for event, moment in moments.items():
        assert "matcher" not in hooks[event][0]  # every way a session starts (fork included), every tool
        assert hooks[event][0]["hooks"][0]["command"] == f'"${{CLAUDE_PLUGIN_ROOT}}/hooks/run" {moment}'
    assert hooks["FileChanged"][0]["hooks"][0]["asyncRewake"] is True
    for script in ("run", "gitmail"):
        assert os.access(ROOT / "hooks" / script, os.X_OK)
    skill = (ROOT / "skills" / "gitmail" / "SKILL.md").read_text()
    front = skill.split("---\n")[1]
    fields = dict(line.split(": ", 1) for line in front.strip().splitlines())
    assert fields["name"] == "gitmail" and len(fields["description"]) <= 1024
    for command in (
        "gitmail send --to",
        "gitmail send --broadcast",
        "gitmail send --reply-to",
        "gitmail done",
        "gitmail inbox",
        "gitmail log --thread",
        "gitmail send --retract",
    ):
        assert command in skill


def test_the_plugin_hook_runs_from_the_plugin_copy_without_an_installed_gitmail(
    home: Path, repos: RepoFactory, tmp_path: Path
) -> None:
    web = repos("web")
    mailbox.send(Store(), sender="api", to="web", subject="through the plugin")
    bin_dir = tmp_path / "only-python"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    for tool in ("git", "sh", "dirname"):
        found = subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip()
        (bin_dir / tool).symlink_to(found)
    payload = json.dumps({"session_id": "s", "cwd": str(web), "hook_event_name": "SessionStart", "source": "startup"})
    env = {"HOME": str(home), "PATH": str(bin_dir), "CLAUDE_PLUGIN_ROOT": str(ROOT)}
    env |= {"GITMAIL_PLUGIN_VENV": str(tmp_path / "no-venv-yet"), "GITMAIL_PLUGIN_SETUP": "off"}
    done = subprocess.run(
        [str(ROOT / "hooks" / "run"), "session-start"], input=payload.encode(), capture_output=True, env=env
    )
    assert done.returncode == 0, done.stderr
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "through the plugin" in context
    assert f"Done:  '{ROOT}/hooks/gitmail' done " in context  # the command that runs for a plugin-only user


def test_a_trust_that_cannot_be_written_is_one_note_not_a_traceback(
    cli: CliRunner, home: Path, path_without_hosts: Path
) -> None:
    config = codex_dir(home) / "config.toml"
    config.mkdir(parents=True)  # a directory where config.toml should be: it cannot be read or written
    result = cli("install", "--codex", "--no-trust")
    assert result.code == 1 and result.err.startswith("gitmail: error: cannot read") and result.err.count("\n") == 1
    config.rmdir()
    config.write_text("hooks = 1\n")  # valid TOML with no room for trust
    result = cli("install", "--codex")
    assert result.code == 0
    assert "gitmail: note: could not trust gitmail's hook for Codex (" in result.err
    assert "Codex skips an untrusted hook without a word, in `codex exec` too: open /hooks in Codex" in result.err
