"""The command lines: `scripts/bench` (its settings, the groups it can measure and the order of its table) and
`scripts/bench-attachments`; a run from the sandbox to the printed report."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from . import __doc__ as about
from . import (
    attachments,
    concurrent,
    disk,
    install,
    leases,
    mcp,
    moments,
    peers,
    pending,
    reads,
    send,
    sessions,
    signing,
    sync,
    view,
)
from .fixtures import Sandbox, build_mailboxes, sandbox
from .report import Report, add_ratios, as_json, machine_facts, markdown
from .runner import WARMUPS, BenchError, Row, Settings, progress, summarise, timed


@dataclass(frozen=True)
class Group:
    """What `--only NAME` measures: its rows, in the table's order, and the function that measures them all."""

    name: str
    rows: tuple[str, ...]
    measure: Callable[[Sandbox, Settings], list[Row]]


GROUPS = (  # in the order they run: each leaves the mailboxes with the 20 pending it found
    Group("reads", reads.ROWS, reads.measure_reads),
    Group("view", view.ROWS, view.measure_view),
    Group("moments", moments.ROWS, moments.measure_moments),
    Group("peers", peers.ROWS, peers.measure_peers),
    Group("pending", pending.ROWS, pending.measure_pending),
    Group("sessions", sessions.ROWS, sessions.measure_sessions),
    Group("send", send.ROWS, send.measure_send),
    Group("mcp", mcp.ROWS, mcp.measure_mcp),
    Group("concurrent", concurrent.ROWS, concurrent.measure_concurrent),
    Group("sync", sync.ROWS, sync.measure_sync),
    Group("signing", signing.ROWS, signing.measure_signing),
    Group("leases", leases.ROWS, leases.measure_leases),
    Group("disk", disk.ROWS, disk.measure_disk),
)
BASELINE = "python -c pass"  # measured in every run, the floor under every row
TABLE = (
    "send",
    "reads",
    "mcp",
    "view",
    "concurrent",
    "moments",
    "peers",
    "pending",
    "sessions",
    "sync",
    "signing",
    "leases",
    "disk",
)
NAMES = tuple(group.name for group in GROUPS)


def row_order() -> tuple[str, ...]:
    """Every row's name in the table's order: the baseline, then each group's rows as TABLE orders the groups."""
    by_name = {group.name: group for group in GROUPS}
    return (BASELINE, *(row for name in TABLE for row in by_name[name].rows))


# -- scripts/bench -----------------------------------------------------------------------------------------------


