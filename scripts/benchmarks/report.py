"""The report of a run: the machine it ran on, its settings, the rows in the table's order with their ratios to
the same row at 0 archived messages, written as a Markdown table or as JSON."""

from __future__ import annotations

import json
import os
import platform
from dataclasses import asdict, dataclass, field
from importlib.metadata import version
from typing import Any

from . import install
from .runner import WARMUPS, Row, run


@dataclass
class Report:
    machine: dict[str, str]
    settings: dict[str, Any]
    build_seconds: dict[int, float] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)


def machine_facts() -> dict[str, str]:
    import pygit2

    git_version = run(["git", "--version"]).decode().strip().removeprefix("git version ")
    return {
        "cpus": str(os.cpu_count()),
        "python": platform.python_version(),
        "git": git_version,
        "pygit2": f"{version('pygit2')} (libgit2 {pygit2.LIBGIT2_VERSION})",
        "gitmail": version("gitmail"),
        "platform": platform.platform(),
        "install": install.where(),
    }


def add_ratios(rows: list[Row]) -> None:
    at_zero = {row.name: row for row in rows if row.archived == 0}
    for row in rows:
        base = at_zero.get(row.name)
        if base is not None and row.archived is not None:
            row.ratio = row.median_ms / base.median_ms
            row.min_ratio = row.min_ms / base.min_ms


def markdown(report: Report) -> str:
    facts, settings = report.machine, report.settings
    built = ", ".join(f"{size:,} in {seconds:.1f} s" for size, seconds in report.build_seconds.items() if size)
    lines = [
        "## gitmail benchmark",
        "",
        f"- CPUs: {facts['cpus']}; Python {facts['python']}; git {facts['git']}; pygit2 {facts['pygit2']}",
        f"- gitmail {facts['gitmail']} on {facts['platform']}; installed: {facts.get('install', 'in place')}",
        f"- whole processes, start to exit: median and min of {settings['runs']} runs after {WARMUPS} warm-ups, "
        f"alternating between sizes; concurrent rows: {settings['concurrent_runs']} burst(s) each",
        "- ratio: median (and min) over the same row's at 0 archived messages; 20 messages pending throughout",
        f"- archive build: {built or 'none'}",
        "",
        "| row | archived | median ms | min ms | ratio | ratio of mins | notes |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    lines += [markdown_row(row) for row in report.rows]
    return "\n".join(lines) + "\n"


def markdown_row(row: Row) -> str:
    archived = "" if row.archived is None else f"{row.archived:,}"
    ratio = "" if row.ratio is None else f"{row.ratio:.2f}"
    min_ratio = "" if row.min_ratio is None else f"{row.min_ratio:.2f}"
    note = row.note
    if row.messages is not None and row.messages_per_s is not None:
        note = f"{note}: {row.messages} messages, {row.messages_per_s:.0f} messages/s"
    if row.bytes is not None:
        note = f"{row.bytes:,} bytes on the wire" + (f"; {note}" if note else "")
    if row.mib is not None:
        note = f"{row.mib[0]:.1f} MiB resident (min {row.mib[1]:.1f})" + (f"; {note}" if note else "")
        return f"| {row.name} | {archived} | — | — | | | {note} |"
    return f"| {row.name} | {archived} | {row.median_ms:.1f} | {row.min_ms:.1f} | {ratio} | {min_ratio} | {note} |"


def as_json(report: Report) -> str:
    data = asdict(report)
    data["build_seconds"] = {str(size): seconds for size, seconds in report.build_seconds.items()}
    return json.dumps(data, indent=2) + "\n"
