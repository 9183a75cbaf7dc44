"""Many real processes writing one mailbox at once, and writers killed mid-write: nothing lost, duplicated,
resurrected or half-made."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from gitmail import mailbox
from gitmail.store import packing
from gitmail.store.lock import GIT_LOCK_WAIT
from gitmail.store.repository import Store
from gitmail.values.layout import ROOT, State
from gitmail.values.message import parse
from tests.processes import AT_THE_LINE, StartingLine

pytestmark = pytest.mark.slow

PRELUDE = (
    AT_THE_LINE
    + """
import json, os, sys, time
from gitmail import mailbox
from gitmail.values.message import parse
from gitmail.store.repository import Store
from gitmail import actions
from gitmail.values.names import RepoName
from gitmail.workspace import Actor
box = Store(os.environ["GITMAIL_DIR"])
def read_inbox(box, repo):
    return actions.inbox(box, Actor(RepoName(repo))).shown
at_the_line(sys.argv[1])
"""
)

SENDER = (
    PRELUDE
    + """
worker = int(sys.argv[2])
for i in range(int(sys.argv[3])):
    body = f"worker {worker} message {i}\\n" + "x" * (i * 37) + "\\nend\\n"
    entry = mailbox.send(box, sender=f"w{worker}", to="web", subject=f"w{worker} #{i}", body=body)
    print(entry.message.id, flush=True)
"""
)

ARCHIVER = (
    PRELUDE
    + """
import random
ids = sys.argv[2].split(",")
random.shuffle(ids)
archived = []
for chunk in (ids[:10], ids[10:20], ids[20:]):
    archived += [e.message.id for e in mailbox.done(box, repo="web", ids=chunk).archived]
print(json.dumps(archived), flush=True)
"""
)

READER = (
    PRELUDE
    + """
handed = []
for _ in range(3):
    handed += [e.message.id for e in read_inbox(box, repo=sys.argv[2]).broadcasts]
print(json.dumps(handed), flush=True)
"""
)


def start(script: str, go: Path, *args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, str(go), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def finish(processes: list[subprocess.Popen[str]]) -> list[str]:
    outputs = []
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        outputs.append(out)
    return outputs


@pytest.fixture
def mail_env(tmp_path: Path) -> dict[str, str]:
    # On a loaded machine eight writers let go at once can keep one queued past the 10 s a command waits for the
    # lock, and it gives up as it should; what these tests prove is that nothing is lost, so they wait longer.
    return {**os.environ, "GITMAIL_DIR": str(tmp_path / "mail.git"), "GITMAIL_LOCK_WAIT": "120"}


def packers_done(box: Store) -> None:
    """Wait for a detached packer (store/packing.py) that runs to end."""
    with packing.held(box):
        pass


def healthy(box: Store) -> None:
    """git finds no corruption, and every message ref leads to a readable message (once a packer that runs is done:
    git fsck itself is no reader beside a repack)."""
    packers_done(box)
    fsck = subprocess.run(["git", "--git-dir", str(box.path), "fsck", "--no-dangling"], capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
    places = box.refs(ROOT)
    for place, document in zip(places, box.read([f"{p.oid}:message.md" for p in places]), strict=True):
        assert document is not None and parse(document).id == place.id


def test_eight_processes_sending_at_once_lose_nothing(mail_env: dict[str, str], tmp_path: Path) -> None:
    line = StartingLine(tmp_path)
    workers = [start(SENDER, line.go, str(w), "25", env=mail_env) for w in range(8)]
    line.wait(workers)
    line.let_go()
    reported = [line for out in finish(workers) for line in out.split()]
    box = Store(mail_env["GITMAIL_DIR"])
    pending = mailbox.pending(box, repo="web").directed
    assert len(pending) == 200
    assert sorted(e.message.id for e in pending) == sorted(reported)
    for entry in pending:
        worker, number = entry.message.subject.lstrip("w").split(" #")
        i = int(number)
        assert entry.message.sender == f"w{worker}"
        assert entry.message.body == f"worker {worker} message {i}\n" + "x" * (i * 37) + "\nend\n"
    healthy(box)


def test_eight_processes_archiving_the_same_mail_archive_each_once(mail_env: dict[str, str], tmp_path: Path) -> None:
    box = Store(mail_env["GITMAIL_DIR"])
    ids = [mailbox.send(box, sender="api", to="web", subject=f"m{i}").message.id for i in range(30)]
    line = StartingLine(tmp_path)
    workers = [start(ARCHIVER, line.go, ",".join(ids), env=mail_env) for _ in range(8)]
    line.wait(workers)
    line.let_go()
    archived = Counter(i for out in finish(workers) for i in json.loads(out))
    assert archived == Counter(ids)  # every message archived, and by exactly one process
    assert not box.refs(f"{ROOT}web/inbox/")
    assert sorted(p.id for p in box.refs(f"{ROOT}web/archive/")) == sorted(ids)
    assert {e.state for e in mailbox.log(box, repo="web", limit=None)} == {State.ARCHIVED}
    healthy(box)


def test_twelve_repos_reading_one_broadcast_are_each_handed_it_once(mail_env: dict[str, str], tmp_path: Path) -> None:
    box = Store(mail_env["GITMAIL_DIR"])
    cast = mailbox.broadcast(box, sender="api", subject="Spec changed")
    line = StartingLine(tmp_path)
    repos = [f"repo{i}" for i in range(12)]
    readers = [start(READER, line.go, repo, env=mail_env) for repo in repos for _ in range(2)]  # two sessions per repo
    line.wait(readers)
    line.let_go()
    outputs = finish(readers)
    per_repo: Counter[str] = Counter()
    for repo, out in zip([r for r in repos for _ in range(2)], outputs, strict=True):
        per_repo[repo] += json.loads(out).count(cast.message.id)
    assert per_repo == Counter({repo: 1 for repo in repos})
    seen = subprocess.run(
        ["git", "--git-dir", str(box.path), "notes", "--ref=gitmail-seen", "show", cast.oid],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert seen == sorted(["api", *repos])


KILLABLE = (
    PRELUDE
    + """
