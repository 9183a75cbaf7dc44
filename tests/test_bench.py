"""scripts/bench runs end to end: a quick smoke run measures every row and delivers every concurrent message."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
VIEW_ROWS = {"view: start until URL", "view: first page", "view: page after new mail"}
HOOK_ROWS = {"hook session-start", "hook session-start, receipts off", "hook session-start, kept answer"}
MCP_ROWS = {"mcp send", "mcp inbox"}
TIMED_ROWS = {"python -c pass", "send", "inbox", "log -n 20", *HOOK_ROWS, *MCP_ROWS, *VIEW_ROWS}
CONCURRENT_ROWS = {"concurrent sends", "concurrent CLI sends"}
MOMENT_ROWS = {
    "moments: python3 -c pass",
    "moments: quiet path, Claude Code",
    "moments: quiet path, Codex",
    "moments: tool call with new mail",
    "moments: session start, mail unchanged",
    "moments: session start with new mail",
    "moments: session start, mail unchanged, a remote syncing by itself",
    "moments: session start with new mail, 20 pending, 1,000 archived",
}
PEER_ROWS = {
    "peers: python3 -c pass",
    "peers: gitmail send",
    "peers: agent-collab-kit send",
    "peers: gitmail inbox --peek (20 pending)",
    "peers: agent-collab-kit inbox (20 pending)",
}
SESSION_ROWS = {
    "sessions: python3 -c pass",
    "sessions: send to a repo",
    "sessions: send to a session",
    "sessions: send to a repo with an idle Codex session",
    "sessions: inbox --peek (20 pending)",
    "sessions: gitmail sessions (50 sessions, 20 repos)",
    "sessions: gitmail sessions --all (50 sessions, 20 repos)",
}
QUIET_SYNC_ROWS = {
    f"{what}, nothing new ({how})" for what in ("git fetch", "gitmail sync") for how in ("git daemon", "path")
}
NEW_MAIL_SYNC_ROWS = {"gitmail sync pushing 10 new (git daemon)", "gitmail sync receiving 10 new (git daemon)"}
ONE_REF_PER_MESSAGE = "git fetch, nothing new, one ref per message (git daemon)"
FROM_AFAR = "signing: session start, 20 pending from another machine"
SIGNING_ROWS = {
    "signing: python3 -c pass",
    "signing: send, signed",
    "signing: send, signing off in-process",
    f"{FROM_AFAR}, verdicts kept (every later start)",
    f"{FROM_AFAR}, first check (kept facts emptied)",
    f"{FROM_AFAR}, checks off in-process",
    "signing: sync receiving 10 new, signed (path)",
    "signing: sync receiving 10 new, sent unsigned (path)",
}
WHOLE_MAILBOX = "gitmail sync pushing the whole mailbox (git daemon)"


@pytest.mark.slow
def test_quick_benchmark_reports_every_row() -> None:
    done = subprocess.run(
        [sys.executable, "scripts/bench", "--quick", "--runs", "2", "--sync-runs", "1", "--processes", "2", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr

    report = json.loads(done.stdout)
    rows = report["rows"]
    sync_rows = QUIET_SYNC_ROWS | NEW_MAIL_SYNC_ROWS | {ONE_REF_PER_MESSAGE, WHOLE_MAILBOX}
    assert {
        row["name"] for row in rows
    } == TIMED_ROWS | CONCURRENT_ROWS | MOMENT_ROWS | PEER_ROWS | SESSION_ROWS | sync_rows | SIGNING_ROWS
    assert all(row["median_ms"] > 0 and row["min_ms"] > 0 for row in rows)
    sizes = report["settings"]["sizes"]
    assert sizes == [0, 1000]
    for name in ("inbox", "log -n 20", *HOOK_ROWS, "send", *MCP_ROWS, *VIEW_ROWS, *CONCURRENT_ROWS):
        assert sorted(row["archived"] for row in rows if row["name"] == name) == sizes, name
    single_size = NEW_MAIL_SYNC_ROWS | {ONE_REF_PER_MESSAGE}  # measured at the largest size only: no ratio
    assert all(row["ratio"] > 0 for row in rows if row["archived"] is not None and row["name"] not in single_size)

    expected = report["settings"]["processes"] * report["settings"]["per_process"]
    concurrent = [row for row in rows if row["name"] in CONCURRENT_ROWS]
    assert all(row["messages"] == expected and row["messages_per_s"] > 0 for row in concurrent)
    moments = {row["name"]: row for row in rows if row["name"] in MOMENT_ROWS}
    assert all(row["archived"] is None for row in moments.values())
    for name in MOMENT_ROWS - {"moments: python3 -c pass"}:
        assert "× python3 -c pass" in moments[name]["note"], name

    peers = {row["name"]: row for row in rows if row["name"] in PEER_ROWS}
    for name in ("peers: gitmail send", "peers: gitmail inbox --peek (20 pending)"):
        assert "× agent-collab-kit 0.1.2" in peers[name]["note"], name

    sessions = {row["name"]: row for row in rows if row["name"] in SESSION_ROWS}
    assert "× send to a repo;" in sessions["sessions: send to a session"]["note"]
    assert "× inbox --peek (20 pending);" in sessions["sessions: gitmail sessions (50 sessions, 20 repos)"]["note"]

    signing = {row["name"]: row for row in rows if row["name"] in SIGNING_ROWS}
    assert all(row["archived"] is None for row in signing.values())
    assert "× send, signing off in-process (min" in signing["signing: send, signed"]["note"]
    for name in (f"{FROM_AFAR}, verdicts kept (every later start)", f"{FROM_AFAR}, first check (kept facts emptied)"):
        assert "× session start, 20 pending from another machine, checks off in-process (min" in signing[name]["note"]
    synced = signing["signing: sync receiving 10 new, signed (path)"]
    assert "× sync receiving 10 new, sent unsigned (path)" in synced["note"]

    for name in QUIET_SYNC_ROWS | {WHOLE_MAILBOX}:
        assert sorted(row["archived"] for row in rows if row["name"] == name) == sizes, name
    for name in NEW_MAIL_SYNC_ROWS | {ONE_REF_PER_MESSAGE}:
        assert [row["archived"] for row in rows if row["name"] == name] == [1000], name
    wire = {(row["name"], row["archived"]): row["bytes"] for row in rows if row["bytes"] is not None}
    assert all(wire[(name, 1000)] > 0 for name in NEW_MAIL_SYNC_ROWS)
    # the state travels in a few refs: a quiet sync moves far fewer bytes than one ref per message would
    assert wire[("gitmail sync, nothing new (git daemon)", 1000)] * 10 < wire[(ONE_REF_PER_MESSAGE, 1000)]
