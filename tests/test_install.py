from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path

import pytest

from gitmail import mailbox
from gitmail.install import codex_trust, hook_commands, host_hooks, jsonedit
from gitmail.install.hook_commands import MARK, hook_command
from gitmail.install.settings import apply
from gitmail.install.status import status
from gitmail.store.repository import Store
from tests.conftest import REAL_HOME, CliRunner, RepoFactory

REPO = Path(__file__).parent.parent
CLAUDE_EVENTS = ["SessionStart", "PostToolBatch", "UserPromptSubmit", "Stop", "FileChanged", "SessionEnd", "PreToolUse"]
CODEX_EVENTS = ["SessionStart", "PostToolUse", "UserPromptSubmit", "Stop", "SessionEnd", "PreToolUse"]
CODEX_LABELS = ["session_start", "post_tool_use", "user_prompt_submit", "stop", "session_end", "pre_tool_use"]

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
    "hooks gitmail does not use": '{\n\t"hooks": {\n\t\t"Notification": []\n\t}\n}',
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


def ours(document: dict[str, object], event: str = "SessionStart") -> list[dict[str, object]]:
    groups = document.get("hooks", {}).get(event, [])  # type: ignore[attr-defined]
    return [entry for group in groups for entry in group["hooks"] if "# gitmail:" in str(entry["command"])]


def start_entry(host: str = "claude", *, watch: bool | None = None, python: str | None = None) -> dict[str, object]:
    """gitmail's SessionStart entry as a full install writes it."""
    watch = host == "claude" if watch is None else watch
    return {"type": "command", "command": hook_command(python, host=host, watch=watch), "timeout": 10}


def sandbox_block(home: Path) -> str:
    """What install adds to a config.toml that has no [sandbox_workspace_write] yet."""
    return f'[sandbox_workspace_write] # added by gitmail\nwritable_roots = ["{home}/.gitmail"] # added by gitmail\n'


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
    assert {event: ours(after, event) for event in CLAUDE_EVENTS} == {
        event: [entry] for event, entry in hook_commands.entries("claude").items()
    }
    for event in CLAUDE_EVENTS:  # each in a group of its own with no matcher: every source, every tool
        assert {"hooks": ours(after, event)} in after["hooks"][event]
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


def test_a_settings_file_keeps_its_permissions_and_a_new_one_is_readable(
    cli: CliRunner, home: Path, path_without_hosts: Path
) -> None:
    umask = os.umask(0o077)
    try:
        assert cli("install", "--claude").code == 0
        assert settings(home).stat().st_mode & 0o7777 == 0o644  # whatever the umask, as hosts expect to read it
        assert cli("uninstall", "--claude").code == 0
        settings(home).write_text('{"model": "opus"}\n')
        settings(home).chmod(0o600)
        assert cli("install", "--claude").code == 0
        assert settings(home).stat().st_mode & 0o7777 == 0o600  # the user's choice, kept
    finally:
        os.umask(umask)
    assert sorted(p.name for p in settings(home).parent.iterdir()) == ["settings.json", "settings.json.gitmail-backup"]


