"""The attachments group (`scripts/bench-attachments`): what attachments cost, as users meet it, each row as
wall-clock time and as the CPU time (user + system) the process and its children used, which a busy machine
disturbs far less; the rows of each comparison in one interleaved run (median and min of N runs, after 2 warm-ups).

  - send: `git hash-object -w` of a new 10 MiB file, `gitmail send` without an attachment, and `gitmail send
    --attach` of a new 10 MiB file (random bytes, and text); the target is attach <= 2 x (hash-object + send);
  - start: the session-start hook (as a host runs it, the message already shown once) with one pending message
    without attachments, and with one carrying a 10 MiB file and two small ones;
  - sync: what moves between two machines over a real `git daemon` (measured as what the receiving side keeps:
    the remote keeps every push as a pack), when a 10 MiB file is attached, and when the same content is attached
    again under another name.

Its rows are records of their own (CPU time; bytes kept rather than times), printed one JSON object a line."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import zlib
from collections.abc import Sequence
from pathlib import Path

from .daemon import git_daemon
from .fixtures import Sandbox
from .runner import BenchError, Moment, Timing, interleave, progress, run

MIB = 1 << 20
PARTS = ("send", "start", "sync")  # what --only chooses among
Record = dict[str, object]


def gitmail() -> list[str]:
    return [sys.executable, "-m", "gitmail"]


def environment(home: Path) -> dict[str, str]:
    """A machine of its own: `home`, its mailbox in home/.gitmail, git configured by nothing outside it."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("GIT", "CLAUDE", "CODEX", "XDG_"))}
    return {
        **keep,
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@example.com",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@example.com",
    }


def text_content(size: int) -> bytes:
    line = b"def handler(request):  # a line of code, repeated with its number: %08d\n"
    count = size // len(line % 0) + 1
    return b"".join(line % n for n in range(count))[:size]


def content(kind: str) -> bytes:
    """10 MiB never seen before: random bytes, or text (ending in random hex so that no two are alike)."""
    return os.urandom(10 * MIB) if kind == "random" else text_content(10 * MIB - 64) + os.urandom(32).hex().encode()


def summary(name: str, timings: Sequence[Timing]) -> Record:
    wall, cpu = [t.wall * 1000 for t in timings], [t.cpu * 1000 for t in timings]
    return {
        "row": name,
        "median_ms": round(statistics.median(wall), 1),
        "min_ms": round(min(wall), 1),
        "cpu_median_ms": round(statistics.median(cpu), 1),
        "cpu_min_ms": round(min(cpu), 1),
    }


def measure_attachments(box: Sandbox, runs: int, parts: Sequence[str] = PARTS) -> list[Record]:
    root = box.root / "attachments"
    root.mkdir()
    records: list[Record] = []
    records += sends(root, runs) if "send" in parts else []
    records += session_starts(root, runs) if "start" in parts else []
    records += syncs(root) if "sync" in parts else []
    return records


# -- send --------------------------------------------------------------------------------------------------------


def sends(root: Path, runs: int) -> list[Record]:
    home = root / "send-home"
    home.mkdir()
    env = environment(home)
    api = root / "send" / "api"
    api.mkdir(parents=True)
    run(["git", "init", "-q"], cwd=api, env=env)
    scratch = root / "scratch.git"
    run(["git", "init", "-q", "--bare", str(scratch)], cwd=root, env=env)
    run([*gitmail(), "send", "--to", "web", "-s", "first"], cwd=api, env=env)
    files = api / "files"
    files.mkdir()

    def fresh(kind: str, turn: int, user: str) -> str:  # written before the run, untimed
        name = f"{kind}-{user}-{turn}.bin"
        (files / name).write_bytes(content(kind))
        return f"files/{name}"

    def hash_object(kind: str) -> Moment:
        turns = itertools.count()

        def argv() -> list[str]:
            return ["git", "hash-object", "-w", fresh(kind, next(turns), "git")]

        return Moment(f"git hash-object -w, 10 MiB {kind}", argv, api, {**env, "GIT_DIR": str(scratch)}, b"")

    def attach(kind: str) -> Moment:
        turns = itertools.count()

        def argv() -> list[str]:
            turn = next(turns)
            return [*gitmail(), "send", "--to", "web", "-s", f"file {turn}", "--attach", fresh(kind, turn, "gitmail")]

        return Moment(f"gitmail send --attach, 10 MiB {kind}", argv, api, env, b"")

    plain = itertools.count()
    send = Moment(
        "gitmail send",
        lambda: [*gitmail(), "send", "--to", "web", "-s", f"plain {next(plain)}", "-m", "hello"],
        api,
        env,
        b"",
    )
    progress("attachments: hash-object, plain send, send --attach (10 MiB random and text)")
    moments = [hash_object("random"), hash_object("text"), send, attach("random"), attach("text")]
    records = [summary(name, timings) for name, timings in interleave(moments, runs).items()]
    shutil.rmtree(root / "send")
    return records


