"""Leases where the edit happens, proven with the real hosts: a session leases a file through its own shell, and
another session's write of it through the host's own editing tools (Claude Code's Write and Edit, Codex's
apply_patch) or its shell (`echo x > file`) is denied before it runs. The file is unchanged, and the tool result
the model receives carries gitmail's reason; the holder's own write goes through."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gitmail import render
from gitmail.mailbox import leasing
from gitmail.store.repository import Store
from gitmail.values.names import RepoName
from tests.hosts.harness import ClaudeCode, Codex, World
from tests.hosts.stub import Call, Shell

pytestmark = pytest.mark.hosts

GITMAIL = f"{sys.executable} -m gitmail"  # as a session runs it: the virtualenv is not on the hosts' PATH
ORDERS = "def orders():\n    return []\n"


class EditingClaude(ClaudeCode):
    """Claude Code as a user who lets it edit files of the repository (`--permission-mode acceptEdits`)."""

    def args(self) -> list[str]:
        return [*super().args(), "--permission-mode", "acceptEdits"]


def repository(world: World) -> tuple[Path, Path]:
    api = world.repo("api")
    (api / "src").mkdir()
    orders = api / "src" / "orders.py"
    orders.write_text(ORDERS)
    env = world.env(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    subprocess.run(["git", "-C", str(api), "add", "."], check=True, env=env)
    subprocess.run(["git", "-C", str(api), "commit", "-q", "-m", "start"], check=True, env=env)
    return api, orders


def refusal(path: str) -> str:
    """What gitmail says of another session's write to `path`, from the lease as the mailbox holds it."""
    [lease] = [s.lease for s in leasing.standing(Store(), RepoName("api")) if s.held]
    return "gitmail: " + render.lease_refusal(path, lease)


def test_claude_code_write_and_edit_of_a_file_another_session_leased_are_denied(world: World) -> None:
    api, orders = repository(world)
    claude = EditingClaude(world)
    claude.install()
    with claude.session(api) as holder:
        world.stub.script(Shell(f"{GITMAIL} lease src/orders.py", then="Leased."))
        leased = holder.prompt("Lease the orders module.")
        assert 'leased "src/orders.py" (exclusive)' in leased.requests[1].tool_result, leased.requests[1].tool_result

        edit = {"file_path": str(orders), "old_string": "return []", "new_string": "return None"}
        world.stub.script(
            Call("Read", {"file_path": str(orders)}, then=Call("Write", {"file_path": str(orders), "content": "x\n"},
                 then=Call("Edit", edit, then="Stopped."))),
        )  # fmt: skip
        turn = claude.run(api, "Rewrite the orders module.")
        reason = refusal("src/orders.py")
        assert turn.requests[2].tool_result == f"PreToolUse:Write hook error: {reason}"
        assert turn.requests[3].tool_result == f"PreToolUse:Edit hook error: {reason}"
        assert orders.read_text() == ORDERS

        world.stub.script(
            Call("Read", {"file_path": str(orders)}, then=Call("Write", {"file_path": str(orders), "content": "mine\n"},
                 then="Written.")),
        )  # fmt: skip
        own = holder.prompt("Now rewrite it yourself.")
        assert "hook error" not in own.requests[2].tool_result, own.requests[2].tool_result
        assert orders.read_text() == "mine\n"
    assert world.gitmail_processes() == [], "a gitmail process outlived its session"


def test_codex_apply_patch_and_shell_write_of_a_file_another_session_leased_are_denied(world: World) -> None:
    api, orders = repository(world)
    config = world.codex_home / "config.toml"  # a model Codex offers apply_patch to (it offers the stub's none)
    config.write_text(config.read_text().replace('model = "stub-model"', 'model = "gpt-5.5"'))
    codex = Codex(world)
    codex.install()
    patch = "*** Begin Patch\n*** Update File: src/orders.py\n@@\n-    return []\n+    return {}\n*** End Patch\n"
    with codex.session(api) as holder:
        world.stub.script(Shell(f"{GITMAIL} lease src/orders.py", then="Leased."))
        leased = holder.prompt("Lease the orders module.")
        assert 'leased "src/orders.py" (exclusive)' in leased.requests[1].tool_result, leased.requests[1].tool_result

        assert world.stub.requests[-1].tool("apply_patch") is not None
        command = "echo x > src/orders.py"
        world.stub.script(Call("apply_patch", {"input": patch}, then=Shell(command, then="Stopped.")))
        turn = codex.run(api, "Change the orders module.")
        reason = refusal("src/orders.py")
        assert turn.requests[1].tool_result == f"Command blocked by PreToolUse hook: {reason}. Command: {patch}"
        assert turn.requests[2].tool_result == f"Command blocked by PreToolUse hook: {reason}. Command: {command}"
        assert orders.read_text() == ORDERS

        world.stub.script(Call("apply_patch", {"input": patch}, then="Patched."))
        own = holder.prompt("Now change it yourself.")
        assert "blocked" not in own.requests[1].tool_result, own.requests[1].tool_result
        assert orders.read_text() == ORDERS.replace("[]", "{}")


def test_a_claude_code_sessions_commit_of_a_file_another_session_leased_is_refused_by_the_guard(world: World) -> None:
    """What the hook before the edit cannot read (a script that writes the file) the commit guard stops: the
    committing session is the one Claude Code names to its shell commands."""
    api, orders = repository(world)
    world.gitmail("install", "--guard", cwd=api)
    claude = EditingClaude(world)
    claude.install()
    with claude.session(api) as holder:
        world.stub.script(Shell(f"{GITMAIL} lease src/orders.py", then="Leased."))
        holder.prompt("Lease the orders module.")

        script = "python3 -c \"open('src/orders.py', 'a').write('# theirs\\n')\""
        commit = "git -c user.name=t -c user.email=t@t commit -qam 'Change orders'; echo exit=$?"
        world.stub.script(Shell(f"{script}; {commit}", then="Stopped."))
        turn = claude.run(api, "Change the orders module and commit.")
        assert orders.read_text() == ORDERS + "# theirs\n"  # the script's write was not plainly readable: it ran
        said = turn.requests[1].tool_result
        assert refusal("src/orders.py") in said and "this commit is refused" in said and "exit=1" in said, said
        log = subprocess.run(["git", "-C", str(api), "log", "--format=%s"], capture_output=True, text=True)
        assert log.stdout == "start\n"
