"""Delivery proven with the real hosts: Claude Code (installed, and as a plugin) and Codex, against the model stub.

Each test is one thing a user relies on, run through every host: mail reaches the model where the host puts hook
context, nothing is added when nothing is pending, a session can archive what it was handed, resumed and compacted
sessions still get pending mail, and uninstalling leaves the user's own hooks running.
"""

from __future__ import annotations

import pytest

from gitmail import mailbox
from gitmail.store.repository import Store
from tests.hosts.harness import Codex, Host, World, done_command
from tests.hosts.stub import Request, Shell

pytestmark = pytest.mark.hosts


def assert_carries(host: Host, request: Request, expected: str, *, first: bool = True) -> None:
    """The latest hook context in the request is exactly gitmail's framing, whole, where the host puts hook
    context (at a session start, the only one)."""
    contexts = host.delivered(request, first=first)
    assert contexts and (len(contexts) == 1 or not first), contexts
    received = contexts[-1]
    if host.name.startswith("claude"):  # Claude Code may run its own paragraphs on after a blank line
        assert received == expected or received.startswith(expected + "\n\n"), received[:3000]
    else:
        assert received == expected, received[:3000]


def test_mail_from_another_repo_reaches_the_first_request(world: World, host: Host) -> None:
    web = world.repo("web")
    mailbox.send(Store(), sender="api", to="web", subject="Schema v2 is live", body="Orders have a status column.")
    expected = host.expected(web)
    assert expected is not None and "Schema v2 is live" in expected
    turn = host.run(web, "What is new?")
    assert_carries(host, turn.first, expected)
    assert "Orders have a status column." in turn.first.text()


def test_nothing_is_added_when_nothing_is_pending(world: World, host: Host) -> None:
    web = world.repo("web")
    turn = host.run(web, "hello")  # no mailbox at all yet
    assert host.delivered(turn.first) == []
    mailbox.send(Store(), sender="api", to="docs", subject="for another repository")
    turn = host.run(web, "hello")  # a mailbox, but never any mail for web
    assert host.delivered(turn.first) == []
    sent = mailbox.send(Store(), sender="api", to="web", subject="handled elsewhere")
    mailbox.done(Store(), repo="web", ids=[sent.message.id])
    turn = host.run(web, "hello")  # mail for web, all of it done
    assert host.delivered(turn.first) == []


def test_a_session_archives_its_mail_with_the_command_it_was_handed(world: World, host: Host) -> None:
    # The command runs as printed from the session's shell (in Codex, inside its workspace-write sandbox, which
    # install lets write the mailbox).
    web = world.repo("web")
    mailbox.send(Store(), sender="api", to="web", subject="Please confirm", body="Is the schema in?")
    world.stub.script(Shell(lambda request: done_command(request, host), then="Marked it done."))
    turn = host.run(web, "Handle your mail.")
    assert world.stub.commands and " done " in world.stub.commands[0]
    assert len(turn.requests) == 2, "the command's result went back to the model"
    assert "archived" in turn.requests[1].tool_result, turn.requests[1].tool_result
    assert world.hook(web) is None, f"still pending; the shell said: {turn.requests[1].tool_result}"
    assert host.delivered(host.run(web, "Anything new?").first) == []


def test_non_ascii_mail_near_the_cap_reaches_the_model_whole(world: World, host: Host) -> None:
    web = world.repo("web")
    bodies = [f"日本語の本文 {n}: " + "🚀" * 1500 for n in range(3)]
    for n, body in enumerate(bodies):
        mailbox.send(Store(), sender="api", to="web", subject=f"Report {n}", body=body)
    expected = host.expected(web)
    assert expected is not None
    turn = host.run(web, "Read your mail.")
    assert_carries(host, turn.first, expected)  # exactly what gitmail printed: neither cut nor replaced
    assert any(f"> {body}\n" in expected for body in bodies), "the oldest message at least arrives whole"


def test_resumed_sessions_get_the_mail_pending_now(world: World, host: Host) -> None:
    web = world.repo("web")
    mailbox.send(Store(), sender="api", to="web", subject="Still pending", body="Answer me when you can.")
    started = host.run(web, "hello")
    mailbox.send(Store(), sender="docs", to="web", subject="Arrived meanwhile", body="One more thing.")
    expected = host.expected(web)
    assert expected is not None and "Arrived meanwhile" in expected and "Still pending" in expected
    resumed = host.run(web, "I am back.", resume=started.session_id)
    assert resumed.session_id == started.session_id
    assert_carries(host, resumed.first, expected, first=False)
    if host.name.startswith("claude"):  # a fork of a session starts with source "fork"
        mailbox.send(Store(), sender="docs", to="web", subject="For the fork", body="And another.")
        expected = host.expected(web)
        assert expected is not None
        forked = host.run(web, "A fork.", resume=started.session_id, fork=True)
        assert forked.session_id != started.session_id
        assert_carries(host, forked.first, expected, first=False)


def test_compacted_sessions_still_get_pending_mail(world: World, host: Host) -> None:
    web = world.repo("web")
    mailbox.send(Store(), sender="api", to="web", subject="Still pending", body="Answer me when you can.")
    expected = host.expected(web)
    assert expected is not None
    with host.session(web) as session:
        assert_carries(host, session.prompt("hello").first, expected)
        session.compact()
        assert_carries(host, session.prompt("Where were we?").first, expected, first=False)


def test_after_uninstall_no_gitmail_hook_runs_and_the_users_own_still_do(world: World, host: Host) -> None:
    if host.name == "claude-plugin":
        pytest.skip("a plugin is taken away by no longer loading it; there is nothing to uninstall")
    web = world.repo("web")
    mailbox.send(Store(), sender="api", to="web", subject="Pending", body="Still here.")
    host.add_own_hook("echo-user-context", context="The user's own hook ran.")  # after gitmail's, as users add them
    both = "\n".join(host.delivered(host.run(web, "hello").first))  # Claude Code joins them in one block
    assert "gitmail: 1 message" in both and "The user's own hook ran." in both
    host.uninstall()
    contexts = host.delivered(host.run(web, "hello").first)
    assert len(contexts) == 1 and contexts[0].startswith("The user's own hook ran."), contexts
    assert "gitmail" not in contexts[0], contexts


def test_codex_sessions_may_write_the_mailbox_while_gitmail_is_installed(world: World) -> None:
    web = world.repo("web")
    codex = Codex(world)
    codex.install()
    probe = "touch ~/.gitmail/probe && echo written"
    world.stub.script(Shell(probe, then="ok"))
    assert "written" in codex.run(web, "Touch it.").requests[1].tool_result
    codex.uninstall()  # takes gitmail's writable root out of Codex's sandbox again
    world.stub.script(Shell(probe, then="ok"))
    assert "Read-only file system" in codex.run(web, "Touch it.").requests[1].tool_result
