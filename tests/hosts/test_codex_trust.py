"""Codex's hook trust, checked against the real Codex: what `gitmail install --codex` records is what Codex itself
records, a hook Codex does not trust does not run, and uninstalling gitmail leaves every other hook as trusted as
it was."""

from __future__ import annotations

import json
import os

import pytest

from gitmail import mailbox
from gitmail.install import codex_trust
from gitmail.install.status import status
from gitmail.store.repository import Store
from tests.hosts.harness import Codex, World

pytestmark = pytest.mark.hosts


def listed(world: World) -> list[codex_trust.Listed]:
    codex = str(world.binaries["codex"])
    return codex_trust.list_hooks(world.root, codex=codex, env=world.env())


def gitmails(world: World) -> list[codex_trust.Listed]:
    return [h for h in listed(world) if "# gitmail:" in h.command]


def test_install_trusts_every_hook_exactly_as_codex_records_trust(world: World) -> None:
    done = world.gitmail("install", "--codex")
    hooks, config = world.codex_home / "hooks.json", world.codex_home / "config.toml"
    assert f"{config}: trusted gitmail's hooks for Codex through Codex's app-server" in done.stderr
    ours = {h.key: h for h in gitmails(world)}
    document = json.loads(hooks.read_text())["hooks"]
    assert set(document) == {"SessionStart", "PostToolUse", "UserPromptSubmit", "Stop", "SessionEnd", "PreToolUse"}
    for event, groups in document.items():
        listed_here = ours[codex_trust.key(hooks, (event, 0, 0))]
        assert listed_here.trust_status == "trusted"
        computed = codex_trust.entry_hash(groups[0]["hooks"][0], None, event)
        assert computed == listed_here.current_hash, event  # the fallback computes what Codex computes
        assert f'[hooks.state."{listed_here.key}"]\ntrusted_hash = "{computed}"\n' in config.read_text()
    files = {path: path.read_bytes() for path in (hooks, config)}
    again = world.gitmail("install", "--codex")
    assert f"{config}: Codex already trusts gitmail's hooks" in again.stderr
    assert {path: path.read_bytes() for path in files} == files  # a second install changes no byte


def test_without_codex_to_ask_the_computed_trust_is_what_codex_accepts(world: World) -> None:
    path = os.pathsep.join(d for d in world.env()["PATH"].split(os.pathsep) if d != str(world.binaries["codex"].parent))
    done = world.gitmail("install", "--codex", PATH=path)
    assert "with the hash Codex computes (no codex on PATH)" in done.stderr
    assert [h.trust_status for h in gitmails(world)] == ["trusted"] * 6


def test_codex_skips_an_untrusted_hook_without_a_word(world: World) -> None:
    web = world.repo("web")
    mailbox.send(Store(), sender="api", to="web", subject="Pending", body="Hello.")
    codex = Codex(world)
    done = world.gitmail("install", "--codex", "--no-trust")
    assert "Codex skips an untrusted hook without a word, in `codex exec` too: open /hooks in Codex" in done.stderr
    assert [h.trust_status for h in gitmails(world)] == ["untrusted"] * 6
    turn = codex.run(web, "hello")
    assert codex.delivered(turn.first) == []  # skipped, and nothing said about it
    world.gitmail("install", "--codex")
    assert len(codex.delivered(codex.run(web, "hello").first)) == 1


def test_uninstall_leaves_every_other_hook_as_trusted_as_it_was(world: World) -> None:
    codex = Codex(world)
    codex.add_own_hook("first", context="first")
    world.gitmail("install", "--codex")
    codex.add_own_hook("second", context="second")
    codex.add_own_hook("third", context="third")
    assert [h.trust_status for h in listed(world)] == ["trusted"] * 9  # first, gitmail's six, second, third
    world.gitmail("uninstall", "--codex")
    after = {h.command.rsplit("/", 1)[-1]: h.trust_status for h in listed(world)}  # their positions all shifted
    assert after == {"first": "trusted", "second": "trusted", "third": "trusted"}
    state = (world.codex_home / "config.toml").read_text()
    assert state.count("trusted_hash") == 3  # gitmail's own entries are gone


def test_status_reports_what_codex_reports(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PATH", "CODEX_HOME"):
        monkeypatch.setenv(name, world.env()[name])
    world.gitmail("install", "--claude")
    world.gitmail("install", "--codex", "--no-trust")
    found = {s.host: s for s in status(world.home)}
    assert (found["claude"].installed, found["claude"].runs, found["claude"].trust) == (True, True, None)
    assert (found["codex"].installed, found["codex"].runs, found["codex"].trust) == (True, True, "untrusted")
    world.gitmail("install", "--codex")
    assert status(world.home, ["codex"])[0].trust == "trusted"
