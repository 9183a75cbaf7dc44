"""Receipts as a sender sees them: pending until a session of the recipient is shown the message, then delivered
(and when), then done or replied; across processes, for directed mail and broadcasts, under concurrency."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gitmail import mailbox
from gitmail.store.repository import Store
from gitmail.values import mail, receipts
from gitmail.values.layout import note_lines, note_specs
from gitmail.values.receipts import RECEIPTS_NOTES
from tests.conftest import RepoFactory, run_gitmail


def start_session(cwd: Path, session: str = "s1", host: str = "claude") -> subprocess.CompletedProcess[str]:
    payload = json.dumps({"session_id": session, "cwd": str(cwd), "hook_event_name": "SessionStart"})
    return run_gitmail("hook", "session-start", "--host", host, cwd=cwd, stdin=payload)


def sent_log(api: Path) -> list[dict[str, Any]]:
    done = run_gitmail("log", "--sent", "--json", cwd=api)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def sent_log_once_shown(api: Path, repos: int = 1) -> list[dict[str, Any]]:
    """`sent_log` once the last session start's receipts are written: by the hook's detached child, once the host
    has its answer, so a process that reads right after the hook may still find none."""
    deadline = time.monotonic() + 30
    while True:
        found = sent_log(api)
        if all(len(entry["delivered"]) >= repos for entry in found):
            return found
        assert time.monotonic() < deadline, f"the receipts were never written: {found}"
        time.sleep(0.05)


def test_a_directed_message_moves_from_pending_to_delivered_to_replied(api: Path, web: Path) -> None:
    question = run_gitmail("send", "--to", "web", "-s", "Which port?", cwd=api).stdout.strip()
    assert [(m["id"], m["status"]) for m in sent_log(api)] == [(question, "pending")]
    assert start_session(web).returncode == 0
    [shown] = sent_log_once_shown(api)
    assert shown["status"] == "delivered" and shown["status_at"] is not None
    assert [(d["repo"], d["host"], d["moment"]) for d in shown["delivered"]] == [("web", "claude", "session-start")]
    line = run_gitmail("log", "--sent", cwd=api).stdout
    assert line.startswith(f"{question}  ") and "  delivered " in line
    answer = run_gitmail("send", "--reply-to", question, "-m", "8080", cwd=web).stdout.strip()
    [handled] = sent_log(api)
    assert (handled["status"], handled["reply"]) == ("replied", answer)
    assert f"· replied {answer}\n" in run_gitmail("show", question, cwd=api).stdout


def test_done_and_reopen_are_what_the_sender_sees(api: Path, web: Path) -> None:
    note = run_gitmail("send", "--to", "web", "-s", "FYI", cwd=api).stdout.strip()
    run_gitmail("inbox", cwd=web)
    assert sent_log(api)[0]["status"] == "delivered"
    assert run_gitmail("done", note, cwd=web).returncode == 0
    assert sent_log(api)[0]["status"] == "done"
    assert run_gitmail("reopen", note, cwd=web).returncode == 0
    assert sent_log(api)[0]["status"] == "delivered"


def test_a_broadcast_lists_every_repo_it_reached(api: Path, repos: RepoFactory) -> None:
    cast = run_gitmail("send", "--broadcast", "-s", "Freeze", cwd=api).stdout.strip()
    assert sent_log(api)[0]["status"] == "pending"
    for name in ("web", "db"):
        start_session(repos(name))
    [entry] = sent_log_once_shown(api, repos=2)
    assert entry["id"] == cast and entry["status"] == "delivered"
    assert sorted(d["repo"] for d in entry["delivered"]) == ["db", "web"]
    assert "delivered to 2" in run_gitmail("log", "--sent", cwd=api).stdout


def test_many_sessions_starting_at_once_leave_one_coherent_receipt(web: Path, box: Store) -> None:
    entry = mailbox.send(box, sender="api", to="web", subject="hello")
    go = web.parent / "go"
    script = (
        "import json, os, sys, time\n"
        "from gitmail import hooks\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.002)\n"
        "answer = hooks.run('session-start', 'claude', json.dumps({'session_id': sys.argv[1], 'cwd': sys.argv[2]}))\n"
        "print(json.dumps(answer.stdout), flush=True)\n"
        "if answer.after: answer.after()  # what the hook does once the host has its answer\n"
    )
    starts = [
        subprocess.Popen([sys.executable, "-c", script, f"session-{i}", str(web)], stdout=subprocess.PIPE, text=True)
        for i in range(8)
    ]
    go.touch()
    outputs = [json.loads(p.communicate(timeout=60)[0]) for p in starts]
    assert all(entry.message.id in o["hookSpecificOutput"]["additionalContext"] for o in outputs)
    lines = note_lines(box.read(note_specs(RECEIPTS_NOTES, entry.oid)))
    assert len([r for r in receipts.parse(lines) if r.event == "delivered"]) == 1, lines


def test_a_receipt_that_cannot_be_written_never_costs_delivery(web: Path, box: Store) -> None:
    entry = mailbox.send(box, sender="api", to="web", subject="hello")
    (box.path / "refs" / "notes").mkdir(parents=True, exist_ok=True)
    (box.path / "refs" / "notes" / "gitmail-receipts.lock").write_text("a git process at work")
    shown = start_session(web)
    assert shown.returncode == 0 and entry.message.id in shown.stdout
    assert mailbox.log(box, repo="api", sent=True)[0].records == ()
    (box.path / "refs" / "notes" / "gitmail-receipts.lock").unlink()
    start_session(web, session="s2")  # the next showing writes it, once the host has its answer
    deadline = time.monotonic() + 30
    while mail.status(mailbox.log(box, repo="api", sent=True)[0]).name != "delivered":
        assert time.monotonic() < deadline, "the receipt was never written"
        time.sleep(0.05)


def test_only_a_receipt_written_here_says_a_message_was_shown_here(box: Store) -> None:
    """What sync says of mail a remote archived ("never shown here") reads only this machine's receipts: one that
    arrived by sync, or that a remote made up, says nothing of this machine."""
    from gitmail.mailbox.writes import receipts_change
    from gitmail.store.writer import writing
    from gitmail.sync.reconcile import _shown_here
    from gitmail.values.layout import locate
    from gitmail.values.names import RepoName

    entry = mailbox.send(box, sender="api", to="web", subject="hello")
    place = locate(f"refs/gitmail/web/inbox/{entry.message.id}", entry.oid)
    assert place is not None
    elsewhere = receipts.Record(receipts.DELIVERED, "web", entry.message.date, host="claude", machine="f" * 10)
    with writing(box, actor=RepoName("web")) as writer:
        writer.apply(receipts_change(writer, {entry.oid: [elsewhere]}, RepoName("web")), "test")
    assert _shown_here(box, [place]) == {entry.message.id: False}
    mailbox.record_shown(box, repo="web", shown=[entry], host="claude", moment="session-start")
    assert _shown_here(box, [place]) == {entry.message.id: True}
