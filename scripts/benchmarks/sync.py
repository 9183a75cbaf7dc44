"""The sync group, over a real `git daemon` on 127.0.0.1 (behind a relay that counts the bytes both ways) and by
path, at 0 and the largest size: `gitmail sync` that finds nothing new against a plain `git fetch` of the same
remote into an up-to-date copy; 10 new messages sent on one machine, pushed by its `gitmail sync` and received by
another machine's (--sync-runs times); what one sync pushing the whole mailbox took; and, for comparison, a `git
fetch` that finds nothing new from a remote keeping one ref per message (the layout gitmail does not send: every
fetch advertises every ref)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .daemon import Relay, git_daemon, relayed
from .fixtures import (
    PENDING,
    RECIPIENT,
    SENDER,
    SYNC_BATCH,
    Sandbox,
    check_sync_quiet,
    copy_mailbox,
    git,
    gitmail_command,
    inbox_prefix,
    refs_under,
)
from .runner import WARMUPS, BenchError, Row, Settings, progress, rotated, run, summarise, timed

FETCH_QUIET = "git fetch, nothing new"
SYNC_QUIET = "gitmail sync, nothing new"
WHOLE_MAILBOX = "gitmail sync pushing the whole mailbox (git daemon)"
ROWS = (
    f"{FETCH_QUIET} (git daemon)",
    f"{SYNC_QUIET} (git daemon)",
    f"{FETCH_QUIET} (path)",
    f"{SYNC_QUIET} (path)",
    f"gitmail sync pushing {SYNC_BATCH} new (git daemon)",
    f"gitmail sync receiving {SYNC_BATCH} new (git daemon)",
    f"git fetch receiving {SYNC_BATCH} new (git daemon)",
    WHOLE_MAILBOX,
    f"{FETCH_QUIET}, one ref per message (git daemon)",
)


@dataclass(frozen=True)
class SyncPair:
    """Two machines sharing one remote: `first` holds a mailbox of `size` archived messages, `second` a copy."""

    size: int
    root: Path
    url: str  # the remote as the machines reach it
    remote: Path

    @property
    def first(self) -> Path:
        return self.root / "first.git"

    @property
    def second(self) -> Path:
        return self.root / "second.git"

    @property
    def plain(self) -> Path:
        return self.root / "plain.git"  # an up-to-date copy of the remote's refs, for the plain `git fetch`


def machine_env(box: Sandbox, mailbox: Path) -> dict[str, str]:
    return {**box.env(), "GITMAIL_DIR": str(mailbox)}


def gitmail_sync(box: Sandbox, mailbox: Path) -> tuple[float, bytes]:
    return timed([*gitmail_command(), "sync"], cwd=box.root, env=machine_env(box, mailbox))


def plain_fetch(pair: SyncPair) -> list[str]:
    return [
        "git",
        "--git-dir",
        str(pair.plain),
        "fetch",
        "--quiet",
        pair.url,
        "+refs/gitmail-sync/*:refs/gitmail-sync/*",
    ]


def settle(mailboxes: Sequence[Path], box: Sandbox) -> None:
    """Wait out the two seconds in which a sync does not trust a fresh ref file, then sync once more, so the
    quiet rows measure the quiet path."""
    time.sleep(2.2)
    for mailbox in mailboxes:
        gitmail_sync(box, mailbox)


def make_pair(box: Sandbox, size: int, url: str, remote: Path, where: Path) -> tuple[SyncPair, float]:
    """Both machines synced through a new remote; the seconds the first sync (pushing everything) took."""
    pair = SyncPair(size, where, url, remote)
    where.mkdir(parents=True)
    run(["git", "init", "-q", "--bare", str(remote)])
    copy_mailbox(box.mailbox(size), pair.first)
    git(pair.first, "config", "gitmail.machine", "first")
    timed([*gitmail_command(), "remote", "add", "origin", url], cwd=box.root, env=machine_env(box, pair.first))
    seconds, _ = gitmail_sync(box, pair.first)
    copy_mailbox(pair.first, pair.second)  # the same mail and tracking refs; its own machine id
    (pair.second / "gitmail" / "machine-id").unlink()
    git(pair.second, "config", "gitmail.machine", "second")
    gitmail_sync(box, pair.second)
    run(["git", "init", "-q", "--bare", str(pair.plain)])
    run(plain_fetch(pair))
    return pair, seconds


def measure_quiet(box: Sandbox, pairs: Mapping[int, SyncPair], runs: int, how: str, relay: Relay | None) -> list[Row]:
    """A sync that finds nothing new against a plain fetch of the same remote, alternating, at each size."""
    seconds: dict[tuple[str, int], list[float]] = {}
    wire: dict[tuple[str, int], list[int]] = {}
    for turn in range(WARMUPS + runs):
        for size in rotated(list(pairs), turn):
            pair = pairs[size]
            for name, argv, env in (
                (SYNC_QUIET, [*gitmail_command(), "sync"], machine_env(box, pair.first)),
                (FETCH_QUIET, plain_fetch(pair), box.env()),
            ):
                if relay is not None:
                    relay.take()
                elapsed, output = timed(argv, cwd=box.root, env=env)
                check_sync_quiet(output)
                if turn >= WARMUPS:
                    seconds.setdefault((name, size), []).append(elapsed)
                    if relay is not None:
                        wire.setdefault((name, size), []).append(relay.take())
    rows = []
    for (name, size), values in sorted(seconds.items(), key=lambda item: (item[0][1], item[0][0])):
        row = summarise(f"{name} ({how})", size, values)
        if (name, size) in wire:
            row.bytes = int(statistics.median(wire[(name, size)]))
        rows.append(row)
    for size in pairs:
        fetch = next(r for r in rows if r.name == f"{FETCH_QUIET} ({how})" and r.archived == size)
        quiet = next(r for r in rows if r.name == f"{SYNC_QUIET} ({how})" and r.archived == size)
        quiet.note = (
            f"{quiet.median_ms / fetch.median_ms:.2f}× the plain git fetch (mins: {quiet.min_ms / fetch.min_ms:.2f}×)"
        )
    return rows


def measure_new_messages(box: Sandbox, pair: SyncPair, runs: int, relay: Relay) -> list[Row]:
    """SYNC_BATCH messages sent on the first machine (not timed), its `gitmail sync` pushing them, and the second
    machine's `gitmail sync` receiving them; each checked to have arrived pending."""
    from gitmail import mailbox as api
    from gitmail.store.repository import Store

    timings: dict[str, list[float]] = {"pushing": [], "receiving": [], "fetching": []}
    wire: dict[str, list[int]] = {"pushing": [], "receiving": [], "fetching": []}
    for number in range(runs):
        first = Store(pair.first)
        subject = f"sync {number}"
        sent = {api.send(first, sender=SENDER, to=RECIPIENT, subject=subject).message.id for _ in range(SYNC_BATCH)}
        relay.take()
        elapsed, _ = gitmail_sync(box, pair.first)
        timings["pushing"].append(elapsed)
        wire["pushing"].append(relay.take())
        # The second machine's sync and a plain fetch of the same refs receive the same new mail, in turn first.
        receivers = [("receiving", [*gitmail_command(), "sync"], machine_env(box, pair.second))]
        receivers.append(("fetching", plain_fetch(pair), box.env()))
        for what, argv, env in rotated(receivers, number):
            relay.take()
            elapsed, _ = timed(argv, cwd=box.root, env=env)
            timings[what].append(elapsed)
            wire[what].append(relay.take())
        arrived = {ref.rsplit("/", 1)[1] for ref in refs_under(pair.second, inbox_prefix())}
        if not sent <= arrived:
            raise BenchError(f"{len(sent - arrived)} of {SYNC_BATCH} synced messages did not arrive pending")
    rows = []
    for what in ("pushing", "receiving", "fetching"):
        name = f"gitmail sync {what}" if what != "fetching" else "git fetch receiving"
        row = summarise(f"{name} {SYNC_BATCH} new (git daemon)", pair.size, timings[what])
        row.bytes = int(statistics.median(wire[what]))
        rows.append(row)
    receiving, fetching = rows[1], rows[2]
    receiving.note = (
        f"{receiving.median_ms / fetching.median_ms:.2f}× the plain git fetch receiving the same "
        f"(mins: {receiving.min_ms / fetching.min_ms:.2f}×)"
    )
    return rows


