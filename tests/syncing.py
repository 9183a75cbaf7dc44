"""Helpers shared by the sync tests: mailboxes standing for machines, a shared bare remote, a real `git daemon`
on 127.0.0.1, and the checks every test makes of a mailbox after syncing."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gitmail import mailbox
from gitmail.store import machines, packing
from gitmail.store.repository import Store
from gitmail.sync import engine, remotes
from gitmail.values.layout import ROOT
from gitmail.values.message import parse
from tests.processes import at_the_line
from tests.reading import inbox as read_inbox


def git(path: Path, *args: str, check: bool = True) -> str:
    done = subprocess.run(["git", "--git-dir", str(path), *args], capture_output=True, text=True)
    if check:
        assert done.returncode == 0, done.stderr
    return done.stdout


def bare_remote(path: Path) -> Path:
    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
    return path


def machine(root: Path, name: str, url: str | None = None) -> Store:
    """A machine called `name`: a home of its own (root/name) holding its mailbox where gitmail keeps one,
    ~/.gitmail/mail.git, with `url` as its remote "origin"."""
    store = Store(root / name / ".gitmail" / "mail.git")
    store.create()
    store.git("config", "gitmail.machine", name)
    machines.current(store)  # its id, made once
    if url is not None:
        remotes.add_remote(store, name="origin", url=url)
    return store


def home_of(mailbox: Path) -> Path:
    """The home directory a machine's default mailbox is in."""
    return mailbox.parent.parent


def as_machine(store: Store) -> dict[str, str]:
    """The environment of a process on that machine: its own HOME, its default mailbox."""
    environment = {k: v for k, v in os.environ.items() if k != "GITMAIL_DIR"}
    return {**environment, "HOME": str(home_of(store.path))}


def settle(store: Store) -> None:
    """Make the mailbox's ref files look older than a sync's 2-second distrust of fresh ones, as a mailbox left
    alone for a while does; then sync, so the record holds the fingerprint a later process will compute."""
    then = time.time() - 10
    for top in (store.path / "refs" / "gitmail", store.path / "refs" / "notes", store.path / "packed-refs"):
        for path in [top, *top.rglob("*")] if top.is_dir() else [top] if top.exists() else []:
            os.utime(path, (then, then))
    sync_now(store)


def sync_now(store: Store, name: str = "origin") -> engine.Outcome:
    with engine.sync_lock(store, wait=60) as fd:
        assert fd is not None
        return engine.sync(store, remotes.find(store, name), lock_fd=fd)


def places(store: Store) -> dict[str, list[tuple[str, str]]]:
    """Every message id with every (ref, commit) it is under: one each, in a whole mailbox."""
    found: dict[str, list[tuple[str, str]]] = {}
    for line in git(store.path, "for-each-ref", "--format=%(refname) %(objectname)", ROOT).splitlines():
        ref, oid = line.split(" ")
        if "/_damaged/" not in ref and "/_oversized/" not in ref:
            found.setdefault(ref.rsplit("/", 1)[1], []).append((ref, oid))
    return found


def remote_places(remote: Path) -> dict[str, tuple[str, str]]:
    """What the remote's state lists: id -> (ref it stands for, commit)."""
    found = {}
    for line in git(remote, "ls-tree", "-r", f"{remotes.REMOTE_ROOT}{remotes.STATE}").splitlines():
        meta, path = line.split("\t")
        if path == remotes.FORMAT_PATH:
            continue
        repo, folder, _, message_id = path.split("/")
        assert message_id not in found, f"{message_id} is twice in the remote's state"
        found[message_id] = (f"{ROOT}{repo}/{folder}/{message_id}", meta.split()[2])
    return found


def whole(store: Store) -> None:
    """No message in two places, every ref leads to a readable message of its id, and git fsck is clean."""
    found = places(store)
    twice = {i: p for i, p in found.items() if len(p) > 1}
    assert not twice, f"messages in two places: {twice}"
    refs = [p[0] for p in found.values()]
    documents = store.read([f"{oid}:message.md" for _, oid in refs])
    for (ref, _), document in zip(refs, documents, strict=True):
        assert document is not None and parse(document).id == ref.rsplit("/", 1)[1], ref
    fsck(store.path)


