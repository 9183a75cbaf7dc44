"""The moments group: the hooks inside a running session, as installed, side by side in one interleaved run with
`python3 -c pass` (0 archived, 20 pending), each with its ratio to it. The quiet path (a tool call with nothing
new: hook.sh for Claude Code, which names the session in the environment, and for Codex, which names it in the
payload), a tool call with one new message, and the session start with nothing new to record (a new session each
run), with one new message (its first showing writes its delivery receipt), with nothing new in a mailbox whose
remote syncs by itself (hourly, not yet due), and with one new message beside 1,000 archived."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from .fixtures import (
    RECIPIENT,
    NewMail,
    Sandbox,
    archive_of,
    check_hook,
    check_quiet,
    hook_payload,
    installed_hook,
    new_sessions,
    syncing_by_itself,
    tool_payload,
)
from .runner import BenchError, Moment, Row, Settings, interleaved, run, timed, times

ROWS = (
    "moments: python3 -c pass",
    "moments: quiet path, Claude Code",
    "moments: quiet path, Codex",
    "moments: tool call with new mail",
    "moments: session start, mail unchanged",
    "moments: session start with new mail (its answer made when the mail came)",
    "moments: session start, mail unchanged, a remote syncing by itself",
    "moments: session start with new mail, 20 pending, 1,000 archived",
    "moments: session start with new mail, Python answering (a resumed session)",
)


@dataclass(frozen=True)
class Sessions:
    """The sessions the moments run in, each started once (its start hook ran) before the timed runs."""

    web: Path  # Claude Code's and Codex's sessions, which find nothing new
    ops: Path  # where new mail goes, so that web's sessions keep finding nothing new
    env: dict[str, str]  # the mailbox of 0 archived messages
    auto_env: dict[str, str]  # a copy whose remote syncs by itself
    big_env: dict[str, str]  # a copy with 1,000 archived
    to_ops: NewMail
    to_web_big: NewMail
    to_ops_prepared: NewMail


def start_sessions(box: Sandbox) -> Sessions:
    from gitmail.store.repository import Store

    web, ops, env = box.repo(RECIPIENT), box.repo("ops"), box.env(0)
    run(["git", "init", "-q", str(ops)])
    for session, host in (("bench-claude", "claude"), ("bench-codex", "codex")):
        timed(installed_hook("session-start", host), cwd=web, env=env, stdin=hook_payload(web, session))
    timed(installed_hook("session-start", "claude"), cwd=ops, env=env, stdin=hook_payload(ops, "bench-mail"))
    timed(installed_hook("session-start", "claude"), cwd=ops, env=env, stdin=hook_payload(ops, "bench-resumed"))
    store = Store(box.mailbox(0))
    auto_env = syncing_by_itself(box)
    big_env, big_store = archive_of(box, 1000)
    timed(installed_hook("session-start", "claude"), cwd=web, env=big_env, stdin=hook_payload(web, "bench-big"))
    return Sessions(
        web, ops, env, auto_env, big_env, NewMail(store, "ops"), NewMail(big_store, RECIPIENT, prepared=True),
        NewMail(store, "ops", prepared=True),
    )  # fmt: skip


def check_new(output: bytes) -> None:
    check_hook(output)
    if b"bench: new" not in output:
        raise BenchError(f"the new message was not delivered: {output[:300]!r}")


def measure_moments(box: Sandbox, settings: Settings) -> list[Row]:
    at = start_sessions(box)
    web, ops, env, start = at.web, at.ops, at.env, installed_hook("session-start", "claude")
    claude, codex = installed_hook("tool", "claude"), installed_hook("tool", "codex")
    new_start = new_sessions(web)
    moments = [
        Moment(ROWS[0], [sys.executable, "-c", "pass"], web, env),
        Moment(
            ROWS[1],
            claude,
            web,
            {**env, "CLAUDE_CODE_SESSION_ID": "bench-claude"},
            tool_payload(web, "bench-claude", "PostToolBatch"),
            check=check_quiet,
        ),
        Moment(
            ROWS[2],
            codex,
            web,
            env,
            tool_payload(web, "bench-codex", "PostToolUse"),
            check=check_quiet,
        ),
        Moment(
            ROWS[3],
            claude,
            ops,
            {**env, "CLAUDE_CODE_SESSION_ID": "bench-mail"},
            tool_payload(ops, "bench-mail", "PostToolBatch"),
            before=at.to_ops.arrive,
            after=at.to_ops.archive,
            check=check_new,
        ),
        Moment(ROWS[4], start, web, env, new_start, check=check_hook),
        Moment(
            ROWS[5],
            start,
            ops,
            env,
            new_sessions(ops, "bench-new-mail"),
            before=at.to_ops_prepared.arrive,
            after=at.to_ops_prepared.archive,
            check=check_new,
        ),
        Moment(
            ROWS[6],
            start,
            web,
            at.auto_env,
            new_start,
            check=check_hook,
        ),
        Moment(
            ROWS[7],
            start,
            web,
            at.big_env,
            new_sessions(web, "bench-new-big"),
            before=at.to_web_big.arrive,
            after=at.to_web_big.archive,
            check=check_new,
        ),
        Moment(
            ROWS[8],
            start,
            ops,
            env,
            hook_payload(ops, "bench-resumed"),
            before=at.to_ops.arrive,
            after=at.to_ops.archive,
            check=check_new,
        ),
    ]
    rows = interleaved(moments, settings.runs)
    for row in rows[1:]:
        row.note = times(row, rows[0], "python3 -c pass")
    return rows