import random
import gitmail.store.packing
gitmail.store.packing.PACK_AFTER = int(sys.argv[2])  # pack often, so packers run beside the writers killed
worker = sys.argv[3]
i = 0
while True:
    i += 1
    kind = random.random()
    if kind < 0.5:
        entry = mailbox.send(box, sender=worker, to="web", subject=f"{worker} {i}", body=f"{worker} body {i}\\n" * 20)
        print("sent", entry.message.id, flush=True)
    elif kind < 0.8:
        pending = mailbox.pending(box, repo="web").directed
        if pending:
            target = random.choice(pending)
            mailbox.reply(box, sender="web", to_id=target.message.id, body=f"re {i}")
            print("replied", target.message.id, flush=True)
    elif kind < 0.9:
        entry = mailbox.broadcast(box, sender=worker, subject=f"all {i}")
        print("sent", entry.message.id, flush=True)
    else:
        for entry in read_inbox(box, repo=f"reader{i % 3}").broadcasts:
            print("handed", entry.message.id, flush=True)
"""
)


def test_writers_killed_at_random_moments_leave_a_whole_mailbox(mail_env: dict[str, str], tmp_path: Path) -> None:
    box = Store(mail_env["GITMAIL_DIR"])
    mailbox.send(box, sender="api", to="web", subject="seed")
    go = tmp_path / "go"
    go.touch()
    reported: list[tuple[str, str]] = []
    rng = random.Random(7)
    for _ in range(14):
        workers = [start(KILLABLE, go, str(rng.choice([1, 1, 5])), f"k{n}", env=mail_env) for n in range(2)]
        for worker in workers:
            # Killed after a random number of its own operations, a random moment into the next one: what the
            # machine's load does to timing cannot make the workers too slow to test anything.
            assert worker.stdout is not None
            for _ in range(rng.randint(1, 4)):
                line = worker.stdout.readline()
                if not line:
                    break
                reported += [tuple(line.split())] if len(line.split()) == 2 else []  # type: ignore[list-item]
            time.sleep(rng.random() * 0.05)
            worker.send_signal(signal.SIGKILL)
        for worker in workers:
            out, _ = worker.communicate(timeout=30)
            reported += [tuple(line.split()) for line in out.splitlines() if len(line.split()) == 2]  # type: ignore[misc]
    assert sum(1 for kind, _ in reported if kind == "sent") > 20, "the workers barely ran: the test proves little"
    # The next writer is not blocked by anything a killed one left behind.
    started = time.monotonic()
    survivor = mailbox.send(box, sender="after", to="web", subject="after the kills")
    mailbox.done(box, repo="web", ids=[survivor.message.id])
    first = time.monotonic() - started
    started = time.monotonic()
    again = mailbox.send(box, sender="after", to="web", subject="and once more")  # nothing left to clear by now
    mailbox.done(box, repo="web", ids=[again.message.id])
    second = time.monotonic() - started
    assert first < second + GIT_LOCK_WAIT, (first, second)  # no lock file a killed git left was waited out
    places = box.refs(ROOT)
    where = Counter(p.id for p in places)
    assert all(count == 1 for count in where.values()), "a message is in two places"
    states = {p.id: p.state for p in places}
    for kind, message_id in reported:
        assert message_id in states, f"{kind} {message_id} was reported but is gone"
        if kind == "replied":
            assert states[message_id] is State.ARCHIVED
    healthy(box)
    handed = Counter((message_id) for kind, message_id in reported if kind == "handed")
    assert all(count <= 3 for count in handed.values())  # at most once for each of the three readers