def fsck(path: Path) -> None:
    done = subprocess.run(["git", "--git-dir", str(path), "fsck", "--no-dangling"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def seen(store: Store, oid: str) -> list[str]:
    return git(store.path, "notes", "--ref=gitmail-seen", "show", oid, check=False).split()


def refs_and_files(store: Store) -> dict[str, object]:
    """The mailbox as far as a failed sync must leave it: every ref (its own and those sync keeps of the remote),
    the config, gitmail's own files. Sync's bookkeeping (its lock and the packing lock it holds, the record of each
    attempt, the repository it fetches in, made on first use) is left out."""
    network = store.own_dir / "sync" / "fetch.git"
    own = {
        str(p.relative_to(store.path)): p.read_bytes()
        for p in sorted(store.own_dir.rglob("*"))
        if p.is_file() and p.name not in ("lock", packing.LOCK) and store.own_dir / "sync" not in p.parents
    }
    return {
        "refs": git(store.path, "for-each-ref", "--format=%(refname) %(objectname)"),
        "tracking": git(network, "for-each-ref", "--format=%(refname) %(objectname)") if network.exists() else "",
        "config": (store.path / "config").read_bytes(),
        "own": own,
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def git_daemon(base: Path) -> Iterator[str]:
    """A real `git daemon` on 127.0.0.1 serving the repositories under `base`, pushes allowed; yields the URL of
    `base` (append a repository's path under it). Stopped on the way out."""
    for _ in range(5):
        port = free_port()
        daemon = subprocess.Popen(
            [
                "git",
                "daemon",
                "--reuseaddr",
                "--export-all",
                "--enable=receive-pack",
                "--informative-errors",
                "--listen=127.0.0.1",
                f"--port={port}",
                f"--base-path={base}",
                str(base),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"},
        )
        if _listening(daemon, port):
            break
        daemon.kill()
        daemon.wait()
    else:
        raise AssertionError("git daemon did not start")
    try:
        yield f"git://127.0.0.1:{port}"
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)


def _listening(daemon: subprocess.Popen[bytes], port: int) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if daemon.poll() is not None:
            return False  # the port was taken meanwhile: try another
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            time.sleep(0.01)
    return False


# -- a machine at work: the loop the stress tests run in one process per machine ----------------------------------


def machine_loop(rounds: int, seed: int, go: str, own: str, everyone: str) -> None:
    """Send, reply, mark done, broadcast, hand over and sync, `rounds` times, reporting on standard output what
    this machine was told succeeded: `sent ID`, `archived ID`, `handed ID REPO`, `synced`, `sync-failed`.

    `own` are the repos read on this machine, the first of them shared with the other machines (one project
    checked out on several); broadcasts are handed over only to the others, which live here alone."""
    import random
    import sys

    from gitmail.errors import GitmailError

    store = Store()  # this machine's own: ~/.gitmail/mail.git in its HOME
    rng = random.Random(seed)
    mine, names = own.split(","), everyone.split(",")
    private = mine[1:]
    at_the_line(go)

    def say(*words: str) -> None:
        print(*words, flush=True)
        sys.stdout.flush()

    for number in range(rounds):
        kind = rng.random()
        repo = rng.choice(mine)
        if kind < 0.35:
            sent = mailbox.send(store, sender=rng.choice(private), to=rng.choice(names), subject=f"m{number}")
            say("sent", sent.message.id)
        elif kind < 0.65:
            waiting = mailbox.pending(store, repo=repo).directed
            if waiting:
                target = rng.choice(waiting)
                if kind < 0.5:
                    answer = mailbox.reply(store, sender=repo, to_id=target.message.id, body=f"re {number}")
                    say("sent", answer.message.id)
                    say("archived", target.message.id)
                else:
                    for archived in mailbox.done(store, repo=repo, ids=[target.message.id]).archived:
                        say("archived", archived.message.id)
        elif kind < 0.72:
            cast = mailbox.broadcast(store, sender=rng.choice(private), subject=f"all {number}")
            say("sent", cast.message.id)
        elif kind < 0.85:
            reader = rng.choice(private)
            for entry in read_inbox(store, repo=reader).broadcasts:
                say("handed", entry.message.id, reader)
        with engine.sync_lock(store, wait=60) as fd:
            assert fd is not None
            try:
                engine.sync(store, remotes.find(store, "origin"), lock_fd=fd)
                say("synced")
            except GitmailError as error:  # other machines kept pushing: the next round tries again
                say("sync-failed", str(error).replace(" ", "_")[:60])