def measure_one_ref_per_message(box: Sandbox, pair: SyncPair, served: Path, relay: Relay, runs: int) -> Row:
    """A remote that keeps one ref per message, as the mailbox does: a fetch that finds nothing new still
    receives every ref's name and commit."""
    naive = served / f"one-ref-per-message-{pair.size}.git"
    run(["git", "clone", "-q", "--mirror", "--no-hardlinks", str(pair.first), str(naive)])
    copy = pair.root / "one-ref-per-message-copy.git"
    run(["git", "init", "-q", "--bare", str(copy)])
    url = pair.url.rsplit("/", 1)[0] + "/" + naive.name
    argv = ["git", "--git-dir", str(copy), "fetch", "--quiet", url, "+refs/gitmail/*:refs/gitmail/*"]
    run(argv)
    seconds, wire = [], []
    for turn in range(WARMUPS + runs):
        relay.take()
        elapsed, _ = timed(argv, cwd=box.root, env=box.env())
        if turn >= WARMUPS:
            seconds.append(elapsed)
            wire.append(relay.take())
    row = summarise(f"{FETCH_QUIET}, one ref per message (git daemon)", pair.size, seconds)
    row.bytes = int(statistics.median(wire))
    return row


def measure_sync(box: Sandbox, settings: Settings) -> list[Row]:
    """The sync rows: over the loopback git daemon (with bytes counted) and by path, at 0 and the largest size."""
    rows: list[Row] = []
    served = box.root / "sync" / "served"
    served.mkdir(parents=True)
    with git_daemon(served) as port, relayed(port) as relay:
        base = f"git://127.0.0.1:{relay.port}"
        pairs, by_path = {}, {}
        for size in settings.ends:
            progress(f"sync: setting up two machines with {size:,} archived messages")
            remote = served / f"mail-{size}.git"
            pair, first = make_pair(box, size, f"{base}/{remote.name}", remote, box.root / "sync" / f"daemon-{size}")
            pairs[size] = pair
            row = Row(WHOLE_MAILBOX, size, first * 1000, first * 1000, 1)
            row.note = f"{size + PENDING:,} messages, one run"
            rows.append(row)
            path_remote = box.root / "sync" / f"path-{size}" / "remote.git"
            by_path[size], _ = make_pair(box, size, str(path_remote), path_remote, path_remote.parent)
        settle([p.first for p in [*pairs.values(), *by_path.values()]] + [p.second for p in pairs.values()], box)
        rows += measure_quiet(box, pairs, settings.runs, "git daemon", relay)
        rows += measure_quiet(box, by_path, settings.runs, "path", None)
        largest = pairs[settings.ends[-1]]
        rows += measure_new_messages(box, largest, settings.sync_runs, relay)
        rows.append(measure_one_ref_per_message(box, largest, served, relay, settings.sync_runs))
    return rows
