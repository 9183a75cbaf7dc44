"""The reads group: what a session or a person reads, at each archive size. `gitmail inbox --peek` in `web` (20
pending), `gitmail log -n 20`, and the session-start hook with a host's JSON payload on stdin: Python answering,
the same with delivery receipts turned off, and as a host runs it (hook.sh, which answers a new session's start
whose mail is unchanged from what the last start kept). The first run of each at each size is checked."""

from __future__ import annotations

import sys
from pathlib import Path

from .fixtures import (
    RECIPIENT,
    Sandbox,
    check_hook,
    check_inbox,
    git,
    gitmail_command,
    gitmail_package,
    hook_payload,
    new_sessions,
)
from .runner import BenchError, Row, Settings, measure

ROWS = (
    "inbox",
    "log -n 20",
    "hook session-start",
    "hook session-start, receipts off",
    "hook session-start, kept answer",
)


def measure_reads(box: Sandbox, settings: Settings) -> list[Row]:
    web, gitmail, sizes, runs = box.repo(RECIPIENT), gitmail_command(), settings.sizes, settings.runs
    inbox = measure(
        "inbox", [*gitmail, "inbox", "--peek"], env=box.env, cwd=web, sizes=sizes, runs=runs, check=check_inbox
    )
    log = measure(
        "log -n 20", [*gitmail, "log", "-n", "20"], env=box.env, cwd=web, sizes=sizes, runs=runs, check=check_log
    )
    python = [*gitmail, "hook", "session-start", "--host", "claude"]
    hook = measure(
        "hook session-start",
        python,
        env=box.env,
        cwd=web,
        sizes=sizes,
        runs=runs,
        stdin=hook_payload(web),
        check=check_hook,
    )
    for size in sizes:  # the same hook with delivery receipts turned off, for what receipts cost
        git(box.mailbox(size), "config", "gitmail.receipts", "false")
    unreceipted = measure(
        "hook session-start, receipts off",
        python,
        env=box.env,
        cwd=web,
        sizes=sizes,
        runs=runs,
        stdin=hook_payload(web),
        check=check_hook,
    )
    for size in sizes:
        git(box.mailbox(size), "config", "--unset", "gitmail.receipts")
    # What a host runs: the shell in front of the hook answers a start that repeats the last one itself.
    shell = ["sh", str(Path(gitmail_package()) / "hook.sh"), "session-start", "claude", sys.executable, "--watch"]
    kept = measure(
        "hook session-start, kept answer",
        shell,
        env=box.env,
        cwd=web,
        sizes=sizes,
        runs=runs,
        stdin=new_sessions(web),
        check=check_hook,
    )
    return inbox + log + hook + unreceipted + kept


def check_log(output: bytes) -> None:
    if len(output.decode().splitlines()) != 20:
        raise BenchError(f"gitmail log -n 20 printed {len(output.decode().splitlines())} lines, not 20")
