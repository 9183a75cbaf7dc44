"""The user's own git maintenance running beside gitmail: `git gc --prune=now`, `git repack -adf` and
`git pack-refs --all` in a loop while 8 sessions send, reply, archive, read and start, and commands are killed at
random. git documents that a prune can take a commit written just before its ref exists; whatever it takes,
gitmail must report it, never wedge, and lose nothing it said it had sent."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from gitmail import mailbox
from gitmail.errors import GitmailError
from gitmail.store.repository import Store
from gitmail.values.layout import ROOT, locate
from tests.conftest import RepoFactory, run_gitmail
from tests.damage import fsck

pytestmark = pytest.mark.slow

REPOS = 4
SESSIONS = 8  # two per repository
STEPS = 16  # commands each session runs: bounds the test by work, not by a clock

MAINTENANCE = """
import json, os, subprocess, sys
mailbox, ready, stop = sys.argv[1:4]
chores = [["gc", "--prune=now", "--quiet"], ["repack", "-a", "-d", "-f", "-q"], ["pack-refs", "--all"]]
runs = {"gc": 0, "repack": 0, "pack-refs": 0, "refused": 0}
open(ready, "w").close()
turn = 0
while not os.path.exists(stop) or turn < 3:
    chore = chores[turn % 3]
    turn += 1
    done = subprocess.run(["git", "--git-dir", mailbox, *chore], capture_output=True)
    runs[chore[0]] += 1
    runs["refused"] += done.returncode != 0
print(json.dumps(runs), flush=True)
"""

SESSION = """
import json, os, random, signal, subprocess, sys, time
here, others, ready, go, steps, seed = sys.argv[1:7]
others, rng = others.split(","), random.Random(int(seed))
pending = []
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.001)

def gitmail(*args, stdin=b""):
    process = subprocess.Popen(
        [sys.executable, "-m", "gitmail", *args], cwd=here, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, start_new_session=True,
    )
    killed = None
    if rng.random() < 0.2:  # a session closed, or the machine out of memory, at a random moment
        try:
            out, err = process.communicate(stdin, timeout=rng.uniform(0.05, 0.6))
        except subprocess.TimeoutExpired:
            killed = rng.choice(["command", "group"])  # gitmail alone (its git children finish), or all of it
            os.killpg(process.pid, signal.SIGKILL) if killed == "group" else process.kill()
            out, err = process.communicate()
    else:
        out, err = process.communicate(stdin, timeout=300)
    record = {"args": list(args), "code": process.returncode, "out": out.decode(errors="replace"),
              "err": err.decode(errors="replace"), "killed": killed}
    print(json.dumps(record), flush=True)
    return record

for step in range(int(steps)):
    action = rng.choices(["send", "reply", "done", "inbox", "hook", "broadcast"], [5, 3, 3, 2, 2, 1])[0]
    if action in ("reply", "done") and not pending:
        action = "inbox"
    if action == "send":
        gitmail("send", "--to", rng.choice(others), "-s", f"step {step}", "-m", f"from {here} at step {step}")
    elif action == "broadcast":
        gitmail("send", "--broadcast", "-s", f"everyone, step {step}")
    elif action == "reply":
        gitmail("send", "--reply-to", pending.pop(rng.randrange(len(pending))), "-m", f"answer at step {step}")
    elif action == "done":
        gitmail("done", pending.pop(rng.randrange(len(pending))))
    elif action == "inbox":
        shown = gitmail("inbox", "--json")
        if shown["code"] == 0 and shown["out"]:
            pending = [m["id"] for m in json.loads(shown["out"])["directed"]]
    else:
        payload = json.dumps({"session_id": f"{here}-{seed}", "cwd": here, "hook_event_name": "SessionStart"})
        gitmail("hook", "session-start", stdin=payload.encode())
