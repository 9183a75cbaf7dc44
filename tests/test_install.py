from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gitmail import jsonedit, mailbox
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
    assert group["matcher"] == "startup|resume|clear|compact"
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
        {
            "matcher": "startup|resume|clear|compact",
            "hooks": [{"type": "command", "command": hook_command(), "timeout": 10}],
        },
        {"matcher": "startup", "hooks": [{"type": "command", "command": "echo mine"}]},
        {"matcher": "resume", "hooks": [{"type": "command", "command": "gitmail hook session-start"}]},  # unmarked
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
    assert '+                "matcher": "startup|resume|clear|compact",' in result.out
    assert settings(home).read_text() == CLAUDE_SETTINGS
    assert not (home / ".claude" / "settings.json.gitmail-backup").exists()


def test_hosts_default_to_those_found(cli: CliRunner, home: Path, path_without_hosts: Path) -> None:
    result = cli("install")
    assert result.code == 1 and "found neither Claude Code (~/.claude) nor Codex (~/.codex)" in result.err
    (home / ".codex").mkdir()
    assert cli("install").code == 0
    assert (home / ".codex" / "hooks.json").exists() and not settings(home).exists()


CODEX_CONFIG = '# my Codex settings\nmodel = "gpt-5"  # the default\n\n[features]\n# experiments\nweb_search = true\n'


def test_old_codex_gets_its_feature_flag_and_loses_it_on_uninstall(
    cli: CliRunner, home: Path, path_without_hosts: Path
) -> None:
    fake_codex(path_without_hosts, "0.120.3")
    config = home / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(CODEX_CONFIG)
    result = cli("install", "--codex")
    assert result.code == 0
    assert "Codex asks you to trust a new hook once" in result.err
    assert config.read_text() == CODEX_CONFIG.replace(
        "[features]\n", "[features]\ncodex_hooks = true # added by gitmail\n"
    )
    assert ours(json.loads((home / ".codex" / "hooks.json").read_text()))
    cli("install", "--codex")
    assert config.read_text().count("codex_hooks") == 1
    cli("uninstall", "--codex")
    assert config.read_text() == CODEX_CONFIG
    assert not (home / ".codex" / "hooks.json").exists()


def test_old_codex_without_a_features_table_gets_one(cli: CliRunner, home: Path, path_without_hosts: Path) -> None:
    fake_codex(path_without_hosts, "0.99.0")
    config = home / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text('model = "o3"')
    cli("install", "--codex")
    assert (
        config.read_text() == 'model = "o3"\n\n[features] # added by gitmail\ncodex_hooks = true # added by gitmail\n'
    )
    cli("uninstall", "--codex")
    assert config.read_text() == 'model = "o3"\n'


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
    path = home / ".codex" / "config.toml"
    path.parent.mkdir()
    path.write_text(config)
    result = cli("install", "--codex")
    assert result.code == 0 and path.read_text() == config
    assert (note in result.err) if note else ("note: Codex was not found" not in result.err)


def test_invalid_codex_config_is_refused(cli: CliRunner, home: Path, path_without_hosts: Path) -> None:
    fake_codex(path_without_hosts, "0.120.0")
    path = home / ".codex" / "config.toml"
    path.parent.mkdir()
    path.write_text("[features\n")
    result = cli("install", "--codex")
    assert result.code == 1 and "is not valid TOML" in result.err
    assert path.read_text() == "[features\n" and not (home / ".codex" / "hooks.json").exists()


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
    hooks = json.loads((ROOT / "hooks" / "hooks.json").read_text())["hooks"]["SessionStart"]
    assert hooks[0]["matcher"] == "startup|resume|clear|compact"
    assert hooks[0]["hooks"][0]["command"] == '"${CLAUDE_PLUGIN_ROOT}/hooks/session-start"'
    assert os.access(ROOT / "hooks" / "session-start", os.X_OK)
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
    done = subprocess.run([str(ROOT / "hooks" / "session-start")], input=payload.encode(), capture_output=True, env=env)
    assert done.returncode == 0, done.stderr
    assert "through the plugin" in json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
