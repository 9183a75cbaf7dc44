"""Sessions as addresses, proven with the real hosts: two Claude Code sessions of one repository (one in a linked
worktree) and a Codex session of it, open side by side. Mail to one session's address reaches that session only, at
its next tool call; mail one session sends to its repository reaches the others and never itself; `gitmail
sessions` lists all three where they work."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hosts.harness import ClaudeCode, Codex, Host, Turn, World
from tests.hosts.stub import Request, Shell

pytestmark = pytest.mark.hosts

GITMAIL = f"{sys.executable} -m gitmail"  # as a session runs it: the virtualenv is not on the hosts' PATH


def test_session_addresses_reach_one_session_and_a_sender_never_gets_its_own_mail(world: World) -> None:
    api = world.repo("api")
    feature = linked_worktree(world, api, "api-feature")
    web = world.repo("web")
    claude, codex = ClaudeCode(world), Codex(world)
    claude.install()
    codex.install()
    with claude.session(api) as one, claude.session(feature) as other, codex.session(api) as third:
        world.stub.script(Shell(f"{GITMAIL} session --name one", then="Named."))
        named = one.prompt("Call yourself one.")
        assert "one" in named.requests[1].tool_result, named.requests[1].tool_result
        other.prompt("hello")
        third.prompt("hello")

        listed = json.loads(world.gitmail("sessions", "--json", cwd=api).stdout)
        # Each with its host process found, though two started before the mailbox existed (nothing recorded them).
        where = {s["session"]: (s["host"], s["handle"], s["worktree"], s["state"], s["checked"]) for s in listed}
        assert where == {
            one.session_id: ("claude", "one", None, "idle", True),
            other.session_id: ("claude", "api-feature", "api-feature", "idle", True),
            third.session_id: ("codex", third.session_id[:8], None, "idle", True),
        }, listed
        assert {s["address"] for s in listed} >= {"api#one", "api#api-feature"}

        # To one session: sent while that session's turn runs, it arrives at its next tool call…
        def to_one(request: Request) -> str:
            world.gitmail("send", "--to", "api#one", "--subject", "For one only", "--message", "Just you.", cwd=web)
            return "echo working"

        world.stub.script(Shell(to_one, then="Read it."))
        turn = one.prompt("Work on.")
        assert "For one only" not in "\n".join(claude.with_prompt(turn.first))
        [context] = claude.after_tool(turn.requests[1])
        assert "For one only" in context and "api#one" in context
        # …and never to the other two, whatever they do next.
        for session in (other, third):
            world.stub.script(Shell("echo working", then="Fine."))
            assert "For one only" not in everything(session.prompt("Work on."))

        # From one session to its repo: the others get it, the sender does not.
        send = f"{GITMAIL} send --to api --subject 'Schema v2 is in' --message 'Rebase onto it.'"
        world.stub.script(Shell(send, then="Told them."))
        turn = one.prompt("Tell the others.")
        assert "Schema v2 is in" not in handed(claude, turn)
        assert len(turn.requests) == 2, "the turn's end was not continued: the sender had nothing new"
        for session, host in ((other, claude), (third, codex)):
            world.stub.script(Shell("echo working", then="Rebasing."))
            turn = session.prompt("Work on.")
            assert "Schema v2 is in" in everything(turn), f"{host.name} did not get its repo's mail"
        world.stub.script(Shell("echo working", then="Fine."))
        assert "Schema v2 is in" not in handed(claude, one.prompt("Anything new?"))
    assert world.gitmail_processes() == []


def linked_worktree(world: World, repo: Path, name: str) -> Path:
    env = world.env(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "start"], check=True, env=env)
    path = repo.parent / name
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", "-b", name, str(path)], check=True, env=env)
    return path


def handed(host: Host, turn: Turn) -> str:
    """What gitmail's hooks handed a session during a turn: with its prompt, beside each tool result, and as the
    turn's continuation."""
    found = host.with_prompt(turn.first)
    for request in turn.requests[1:]:
        found += host.after_tool(request) if request.after_tool_call else []
        found.append(host.continuation(request) or "")
    return "\n".join(found)


def everything(turn: Turn) -> str:
    """The text of a turn's model requests: whatever reached the model at all."""
    return "\n".join(r.text() for r in turn.requests)
