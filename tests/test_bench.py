"""scripts/bench runs end to end: a quick smoke run measures every row of every group and delivers every concurrent
message; scripts/bench-attachments measures every attachment row; every group module is one the table knows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).parent.parent
VIEW_ROWS = {"view: start until URL", "view: first page", "view: page after new mail"}
HOOK_ROWS = {"hook session-start", "hook session-start, receipts off", "hook session-start, kept answer"}
MCP_ROWS = {"mcp send", "mcp inbox"}
MCP_SIDE_ROWS = {
    "mcp: python3 -c pass",
    "mcp: first answer after start",
    "mcp: idle memory",
    "mcp: inbox call at 1,000 pending",
}
TIMED_ROWS = {"python -c pass", "send", "inbox", "log -n 20", *HOOK_ROWS, *MCP_ROWS, *VIEW_ROWS}
CONCURRENT_ROWS = {"concurrent sends", "concurrent CLI sends"}
MOMENT_ROWS = {
    "moments: python3 -c pass",
    "moments: quiet path, Claude Code",
    "moments: quiet path, Codex",
    "moments: tool call with new mail",
    "moments: session start, mail unchanged",
    "moments: session start with new mail (its answer made when the mail came)",
    "moments: session start, mail unchanged, a remote syncing by itself",
    "moments: session start with new mail, 20 pending, 1,000 archived",
    "moments: session start with new mail, Python answering (a resumed session)",
}
PEER_ROWS = {
    "peers: python3 -c pass",
    "peers: gitmail send",
    "peers: agent-collab-kit send",
    "peers: gitmail inbox --peek (20 pending)",
    "peers: agent-collab-kit inbox (20 pending)",
    "peers: gitmail log -n 20",
}
PENDING_ROWS = {
    "pending: python3 -c pass",
    "pending: hook session-start, 1 pending",
    "pending: hook session-start, 500 pending",
    "pending: inbox --peek, 1 pending",
    "pending: inbox --peek, 500 pending",
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
NEW_MAIL_SYNC_ROWS = {
    "gitmail sync pushing 10 new (git daemon)",
    "gitmail sync receiving 10 new (git daemon)",
    "git fetch receiving 10 new (git daemon)",
}
ONE_REF_PER_MESSAGE = "git fetch, nothing new, one ref per message (git daemon)"
DISK_ROWS = {"disk per message"}
LEASE_ROWS = {
    "leases: python3 -c pass",
    "leases: before an edit, no lease in the repository",
    "leases: before an edit, 20 leases, none on the file",
    "leases: before an edit of another session's leased file (denied)",
    "leases: gitmail send",
    "leases: gitmail lease (and release, untimed)",
    "leases: 8 processes racing for one path",
    "leases: pre-commit guard, no lease in the repository",
    "leases: pre-commit guard, 20 leases of another session, none staged",
}
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
    assert report["machine"]["install"].startswith("pip install . (not editable)")  # as users install it
    rows = report["rows"]
    sync_rows = QUIET_SYNC_ROWS | NEW_MAIL_SYNC_ROWS | {ONE_REF_PER_MESSAGE, WHOLE_MAILBOX}
    every = (
        TIMED_ROWS | CONCURRENT_ROWS | MOMENT_ROWS | PEER_ROWS | PENDING_ROWS | SESSION_ROWS | sync_rows | SIGNING_ROWS
    )
    assert {row["name"] for row in rows} == every | LEASE_ROWS | DISK_ROWS | MCP_SIDE_ROWS
    memory = [row for row in rows if row["mib"] is not None]
    assert [row["name"] for row in memory] == ["mcp: idle memory"] and 0 < memory[0]["mib"][1] <= memory[0]["mib"][0]
    assert all(row["median_ms"] > 0 and row["min_ms"] > 0 for row in rows if row["mib"] is None)
    sizes = report["settings"]["sizes"]
    assert sizes == [0, 1000]
    for name in ("inbox", "log -n 20", *HOOK_ROWS, "send", *MCP_ROWS, *VIEW_ROWS, *CONCURRENT_ROWS):
        assert sorted(row["archived"] for row in rows if row["name"] == name) == sizes, name
    single_size = NEW_MAIL_SYNC_ROWS | {ONE_REF_PER_MESSAGE}  # measured at the largest size only: no ratio
    single_size |= DISK_ROWS  # bytes per message at 100 sent and archived (--quick)
    assert all(row["ratio"] > 0 for row in rows if row["archived"] is not None and row["name"] not in single_size)
    (disk,) = [row for row in rows if row["name"] in DISK_ROWS]
    assert disk["archived"] == 100 and "bytes a message" in disk["note"]

    expected = report["settings"]["processes"] * report["settings"]["per_process"]
    concurrent = [row for row in rows if row["name"] in CONCURRENT_ROWS]
    assert all(row["messages"] == expected and row["messages_per_s"] > 0 for row in concurrent)
    mcp = {row["name"]: row for row in rows if row["name"] in MCP_SIDE_ROWS}
    for name in ("mcp: first answer after start", "mcp: inbox call at 1,000 pending"):
        assert mcp[name]["archived"] is None and "× python3 -c pass" in mcp[name]["note"], name
    moments = {row["name"]: row for row in rows if row["name"] in MOMENT_ROWS}
    assert all(row["archived"] is None for row in moments.values())
    for name in MOMENT_ROWS - {"moments: python3 -c pass"}:
        assert "× python3 -c pass" in moments[name]["note"], name

    peers = {row["name"]: row for row in rows if row["name"] in PEER_ROWS}
    for name in ("peers: gitmail send", "peers: gitmail inbox --peek (20 pending)"):
        assert "× agent-collab-kit 0.1.2" in peers[name]["note"], name
    assert "× python3 -c pass" in peers["peers: gitmail log -n 20"]["note"]

    pending = {row["name"]: row for row in rows if row["name"] in PENDING_ROWS}
    for name in ("pending: hook session-start, 500 pending", "pending: inbox --peek, 500 pending"):
        assert "× 1 pending (min" in pending[name]["note"], name

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
    (received,) = [row for row in rows if row["name"] == "gitmail sync receiving 10 new (git daemon)"]
    assert "× the plain git fetch receiving the same" in received["note"]
    # the state travels in a few refs: a quiet sync moves far fewer bytes than one ref per message would
    assert wire[("gitmail sync, nothing new (git daemon)", 1000)] * 10 < wire[(ONE_REF_PER_MESSAGE, 1000)]


def benchmarks(monkeypatch: pytest.MonkeyPatch) -> Any:
    """scripts/benchmarks/main.py, imported as scripts/bench imports it."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    from benchmarks import main

    return main


