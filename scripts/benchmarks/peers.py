"""The peers group: `gitmail send` and `gitmail inbox --peek` beside the fastest peer measured here
(agent-collab-kit, a stdlib SQLite mailbox), interleaved with `python3 -c pass` so that every row meets the same
machine; both run as `python -m`, each with 20 messages pending for its reader. `gitmail log -n 20` runs in the
same interleaving, for its ratio to `python3 -c pass`. The peer is installed into the
sandbox where this interpreter does not have it."""

from __future__ import annotations

import subprocess
import sys

from .fixtures import (
    PENDING,
    RECIPIENT,
    SEND_ARGS,
    SENDER,
    Sandbox,
    check_inbox,
    pending_refs,
    remove_sent,
)
from .reads import check_log
from .runner import WARMUPS, BenchError, Moment, Row, Settings, interleaved, progress, run, timed, times

PEER = ("agent-collab-kit", "0.1.2")  # the fastest peer measured: a stdlib SQLite mailbox
FLOOR = "python3 -c pass"
ROWS = (
    "peers: python3 -c pass",
    "peers: gitmail send",
    f"peers: {PEER[0]} send",
    "peers: gitmail inbox --peek (20 pending)",
    f"peers: {PEER[0]} inbox (20 pending)",
    "peers: gitmail log -n 20",
)


def peer_mailbox(box: Sandbox) -> tuple[list[str], dict[str, str]]:
    """The peer's command line (its database in the sandbox, 20 messages pending for `web`) and its environment."""
    peer = box.root / "peer"
    if subprocess.run([sys.executable, "-c", "import agent_collab"], capture_output=True).returncode != 0:
        progress(f"installing {PEER[0]}=={PEER[1]} into the sandbox")
        run([sys.executable, "-m", "pip", "install", "-q", "--target", str(peer), f"{PEER[0]}=={PEER[1]}"])
    env = {**box.env(0), "PYTHONPATH": str(peer)}
    database = box.root / "peer.db"
    collab = [sys.executable, "-m", "agent_collab", "--db", str(database)]
    timed([*collab, "init"], cwd=box.root, env=env)
    for number in range(PENDING):
        timed([*collab, "send", "--sender", SENDER, "--recipient", RECIPIENT, "--body", "Please read this.",
               "--key", f"pending-{number}"], cwd=box.root, env=env)  # fmt: skip
    return collab, env


def check_peer_inbox(output: bytes) -> None:
    if output.count(b"Please read this.") != PENDING:
        raise BenchError(f"the peer's inbox did not list the {PENDING} pending messages: {output[:300]!r}")


def measure_peers(box: Sandbox, settings: Settings) -> list[Row]:
    collab, env = peer_mailbox(box)
    keys = iter(range(10**9))
    before = pending_refs(box, 0)

    def peer_send() -> list[str]:  # every send needs its own key
        return [*collab, "send", "--sender", SENDER, "--recipient", "elsewhere", "--body", "hello",
                "--key", f"bench-{next(keys)}"]  # fmt: skip

    gitmail = [sys.executable, "-m", "gitmail"]
    rows_of = [
        Moment(ROWS[0], [sys.executable, "-c", "pass"], box.root, env),
        Moment(ROWS[1], [*gitmail, *SEND_ARGS], box.repo(SENDER), env),
        Moment(ROWS[2], peer_send, box.root, env),
        Moment(ROWS[3], [*gitmail, "inbox", "--peek"], box.repo(RECIPIENT), env, check=check_inbox),
        Moment(ROWS[4], [*collab, "inbox", "--recipient", RECIPIENT], box.root, env, check=check_peer_inbox),
        Moment(ROWS[5], [*gitmail, "log", "-n", "20"], box.repo(RECIPIENT), env, check=check_log),
    ]
    rows = interleaved(rows_of, settings.runs)
    remove_sent(box, 0, before, settings.runs + WARMUPS, "peers: gitmail send")
    by_name = {row.name: row for row in rows}
    floor = rows[0]
    for name, peer_name in ((ROWS[1], ROWS[2]), (ROWS[3], ROWS[4])):
        mine, theirs = by_name[name], by_name[peer_name]
        mine.note = (
            f"{times(mine, theirs, f'{PEER[0]} {PEER[1]}')}; {times(mine, floor, 'python3 -c pass', mins=False)}"
        )
        theirs.note = times(theirs, floor, FLOOR, mins=False)
    by_name[ROWS[5]].note = times(by_name[ROWS[5]], floor, FLOOR)
    return rows
