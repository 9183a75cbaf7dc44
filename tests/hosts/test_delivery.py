"""Delivery proven with the real hosts: Claude Code (installed, and as a plugin) and Codex, against the model stub.

Each test is one thing a user relies on, run through every host: mail reaches the model where the host puts hook
context, nothing is added when nothing is pending, a session can archive what it was handed, resumed and compacted
sessions still get pending mail, and uninstalling leaves the user's own hooks running.
"""

from __future__ import annotations

import pytest

from gitmail import mailbox
from gitmail.store import Store
from tests.hosts.harness import Host, World, done_command
from tests.hosts.stub import Answer, Request, Shell

pytestmark = pytest.mark.hosts


def framing_of(world: World, host: Host, request: Request, *, first: bool = True) -> str:
    """The one gitmail framing the request carries, exactly as the model received it."""
    contexts = host.delivered(request, first=first)
    assert len(contexts) == 1, contexts
    return contexts[0]


def assert_carries(host: Host, request: Request, expected: str, *, first: bool = True) -> None:
    """The request carries exactly gitmail's framing, whole, at the host's place for hook context."""
    contexts = host.delivered(request, first=first)
    assert len(contexts) == 1, contexts
    received = contexts[0]
    if host.name.startswith("claude"):  # Claude Code trims it and runs its own paragraphs on after a blank line
        assert received.startswith(expected.rstrip("\n") + "\n\n"), received[:3000]
    else:
        assert received == expected, received[:3000]


def test_mail_from_another_repo_reaches_the_first_request(world: World, host: Host) -> None:
    web = world.repo("web")
    mailbox.send(Store(), sender="api", to="web", subject="Schema v2 is live", body="Orders have a status column.")
    expected = world.hook(web)
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
