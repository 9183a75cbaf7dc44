"""The disk group: what a mailbox takes on disk per message, as mail accumulates the way users make it. Messages are
sent from `api` to `disk` and archived (`done`) one by one through the library, as the CLI writes them, with packing
as it runs for users (store/packing.py: a detached packer every few writes); at each of `--disk-sizes` (1,000 and
10,000; 100,000 written one by one takes hours on two cores) the whole mailbox folder is measured as `du` counts it
(4 KB blocks, folders included), once any packer that runs has finished. A row's time is a write's median (a send or a
done), its note the bytes per message."""

from __future__ import annotations

import os
import shutil
import statistics
import time
from pathlib import Path

from .fixtures import Sandbox
from .runner import Row, Settings, progress

ROWS = ("disk per message",)


def disk(path: Path) -> int:
    total = 0
    for folder, folders, files in os.walk(path):
        for name in [*files, *folders]:
            try:
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total


def measure_disk(box: Sandbox, settings: Settings) -> list[Row]:
    from gitmail import mailbox as api
    from gitmail.store.packing import held
    from gitmail.store.repository import Store

    path = box.root / "mail-disk.git"
    shutil.rmtree(path, ignore_errors=True)
    store = Store(path)
    rows, written, seconds = [], 0, []
    for target in settings.disk_sizes:
        while written < target:
            start = time.perf_counter()
            sent = api.send(store, sender="api", to="disk", subject=f"message {written}", body=f"line {written}\n" * 8)
            seconds.append(time.perf_counter() - start)
            start = time.perf_counter()
            api.done(store, repo="disk", ids=[sent.message.id])
            seconds.append(time.perf_counter() - start)
            written += 1
        time.sleep(0.2)  # a packer the last write started takes its lock
        with held(store):  # once any packer that runs has finished
            size = disk(path)
        row = Row(ROWS[0], target, statistics.median(seconds) * 1000, min(seconds) * 1000, len(seconds))
        row.note = f"{size / target:,.0f} bytes a message ({size / 1e6:.2f} MB for {target:,} sent and archived)"
        progress(f"disk at {target:,}: {row.note}")
        rows.append(row)
    shutil.rmtree(path, ignore_errors=True)
    return rows
