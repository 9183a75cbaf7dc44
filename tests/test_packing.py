"""Packing beside writers (store/packing.py): nothing is lost or unseen while refs and objects are packed, and the
mailbox's size follows its mail."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gitmail import mailbox
from gitmail.store import packing
from gitmail.store.repository import Store
from gitmail.values.layout import ROOT
from tests.test_concurrency import finish, healthy, mail_env, packers_done, start

__all__ = ["mail_env"]  # the fixture, shared with the concurrency tests

pytestmark = pytest.mark.slow

SENDER = """
import os, sys, time
from gitmail import mailbox
from gitmail.store import packing
from gitmail.store.repository import Store
packing.PACK_AFTER = 3  # a packer starts every few writes: packing runs beside every send
box = Store(os.environ["GITMAIL_DIR"])
while not os.path.exists(sys.argv[1]):
    time.sleep(0.001)
for i in range(int(sys.argv[3])):
    entry = mailbox.send(box, sender=sys.argv[2], to="web", subject=f"{sys.argv[2]} {i}", body=f"body {i}\\n" * 30)
    print(entry.message.id, flush=True)
"""

PACKER = """
import os, sys, time
from gitmail.errors import GitmailError
from gitmail.store import packing
from gitmail.store.repository import Store
box = Store(os.environ["GITMAIL_DIR"])
packs = 0
while not os.path.exists(sys.argv[1]):
    time.sleep(0.001)
while not os.path.exists(sys.argv[2]):
    # what the detached packer does, again and again, at the senders' priority (it lowers its own, and on a busy
    # machine would barely run beside them)
    try:
        with packing.held(box):
            packing.pack(box)
        packs += 1
    except GitmailError:
        pass
    time.sleep(0.05)  # the write lock's waiters are not served in turn: leave them a moment to take it
print(packs, flush=True)
"""

WATCHER = """
import os, sys, time
from gitmail.store.repository import Store
box = Store(os.environ["GITMAIL_DIR"])
seen, misses, looks = set(), 0, 0
while not os.path.exists(sys.argv[1]):
    time.sleep(0.001)
while not os.path.exists(sys.argv[2]):
    now = {place.id for place in box.refs("refs/gitmail/web/inbox/")}  # the listing pending mail is read from
    misses += len(seen - now)  # nothing is archived here: a message once listed is listed at every later look
    seen |= now
    looks += 1
print(misses, looks, flush=True)
"""


def test_senders_beside_packers_lose_nothing_and_readers_miss_nothing(mail_env: dict[str, str], tmp_path: Path) -> None:
    box = Store(mail_env["GITMAIL_DIR"])
    mailbox.send(box, sender="api", to="web", subject="seed")
    go, stop = tmp_path / "go", tmp_path / "stop"
    senders = [start(SENDER, go, f"s{n}", "40", env=mail_env) for n in range(3)]
    others = [start(PACKER, go, str(stop), env=mail_env), start(WATCHER, go, str(stop), env=mail_env)]
    time.sleep(0.3)
    go.touch()
    reported = {line for out in finish(senders) for line in out.split()}
    stop.touch()
    packs, watched = finish(others)
    assert int(packs) >= 2, "the packer barely ran beside the senders: the test proves little"
    misses, looks = map(int, watched.split())
    assert looks > 10 and misses == 0
    assert len(reported) == 120
    pending = {e.message.id for e in mailbox.pending(box, repo="web").directed}
    assert reported <= pending and len(pending) == 121
    healthy(box)
    packing.pack(box)
    assert not [p for p in (box.path / "refs" / "gitmail").rglob("*") if p.is_file()]  # every ref packed
    assert (box.path / "packed-refs").read_text().count(ROOT) == 121


def test_a_write_starts_one_detached_packer_and_the_setting_stops_it(box: Store) -> None:
    for i in range(packing.PACK_AFTER - 1):
        mailbox.send(box, sender="api", to="web", subject=f"m{i}")
    assert not list((box.path / "objects" / "pack").glob("*.pack"))
    mailbox.send(box, sender="api", to="web", subject="the one that starts it")
    packers_done(box)
    deadline = time.monotonic() + 20
    while not list((box.path / "objects" / "pack").glob("*.pack")) and time.monotonic() < deadline:
        time.sleep(0.05)  # the packer may not have taken its lock yet when the wait above began
        packers_done(box)
    assert list((box.path / "objects" / "pack").glob("*.pack"))
    assert (box.own_dir / packing.COUNTER).stat().st_size < packing.PACK_AFTER
    subprocess.run(["git", "--git-dir", str(box.path), "config", "gitmail.autoPack", "false"], check=True)
    packs = sorted((box.path / "objects" / "pack").glob("*.pack"))
    for i in range(packing.PACK_AFTER + 2):
        mailbox.send(box, sender="api", to="web", subject=f"after {i}")
    time.sleep(0.5)
    packers_done(box)
    assert sorted((box.path / "objects" / "pack").glob("*.pack")) == packs
    assert len(mailbox.pending(box, repo="web").directed) == 2 * packing.PACK_AFTER + 2


def disk(path: Path) -> int:
    """Bytes of disk the folder takes, as `du` counts them (blocks, the folders' own among them)."""
    total = 0
    for folder, folders, files in os.walk(path):
        for name in [*files, *folders]:
            try:
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total


def test_a_mailbox_grows_by_its_mail(box: Store) -> None:
    """Sent and archived through the library as the CLI does it, with packing as it runs for users: what each more
    message costs, measured between two packed states, and what is left loose between packings (a bound whatever
    the mailbox holds). A guard against growth; `scripts/bench --only disk` measures 1,000 and more whole."""
    sizes = {}
    count = 0
    for target in (100, 250):
        while count < target:
            sent = mailbox.send(box, sender="api", to="web", subject=f"message {count}", body=f"line {count}\n" * 8)
            mailbox.done(box, repo="web", ids=[sent.message.id])
            count += 1
        packers_done(box)
        unpacked = disk(box.path)
        packing.pack(box)
        sizes[target] = disk(box.path)
        assert unpacked - sizes[target] < 700_000  # what is left loose between packings stays small
    per_message = (sizes[250] - sizes[100]) / 150
    print(f"{per_message:.0f} bytes a message, {sizes[250] / 250:.0f} at 250", file=sys.stderr)
    assert per_message < 2_048  # the bound the mailbox keeps to; a reflog file per message ref alone took 4,096
    assert not [p for p in (box.path / "logs").rglob("*") if p.is_file()]  # no reflog: the record of moves