def test_a_settings_file_the_disk_refuses_is_one_error_line_and_left_as_it_was(
    cli: CliRunner, home: Path, path_without_hosts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings(home).parent.mkdir()
    settings(home).write_text('{"model": "opus"}\n')
    replace = os.replace

    def full_disk(source: str, target: str) -> None:
        if Path(target) == settings(home):
            raise OSError(errno.ENOSPC, "No space left on device")
        replace(source, target)

    monkeypatch.setattr(os, "replace", full_disk)
    result = cli("install", "--claude")
    assert (result.code, result.err) == (1, f"gitmail: error: cannot write {settings(home)}: the disk is full\n")
    assert settings(home).read_text() == '{"model": "opus"}\n'
    assert sorted(p.name for p in settings(home).parent.iterdir()) == ["settings.json", "settings.json.gitmail-backup"]


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
        {"hooks": [start_entry()]},  # its old matcher left out fork
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
        {"hooks": [start_entry()]},
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
+                        "command": {json.dumps(hook_command(watch=True), ensure_ascii=False)},
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
        label = lambda event: "".join("_" + c.lower() if c.isupper() else c for c in event).lstrip("_")
        hooks = [
            {"key": f"{hooks_json}:{label(event)}:{g}:{h}", "command": entry["command"], "currentHash": "sha256:from-codex",
             "trustStatus": "trusted" if trusted else "untrusted", "sourcePath": hooks_json}
            for event, groups in json.load(open(hooks_json))["hooks"].items()
            for g, group in enumerate(groups)
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
    assert config.read_text() == CODEX_CONFIG + "codex_hooks = true # added by gitmail\n\n" + sandbox_block(home)
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
    installed += "\n" + sandbox_block(home)
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
def test_the_flag_is_left_out_when_not_needed(
    cli: CliRunner, home: Path, path_without_hosts: Path, version: str | None, config: str, note: str | None
) -> None:
    if version:
        fake_codex(path_without_hosts, version)
    path = codex_dir(home) / "config.toml"
    path.parent.mkdir()
    path.write_text(config)
    result = cli("install", "--codex", "--no-trust")
    assert result.code == 0 and path.read_text() == config + "\n" + sandbox_block(home)
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


# -- Codex's sandbox ------------------------------------------------------------------------------------------------

MAILBOX_ROOT = '"{H}/.gitmail"'  # as install writes the mailbox's folder, {H} being the home directory


@pytest.mark.parametrize(
    ("original", "installed"),
    [
        ("", "[sandbox_workspace_write] # added by gitmail\nwritable_roots = [{R}] # added by gitmail\n"),
        (
            "[sandbox_workspace_write]\nnetwork_access = true\n\n[tui]\nx = 1\n",
            "[sandbox_workspace_write]\nwritable_roots = [{R}] # added by gitmail\nnetwork_access = true\n\n[tui]\nx = 1\n",
        ),
        (
            '[sandbox_workspace_write] # mine\nwritable_roots = ["/data"]\n',
            '[sandbox_workspace_write] # mine\nwritable_roots = [\n    {R}, # added by gitmail\n"/data"]\n',
        ),
        (
            '[sandbox_workspace_write]\nwritable_roots = [\n  "/a",\n  "/b",\n]\n',
            '[sandbox_workspace_write]\nwritable_roots = [\n    {R}, # added by gitmail\n\n  "/a",\n  "/b",\n]\n',
        ),
        (
            "[sandbox_workspace_write]\nwritable_roots = []\n",
            "[sandbox_workspace_write]\nwritable_roots = [\n    {R}, # added by gitmail\n]\n",
        ),
        (
            'sandbox_workspace_write.network_access = true\nmodel = "x"\n',
            'sandbox_workspace_write.network_access = true\nsandbox_workspace_write.writable_roots = [{R}] # added by gitmail\nmodel = "x"\n',
        ),
        (
            'sandbox_workspace_write.writable_roots = ["/a"]\n[tui]\n',
            'sandbox_workspace_write.writable_roots = [\n    {R}, # added by gitmail\n"/a"]\n[tui]\n',
        ),
    ],
)
def test_the_mailbox_is_made_writable_from_codexs_sandbox_in_any_shape_of_table(
    cli: CliRunner, home: Path, path_without_hosts: Path, original: str, installed: str
) -> None:
    config = codex_dir(home) / "config.toml"
    config.parent.mkdir()
    config.write_text(original)
    result = cli("install", "--codex", "--no-trust")
    assert result.code == 0
    assert config.read_text() == installed.replace("{R}", MAILBOX_ROOT).replace("{H}", str(home))
    assert str(home / ".gitmail") in tomllib.loads(config.read_text())["sandbox_workspace_write"]["writable_roots"]
    assert f"note: sessions may now write {home / '.gitmail'} from Codex's workspace-write sandbox" in result.err
    assert (home / ".gitmail").is_dir() and (home / ".gitmail").stat().st_mode & 0o777 == 0o700  # Codex needs it
    assert cli("install", "--codex", "--no-trust").code == 0
    assert config.read_text() == installed.replace("{R}", MAILBOX_ROOT).replace("{H}", str(home))  # no byte changed
    cli("uninstall", "--codex")
    assert config.read_text() == original


@pytest.mark.parametrize(
    ("original", "note"),
    [
        ('default_permissions = "dev"\n', "Codex uses permission profiles here (default_permissions): let yours write"),
        ("sandbox_workspace_write = { network_access = true }\n", "to [sandbox_workspace_write] writable_roots in"),
        ('[sandbox_workspace_write]\nwritable_roots = ["{H}/.gitmail"]\n', None),  # the user's own entry: kept
    ],
)
def test_a_sandbox_setting_gitmail_cannot_extend_safely_is_left_to_the_user(
    cli: CliRunner, home: Path, path_without_hosts: Path, original: str, note: str | None
) -> None:
    config = codex_dir(home) / "config.toml"
    config.parent.mkdir()
    config.write_text(original.replace("{H}", str(home)))
    result = cli("install", "--codex", "--no-trust")
    assert result.code == 0 and config.read_text() == original.replace("{H}", str(home))
    assert (note in result.err) if note else "sessions may now write" not in result.err
    cli("uninstall", "--codex")
    assert config.read_text() == original.replace("{H}", str(home))


def test_a_mailbox_of_its_own_is_created_and_made_writable(
    cli: CliRunner, home: Path, path_without_hosts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere" / "mail.git"
    monkeypatch.setenv("GITMAIL_DIR", str(elsewhere))
    assert cli("install", "--codex", "--no-trust").code == 0
    roots = tomllib.loads((codex_dir(home) / "config.toml").read_text())["sandbox_workspace_write"]["writable_roots"]
    assert roots == [str(elsewhere)]  # the mailbox, not the folder it is in (which may hold anything)
    assert Store(elsewhere).exists()  # an empty folder there would be no mailbox; Codex needs it to exist
    assert not (home / ".gitmail").exists()


# -- Codex's trust --------------------------------------------------------------------------------------------------


def codex_entries(python: str | None = None) -> list[tuple[str, dict[str, object]]]:
    return list(hook_commands.entries("codex", python=python).items())


def test_without_a_codex_to_ask_the_hooks_are_trusted_with_the_hash_codex_computes(
    cli: CliRunner, home: Path, path_without_hosts: Path
) -> None:
    config, hooks = codex_dir(home) / "config.toml", codex_dir(home) / "hooks.json"
    config.parent.mkdir()
    config.write_text(CODEX_CONFIG)
    result = cli("install", "--codex")
    assert result.code == 0
    trusted = "".join(
        f'\n[hooks.state."{hooks}:{label}:0:0"]\ntrusted_hash = "{codex_trust.entry_hash(entry, None, event)}"\n'
        for label, (event, entry) in zip(CODEX_LABELS, codex_entries(), strict=True)
    )
    assert config.read_text() == CODEX_CONFIG + "\n" + sandbox_block(home) + trusted
    assert f"{config}: trusted gitmail's hooks for Codex with the hash Codex computes (no codex on PATH)" in result.err
    assert "Codex skips an untrusted hook without a word, in `codex exec` too" in result.err
    assert "--no-trust" in result.err
    again = cli("install", "--codex")
    assert config.read_text().count("trusted_hash") == 6 and f"{config}: Codex already trusts" in again.err
    cli("uninstall", "--codex")
    assert config.read_text() == CODEX_CONFIG and not hooks.exists()


def test_the_hash_is_the_one_codex_lists() -> None:
    # What Codex 0.171.0's app-server listed (hooks/list "currentHash") for entries with only a command, and for a
    # PostToolUse entry with a timeout.
    entry = {"type": "command", "command": "/tmp/explore/c1/hook.sh"}
    assert (
        codex_trust.entry_hash(entry, None, "SessionStart")
        == "sha256:f41f821ae7d32ee6d86c54bdb5e224ecadab37f895585898065f0b2e3db13c0e"
    )
    entry = {"type": "command", "command": "/tmp/pytest-of-root/pytest-179/test_codex_keys0/codex.sh PostToolUse"}
    assert (
        codex_trust.entry_hash({**entry, "timeout": 10}, None, "PostToolUse")
        == "sha256:aae66796ebf2ad936dbf53664726577b221bd1f22c73e3d0ac412eb3de5dd1e7"
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
    assert "trusted gitmail's hooks for Codex through Codex's app-server, as its /hooks review does" in result.err
    keys = {f"{hooks}:{label}:0:0": {"trusted_hash": "sha256:from-codex"} for label in CODEX_LABELS}
    edit = {"keyPath": "hooks.state", "value": keys}
    assert json.loads(log.read_text()) == {"edits": [{**edit, "mergeStrategy": "upsert"}], "reloadUserConfig": True}
    assert "hooks.state" not in (codex_dir(home) / "config.toml").read_text()  # Codex wrote trust (a fake here)
    again = cli("install", "--codex")
    assert "Codex already trusts gitmail's hooks" in again.err and len(log.read_text().splitlines()) == 1


def codex_files(home: Path, groups: dict[str, Sequence[object]], state: str) -> tuple[Path, Path]:
    hooks, config = codex_dir(home) / "hooks.json", codex_dir(home) / "config.toml"
    hooks.parent.mkdir(exist_ok=True)
    hooks.write_text(json.dumps({"hooks": groups}))
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
trusted_hash = "sha256:gitmail-stop"

[hooks.state."{H}:stop:1:0"]
trusted_hash = "sha256:stop"

[hooks.state."{H}:post_tool_use:0:0"]
trusted_hash = "sha256:post"

[hooks.state."/elsewhere/hooks.json:session_start:2:0"]
trusted_hash = "sha256:another-file"
"""


def test_uninstall_carries_the_users_trust_with_their_hooks_and_drops_its_own(
    cli: CliRunner, home: Path, path_without_hosts: Path
) -> None:
    entries = dict(codex_entries())
    start = [{"hooks": [command("a")]}, {"hooks": [entries["SessionStart"]]}, {"hooks": [command("b0"), command("b1")]}]
    stop = [{"hooks": [entries["Stop"]]}, {"hooks": [command("notify")]}]
    post = [{"matcher": "Bash", "hooks": [command("lint")]}, {"hooks": [entries["PostToolUse"]]}]
    hooks, config = codex_files(home, {"SessionStart": start, "Stop": stop, "PostToolUse": post}, STATE)
    assert cli("uninstall", "--codex").code == 0
    assert json.loads(hooks.read_text())["hooks"] == {
        "SessionStart": [start[0], start[2]],
        "Stop": [stop[1]],
        "PostToolUse": [post[0]],
    }
    assert trust_state(config) == {
        f"{hooks}:session_start:0:0": {"trusted_hash": "sha256:a"},
        f"{hooks}:session_start:1:0": {"trusted_hash": "sha256:b0", "enabled": False},
        f"{hooks}:session_start:1:1": {"trusted_hash": "sha256:b1"},
        f"{hooks}:stop:0:0": {"trusted_hash": "sha256:stop"},  # moved up with its hook, gitmail's own gone
        f"{hooks}:post_tool_use:0:0": {"trusted_hash": "sha256:post"},  # before gitmail's: where it was
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
    hooks, config = codex_files(home, {"SessionStart": groups}, state)
    assert cli("install", "--codex").code == 0
    entries = dict(codex_entries())
    assert json.loads(hooks.read_text())["hooks"]["SessionStart"] == [
        {"hooks": [command("a")]},
        {"hooks": [command("b")]},
        {"hooks": [entries["SessionStart"]]},
    ]
    expected = {
        f"{hooks}:session_start:0:0": {"trusted_hash": "sha256:a"},
        f"{hooks}:session_start:1:0": {"trusted_hash": "sha256:b"},
        f"{hooks}:session_start:2:0": {
            "trusted_hash": codex_trust.entry_hash(entries["SessionStart"], None, "SessionStart")
        },
    }
    for label, (event, entry) in list(zip(CODEX_LABELS, codex_entries(), strict=True))[1:]:
        expected[f"{hooks}:{label}:0:0"] = {"trusted_hash": codex_trust.entry_hash(entry, None, event)}
    assert trust_state(config) == expected


def test_no_trust_says_plainly_what_codex_will_do(cli: CliRunner, home: Path, path_without_hosts: Path) -> None:
    result = cli("install", "--codex", "--no-trust")
    assert result.code == 0 and "hooks.state" not in (codex_dir(home) / "config.toml").read_text()
    assert (
        "note: Codex skips an untrusted hook without a word, in `codex exec` too: open /hooks in Codex and trust "
        f"gitmail's hooks (/hooks lists them under {codex_dir(home) / 'hooks.json'})." in result.err
    )
    dry = cli("install", "--codex", "--dry-run")
    assert "note: would trust gitmail's hooks for Codex, as its /hooks review does (--no-trust" in dry.err


def test_status_lists_the_moments_their_command_and_trust(home: Path, path_without_hosts: Path) -> None:
    assert [(s.host, s.installed, s.runs, s.trust, s.moments) for s in status(home)] == [
        ("claude", False, None, None, ()),
        ("codex", False, None, None, ()),
    ]
    apply(host_hooks.plan(home=home, hosts=host_hooks.HOSTS, install=True))
    found = status(home)
    assert [(s.host, s.installed, s.runs, s.trust, s.moments) for s in found] == [
        ("claude", True, True, None, ("start", "tool", "prompt", "stop", "wake", "end", "edit")),
        ("codex", True, True, "trusted", ("start", "tool", "prompt", "stop", "end", "edit")),
    ]
    assert found[0].command == hook_command(watch=True) and "runs (" in found[0].detail
    assert f"sessions may write {home / '.gitmail'} from Codex's sandbox" in found[1].detail
    hooks = codex_dir(home) / "hooks.json"
    hooks.write_text(hooks.read_text().replace('"timeout": 10', '"timeout": 20', 1))
    assert status(home, ["codex"])[0].trust == "modified"
    (codex_dir(home) / "config.toml").unlink()
    codex = status(home, ["codex"])[0]
    assert codex.trust == "untrusted" and "does not let sessions write" in codex.detail
    fewer = host_hooks.plan(home=home, hosts=["claude"], install=True, moments=("start", "stop"))
    apply(fewer)
    assert status(home, ["claude"])[0].moments == ("start", "stop")
    gone = host_hooks.plan(home=home, hosts=["claude"], install=True, python="/gone/venv/bin/python")
    apply(gone)
    claude = status(home, ["claude"])[0]
    assert claude.runs is False and "/gone/venv/bin/python no longer runs gitmail" in claude.detail


# -- the moments ----------------------------------------------------------------------------------------------------


def test_every_moment_gets_its_command_and_codex_has_no_wake(home: Path) -> None:
    script = str(hook_commands.hook_script())
    assert os.path.exists(script)  # shipped with the package
    python = sys.executable
    claude = hook_commands.entries("claude")
    assert claude == {
        "SessionStart": {
            "type": "command",
            "command": f"sh {script} session-start claude {python} --watch || gitmail hook session-start "
            "--host claude --watch || true # gitmail:session-start",
            "timeout": 10,
        },
        "PostToolBatch": {
            "type": "command",
            "command": f"sh {script} tool claude {python} || true # gitmail:tool",
            "timeout": 10,
        },
        "UserPromptSubmit": {
            "type": "command",
            "command": f"sh {script} prompt claude {python} || true # gitmail:prompt",
            "timeout": 10,
        },
        "Stop": {
            "type": "command",
            "command": f"sh {script} stop claude {python} || true # gitmail:stop",
            "timeout": 10,
        },
        "FileChanged": {  # exit 2 must reach Claude Code: no `|| true`
            "type": "command",
            "command": f"sh {script} wake claude {python} # gitmail:wake",
            "timeout": 10,
            "asyncRewake": True,
        },
        "SessionEnd": {
            "type": "command",
            "command": f"{python} -P -m gitmail hook session-end --host claude || gitmail hook session-end --host claude "
            "|| true # gitmail:session-end",
            "timeout": 3,
        },
        "PreToolUse": {  # every tool: hook.sh reads the lease index, and Python decides only where one may apply
            "type": "command",
            "command": f"sh {script} edit claude {python} || true # gitmail:edit",
            "timeout": 10,
        },
    }
    codex = hook_commands.entries("codex", python="/opt/my venv/bin/python")
    assert list(codex) == CODEX_EVENTS
    assert codex["PostToolUse"]["command"] == f"sh {script} tool codex '/opt/my venv/bin/python' || true # gitmail:tool"
    assert "--watch" not in str(codex["SessionStart"]["command"])  # nothing to wake
    assert "--watch" not in str(hook_commands.entries("claude", ("start", "tool"))["SessionStart"]["command"])


def test_moments_choose_what_is_installed_and_a_new_choice_replaces_the_old(
    cli: CliRunner, home: Path, path_without_hosts: Path
) -> None:
    settings(home).parent.mkdir()
    settings(home).write_text(CLAUDE_SETTINGS)
    assert cli("install", "--claude", "--moments", "start,prompt").code == 0
    document = json.loads(settings(home).read_text())
    assert [e for e in CLAUDE_EVENTS if ours(document, e)] == ["SessionStart", "UserPromptSubmit"]
    assert "--watch" not in str(ours(document)[0]["command"])
    assert cli("install", "--claude").code == 0
    document = json.loads(settings(home).read_text())
    assert [e for e in CLAUDE_EVENTS if ours(document, e)] == CLAUDE_EVENTS
    assert cli("install", "--claude", "--moments", "stop, tool").code == 0
    document = json.loads(settings(home).read_text())
    assert [e for e in CLAUDE_EVENTS if ours(document, e)] == ["PostToolBatch", "Stop"]
    assert document["hooks"]["Stop"][0] == json.loads(CLAUDE_SETTINGS)["hooks"]["Stop"][0]  # the user's, untouched
    assert cli("uninstall", "--claude").code == 0
    assert settings(home).read_text() == CLAUDE_SETTINGS


@pytest.mark.parametrize(
    ("moments", "error"),
    [
        (
            "start,naps",
            "--moments takes a comma-separated list of start, tool, prompt, stop, wake, end, edit (got 'start,naps')",
        ),
        ("", "--moments takes a comma-separated list of"),
        ("tool,wake", "--moments: wake needs start (a session is woken through the files its start watches)"),
    ],
)
def test_moments_that_make_no_sense_are_refused(
    cli: CliRunner, home: Path, path_without_hosts: Path, moments: str, error: str
) -> None:
    result = cli("install", "--claude", "--moments", moments)
    assert result.code == 2 and result.err.startswith(f"gitmail: error: {error}") and result.err.count("\n") == 1
    assert not settings(home).exists()


def test_an_older_install_with_session_start_only_is_brought_up_to_every_moment(
    cli: CliRunner, home: Path, path_without_hosts: Path
) -> None:
    old = command(f"/old/venv/bin/python -m gitmail hook session-start || gitmail hook session-start || true {MARK}")
    mine = {"hooks": [command("echo mine")]}
    state = '[hooks.state."{H}:session_start:0:0"]\ntrusted_hash = "sha256:old"\n\n'
    state += '[hooks.state."{H}:session_start:1:0"]\ntrusted_hash = "sha256:mine"\n'
    hooks, config = codex_files(home, {"SessionStart": [{"hooks": [{**old, "timeout": 10}]}, mine]}, state)
    assert cli("install", "--codex").code == 0
    document = json.loads(hooks.read_text())
    assert document["hooks"]["SessionStart"] == [{"hooks": [start_entry("codex")]}, mine]  # updated where it stood
    assert [e for e in CODEX_EVENTS if ours(document, e)] == CODEX_EVENTS
    state_now = trust_state(config)
    assert state_now[f"{hooks}:session_start:1:0"] == {"trusted_hash": "sha256:mine"}  # the user's did not move
    assert state_now[f"{hooks}:session_start:0:0"] == {
        "trusted_hash": codex_trust.entry_hash(start_entry("codex"), None, "SessionStart")
    }
    assert len(state_now) == 7


def test_the_plugin_hooks_match_what_install_writes() -> None:
    plugin = json.loads((REPO / "hooks" / "hooks.json").read_text())["hooks"]
    assert list(plugin) == list(hook_commands.entries("claude"))  # the same moments, through the same events
    for event, entry in hook_commands.entries("claude").items():
        [group] = plugin[event]
        assert "matcher" not in group and group["hooks"][0].get("asyncRewake") == entry.get("asyncRewake")


def run_installed_hook(
    command: str, cwd: Path, event: str = "SessionStart", session: str = "s", **extra: object
) -> subprocess.CompletedProcess[bytes]:
    """What a host does with an installed entry: run it through a shell, in the session's directory, with the
    JSON payload on stdin (session_id first, as both hosts send it)."""
    payload = json.dumps({"session_id": session, "cwd": str(cwd), "hook_event_name": event, **extra})
    return subprocess.run(["sh", "-c", command], input=payload.encode(), capture_output=True, cwd=cwd)


def test_the_installed_command_delivers_mail_from_any_directory(
    cli: CliRunner, home: Path, repos: RepoFactory, path_without_hosts: Path
) -> None:
    web = repos("web")
    mailbox.send(Store(), sender="api", to="web", subject="via the installed hook")
    cli("install", "--claude")
    command = ours(json.loads(settings(home).read_text()))[0]["command"]
    assert isinstance(command, str)
    done = subprocess.run(
        ["sh", "-c", command],
        input=json.dumps({"session_id": "s", "cwd": str(web), "hook_event_name": "SessionStart"}).encode(),
        capture_output=True,
        cwd="/",
    )
    assert done.returncode == 0
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "via the installed hook" in context


def test_the_installed_moments_answer_as_each_host_expects(
    home: Path, repos: RepoFactory, path_without_hosts: Path
) -> None:
    web = repos("web")
    claude = {event: str(entry["command"]) for event, entry in hook_commands.entries("claude").items()}
    codex = {event: str(entry["command"]) for event, entry in hook_commands.entries("codex").items()}
    start = run_installed_hook(claude["SessionStart"], web)
    assert start.returncode == 0 and start.stdout == b""  # no mailbox yet: nothing to say, nothing to watch
    mailbox.send(Store(), sender="api", to="web", subject="first")
    start = json.loads(run_installed_hook(claude["SessionStart"], web).stdout)["hookSpecificOutput"]
    assert "first" in start["additionalContext"] and len(start["watchPaths"]) == 2
    quiet = run_installed_hook(claude["PostToolBatch"], web, "PostToolBatch")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, b"", b"")  # nothing new since the start
    mailbox.send(Store(), sender="api", to="web", subject="second")
    tool = json.loads(run_installed_hook(claude["PostToolBatch"], web, "PostToolBatch").stdout)["hookSpecificOutput"]
    assert tool["hookEventName"] == "PostToolBatch" and "second" in tool["additionalContext"]
    assert "first" not in tool["additionalContext"]  # the session was told of it at its start
    mailbox.send(Store(), sender="api", to="web", subject="third")
    busy = run_installed_hook(claude["FileChanged"], web, "FileChanged", file_path="x", event_name="change")
    assert (busy.returncode, busy.stderr) == (0, b"")  # mid-turn: the next tool call or the turn's end brings it
    stop = json.loads(run_installed_hook(claude["Stop"], web, "Stop", stop_hook_active=False).stdout)
    assert "third" in stop["hookSpecificOutput"]["additionalContext"]  # the turn goes on once, with the mail
    assert run_installed_hook(claude["Stop"], web, "Stop", stop_hook_active=True).stdout == b""  # and ends
    mailbox.send(Store(), sender="api", to="web", subject="fourth")
    wake = run_installed_hook(claude["FileChanged"], web, "FileChanged", file_path="x", event_name="change")
    assert wake.returncode == 2 and b"1 new message" in wake.stderr and b"fourth" not in wake.stderr  # notice only
    mailbox.send(Store(), sender="api", to="web", subject="for codex")
    run_installed_hook(codex["SessionStart"], web, session="c")
    mailbox.send(Store(), sender="api", to="web", subject="while codex works")
    stop = json.loads(run_installed_hook(codex["Stop"], web, "Stop", session="c", stop_hook_active=False).stdout)
    assert stop["decision"] == "block" and "while codex works" not in stop["reason"]  # a user turn: notice only
    assert run_installed_hook(codex["PostToolUse"], web, "PostToolUse", session="c").stdout == b""  # told already


def test_installed_moments_never_fail_a_session_when_gitmail_is_gone(
    home: Path, repos: RepoFactory, path_without_hosts: Path
) -> None:
    web = repos("web")
    mailbox.send(Store(), sender="api", to="web", subject="pending")
    for event, entry in hook_commands.entries("claude", python="/gone/venv/bin/python").items():
        done = run_installed_hook(str(entry["command"]), web, session=event)
        assert done.returncode == (127 if event == "FileChanged" else 0), (event, done)  # 127: no wake, no error


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


def test_the_plugin_manifest_hooks_and_skill_are_well_formed() -> None:
    manifest = json.loads((REPO / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "gitmail" and manifest["version"] and manifest["description"]
    market = json.loads((REPO / ".claude-plugin" / "marketplace.json").read_text())
    assert market["plugins"][0]["name"] == "gitmail" and market["plugins"][0]["source"] == "./"
    hooks = json.loads((REPO / "hooks" / "hooks.json").read_text())["hooks"]
    moments = {"SessionStart": "session-start", "PostToolBatch": "tool", "UserPromptSubmit": "prompt"}
    moments |= {"Stop": "stop", "FileChanged": "wake", "SessionEnd": "session-end", "PreToolUse": "edit"}
    assert set(hooks) == set(moments)
    for event, moment in moments.items():
        assert "matcher" not in hooks[event][0]  # every way a session starts (fork included), every tool
        assert hooks[event][0]["hooks"][0]["command"] == f'"${{CLAUDE_PLUGIN_ROOT}}/hooks/run" {moment}'
    assert hooks["FileChanged"][0]["hooks"][0]["asyncRewake"] is True
    for script in ("run", "gitmail"):
        assert os.access(REPO / "hooks" / script, os.X_OK)
    skill = (REPO / "skills" / "gitmail" / "SKILL.md").read_text()
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
    env = {"HOME": str(home), "PATH": str(bin_dir), "CLAUDE_PLUGIN_ROOT": str(REPO)}
    env |= {"GITMAIL_PLUGIN_VENV": str(tmp_path / "no-venv-yet"), "GITMAIL_PLUGIN_SETUP": "off"}
    done = subprocess.run(
        [str(REPO / "hooks" / "run"), "session-start"], input=payload.encode(), capture_output=True, env=env
    )
    assert done.returncode == 0, done.stderr
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "through the plugin" in context
    assert f"Done:  '{REPO}/hooks/gitmail' done " in context  # the command that runs for a plugin-only user


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
    assert "gitmail: note: could not trust gitmail's hooks for Codex (" in result.err
    assert "Codex skips an untrusted hook without a word, in `codex exec` too: open /hooks in Codex" in result.err


@pytest.mark.slow
def test_a_plugin_only_user_can_answer_and_is_handed_broadcasts_once_the_plugin_has_set_itself_up(
    home: Path, repos: RepoFactory, tmp_path: Path
) -> None:
    """No `pip install gitmail`: only Python and git. The plugin delivers mail with what is there (reading with git,
    writing git's objects itself: the broadcast is handed over), and the command the mail names makes the plugin's
    own environment (from PyPI, once) and answers through it."""
    web = repos("web")
    sent = mailbox.send(Store(), sender="api", to="web", subject="directed")
    cast = mailbox.broadcast(Store(), sender="api", subject="for everyone")
    bare = tmp_path / "bare-python"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)  # a Python with no pygit2
    bin_dir = tmp_path / "only-python"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(bare / "bin" / "python3")
    for tool in ("git", "sh", "dirname", "cat", "dd", "mkdir", "rmdir", "sleep"):
        found = subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip()
        (bin_dir / tool).symlink_to(found)
    venv = tmp_path / "plugin-venv"
    env = {"HOME": str(home), "PATH": str(bin_dir), "CLAUDE_PLUGIN_ROOT": str(REPO), "GITMAIL_PLUGIN_VENV": str(venv)}
    env |= {"GITMAIL_PLUGIN_SETUP": "off", "PIP_CACHE_DIR": str(REAL_HOME / ".cache" / "pip")}
    env |= {k: v for k, v in os.environ.items() if k.startswith(("PIP_", "HTTP", "http"))}

    def start(session: str) -> str:
        payload = json.dumps({"session_id": session, "cwd": str(web), "hook_event_name": "SessionStart"})
        done = subprocess.run(
            [str(REPO / "hooks" / "run"), "session-start"], input=payload.encode(), capture_output=True, env=env
        )
        assert done.returncode == 0, done.stderr
        return str(json.loads(done.stdout)["hookSpecificOutput"].get("additionalContext", ""))  # "": nothing new

    first = start("one")
    assert "directed" in first and "for everyone" in first  # read and handed over with what is there
    assert "could not be handed over" not in first
    done_line = next(line for line in first.splitlines() if line.startswith("Done:  "))
    command = done_line.removeprefix("Done:  ")
    assert command == f"'{REPO}/hooks/gitmail' done {sent.message.id}"
    archived = subprocess.run(["sh", "-c", command], cwd=web, capture_output=True, text=True, env=env, timeout=600)
    assert archived.returncode == 0, archived.stderr  # the plugin made its environment, then archived
    assert f"archived {sent.message.id}" in archived.stderr
    second = start("two")
    assert cast.message.id not in second and sent.message.id not in second  # handed over once; archived
    assert cast.message.id not in start("three")