def parse_settings(argv: Sequence[str]) -> Settings | list[str]:
    """The run's settings, or the worker's arguments when this process is a concurrent-send worker."""
    parser = argparse.ArgumentParser(prog="scripts/bench", description=about.split("\n\n")[0] if about else "")
    parser.add_argument("--runs", type=int, help="timed runs per row (default 21; --quick: 5)")
    parser.add_argument("--sizes", type=sizes_list, help="archive sizes (default 0,10000,100000; --quick: 0,1000)")
    parser.add_argument("--processes", type=int, help="concurrent senders P (default 8; --quick: 4)")
    parser.add_argument("--per-process", type=int, help="messages per concurrent sender M (default 25; --quick: 5)")
    parser.add_argument("--concurrent-runs", type=int, help="timed bursts per concurrent row (default 3; --quick: 1)")
    parser.add_argument("--sync-runs", type=int, help="runs of the new-messages sync rows (default 7; --quick: 2)")
    parser.add_argument(
        "--disk-sizes",
        type=sizes_list,
        help="messages at which the disk group measures (default 1000,10000; --quick: 100)",
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run of well under a minute")
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of Markdown")
    parser.add_argument(
        "--in-place",
        action="store_true",
        help="measure the gitmail this interpreter imports, as it is installed (default: pip install . into a venv "
        "of the run's own, as users install it; an editable install costs every Python start ~20 ms)",
    )
    parser.add_argument("--only", help=f"measure only these groups, comma-separated ({', '.join(NAMES)})")
    parser.add_argument("--worker", nargs=3, metavar=("READY", "GO", "COUNT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return list(args.worker)
    quick = bool(args.quick)
    settings = Settings(
        runs=args.runs or (5 if quick else 21),
        sizes=sorted({0, *(args.sizes or ([1000] if quick else [10_000, 100_000]))}),
        processes=args.processes or (4 if quick else 8),
        per_process=args.per_process or (5 if quick else 25),
        concurrent_runs=args.concurrent_runs or (1 if quick else 3),
        sync_runs=args.sync_runs or (2 if quick else 7),
        disk_sizes=sorted({*(args.disk_sizes or ([100] if quick else [1000, 10_000]))} - {0}),
        as_json=bool(args.json),
        in_place=bool(args.in_place),
        groups=frozenset(args.only.split(",")) if args.only else frozenset(NAMES),
    )
    if not settings.groups <= set(NAMES):
        parser.error(f"--only takes groups among {', '.join(NAMES)}")
    if min(settings.runs, settings.processes, settings.per_process, settings.concurrent_runs, settings.sync_runs) < 1:
        parser.error("--runs, --processes, --per-process, --concurrent-runs and --sync-runs must be at least 1")
    return settings


def sizes_list(text: str) -> list[int]:
    try:
        sizes = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of numbers") from None
    if any(size < 0 for size in sizes):
        raise argparse.ArgumentTypeError("archive sizes cannot be negative")
    return sizes


def measure_baseline(box: Sandbox, settings: Settings) -> Row:
    env = box.env()
    argv = [sys.executable, "-c", "pass"]
    for _ in range(WARMUPS):
        timed(argv, cwd=box.root, env=env)
    return summarise(BASELINE, None, [timed(argv, cwd=box.root, env=env)[0] for _ in range(settings.runs)])


def benchmark(settings: Settings) -> Report:
    with sandbox() as box:
        recorded = {k: v for k, v in asdict(settings).items() if k != "as_json"}
        report = Report(machine_facts(), {**recorded, "groups": sorted(settings.groups)})
        report.build_seconds = build_mailboxes(box, settings.sizes)
        report.rows.append(measure_baseline(box, settings))
        for group in GROUPS:
            if group.name in settings.groups:
                report.rows += declared(group, group.measure(box, settings))
    order = row_order()
    report.rows.sort(key=lambda row: (order.index(row.name), row.archived or 0))
    add_ratios(report.rows)
    return report


def declared(group: Group, rows: list[Row]) -> list[Row]:
    """The group's rows, which must be the rows it declares: a row the table does not know has no place in it."""
    measured = {row.name for row in rows}
    if measured != set(group.rows):
        raise BenchError(
            f"the {group.name} group measured rows it does not declare ({sorted(measured - set(group.rows))}) "
            f"or did not measure rows it declares ({sorted(set(group.rows) - measured)})"
        )
    return rows


def main(argv: Sequence[str]) -> int:
    settings = parse_settings(argv)
    if isinstance(settings, list):
        return concurrent.worker(*settings)
    started = time.perf_counter()
    try:
        if not settings.in_place and not install.INSTALLED:
            install.restart_installed(list(argv))  # the run goes on in the new environment
        report = benchmark(settings)
    except BenchError as error:
        progress(f"error: {error}")
        return 1
    finally:
        install.remove_installed()
    progress(f"done in {time.perf_counter() - started:.0f} s")
    sys.stdout.write(as_json(report) if settings.as_json else markdown(report))
    return 0


# -- scripts/bench-attachments -----------------------------------------------------------------------------------


def attachments_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description="What attachments cost.")
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--only", choices=attachments.PARTS, action="append")
    settings = parser.parse_args(argv)
    try:
        with sandbox() as box:
            records = attachments.measure_attachments(box, settings.runs, settings.only or attachments.PARTS)
    except BenchError as error:
        progress(f"error: {error}")
        return 1
    for record in records:
        print(json.dumps(record))
    return 0
