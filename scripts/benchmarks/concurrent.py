"""The concurrent group, at 0 archived and at the largest size: P processes sending M messages each through the
Python API at once (released together by a "go" file, imports done beforehand), timed from go to the last exit;
and M rounds of P `gitmail send` processes in parallel. Bursts are long, so each is repeated --concurrent-runs
times, after 2 warm-up bursts of one message per process; every message sent must arrive pending."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from .fixtures import RECIPIENT, SEND_ARGS, SENDER, Sandbox, gitmail_command, pending_refs, remove_sent
from .runner import WARMUPS, BenchError, Row, Settings, progress, rotated

ROWS = ("concurrent sends", "concurrent CLI sends")
WORKER_START_TIMEOUT = 60.0
LAUNCHER = Path(__file__).resolve().parent.parent / "bench"  # `scripts/bench --worker READY GO COUNT` is a sender

Burst = Callable[[Sandbox, int, int, int], float]


def measure_concurrent(box: Sandbox, settings: Settings) -> list[Row]:
    return bursts(ROWS[0], api_burst, box, settings) + bursts(ROWS[1], cli_burst, box, settings)


def worker(ready: str, go: str, count: str) -> int:
    """One concurrent sender: imports done and pygit2 loaded, it says ready, waits for go, then sends."""
    import pygit2  # noqa: F401  (loaded before the barrier, as a long-running process would have it)

    from gitmail import mailbox as api
    from gitmail.store.repository import Store

    store = Store()
    Path(ready).touch()
    while not os.path.exists(go):
        time.sleep(0.001)
    for number in range(int(count)):
        api.send(store, sender=SENDER, to=RECIPIENT, subject=f"bench {number}", body="hello")
    return 0


def api_burst(box: Sandbox, size: int, processes: int, per_process: int) -> float:
    """Seconds from go to the last worker's exit."""
    with tempfile.TemporaryDirectory(dir=box.root) as scratch:
        go = Path(scratch) / "go"
        flags = [Path(scratch) / f"ready-{n}" for n in range(processes)]
        argv = [sys.executable, str(LAUNCHER), "--worker"]
        workers = [
            subprocess.Popen([*argv, str(flag), str(go), str(per_process)], env=box.env(size), stderr=subprocess.PIPE)
            for flag in flags
        ]
        try:
            await_ready(workers, flags)
            start = time.perf_counter()
            go.touch()
            errors = [w.communicate()[1] for w in workers]
            elapsed = time.perf_counter() - start
        finally:
            stop(workers)
    failed = [error for w, error in zip(workers, errors, strict=True) if w.returncode != 0]
    if failed:
        raise BenchError(f"{len(failed)} concurrent senders failed: {failed[0].decode().strip()[-500:]}")
    return elapsed


def await_ready(workers: Sequence[subprocess.Popen[bytes]], flags: Sequence[Path]) -> None:
    deadline = time.monotonic() + WORKER_START_TIMEOUT
    while not all(flag.exists() for flag in flags):
        if any(w.poll() is not None for w in workers):
            errors = next(w.communicate()[1] for w in workers if w.returncode is not None)
            raise BenchError(f"a concurrent sender died before go: {errors.decode().strip()[-500:]}")
        if time.monotonic() > deadline:
            raise BenchError(f"the concurrent senders were not ready within {WORKER_START_TIMEOUT:g} s")
        time.sleep(0.005)


def stop(processes: Sequence[subprocess.Popen[bytes]]) -> None:
    """Kill whichever of our own processes are still running (after an error), and reap them."""
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait()


def cli_burst(box: Sandbox, size: int, processes: int, rounds: int) -> float:
    """Seconds for `rounds` rounds of `processes` parallel `gitmail send` processes."""
    argv = [*gitmail_command(), *SEND_ARGS]
    start = time.perf_counter()
    for _ in range(rounds):
        senders = [start_sender(argv, box.repo(SENDER), box.env(size)) for _ in range(processes)]
        try:
            errors = [s.communicate()[1] for s in senders]
        finally:
            stop(senders)
        failed = [error for s, error in zip(senders, errors, strict=True) if s.returncode != 0]
        if failed:
            raise BenchError(f"{len(failed)} of {processes} gitmail send processes failed: {failed[0].decode()}")
    return time.perf_counter() - start


def start_sender(argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def counted_burst(box: Sandbox, size: int, burst: Burst, processes: int, per_process: int, what: str) -> float:
    before = pending_refs(box, size)
    seconds = burst(box, size, processes, per_process)
    remove_sent(box, size, before, processes * per_process, what)
    return seconds


def bursts(name: str, burst: Burst, box: Sandbox, settings: Settings) -> list[Row]:
    """Bursts alternating between 0 and the largest size, after warm-up bursts of one message per process."""
    processes, per_process = settings.processes, settings.per_process
    for size in settings.ends:
        for _ in range(WARMUPS):
            counted_burst(box, size, burst, processes, 1, name)
    seconds: dict[int, list[float]] = {size: [] for size in settings.ends}
    for turn in range(settings.concurrent_runs):
        for size in rotated(settings.ends, turn):
            seconds[size].append(counted_burst(box, size, burst, processes, per_process, name))
    return [concurrent_row(name, size, seconds[size], processes, per_process) for size in settings.ends]


def concurrent_row(name: str, size: int, seconds: Sequence[float], processes: int, per_process: int) -> Row:
    messages = processes * per_process
    row = Row(
        name,
        size,
        statistics.median(seconds) * 1000,
        min(seconds) * 1000,
        len(seconds),
        messages=messages,
        messages_per_s=messages / statistics.median(seconds),
        note=f"{processes} processes × {per_process} messages",
    )
    progress(f"{name} at {size:,} archived: {messages} messages, {row.messages_per_s:.0f} messages/s (median)")
    return row
