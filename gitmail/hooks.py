"""Hook entry points for host programs (Claude Code, Codex): read the host's JSON on stdin, ask the delivery policy,
answer in the host's format. `gitmail hook MOMENT --host HOST`, where MOMENT is one of session-start, tool, prompt,
stop, wake.

Runs at every session start (and, behind the shell pre-check in hook.sh, whenever something new may have arrived),
so it imports no command-line library, and it never fails a session: whatever goes wrong, it exits 0 (2 only to
wake an idle Claude Code session, which is how that host is asked to start a turn), says at most one short
factual line to the session, and logs the details next to the mailbox.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

LOCK_WAIT = 1.5  # seconds one hook run may wait for the mailbox, all waits together
HOSTS = ("claude", "codex")
MOMENTS = {  # our name -> the host event it answers by default
    "session-start": "SessionStart",
    "tool": "PostToolUse",
    "prompt": "UserPromptSubmit",
    "stop": "Stop",
    "wake": "FileChanged",
    "session-end": "SessionEnd",
}
WAKE_EXIT = 2  # Claude Code starts a new turn when an asyncRewake hook exits 2; its stderr reaches the model
MAX_PAYLOAD = 1 << 24  # a host payload larger than this is not read whole (a tool's output can be large)


class Answer:
    """What the hook prints and how it exits."""

    def __init__(self, stdout: dict[str, Any] | None = None, stderr: str | None = None, code: int = 0) -> None:
        self.stdout, self.stderr, self.code = stdout, stderr, code


def main(argv: list[str]) -> int:
    moment, host, watch, problems = _arguments(argv)
    for problem in problems:
        _warn(problem)
    if moment is None:
        return 0
    try:
        answer = run(moment, host, _stdin(), watch=watch)
    except Exception as error:  # a hook must never break the session it serves
        answer = _failure(moment, host, error)
    return _emit(answer)


def _arguments(argv: list[str]) -> tuple[str | None, str, bool, list[str]]:
    moment = argv[0] if argv else ""
    host, watch, problems = "claude", False, []
    rest = iter(argv[1:])
    for extra in rest:
        if extra == "--host":
            host = next(rest, "claude")
        elif extra == "--watch":
            watch = True
        else:
            problems.append(f"ignoring unknown argument {extra!r}")
    if host not in HOSTS:
        problems.append(f"unknown host {host!r}; answering as Claude Code")
        host = "claude"
    if moment not in MOMENTS:
        problems.append(f"unknown hook {moment!r}; known: {', '.join(MOMENTS)}")
        return None, host, watch, problems
    return moment, host, watch, problems


def run(moment_name: str, host: str, raw: str, *, watch: bool = False) -> Answer:
    """One hook run: the payload in, the host's answer out."""
    from gitmail import delivery, render
    from gitmail.store import stamps
    from gitmail.store.lock import Deadline
    from gitmail.store.opening import open_mailbox
    from gitmail.values.names import RepoName, name_problem
    from gitmail.workspace import toplevel

    deadline = Deadline(LOCK_WAIT)
    payload = _payload(raw)
    if moment_name == "session-end":
        session = payload.get("session_id")
        if isinstance(session, str) and not payload.get("agent_id"):
            from gitmail.store import sessions

            sessions.forget(open_mailbox().path, host, session)
        return Answer()
    moment = delivery.Moment(moment_name)
    event = str(payload.get("hook_event_name") or MOMENTS[moment_name])
    if payload.get("agent_id"):  # a subagent's event: the main session's mail is not for it
        return Answer()
    top = toplevel(_cwd(payload))
    if top is None or name_problem(top.name):
        return Answer()
    repo = RepoName(top.name)
    store = open_mailbox()
    if not store.exists():
        return Answer()
    due = None  # with automatic remotes: when a session start must next start a sync
    if moment is delivery.Moment.START:
        from gitmail.sync import engine as sync

        auto = sync.automatic(store)
        if auto:
            sync.start_if_due(store, auto)  # a background sync when one is due: spawned, never waited for
            due = sync.next_due(store, auto)
    session = payload.get("session_id")
    reader = delivery.Reader(
        repo=repo,
        here=top,
        host=host,
        session=session if isinstance(session, str) else None,
        voice=render.Voice(command=delivery.own_command()),
    )
    channel = delivery.Channel.CONTEXT
    if moment is delivery.Moment.WAKE or (moment is delivery.Moment.STOP and host == "codex"):
        channel = delivery.Channel.NOTICE  # these hosts carry it as a user turn: gitmail's own words only
    if moment is delivery.Moment.WAKE and not wake_enabled(store):
        return Answer()
    limit, window = wake_limits(store)
    result = delivery.deliver(
        store,
        reader,
        moment,
        channel=channel,
        deadline=deadline,
        continuing=payload.get("stop_hook_active") is True,
        wake_limit=limit,
        wake_window=window,
    )
    watched = [str(p) for p in stamps.ensure(store.path, repo)] if watch and wake_enabled(store) else []
    reply = answer(host, moment, event, result.text, watched)
    if moment is delivery.Moment.START and reader.session and result.record is not None:
        from gitmail.store import startcache

        if result.settled and event == "SessionStart":
            key = startcache.key(store.path, result.stamps, watch=watch)
            startcache.keep(store.path, host, repo, key=key, record=result.record, answer=reply.stdout, due=due)
        else:
            startcache.forget(store.path, host, repo)
    return reply


