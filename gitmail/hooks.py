"""The hook adapter for host programs (Claude Code, Codex): `gitmail hook MOMENT --host HOST` reads the host's JSON
payload on stdin, makes one call to the action layer, and answers in the host's format; the receipts of what it
showed are written after the host has its answer. MOMENT is one of session-start, tool, prompt, stop, wake,
session-end.

It runs at every session start (and, behind the shell pre-check in hook.sh, whenever something new may have
arrived), so it imports no command-line library, and it never fails a session: whatever goes wrong, it exits 0
(2 only to wake an idle Claude Code session, which is how that host is asked to start a turn), says at most one
short factual line to the session, and logs the details next to the mailbox (edge.py).
"""

from __future__ import annotations

import os
import sys

from gitmail.edge import contained
from gitmail.values import jsontext

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

WAKE_EXIT = 2  # Claude Code starts a new turn when an asyncRewake hook exits 2; its stderr reaches the model
MAX_PAYLOAD = 1 << 24  # a host payload larger than this is not read whole (a tool's output can be large)
HOSTS = ("claude", "codex")
# The moments a hook answers (delivery.Moment's, but a reader's `inbox`), spelt here: the edit hook, before every
# tool call, loads no more than a lease's verdict needs (a test checks the two agree).
MOMENTS = ("session-start", "tool", "prompt", "stop", "wake", "session-end", "edit")
KEPT_RECORD = (
    "known",
    "shown",
    "stamps",
    "repo",
    "watch",
)  # what a kept session start gives the new session it answers


class Answer:
    """What the hook prints and how it exits, and what it records once it has answered."""

    def __init__(self, stdout: dict[str, Any] | None = None, stderr: str | None = None, code: int = 0) -> None:
        self.stdout, self.stderr, self.code = stdout, stderr, code
        self.after: Callable[[], None] | None = None  # run once the host has the answer: the receipts of the showing


def main(argv: list[str]) -> int:
    moment, host, watch, problems = _arguments(argv)
    for problem in problems:
        _warn(problem)
    if moment is None:
        return 0
    answer = contained(
        lambda: run(moment, host, _stdin(), watch=watch), where=f"hook {moment} of {host}", fallback=_failure(moment)
    )
    code = _emit(answer)
    if answer.after is not None:
        _afterwards(answer.after, host)
    return code


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
    known = list(MOMENTS)
    if moment not in known:
        problems.append(f"unknown hook {moment!r}; known: {', '.join(known)}")
        return None, host, watch, problems
    return moment, host, watch, problems


def run(moment_name: str, host: str, raw: str, *, watch: bool = False) -> Answer:
    """One hook run: the payload in, the host's answer out (and what to record once it is given)."""
    if moment_name == "edit":  # before every tool call: only what a lease's verdict needs is loaded
        return _before_edit(host, _payload(raw))
    from gitmail import actions, delivery
    from gitmail.store import hookfiles, stamps, startcache
    from gitmail.store.opening import open_mailbox
    from gitmail.values.names import RepoName, repo_problem
    from gitmail.workspace import Actor, Session, own_command, place

    payload = _payload(raw)
    moment = delivery.Moment(moment_name)
    if payload.get("agent_id"):  # a subagent's event: the main session's mail is not for it
        return Answer()
    cwd = _cwd(payload)
    found = place(cwd) if cwd is not None else None
    session_id, transcript = payload.get("session_id"), payload.get("transcript_path")
    transcript = transcript if isinstance(transcript, str) and transcript and "\0" not in transcript else None
    session = Session(host, session_id, transcript) if isinstance(session_id, str) else None
    if moment is delivery.Moment.END:  # what the session knew goes, whichever repository it ended in
        if session is not None:
            reason = payload.get("reason")
            actions.session_ended(open_mailbox(), session, reason if isinstance(reason, str) else "")
        return Answer()
    if found is None or repo_problem(found.name):
        return Answer()
    store = open_mailbox()
    if not store.exists():
        return Answer()
    actor = Actor(RepoName(found.name), found.home, host, session, found)
    wake = watch and delivery.wake_enabled(store)
    continuing = payload.get("stop_hook_active") is True
    shown = actions.at_moment(store, actor, moment, continuing=continuing, command=own_command(), watch=wake)
    carried = delivery.capability(host, moment)
    event = str(payload.get("hook_event_name") or (carried.event if carried else ""))
    watched = [str(p) for p in stamps.ensure(store.root, actor.repo)] if watch and delivery.wake_enabled(store) else []
    reply = answer(host, moment, event, shown.text, watched)
    if shown.recording is not None:
        recording = shown.recording

        def record() -> None:
            try:
                actions.record(store, recording)
            except BaseException:  # not written: the next session start must run Python and write it then
                startcache.forget(store.root, host, found.top)
                raise

        reply.after = record
    if moment is delivery.Moment.START and session is not None and shown.record is not None:
        if shown.settled and event == "SessionStart" and shown.generic:
            until = due(store, actor.repo)
            key = startcache.key(store.root, shown.stamps, watch=watch)
            kept = {k: v for k, v in shown.record.items() if k in KEPT_RECORD}  # nothing of this session's own
            quiet = hookfiles.quiet_line(shown.stamps, shown.quiet)
            startcache.keep(
                store.root, host, found.top, key=key, record=kept, answer=reply.stdout, due=until, config=found.config,
                quiet=quiet,
            )  # fmt: skip
        else:
            startcache.forget(store.root, host, found.top)
    return reply


