"""Three machines at work at once, each a process sending, replying, archiving, broadcasting, handing over and
syncing in a loop through one shared remote (by path and over `git daemon`); and syncs killed with SIGKILL while
they fetch, reconcile and push. After a final quiet sync everywhere: nothing lost, nothing in two places, nothing
archived came back, no broadcast handed to a repo twice, and git fsck is clean on every machine and the remote.

GITMAIL_STRESS_ROUNDS sets the rounds each machine runs (default 12: the default test run stays fast); scripts/stress
runs these tests again and again, and with a larger number for long runs."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from gitmail import mailbox
from gitmail.store.repository import Store
from gitmail.sync import quick
from gitmail.sync.remotes import SyncError
from gitmail.values.layout import State
from tests.processes import StartingLine, kill_when
from tests.syncing import as_machine, bare_remote, fsck, git_daemon, places, remote_places, seen, sync_now, whole
from tests.syncing import machine as make_machine

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parent.parent
ROUNDS = int(os.environ.get("GITMAIL_STRESS_ROUNDS", "12"))
NAMES = ("laptop", "server", "ci")
SHARED = "shared"  # a project checked out on every machine


def own_repos(name: str) -> list[str]:
    return [SHARED, f"{name}-api", f"{name}-web"]


EVERYONE = [SHARED, *(f"{n}-{r}" for n in NAMES for r in ("api", "web"))]


def start_loops(machines: Sequence[tuple[str, Store]], go: Path, rounds: int) -> list[subprocess.Popen[str]]:
    script = (
        "import sys; from tests.syncing import machine_loop; "
        "machine_loop(int(sys.argv[1]), int(sys.argv[2]), *sys.argv[3:])"
    )
    return [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                script,
                str(rounds),
                str(seed),
                str(go),
                ",".join(own_repos(name)),
                ",".join(EVERYONE),
            ],
            cwd=ROOT,
            env=as_machine(box),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for seed, (name, box) in enumerate(machines)
    ]


def reports(loops: Sequence[subprocess.Popen[str]]) -> list[list[str]]:
    lines = []
    try:
        for loop in loops:
            out, err = loop.communicate(timeout=600)
            assert loop.returncode == 0, err
            lines += [line.split() for line in out.splitlines()]
    finally:
        for loop in loops:  # after a failure, none of ours keeps running
            if loop.poll() is None:
                loop.kill()
                loop.communicate()
    return lines


def converge(boxes: Sequence[Store]) -> None:
    """Quiet syncs until every machine has everything: two passes bring everything everywhere, the third must
    find nothing new anywhere."""
    for _ in range(2):
        for box in boxes:
            sync_now(box)
    for box in boxes:
        outcome = sync_now(box)
        assert outcome.quiet and not outcome.conflicts, outcome


def check(boxes: Sequence[Store], remote: Path, told: Sequence[Sequence[str]]) -> None:
    """What every machine was told held, holds everywhere."""
    sent = {line[1] for line in told if line[0] == "sent"}
    archived = {line[1] for line in told if line[0] == "archived"}
    handed = Counter((line[1], line[2]) for line in told if line[0] == "handed")
    assert sent, "the machines barely ran: the test proves little"
    there = remote_places(remote)
    for box in boxes:
        whole(box)
        here = {i: p[0] for i, p in places(box).items()}
        assert here == there, f"{box.path} differs from the remote"
        assert sent <= here.keys(), f"lost on {box.path}: {sorted(sent - here.keys())}"
        for message_id in archived:
            assert "/archive/" in here[message_id][0], f"{message_id} is not archived on {box.path}"
    assert all(count == 1 for count in handed.values()), [k for k, v in handed.items() if v > 1]
    for (message_id, repo), _ in handed.items():
        oid = there[message_id][1]
        for box in boxes:
            assert repo in seen(box, oid)
    fsck(remote)


@pytest.fixture(autouse=True)
def settled_quickly(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(quick, "RACY_SECONDS", 0.0)
    monkeypatch.setattr(quick, "FINE_RACY_SECONDS", 0.0)
    yield


def run_three_machines(tmp_path: Path, url: str, remote: Path) -> None:
    boxes = [make_machine(tmp_path, name, url) for name in NAMES]
    line = StartingLine(tmp_path)
    loops = start_loops(list(zip(NAMES, boxes, strict=True)), line.go, ROUNDS)
    line.wait(loops)
    line.let_go()
    told = reports(loops)
    converge(boxes)
    check(boxes, remote, told)


def test_three_machines_syncing_at_once_through_a_path(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path / "remote.git")
    run_three_machines(tmp_path, str(remote), remote)


def test_three_machines_syncing_at_once_over_git_daemon(tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    remote = bare_remote(served / "mail.git")
    with git_daemon(served) as base:
        run_three_machines(tmp_path, f"{base}/mail.git", remote)


# -- SIGKILL while a sync fetches, reconciles or pushes ------------------------------------------------------------


def fetching(argv: list[str]) -> bool:
    return "fetch" in argv


def reconciling(argv: list[str]) -> bool:
    importing = "update-ref" in argv and any(a.startswith("gitmail: sync from") for a in argv)
    return importing or "write-tree" in argv or "commit-tree" in argv


def pushing(argv: list[str]) -> bool:
    return "push" in argv


# what a sync runs in each phase, as its child processes show it
PHASES: dict[str, Callable[[list[str]], bool]] = {"fetch": fetching, "reconcile": reconciling, "push": pushing}


def killed_in(phase: str, box: Store, *, whole_group: bool) -> bool:
    """Run `gitmail sync` as its own process and SIGKILL it as soon as it is in `phase` (it, or it and its git
    children). False when it finished before reaching that phase."""
    sync_process = subprocess.Popen(
        [sys.executable, "-m", "gitmail", "sync"],
        env=as_machine(box),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        return kill_when(sync_process, PHASES[phase], whole_group=whole_group)
    finally:
        if sync_process.poll() is None:
            sync_process.kill()
        sync_process.communicate()


def recover(box: Store) -> None:
    """The sync after a kill completes: the only failure allowed is the bounded one, where the other machines,
    syncing in a tight loop, pushed first every time; it says so, and the sync after it completes."""
    for _ in range(3):
        try:
            sync_now(box)
            return
        except SyncError as error:
            assert "other machines kept pushing" in str(error), error
    raise AssertionError("three syncs in a row lost every race")


def test_syncs_killed_while_fetching_reconciling_and_pushing_lose_nothing(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path / "remote.git")
    victim, *others = [make_machine(tmp_path, name, str(remote)) for name in NAMES]
    go = tmp_path / "go"
    loops = start_loops(list(zip(NAMES[1:], others, strict=True)), go, ROUNDS)  # the others work meanwhile
    go.touch()
    rng = random.Random(11)
    told: list[list[str]] = []
    kills = Counter[str]()
    round_number = 0
    while min(kills.values(), default=0) < 2 or any(loop.poll() is None for loop in loops):
        round_number += 1
        phase = ("fetch", "reconcile", "push")[round_number % 3]
        sent = mailbox.send(victim, sender="laptop-api", to=rng.choice(EVERYONE), subject=f"v{round_number}")
        told.append(["sent", sent.message.id])
        other = others[round_number % 2]  # something new on the remote too, so the victim fetches and imports
        news = mailbox.send(other, sender="server-api", to=rng.choice(EVERYONE), subject=f"o{round_number}")
        told.append(["sent", news.message.id])
        sync_now(other)
        if killed_in(phase, victim, whole_group=rng.random() < 0.5):
            kills[phase] += 1
        recover(victim)
        whole(victim)
        assert round_number < 200, f"kills landed too rarely: {kills}"
    told += reports(loops)
    assert set(kills) == {"fetch", "reconcile", "push"}, kills
    converge([victim, *others])
    check([victim, *others], remote, told)
    for box in (victim, *others):
        assert {mailbox.show(box, i).state for i in (line[1] for line in told if line[0] == "archived")} <= {
            State.ARCHIVED
        }
