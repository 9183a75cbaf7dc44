"""The leases group: the PreToolUse hook as installed (hook.sh, then Python only where an edit may touch another
session's lease) before an edit in a repository with no lease, with 20 leases none of which covers the file, and of
a leased file (denied); the pre-commit guard (`gitmail install --guard`) of a session's commit in a repository with
no lease and with 20 leases of another session none of which covers the staged file; `gitmail lease` beside
`gitmail send`; all in one interleaved run with `python3 -c pass`. Then eight processes racing for one path, once:
exactly one may hold it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from .fixtures import SEND_ARGS, Sandbox, gitmail_command, hook_payload, installed_hook, pending_refs, remove_sent
from .runner import WARMUPS, BenchError, Moment, Row, Settings, interleaved, run, timed, times

ROWS = (
    "leases: python3 -c pass",
    "leases: before an edit, no lease in the repository",
    "leases: before an edit, 20 leases, none on the file",
    "leases: before an edit of another session's leased file (denied)",
    "leases: gitmail send",
    "leases: gitmail lease (and release, untimed)",
    "leases: 8 processes racing for one path",
    "leases: pre-commit guard, no lease in the repository",
    "leases: pre-commit guard, 20 leases of another session, none staged",
)
LEASED = 20


def edit_payload(repo: Path, session: str, file: str) -> bytes:
    """A Write as Claude Code hands it to its PreToolUse hook."""
    call = {"file_path": str(repo / file), "content": "x" * 200}
    payload: dict[str, object] = {"session_id": session, "transcript_path": f"/tmp/{session}.jsonl", "cwd": str(repo)}
    payload |= {"hook_event_name": "PreToolUse", "tool_name": "Write", "tool_input": call}
    return json.dumps(payload).encode()


def check_silent(output: bytes) -> None:
    if output:
        raise BenchError(f"the edit hook said something where no lease applies: {output[:300]!r}")


def check_denied(output: bytes) -> None:
    try:
        decision = json.loads(output)["hookSpecificOutput"]["permissionDecision"]
    except (ValueError, KeyError, TypeError):
        raise BenchError(f"the edit hook did not deny the leased file: {output[:300]!r}") from None
    if decision != "deny":
        raise BenchError(f"the edit hook answered {decision!r}, not deny")


def _repository(box: Sandbox, name: str) -> Path:
    repo = box.repo(name)
    run(["git", "init", "-q", str(repo)])
    (repo / "src").mkdir(exist_ok=True)
    for number in range(LEASED):
        (repo / "src" / f"module{number}.py").write_text("x\n")
    return repo


def stand_in_for_the_host() -> None:
    """This process starts the hooks as a host would: named as Claude Code's program is, so that the sessions it
    starts count as live (a lease of a session whose host program is gone is absent), as the test suite does."""
    comm = Path("/proc/self/comm")
    if comm.exists():
        comm.write_text("claude")


def measure_leases(box: Sandbox, settings: Settings) -> list[Row]:
    stand_in_for_the_host()
    env = box.env(0)
    quiet, busy = _repository(box, "unleased"), _repository(box, "leased")
    start, edit = installed_hook("session-start", "claude"), installed_hook("edit", "claude")
    for repo, session in ((quiet, "bench-editor"), (busy, "bench-reviser"), (busy, "bench-holder")):
        timed(start, cwd=repo, env=env, stdin=hook_payload(repo, session))  # one work tree per session, as hosts do
    holder = {**env, "CLAUDE_CODE_SESSION_ID": "bench-holder"}
    for number in range(LEASED):
        run([*gitmail_command(), "lease", f"src/module{number}.py"], cwd=busy, env=holder)
    editor = {**env, "CLAUDE_CODE_SESSION_ID": "bench-editor"}
    reviser = {**env, "CLAUDE_CODE_SESSION_ID": "bench-reviser"}
    timed(edit, cwd=quiet, env=editor, stdin=edit_payload(quiet, "bench-editor", "src/new.py"))  # writes the index
    leased_here = {**env, "CLAUDE_CODE_SESSION_ID": "bench-leaser"}
    quiet_guard, busy_guard = _guarded(quiet, env, editor), _guarded(busy, env, reviser)
    before = pending_refs(box, 0)

    def release() -> None:
        run([*gitmail_command(), "release"], cwd=quiet, env=leased_here)

    moments = [
        Moment(ROWS[0], [sys.executable, "-c", "pass"], quiet, env),
        Moment(ROWS[1], edit, quiet, editor, edit_payload(quiet, "bench-editor", "src/module3.py"), check=check_silent),
        Moment(ROWS[2], edit, busy, reviser, edit_payload(busy, "bench-reviser", "src/other.py"), check=check_silent),
        Moment(ROWS[3], edit, busy, reviser, edit_payload(busy, "bench-reviser", "src/module7.py"), check=check_denied),
        Moment(ROWS[4], [*gitmail_command(), *SEND_ARGS], box.repo("api"), env),
        Moment(ROWS[5], [*gitmail_command(), "lease", "src/module1.py"], quiet, leased_here, after=release),
        Moment(ROWS[7], quiet_guard, quiet, editor),
        Moment(ROWS[8], busy_guard, busy, reviser),
    ]
    rows = interleaved(moments, settings.runs)
    remove_sent(box, 0, before, settings.runs + WARMUPS, "send")
    for row in [*rows[1:4], *rows[6:]]:
        row.note = times(row, rows[0], "python3 -c pass")
    rows[5].note = times(rows[5], rows[4], "gitmail send")
    return [*rows[:6], _race(box, quiet, env), *rows[6:]]


def _guarded(repo: Path, env: dict[str, str], committer: dict[str, str]) -> list[str]:
    """The pre-commit hook `gitmail install --guard` puts in the repository, with a file staged that no lease covers;
    checked once to let the commit through in silence."""
    run([*gitmail_command(), "install", "--guard"], cwd=repo, env=env)
    (repo / "src" / "other.py").write_text("x\n")
    run(["git", "add", "src/other.py"], cwd=repo, env=env)
    hook = [str(repo / ".git" / "hooks" / "pre-commit")]
    done = subprocess.run(hook, cwd=repo, env=committer, capture_output=True)
    if done.returncode != 0 or done.stdout or done.stderr:
        raise BenchError(f"the guard did not let the commit through in silence: {done.returncode} {done.stderr!r}")
    return hook


def _race(box: Sandbox, repo: Path, env: dict[str, str]) -> Row:
    """Eight sessions asking at once for one path: one holder, seven refused in one line each, nothing else; the
    row's time is the whole race's."""
    began = time.perf_counter()
    racers = [
        subprocess.Popen(
            [*gitmail_command(), "lease", "src/module0.py"],
            cwd=repo,
            env={**env, "CLAUDE_CODE_SESSION_ID": f"racer-{n}"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for n in range(8)
    ]
    results = [(racer.wait(120), *racer.communicate()) for racer in racers]
    took = (time.perf_counter() - began) * 1000
    held = [r for r in results if r[0] == 0]
    refused = [r for r in results if r[0] == 1 and r[2].count("\n") == 1 and " is leased exclusive by " in r[2]]
    errors = len(results) - len(held) - len(refused)
    if len(held) != 1 or errors:
        raise BenchError(f"the race left {len(held)} holders and {errors} errors: {results}")
    for racer in range(8):
        run([*gitmail_command(), "release"], cwd=repo, env={**env, "CLAUDE_CODE_SESSION_ID": f"racer-{racer}"})
    note = f"{len(held)} holder, {len(refused)} refused in one line each, {errors} errors"
    return Row(ROWS[6], None, took, took, 1, note=note)