def answer(host: str, moment: Any, event: str, text: str | None, watched: list[str]) -> Answer:
    """The host's format for this moment."""
    name = moment.value
    if name == "wake":
        return Answer(stderr=text, code=WAKE_EXIT) if text else Answer()
    if name == "stop" and host == "codex":
        return Answer({"decision": "block", "reason": text}) if text else Answer()
    specific: dict[str, Any] = {"hookEventName": event}
    if text:
        specific["additionalContext"] = text
    if watched and name == "session-start":
        specific["watchPaths"] = watched
    return Answer({"hookSpecificOutput": specific}) if len(specific) > 1 else Answer()


def wake_enabled(store: Any) -> bool:
    """The kill switch for waking idle sessions: GITMAIL_WAKE=0 in the environment, or `gitmail.wake = false`
    in the mailbox's config."""
    if os.environ.get("GITMAIL_WAKE", "").strip().lower() in ("0", "false", "no", "off"):
        return False
    return bool(store.flag("wake"))


def wake_limits(store: Any) -> tuple[int, float]:
    """At most this many wakes per this many seconds per session: `gitmail.wakeLimit` and `gitmail.wakeWindow` in
    the mailbox's config, else the defaults."""
    from gitmail import delivery

    try:
        limit = max(0, int(store.setting("wakeLimit") or delivery.WAKE_LIMIT))
        window = max(0.0, float(store.setting("wakeWindow") or delivery.WAKE_WINDOW))
    except ValueError:
        return delivery.WAKE_LIMIT, delivery.WAKE_WINDOW
    return limit, window


def _cwd(payload: dict[str, Any]) -> str:
    cwd = payload.get("cwd")
    if isinstance(cwd, str) and cwd:
        return cwd
    try:
        return os.getcwd()
    except OSError:  # the working directory was deleted
        return os.environ.get("PWD", "/")


def _stdin() -> str:
    if sys.stdin is None or sys.stdin.isatty():
        return ""
    try:
        return sys.stdin.buffer.read(MAX_PAYLOAD).decode("utf-8", errors="replace")
    except (OSError, ValueError):
        return ""


def _payload(raw: str) -> dict[str, Any]:
    try:
        payload = json.loads(raw) if raw.strip() else {}
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
        return {}
    return payload if isinstance(payload, dict) else {}


def _failure(moment: str, host: str, error: Exception) -> Answer:
    """Log the details; tell the session in one line that mail could not be checked (only where the session is
    told things anyway: at session start, never in the middle of its work)."""
    text = report(error, moment)
    if moment != "session-start":
        return Answer()
    return Answer({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}})


def report(error: BaseException, where: str) -> str:
    """Log an unexpected failure with its traceback beside the mailbox; one line saying so."""
    import time
    import traceback

    detail = "".join(traceback.format_exception(error))
    reason = (str(error).splitlines() or [type(error).__name__])[0]
    try:
        from gitmail.store.location import default_path

        log = default_path().parent / "gitmail.log"
        if log.parent.is_dir():
            with open(log, "a", encoding="utf-8") as handle:
                handle.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} {where}: {detail}\n")
            return f"gitmail could not check this repository's mail: {reason} (details: {log})."
    except Exception:  # no home directory, an unusable GITMAIL_DIR, a full disk: the one line is enough
        pass
    return f"gitmail could not check this repository's mail: {reason}."


def _emit(answer: Answer) -> int:
    try:
        if answer.stdout is not None:
            sys.stdout.write(json.dumps(answer.stdout, ensure_ascii=False) + "\n")
            sys.stdout.flush()
        if answer.stderr:
            sys.stderr.write(answer.stderr + "\n")
            sys.stderr.flush()
    except (OSError, ValueError):
        return 0  # the host stopped listening
    return answer.code


def _warn(text: str) -> None:
    print(f"gitmail: warning: {text}", file=sys.stderr)