"""


def start(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_ready(processes: list[subprocess.Popen[str]], flags: list[Path]) -> None:
    """A barrier: every process has imported what it needs and said so with its ready file."""
    while not all(flag.exists() for flag in flags):
        for process in processes:
            assert process.poll() is None, process.communicate()
        time.sleep(0.001)


def test_git_maintenance_beside_sessions_killed_at_random_loses_nothing_gitmail_reported(
    repos: RepoFactory, box: Store, tmp_path: Path
) -> None:
    names = [f"r{i}" for i in range(REPOS)]
    folders = {name: repos(name) for name in names}
    mailbox.send(box, sender="r0", to="r1", subject="the mailbox exists")  # so maintenance has something to do
    flags, go, stop = tmp_path / "flags", tmp_path / "go", tmp_path / "stop"
    flags.mkdir()
    seed = random.randrange(1 << 30)
    maintenance = start(MAINTENANCE, str(box.path), str(flags / "maintenance"), str(stop))
    sessions = [
        start(
            SESSION,
            str(folders[names[n % REPOS]]),
            ",".join(name for name in names if name != names[n % REPOS]),
            str(flags / f"session{n}"),
            str(go),
            str(STEPS),
            str(seed + n),
        )
        for n in range(SESSIONS)
    ]
    wait_ready([maintenance, *sessions], [flags / "maintenance", *(flags / f"session{n}" for n in range(SESSIONS))])
    go.touch()
    records: list[dict[str, Any]] = []
    for session in sessions:
        out, err = session.communicate(timeout=600)
        assert session.returncode == 0, err
        records += [json.loads(line) for line in out.splitlines()]
    stop.touch()
    out, err = maintenance.communicate(timeout=120)
    runs = json.loads(out)
    context = f"seed {seed}, maintenance {runs}"

    # Every command that was not killed ended in success or in one `gitmail: error:` line; the hook always in 0.
    finished = [r for r in records if r["killed"] is None]
    for record in finished:
        if record["args"][0] == "hook":
            assert record["code"] == 0 and "Traceback" not in record["err"], (context, record)
        elif record["code"] != 0:
            assert record["code"] == 1, (context, record)
            assert record["err"].startswith("gitmail: error: ") and record["err"].count("\n") == 1, (context, record)
    sent = [r["out"].strip() for r in finished if r["args"][0] == "send" and r["code"] == 0]
    assert len(sent) >= SESSIONS * STEPS // 4, f"too few sends got through to prove anything ({context})"
    assert any(r["killed"] for r in records), f"no command was killed ({context})"
    assert min(runs["gc"], runs["repack"], runs["pack-refs"]) >= 2, context

    # No message is in two states at once.
    refs = subprocess.run(
        ["git", "--git-dir", str(box.path), "for-each-ref", "--format=%(objectname) %(refname)", ROOT],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    places = [p for line in refs if (p := locate(line.split(" ", 1)[1], line.split(" ", 1)[0]))]
    twice = [key for key, n in Counter((p.recipient, p.id) for p in places).items() if n > 1]
    assert not twice, (context, twice)

    # Every id a send printed can be read, or `gitmail doctor` names it.
    found = run_gitmail("doctor", "--json", cwd=folders["r0"])
    report = json.loads(found.stdout)
    named = {
        item.rsplit("/", 1)[1]
        for finding in report["findings"]
        if finding["topic"] == "messages"
        for item in finding["items"]
    }
    for message_id in sent:
        try:
            mailbox.show(box, message_id)
        except GitmailError:
            assert message_id in named, (context, message_id, found.stdout)

    # After `doctor --repair` git itself is content, and mail is delivered.
    repaired = run_gitmail("doctor", "--repair", cwd=folders["r0"])
    assert repaired.returncode == 0, (context, repaired.stdout)
    checked = fsck(box)
    assert checked.returncode == 0, (context, checked.stdout, checked.stderr)
    last = run_gitmail("send", "--to", "r0", "-s", "after the storm", cwd=folders["r1"])
    assert last.returncode == 0, last.stderr
    payload = json.dumps({"session_id": "after", "cwd": str(folders["r0"]), "hook_event_name": "SessionStart"})
    hook = run_gitmail("hook", "session-start", cwd=folders["r0"], stdin=payload)
    assert hook.returncode == 0 and f"id {last.stdout.strip()}" in hook.stdout, (context, hook)
    assert run_gitmail("done", last.stdout.strip(), cwd=folders["r0"]).returncode == 0
