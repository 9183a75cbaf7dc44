"""Urgency and idle wake with the real hosts: an interactive Codex (its TUI in a terminal) left idle is woken by
mail through `codex queue` with gitmail's notice alone, reads the mail in the developer channel, is not queued a
second turn while it works, and is never woken once closed; Claude Code is woken by *now* mail, never by *low*."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from gitmail import mailbox
from gitmail.store import hookfiles
from gitmail.store.repository import Store
from tests.hosts.harness import ClaudeCode, ClaudeSession, Codex, CodexWindow, World, _codex_text
from tests.hosts.stub import Answer, Request, Shell

pytestmark = pytest.mark.hosts

CODEX_WAKE_WITHIN = 3.0  # seconds from a send to the woken Codex session's first model request
CLAUDE_WAKE_WITHIN = 2.0


@pytest.fixture
def window_world(world: World) -> World:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed: Codex's TUI runs in a tmux pane")
    return world


def thread_of(world: World) -> str:
    """The Codex thread gitmail's hooks recorded (the only one)."""
    folder = Store().path / "gitmail" / "sessions"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = [p.stem.removeprefix("codex-") for p in folder.glob("codex-*.json")] if folder.exists() else []
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError("no Codex session was recorded")


def idle(thread: str) -> None:
    turn = Store().path / "gitmail" / "sessions" / f"codex-{thread}.turn"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if turn.exists() and not hookfiles.in_turn(turn.read_text().strip()):
            return
        time.sleep(0.05)
    raise AssertionError("the Codex session never went idle")


def user_turns(request: Request) -> list[str]:
    return [_codex_text(i) for i in request.body.get("input") or [] if i.get("role") == "user"]


def developer_texts(request: Request) -> list[str]:
    return [_codex_text(i) for i in request.body.get("input") or [] if i.get("role") == "developer"]


def test_an_idle_codex_window_wakes_on_mail_once_and_never_after_it_closed(window_world: World) -> None:
    world = window_world
    web, api = world.repo("web"), world.repo("api")
    Codex(world).install()
    mailbox.send(Store(), sender="api", to="docs", subject="a mailbox exists")  # sessions are recorded in it
    with CodexWindow(world, web) as window:
        window.prompt("hello")
        thread = thread_of(world)
        idle(thread)
        listed = world.gitmail("sessions", "--json", cwd=web).stdout
        assert '"wakeable": true' in listed, listed

        def meanwhile(request: Request) -> str:  # while the woken turn works, more mail comes
            world.gitmail("send", "--to", "web", "-s", "Also this", "-m", "Second.", cwd=api)
            return "echo reading"

        world.stub.script(Shell(meanwhile, then="Read it."))
        since = len(world.stub.requests)
        sent = time.monotonic()
        world.gitmail("send", "--to", "web", "-s", "Schema changed", "-m", "Orders have a status.", cwd=api)
        woken = world.stub.next_request(since, timeout=30)
        assert woken is not None, f"the idle Codex window was not woken:\n{window.screen()}"
        latency = woken.at - sent
        last_user = user_turns(woken)[-1]
        assert last_user.startswith('gitmail: 1 new message for "web" arrived while this session was idle.')
        assert "Schema changed" not in last_user and "Orders" not in last_user  # the notice only
        assert any("Schema changed" in t and "Orders have a status." in t for t in developer_texts(woken))
        idle(thread)
        time.sleep(3.0)  # a second queued turn would have started by now
        turns = [r for r in world.stub.requests[since:] if r.shell_tool is not None]
        notices = {u for r in turns for u in user_turns(r) if "arrived while this session was idle" in u}
        assert len(notices) == 1, notices  # one queued turn, though mail came while it worked
        assert any("Also this" in r.text() for r in turns)  # that mail came within the turn (its tool call)
        print(f"\nCodex idle wake: {latency * 1000:.0f} ms from send to the woken session's first model request")
        assert latency < CODEX_WAKE_WITHIN, latency

        window.quit()
        [left] = json.loads(world.gitmail("sessions", "--json", cwd=web).stdout)
        assert (left["state"], left["end_reason"]) == ("ended", "its window is closed")  # replies go to the repo
        since = len(world.stub.requests)
        world.gitmail("send", "--to", "web", "-s", "After you left", "-m", "Nobody reads this now.", cwd=api)
        assert world.stub.next_request(since, timeout=8) is None, "a closed Codex session ran a turn"
    assert world.gitmail_processes() == [], "a gitmail process outlived the session"


def test_claude_code_is_woken_by_now_mail_and_never_by_low_mail(world: World) -> None:
    web = world.repo("web")
    claude = ClaudeCode(world)
    claude.install()
    mailbox.send(Store(), sender="api", to="docs", subject="a mailbox exists")
    with claude.session(web) as session:
        assert isinstance(session, ClaudeSession)
        session.prompt("hello")
        since = len(world.stub.requests)
        mailbox.send(Store(), sender="api", to="web", subject="FYI: the changelog moved", urgency="low")
        assert session.idle_turn(since, timeout=6) is None, "low mail woke the session"
        world.stub.script(Answer("Reading my mail."))
        sent = time.monotonic()
        mailbox.send(Store(), sender="api", to="web", subject="Stop: the schema changed", urgency="now")
        woken = session.idle_turn(since, timeout=30)
        assert woken is not None, "now mail did not wake the session"
        assert woken.requests[0].at - sent < CLAUDE_WAKE_WITHIN
        notice = str(woken.requests[0].body["messages"][-1]["content"])
        assert "2 new messages" in notice and "schema" not in notice  # the low one comes along, unnamed
    assert world.gitmail_processes() == []


_ = Path