def _before_edit(host: str, payload: dict[str, Any]) -> Answer:
    """A PreToolUse hook: deny a write to another holder's exclusive lease (the one decision both hosts honour),
    or let it run with a line naming a shared lease's holder; say nothing otherwise. A subagent's tool calls are
    its session's, and held to its leases alike."""
    from gitmail import actions
    from gitmail.store.opening import open_mailbox
    from gitmail.values.names import RepoName, repo_problem
    from gitmail.workspace import Actor, Session, place

    tool, arguments, cwd = payload.get("tool_name"), payload.get("tool_input"), _cwd(payload)
    if not isinstance(tool, str) or not isinstance(arguments, dict) or cwd is None:
        return Answer()
    found = place(cwd)
    session_id = payload.get("session_id")
    if found is None or repo_problem(found.name) or not isinstance(session_id, str):
        return Answer()
    store = open_mailbox()
    if not store.exists():
        return Answer()
    actor = Actor(RepoName(found.name), found.home, host, Session(host, session_id), found)
    verdict = actions.before_edit(store, actor, tool, arguments, cwd)
    specific: dict[str, Any] = {"hookEventName": "PreToolUse"}
    if verdict.deny is not None:
        specific |= {"permissionDecision": "deny", "permissionDecisionReason": f"gitmail: {verdict.deny}"}
    elif verdict.told is not None:
        specific["additionalContext"] = verdict.told
    else:
        return Answer()
    return Answer({"hookSpecificOutput": specific})


def due(store: Any, repo: Any) -> float | None:
    """When a kept session start stops holding: when one must start a sync (with remotes that sync by themselves),
    or a lease it names ends."""
    from gitmail.sync import background
    from gitmail.values.layout import leases_prefix

    auto = background.automatic(store)
    times = [background.next_due(store, auto)] if auto else []
    if store.refs_under(leases_prefix(repo)):  # what reads and judges leases is loaded only when one is held
        from gitmail.mailbox import leasing

        times += [s.lease.expires for s in leasing.standing(store, repo) if s.held]
    return min(times) if times else None


def answer(host: str, moment: Any, event: str, text: str | None, watched: list[str]) -> Answer:
    """The host's format for this moment."""
    from gitmail.delivery import Channel, Moment, capability

    carried = capability(host, moment)
    if moment is Moment.WAKE:
        return Answer(stderr=text, code=WAKE_EXIT) if text else Answer()
    if moment is Moment.STOP and carried is not None and carried.channel is Channel.NOTICE:
        return Answer({"decision": "block", "reason": text}) if text else Answer()
    specific: dict[str, Any] = {"hookEventName": event}
    if text:
        specific["additionalContext"] = text
    if watched and moment is Moment.START:
        specific["watchPaths"] = watched
    return Answer({"hookSpecificOutput": specific}) if len(specific) > 1 else Answer()


def _cwd(payload: dict[str, Any]) -> str | None:
    """Where the session works: the payload's cwd, else this process's directory; None when neither exists (a
    deleted directory): then there is no repository to deliver for."""
    cwd = payload.get("cwd")
    if isinstance(cwd, str) and cwd:
        return cwd if os.path.isdir(cwd) else None
    try:
        return os.getcwd()
    except OSError:  # the working directory was deleted
        return None


def _stdin() -> str:
    if sys.stdin is None or sys.stdin.isatty():
        return ""
    try:
        return sys.stdin.buffer.read(MAX_PAYLOAD).decode("utf-8", errors="replace")
    except (OSError, ValueError):
        return ""


def _payload(raw: str) -> dict[str, Any]:
    try:
        payload = jsontext.loads(raw) if raw.strip() else {}
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
        return {}
    return payload if isinstance(payload, dict) else {}


def _failure(moment: str) -> Callable[[str], Answer]:
    """Tell the session in one line that mail could not be checked (only where the session is told things anyway:
    at session start, never in the middle of its work)."""

    def fallback(line: str) -> Answer:
        if moment != "session-start":
            return Answer()
        text = f"gitmail could not check this repository's mail: {line}"
        return Answer({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}})

    return fallback


def _emit(answer: Answer) -> int:
    try:
        if answer.stdout is not None:
            sys.stdout.write(jsontext.dumps(answer.stdout, ensure_ascii=False) + "\n")
            sys.stdout.flush()
        if answer.stderr:
            sys.stderr.write(answer.stderr + "\n")
            sys.stderr.flush()
    except (OSError, ValueError):
        return 0  # the host stopped listening
    return answer.code


def _afterwards(work: Callable[[], None], host: str) -> None:
    """Run `work` once the host has its answer: in a child of this process, detached from the host's pipes and
    process group, so the hook exits now and the host waits for nothing. What fails here is written at a later
    showing (receipts are only ever added where missing)."""
    try:
        pid = os.fork()
    except OSError:
        return
    if pid:
        return
    try:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        contained(work, where=f"hook of {host}: recording what was shown", fallback=lambda line: None)
    finally:
        os._exit(0)


def _warn(text: str) -> None:
    print(f"gitmail: warning: {text}", file=sys.stderr)