# -- session start -----------------------------------------------------------------------------------------------


def session_starts(root: Path, runs: int) -> list[Record]:
    progress("attachments: session start with one pending message, without and with attachments")
    moments = []
    for label, attached in (("without attachments", False), ("with 10 MiB + 2 small attached", True)):
        home = root / f"start-{attached}"
        home.mkdir()
        env = environment(home)
        api, web = home / "work" / "api", home / "work" / "web"
        for repo in (api, web):
            repo.mkdir(parents=True)
            run(["git", "init", "-q"], cwd=repo, env=env)
        extra: list[str] = []
        if attached:
            (api / "big.bin").write_bytes(os.urandom(10 * MIB))
            (api / "notes.txt").write_text("notes\n")
            (api / "schema.sql").write_text("create table t (x int);\n")
            extra = ["--attach", "big.bin", "--attach", "notes.txt", "--attach", "schema.sql"]
        message = ["send", "--to", "web", "-s", "Schema v2", "-m", "Orders have a status.", *extra]
        run([*gitmail(), *message], cwd=api, env=env)
        payload = json.dumps({"session_id": "bench", "cwd": str(web), "hook_event_name": "SessionStart"}).encode()
        start = [*gitmail(), "hook", "session-start"]
        first = run(start, cwd=web, env=env, stdin=payload)  # the receipt is written
        context = json.loads(first)["hookSpecificOutput"]["additionalContext"]
        if ('Attachment: "big.bin"' in context) != attached:
            raise BenchError(f"the session start's attachments are not what was sent: {context}")
        moments.append(Moment(f"hook session-start, {label}", start, web, env, payload))
    return [summary(name, timings) for name, timings in interleave(moments, runs).items()]


# -- sync --------------------------------------------------------------------------------------------------------


def kept(path: Path) -> int:
    """Bytes of the objects a mailbox keeps, but for its record of moves (store/moves.py: a commit of a few hundred
    bytes per write, which stays on its machine), so that what a sync brought is what it grew by."""
    total = sum(p.stat().st_size for p in (path / "objects").rglob("*") if p.is_file())
    listed = subprocess.run(
        ["git", "--git-dir", str(path), "rev-list", "--objects", "refs/gitmail-moves", "--"],
        capture_output=True,
        text=True,
    ).stdout.split()
    for oid in {word for word in listed if len(word) == 40}:
        loose = path / "objects" / oid[:2] / oid[2:]
        total -= loose.stat().st_size if loose.is_file() else 0
    return total


def syncs(root: Path) -> list[Record]:
    progress("attachments: a 10 MiB attachment between two machines over git daemon, then the same content again")
    served = root / "served"
    served.mkdir()
    plain = environment(root)
    run(["git", "init", "-q", "--bare", str(served / "mail.git")], cwd=root, env=plain)
    run(["git", "config", "receive.unpackLimit", "1"], cwd=served / "mail.git", env=plain)
    records: list[Record] = []
    with git_daemon(served, env=plain) as port:
        machines = {}
        for name in ("laptop", "server"):
            home = root / name
            home.mkdir()
            env = environment(home)
            repo = home / "work" / "api"
            repo.mkdir(parents=True)
            run(["git", "init", "-q"], cwd=repo, env=env)
            run([*gitmail(), "remote", "add", "origin", f"git://127.0.0.1:{port}/mail.git"], cwd=repo, env=env)
            machines[name] = (env, repo, home / ".gitmail" / "mail.git")
            # Objects measured as they arrive: no packer folds them into packs meanwhile.
            run(["git", "--git-dir", str(machines[name][2]), "config", "gitmail.autoPack", "false"], cwd=repo, env=env)
        laptop_repo, server_repo = machines["laptop"][1], machines["server"][1]
        for kind in ("random", "text"):
            data = content(kind)
            (laptop_repo / f"{kind}.bin").write_bytes(data)
            (server_repo / f"copy-{kind}.bin").write_bytes(data)
            for who, (env, repo, _), other in (
                ("first", machines["laptop"], machines["server"]),
                ("again", machines["server"], machines["laptop"]),
            ):
                name = f"{kind}.bin" if who == "first" else f"copy-{kind}.bin"
                run([*gitmail(), "send", "--to", "web", "-s", f"{kind} {who}", "--attach", name], cwd=repo, env=env)
                before_remote, before_other = kept(served / "mail.git"), kept(other[2])
                run([*gitmail(), "sync"], cwd=repo, env=env)
                run([*gitmail(), "sync"], cwd=other[1], env=other[0])
                records.append(
                    {
                        "row": f"sync, 10 MiB {kind}, {'attached' if who == 'first' else 'attached again'}",
                        "pushed_bytes": kept(served / "mail.git") - before_remote,
                        "fetched_bytes": kept(other[2]) - before_other,
                        "compressed_size": len(zlib.compress(data, 1)),
                    }
                )
    return records