def test_every_group_module_is_measured_and_has_its_place_in_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    main = benchmarks(monkeypatch)
    folder = ROOT / "scripts" / "benchmarks"
    with_rows = {path.stem for path in folder.glob("*.py") if "\nROWS = " in path.read_text()}
    assert with_rows == set(main.NAMES)
    assert sorted(main.TABLE) == sorted(main.NAMES)
    rows = [row for group in main.GROUPS for row in group.rows]
    assert len(rows) == len(set(rows)) and main.BASELINE not in rows
    assert set(main.row_order()) == {main.BASELINE, *rows}
    run = subprocess.run(
        [sys.executable, "scripts/bench", "--only", "reads,nosuch"], cwd=ROOT, capture_output=True, text=True
    )
    assert run.returncode == 2
    assert run.stderr.endswith(f"error: --only takes groups among {', '.join(main.NAMES)}\n")


def test_a_group_measuring_a_row_it_does_not_declare_stops_the_benchmark(monkeypatch: pytest.MonkeyPatch) -> None:
    main = benchmarks(monkeypatch)
    from benchmarks.runner import BenchError, Row

    group = main.GROUPS[0]
    rows = [Row(name, 0, 1.0, 1.0, 1) for name in group.rows]
    assert main.declared(group, rows) == rows
    with pytest.raises(BenchError, match=r"measured rows it does not declare \(\['inbox, typo'\]\)"):
        main.declared(group, [*rows, Row("inbox, typo", 0, 1.0, 1.0, 1)])
    with pytest.raises(BenchError, match=r"did not measure rows it declares \(\['log -n 20'\]\)"):
        main.declared(group, [row for row in rows if row.name != "log -n 20"])


ATTACHMENT_TIMED_ROWS = [
    "git hash-object -w, 10 MiB random",
    "git hash-object -w, 10 MiB text",
    "gitmail send",
    "gitmail send --attach, 10 MiB random",
    "gitmail send --attach, 10 MiB text",
    "hook session-start, without attachments",
    "hook session-start, with 10 MiB + 2 small attached",
]
ATTACHMENT_SYNC_ROWS = [
    f"sync, 10 MiB {kind}, {when}" for kind in ("random", "text") for when in ("attached", "attached again")
]


@pytest.mark.slow
def test_attachments_benchmark_reports_every_row() -> None:
    done = subprocess.run(
        [sys.executable, "scripts/bench-attachments", "--runs", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr

    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert [record["row"] for record in records] == ATTACHMENT_TIMED_ROWS + ATTACHMENT_SYNC_ROWS
    timed = records[: len(ATTACHMENT_TIMED_ROWS)]
    assert all(set(record) == {"row", "median_ms", "min_ms", "cpu_median_ms", "cpu_min_ms"} for record in timed)
    assert all(record[key] > 0 for record in timed for key in ("median_ms", "min_ms", "cpu_median_ms", "cpu_min_ms"))
    synced = {record["row"]: record for record in records[len(ATTACHMENT_TIMED_ROWS) :]}
    for kind in ("random", "text"):
        first, again = synced[f"sync, 10 MiB {kind}, attached"], synced[f"sync, 10 MiB {kind}, attached again"]
        assert first["pushed_bytes"] == first["fetched_bytes"] and again["pushed_bytes"] == again["fetched_bytes"]
        # the same content attached again under another name does not cross the network again
        assert 0 < again["pushed_bytes"] * 20 < first["pushed_bytes"], kind
    assert synced["sync, 10 MiB random, attached"]["pushed_bytes"] > 10 * 2**20  # random bytes do not compress
