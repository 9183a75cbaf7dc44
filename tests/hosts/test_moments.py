"""Delivery into running sessions, proven with the real hosts against the model stub: mail that arrives during a
tool call, between turns, at a turn's end, and (Claude Code) while a session waits for its user.

The stub acts at a precise moment of a turn by computing its answer: `sending(...)` sends mail from another
repository when the model "decides" on a tool call or a final answer, so the mail arrives while the turn runs.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest

from gitmail import mailbox
from gitmail.store.repository import Store
from tests.hosts.harness import ClaudeCode, ClaudeSession, Codex, Host, World
from tests.hosts.stub import Answer, Call, Request, Shell

pytestmark = pytest.mark.hosts

WAIT = "multi_agent_v1__wait_agent"  # Codex's tool for waiting on a subagent, in the namespace it declares it in
WAKE_WITHIN = 2.0  # seconds from a send to the woken session's first model request


def sending(subject: str, then: str) -> Callable[[Request], str]:
    """A stub answer (or shell command) that first sends `subject` to web from api."""

    def act(request: Request) -> str:
        mailbox.send(Store(), sender="api", to="web", subject=subject, body=f"About {subject.lower()}.")
        return then

    return act


def test_mail_sent_during_a_tool_call_reaches_the_very_next_request(world: World, host: Host) -> None:
    web = world.repo("web")
    world.stub.script(Shell(sending("Stop, the schema changed", then="echo working"), then="Switching."))
    turn = host.run(web, "Build the order list.")  # print mode, with the wake installed: it ends by itself
    assert host.delivered(turn.first) == []  # nothing was pending when the session started
    expected = host.expected(web, "tool")
    assert expected is not None and "Stop, the schema changed" in expected
    assert host.after_tool(turn.requests[1]) == [expected]  # beside the tool's result, as hook context
    assert len(turn.requests) == 2, "the turn ended as the model ended it: the session had the mail already"
    assert world.gitmail_processes() == []


def test_mail_sent_between_turns_arrives_with_the_next_prompt(world: World, host: Host) -> None:
    web = world.repo("web")
    with host.session(web, GITMAIL_WAKE="0") as session:  # not woken: it waits for its user's next prompt
        assert host.with_prompt(session.prompt("hello").first) == []
        mailbox.send(Store(), sender="api", to="web", subject="Answer to your question", body="Yes, v2.")
        expected = host.expected(web, "prompt")
        turn = session.prompt("Carry on.")
        assert expected is not None and host.with_prompt(turn.first) == [expected]
        assert host.with_prompt(session.prompt("And then?").first) == []  # once


def test_mail_sent_during_a_turn_continues_it_once_and_only_once(world: World, host: Host) -> None:
    web = world.repo("web")
    continued_with: list[str | None] = []

    def continuation(request: Request) -> str:
        continued_with.append(host.expected(web, "stop"))  # what a session knowing nothing would get now
        return sending("Also this", then="Noted; reading my mail.")(request)  # arrives while it goes on

    world.stub.script(Answer(sending("Before you stop", then="Finished.")), Answer(continuation))
    turn = host.run(web, "Finish up.")
    assert len(turn.requests) == 2, "continued once, and only once though more mail came meanwhile"
    [expected] = continued_with
    assert expected is not None and host.continuation(turn.requests[1]) == expected
    if host.name == "codex":  # a user turn: gitmail's own notice, never the message
        assert "Before you stop" not in expected and "gitmail inbox`" in expected
    else:  # labelled hook context: the message itself
        assert "Before you stop" in expected
    assert host.continuation(turn.requests[0]) is None


def test_a_subagents_tool_calls_get_nothing(world: World) -> None:
    web = world.repo("web")
    claude = ClaudeCode(world)
    claude.install()
    task = {"description": "Look around", "prompt": "List the files.", "run_in_background": False}  # waited for
    world.stub.script(
        Call("Agent", task, then="unused"),  # the main session starts a subagent…
        Shell(sending("For the main session", then="ls"), then="Nothing here."),  # …whose tool call sees mail come
        Answer("Done."),  # the main session, once the subagent has answered
    )
    turn = claude.run(web, "Delegate a look around.")
    subagent = [r for r in world.stub.requests if r.shell_tool and "List the files." in str(r.body["messages"][:1])]
    main = [r for r in turn.requests if r not in subagent]
    assert len(subagent) == 2 and len(main) == 2, (len(subagent), len(main))
    assert all("For the main session" not in r.text() for r in subagent)
    assert host_context(claude, main[1]) == claude.expected(web, "tool")  # at its own next tool call: the subagent's


def test_a_codex_subagents_tool_calls_get_nothing(world: World) -> None:
    web = world.repo("web")
    codex = Codex(world)
    codex.install()

    def subagents(request: Request) -> bool:  # the conversation whose user asked for the list: the subagent's
        users = [item for item in request.body.get("input") or [] if item.get("role") == "user"]
        return any("List the files." in str(item.get("content")) for item in users)

    def waiting(request: Request) -> dict[str, Any]:  # for the agent spawn_agent answered with
        return {"targets": [json.loads(request.tool_result)["agent_id"]], "timeout_ms": 60_000}

    world.stub.script(  # the main session starts a subagent and waits for it…
        Call("multi_agent_v1__spawn_agent", {"message": "List the files."}, then=Call(WAIT, waiting, then="Done."))
    )
    world.stub.script(Shell(sending("For the main session", then="ls"), then="Nothing here."), picks=subagents)
    turn = codex.run(web, "Delegate a look around.")  # …whose tool call sees mail come
    subagent = [r for r in world.stub.requests if r.shell_tool and subagents(r)]
    main = [r for r in turn.requests if r not in subagent]
    assert len(subagent) == 2 and len(main) == 3, (len(subagent), len(main))
    assert all("For the main session" not in r.text() for r in subagent)
    assert host_context(codex, main[1]) is None  # spawning came before the mail
    assert host_context(codex, main[2]) == codex.expected(web, "tool")  # at its own next tool call: the wait


def host_context(host: Host, request: Request) -> str | None:
    contexts = host.after_tool(request)
    return contexts[0] if len(contexts) == 1 else None


@pytest.mark.parametrize("host", ["claude", "claude-plugin"], indirect=True)
def test_an_idle_session_wakes_soon_after_a_send_at_most_the_limit_and_leaves_nothing_running(
    world: World, host: Host
) -> None:
    web = world.repo("web")
    mailbox.send(Store(), sender="api", to="docs", subject="a mailbox exists")  # a session watches only an existing one
    config = Store().path / "config"
    subprocess.run(["git", "config", "--file", str(config), "gitmail.wakeLimit", "2"], check=True)
    latencies = []
    with host.session(web) as session:
        assert isinstance(session, ClaudeSession)
        session.prompt("hello")
        for number in range(2):
            since = len(world.stub.requests)
            world.stub.script(Answer(f"Read my mail ({number})."))
            sent = time.monotonic()
            mailbox.send(Store(), sender="api", to="web", subject=f"Urgent {number}", body="Please look.")
            woken = session.idle_turn(since, timeout=30)
            assert woken is not None, "the session was not woken"
            latencies.append(woken.requests[0].at - sent)
            notice = woken.requests[0].body["messages"][-1]
            text = str(notice["content"])
            assert notice["role"] == "user" and "SYSTEM NOTIFICATION" in text and "1 new message for" in text
            assert f"Urgent {number}" not in text  # a user turn: gitmail's own notice, never the message
        record = next((Store().path / "gitmail" / "sessions").glob("claude-*.json"))
        touched = record.stat().st_mtime_ns
        since = len(world.stub.requests)
        mailbox.send(Store(), sender="api", to="web", subject="Urgent 2", body="Please look.")
        deadline = time.monotonic() + 30
        while record.stat().st_mtime_ns == touched and time.monotonic() < deadline:  # the wake hook decided
            time.sleep(0.02)
        assert record.stat().st_mtime_ns != touched, "the wake hook did not run"
        assert world.stub.next_request(since, timeout=1.0) is None, "woken a third time: the cap did not hold"
    print(f"\nwake latencies (send to the model request): {', '.join(f'{s * 1000:.0f} ms' for s in latencies)}")
    assert max(latencies) < WAKE_WITHIN, latencies
    assert world.gitmail_processes() == [], "a gitmail process outlived its session"
