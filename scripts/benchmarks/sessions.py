"""The sessions group: sessions as addresses, interleaved with `python3 -c pass`. A send to one session of `web`
beside a send to `web`, a send to a repository with an idle Codex session (each send starts the waker, which finds
no Codex window showing it and leaves), and `gitmail sessions` beside `gitmail inbox --peek`, with 50 sessions
recorded across 20 repositories (each a real repository; the sessions' process is this one, so all are live)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .fixtures import (
    RECIPIENT,
    SEND_ARGS,
    SENDER,
    Sandbox,
    check_inbox,
    delete_refs,
    gitmail_command,
    pending_refs,
    refs_under,
    remove_sent,
)
from .runner import BenchError, Moment, Row, Settings, interleaved, run, times

ROWS = (
    "sessions: python3 -c pass",
    "sessions: send to a repo",
    "sessions: send to a session",
    "sessions: send to a repo with an idle Codex session",
    "sessions: inbox --peek (20 pending)",
    "sessions: gitmail sessions (50 sessions, 20 repos)",
    "sessions: gitmail sessions --all (50 sessions, 20 repos)",
)
SESSIONS, SESSION_REPOS = 50, 20
IDLE_CODEX = ("docs", "01a20000-0000-7000-8000-00000000b0b0")  # its repository and thread


def record_sessions(box: Sandbox) -> None:
    """50 sessions across 20 repositories, and an idle Codex session of `docs` (its process: this one)."""
    from gitmail.store import sessions

    mailbox = box.mailbox(0)
    names = [RECIPIENT, *(f"repo-{number:02d}" for number in range(1, SESSION_REPOS))]
    for name in names[1:]:
        run(["git", "init", "-q", str(box.repo(name))])
    for number in range(SESSIONS):
        name = names[number % SESSION_REPOS]
        session_id = f"{number:08x}-0000-4000-8000-{number:012x}"
        sessions.introduce(mailbox, "claude", session_id, repo=name, top=str(box.repo(name)))
        sessions.describe(mailbox, "claude", session_id, name=f"s{number}", card=f"working on part {number}")
    docs, thread = IDLE_CODEX
    run(["git", "init", "-q", str(box.repo(docs))])
    sessions.introduce(mailbox, "codex", thread, repo=docs, top=str(box.repo(docs)))
    live = mailbox / "gitmail" / "sessions" / f"codex-{thread}.live"
    live.write_text(f"{os.getpid()} {process_ticks(os.getpid())}\n")


def process_ticks(pid: int) -> int:
    """A process's start time in clock ticks since boot, as gitmail records a session's process."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[19])


def check_listing(output: bytes) -> None:
    if output.count(b"working on part") < SESSIONS // SESSION_REPOS:
        raise BenchError(f"gitmail sessions did not list the sessions recorded: {output[:300]!r}")


def measure_sessions(box: Sandbox, settings: Settings) -> list[Row]:
    record_sessions(box)
    mailbox, docs = box.mailbox(0), IDLE_CODEX[0]
    before = pending_refs(box, 0)
    gitmail, env, web = gitmail_command(), box.env(0), box.repo(RECIPIENT)
    to_session = [*gitmail, "send", "--to", f"{RECIPIENT}#s0", "--subject", "bench", "--message", "hello"]
    to_codex = [*gitmail, "send", "--to", docs, "--subject", "bench", "--message", "hello"]
    rows_of = [
        Moment(ROWS[0], [sys.executable, "-c", "pass"], box.root, env),
        Moment(ROWS[1], [*gitmail, *SEND_ARGS], box.repo(SENDER), env),
        Moment(ROWS[2], to_session, box.repo(SENDER), env),
        Moment(ROWS[3], to_codex, box.repo(SENDER), env),
        Moment(ROWS[4], [*gitmail, "inbox", "--peek"], web, env, check=check_inbox),
        Moment(ROWS[5], [*gitmail, "sessions"], web, env, check=check_listing),
        Moment(ROWS[6], [*gitmail, "sessions", "--all"], web, env, check=check_listing),
    ]

    def tidy() -> None:  # every run finds the same 20 pending
        remove_sent(box, 0, before, 2, "sessions: sends")
        delete_refs(mailbox, refs_under(mailbox, "refs/gitmail/docs/inbox/"))

    rows = interleaved(rows_of, settings.runs, after_turn=tidy)
    by_name = {row.name: row for row in rows}
    floor = rows[0]
    for name, against in ((ROWS[2], ROWS[1]), (ROWS[3], ROWS[1]), (ROWS[5], ROWS[4]), (ROWS[6], ROWS[4])):
        mine, theirs = by_name[name], by_name[against]
        said = against.removeprefix("sessions: ")
        mine.note = f"{times(mine, theirs, said, mins=False)}; {times(mine, floor, 'python3 -c pass', mins=False)}"
    return rows
