"""Peeking at a session's transcript: both hosts' formats, the bounds, and paths that must not be read."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gitmail import mailbox
from gitmail.errors import GitmailError
from gitmail.store import sessions, transcripts
from gitmail.store.lock import Deadline
from gitmail.store.repository import Store
from gitmail.values.transcript import Turn, last, turns
from tests.conftest import CliRunner

SAMPLES = Path(__file__).parent / "transcripts"


def _lines(name: str) -> list[bytes]:
    return (SAMPLES / name).read_bytes().split(b"\n")


def test_claude_codes_transcript_reads_as_prompts_replies_and_one_line_a_tool_call() -> None:
    assert turns(_lines("claude.jsonl")) == [
        Turn("prompt", "Fix the order totals in src/orders.py"),
        Turn("reply", "Looking at the file."),
        Turn("tool", "Bash: cat src/orders.py"),
        Turn("tool", 'Edit: {"file_path": "src/orders.py", "old_string": "a", "new_string": "b"}'),
        Turn("reply", "Fixed: totals now round once."),
        Turn("prompt", "Now run the tests"),
        Turn("reply", "All 12 pass."),
    ]


def test_codexs_transcript_leaves_out_the_hosts_own_context() -> None:
    assert turns(_lines("codex.jsonl")) == [
        Turn("prompt", "Rename the orders module"),
        Turn("tool", 'shell: ["bash", "-lc", "git mv src/orders.py src/order.py"]'),
        Turn("tool", "apply_patch: *** Begin Patch *** Update File: src/order.py @@ -a +b *** End Patch"),
        Turn("reply", "Renamed, and imports updated."),
    ]


def test_transcripts_the_pinned_hosts_wrote_read_as_the_turn_that_ran() -> None:
    """Recorded from Claude Code 2.1.332 and Codex 0.171.0 (tests/hosts/test_peek_hosts.py, paths scrubbed): a turn
    with one shell call, in a session that gitmail handed a message at its start. What gitmail handed it (Claude
    Code's hook attachment, Codex's developer message), the hosts' own context and their bookkeeping lines are
    no turns of the session's."""
    assert turns(_lines("claude-2.1.332.jsonl")) == [
        Turn("prompt", "Check the order totals."),
        Turn("tool", "Bash: echo orders-checked"),
        Turn("reply", "The order totals round once now."),
    ]
    assert turns(_lines("codex-0.171.0.jsonl")) == [
        Turn("prompt", "Check the order totals."),
        Turn("tool", "exec_command: echo orders-checked"),
        Turn("reply", "The order totals round once now."),
    ]
    for name in ("claude-2.1.332.jsonl", "codex-0.171.0.jsonl"):
        assert b"Do they round twice?" in (SAMPLES / name).read_bytes()  # the message handed at the start is there


def test_the_last_turns_start_at_a_prompt() -> None:
    found = turns(_lines("claude.jsonl"))
    assert last(found, 1) == [Turn("prompt", "Now run the tests"), Turn("reply", "All 12 pass.")]
    assert last(found, 5) == found


def _claude_home(home: Path) -> Path:
    folder = home / ".claude" / "projects" / "-x-api"
    folder.mkdir(parents=True)
    return folder


def test_only_regular_files_inside_the_hosts_folders_are_read(home: Path, tmp_path: Path) -> None:
    folder = _claude_home(home)
    inside = folder / "s.jsonl"
    inside.write_bytes((SAMPLES / "claude.jsonl").read_bytes())
    assert transcripts.tail(str(inside))
    outside = tmp_path / "secret.jsonl"
    outside.write_text("{}\n")
    (folder / "link.jsonl").symlink_to(outside)
    os.mkfifo(folder / "fifo.jsonl")
    for path, said in [
        (str(outside), "not inside a host's own folder"),
        (str(folder / "link.jsonl"), "not inside a host's own folder"),
        (str(folder / ".." / ".." / ".." / "x.jsonl"), "not inside a host's own folder"),
        ("relative.jsonl", "not inside a host's own folder"),
        (str(folder / "fifo.jsonl"), "not a regular file"),
        (str(folder / "missing.jsonl"), "cannot read the transcript"),
    ]:
        with pytest.raises(GitmailError, match=said):
            transcripts.tail(path)


def test_peek_prints_the_last_turns_quoted_and_bounded(cli: CliRunner, home: Path, box: Store) -> None:
    folder = _claude_home(home)
    path = folder / "s1.jsonl"
    big = "".join(f'{{"type":"user","message":{{"content":"prompt {i} {"x" * 900}"}}}}\n' for i in range(20))
    path.write_text(big + (SAMPLES / "claude.jsonl").read_text())
    mailbox.send(box, sender="web", to="api", subject="x")  # the mailbox, where session records live
    with sessions.record(box.path, "claude", "s1", Deadline(2.0)) as record:
        assert record is not None
        record.set("repo", "api")
        record.set("transcript", str(path))
    sessions.note_live(box.path, "claude", "s1")
    result = cli("sessions", "--peek", "api#s1", "-n", "2")
    assert result.code == 0, result
    lines = result.out.splitlines()
    assert lines[0].startswith("gitmail: the last ") and "untrusted data" in lines[0]
    assert all(line.startswith("> ") for line in lines[1:])
    assert "> prompt: Now run the tests" in lines and "> reply: All 12 pass." in lines
    assert "> tool: Bash: cat src/orders.py" in lines
    result = cli("sessions", "--peek", "api#s1", "-n", "30")
    assert result.code == 0 and len(result.out.encode()) <= 8000
    assert "earlier left out" in result.out.splitlines()[0]
    long_reply = "".join(f"line {i} of a long reply\n" for i in range(2000)) + "the very end"
    with path.open("a") as handle:  # a newest part far longer than a peek: its end is shown, cut, never nothing
        handle.write(json.dumps({"type": "assistant", "message": {"content": long_reply}}) + "\n")
    result = cli("sessions", "--peek", "api#s1", "-n", "1")
    assert result.code == 0 and len(result.out.encode()) <= 8000, result
    lines = result.out.splitlines()
    assert lines[0].startswith("gitmail: the last 1 part of") and all(line.startswith("> ") for line in lines[1:])
    assert lines[1].startswith("> reply (its last ") and lines[-1] == "> the very end"
    with sessions.record(box.path, "claude", "s1", Deadline(2.0)) as record:
        assert record is not None
        record.set("transcript", "/etc/passwd")
    result = cli("sessions", "--peek", "api#s1")
    assert result.code == 1 and "not inside a host's own folder" in result.err and not result.out
    assert cli("sessions", "--peek", "api#nobody").code == 1
