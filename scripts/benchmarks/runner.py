"""The runner every group shares: whole processes timed from start to exit, warm-up runs that are not counted,
runs interleaved so that a machine getting busier or quieter shifts every row alike, medians and mins, and the
ratios written into a row's notes."""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
WARMUPS = 2  # runs before the timed ones, at every size and for every row, never counted

Check = Callable[[bytes], None]
Stdin = bytes | Callable[[], bytes] | None  # a run's standard input: the same every run, or made for each


class BenchError(Exception):
    """The benchmark cannot go on: a command failed or gitmail's output is not what it should be."""


@dataclass(frozen=True)
class Settings:
    runs: int
    sizes: list[int]  # ascending, always starting at 0
    processes: int
    per_process: int
    concurrent_runs: int
    sync_runs: int
    disk_sizes: list[int]  # messages sent and archived at which the disk group measures, ascending
    as_json: bool
    in_place: bool  # measure this interpreter's gitmail, not one installed for the run
    groups: frozenset[str]  # which groups of rows to measure

    @property
    def ends(self) -> list[int]:
        """0 and the largest size: where the writing rows are measured."""
        return sorted({0, self.sizes[-1]})


@dataclass
class Row:
    name: str
    archived: int | None
    median_ms: float
    min_ms: float
    runs: int
    ratio: float | None = None  # median over the same row's median at 0 archived
    min_ratio: float | None = None  # the same for the minimums: less moved by a busy machine
    messages: int | None = None
    messages_per_s: float | None = None
    bytes: int | None = None  # median bytes on the wire, both ways (sync rows)
    mib: tuple[float, float] | None = None  # median and min resident memory, MiB (memory rows: no time)
    note: str = ""


def progress(text: str) -> None:
    print(f"bench: {text}", file=sys.stderr, flush=True)


def run(
    argv: Sequence[str], *, stdin: bytes | None = None, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> bytes:
    """An untimed command that must succeed; what it printed."""
    done = subprocess.run(list(argv), cwd=cwd, env=env, input=stdin, capture_output=True)
    if done.returncode != 0:
        raise BenchError(f"{' '.join(argv[:4])} ... exited {done.returncode}: {done.stderr.decode().strip()}")
    return done.stdout


class Detached:
    """What a run leaves running after it exits (a session start's receipts, a send's answers for the next starts,
    a packer, a sync due), each naming the sandbox in its command line: waited for, untimed, before the next run,
    so that one row's detached work is not timed as part of whatever row runs next. Nothing waits for it in a
    session; it is measured by the rows that time it (the send's answers, the packer in the disk group)."""

    marker: str | None = None  # the sandbox's root, while one is entered
    lasting: set[int] = set()  # processes that outlived a wait (a server, a watcher): never waited for again

    @classmethod
    def running(cls) -> set[int]:
        if cls.marker is None:
            return set()
        found, mark = set(), cls.marker.encode()
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) != os.getpid():
                try:
                    with open(f"/proc/{name}/cmdline", "rb") as handle:
                        if mark in handle.read():
                            found.add(int(name))
                except OSError:
                    continue
        return found

    @classmethod
    def settle(cls, before: set[int], timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while left := cls.running() - before - cls.lasting:
            if time.monotonic() > deadline:
                cls.lasting |= left
                return
            time.sleep(0.01)


def timed(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], stdin: bytes | None = None) -> tuple[float, bytes]:
    """Seconds from process start to exit, and what it printed; a failed run stops the benchmark. What the run
    left running is waited for afterwards (`Detached`)."""
    before = Detached.running()
    start = time.perf_counter()
    done = subprocess.run(
        list(argv),
        cwd=cwd,
        env=env,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
    )
    elapsed = time.perf_counter() - start
    Detached.settle(before)
    if done.returncode != 0:
        raise BenchError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode().strip()}")
    return elapsed, done.stdout


def payload(stdin: Stdin) -> bytes | None:
    """What a run reads: the same bytes every run, or each run's own."""
    return stdin() if callable(stdin) else stdin


def rotated(items: Sequence[T], turn: int) -> list[T]:
    """The items (sizes, rows) in a different order each turn, so none always runs right after another."""
    shift = turn % len(items)
    return [*items[shift:], *items[:shift]]


def summarise(name: str, size: int | None, seconds: Sequence[float]) -> Row:
    row = Row(name, size, statistics.median(seconds) * 1000, min(seconds) * 1000, len(seconds))
    where = "" if size is None else f" at {size:,} archived"
    progress(f"{name}{where}: median {row.median_ms:.1f} ms, min {row.min_ms:.1f} ms")
    return row


def times(mine: Row, theirs: Row, what: str, *, mins: bool = True) -> str:
    """`mine` as a multiple of `theirs`, for a note: "1.23× what (min 1.10×)", or without the mins."""
    text = f"{mine.median_ms / theirs.median_ms:.2f}× {what}"
    return f"{text} (min {mine.min_ms / theirs.min_ms:.2f}×)" if mins else text


# -- one command at each archive size ----------------------------------------------------------------------------


def measure(
    name: str,
    argv: Sequence[str],
    *,
    env: Callable[[int], Mapping[str, str]],
    cwd: Path,
    sizes: Sequence[int],
    runs: int,
    stdin: Stdin = None,
    check: Check | None = None,
) -> list[Row]:
    """One row per size (`env(size)` is the environment with that size's mailbox): warm-ups first, then timed runs
    alternating between the sizes' mailboxes."""

    def once(size: int) -> tuple[float, bytes]:
        return timed(argv, cwd=cwd, env=env(size), stdin=payload(stdin))

    for size in sizes:
        for warmup in range(WARMUPS):
            _, output = once(size)
            if warmup == 0 and check is not None:
                check(output)
    seconds: dict[int, list[float]] = {size: [] for size in sizes}
    for turn in range(runs):
        for size in rotated(sizes, turn):
            seconds[size].append(once(size)[0])
    return [summarise(name, size, seconds[size]) for size in sizes]


# -- rows side by side in one interleaved run --------------------------------------------------------------------


@dataclass(frozen=True)
class Moment:
    """One row of an interleaved run: a command as a host or a person runs it, what to do before and after each run
    (untimed), and what its output must be."""

    name: str
    argv: list[str] | Callable[[], list[str]]  # the same every run, or made for each (untimed)
    cwd: Path  # hosts run hooks in the session's directory
    env: Mapping[str, str]
    stdin: Stdin = None
    before: Callable[[], None] = lambda: None
    after: Callable[[], None] = lambda: None
    check: Check | None = None


@dataclass(frozen=True)
class Timing:
    wall: float  # seconds from process start to exit
    cpu: float  # user + system seconds of the process and every process it waited for


def interleave(
    moments: Sequence[Moment], runs: int, after_turn: Callable[[], None] = lambda: None
) -> dict[str, list[Timing]]:
    """Each moment run `runs` times after the warm-ups, in a different order each turn so that every row meets the
    same machine; each moment's timed runs, in their order."""
    timings: dict[str, list[Timing]] = {moment.name: [] for moment in moments}
    for turn in range(WARMUPS + runs):
        for moment in rotated(moments, turn):
            moment.before()
            argv = moment.argv() if callable(moment.argv) else moment.argv
            used = resource.getrusage(resource.RUSAGE_CHILDREN)
            elapsed, output = timed(argv, cwd=moment.cwd, env=moment.env, stdin=payload(moment.stdin))
            done = resource.getrusage(resource.RUSAGE_CHILDREN)
            moment.after()
            if moment.check is not None:
                moment.check(output)
            if turn >= WARMUPS:
                cpu = (done.ru_utime - used.ru_utime) + (done.ru_stime - used.ru_stime)
                timings[moment.name].append(Timing(elapsed, cpu))
        after_turn()
    return timings


def interleaved(moments: Sequence[Moment], runs: int, after_turn: Callable[[], None] = lambda: None) -> list[Row]:
    """A row per moment, in their order, from one interleaved run (wall-clock time)."""
    timings = interleave(moments, runs, after_turn)
    return [summarise(name, None, [timing.wall for timing in recorded]) for name, recorded in timings.items()]
