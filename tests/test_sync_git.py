"""How little git a sync runs: one `ls-remote` per remote and sync, no `for-each-ref` (refs are read from their
files), the remote's state compared with the one read before by `git diff-tree` (the listing kept of it agrees with
the whole tree), and the command line's answer before the wait for fresh ref files to settle."""

from __future__ import annotations

import collections
import os
import time
from pathlib import Path

import pytest

from gitmail import mailbox
from gitmail.store.repository import Store
from gitmail.sync import quick, remotestate
from gitmail.sync.remotes import REMOTE_ROOT, STATE
from tests.conftest import run_gitmail
from tests.syncing import as_machine, bare_remote, git, remote_places, sync_now
from tests.syncing import machine as make_machine


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Store, Store, Path]:
    remote = bare_remote(tmp_path / "remote.git")
    a, b = (make_machine(tmp_path, name, str(remote)) for name in ("laptop", "server"))
    return a, b, remote


def counting_git(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A `git` first on PATH that notes each command line it runs, then runs git."""
    folder, log = tmp_path / "counting", tmp_path / "git-commands"
    folder.mkdir()
    real = next(
        os.path.join(d, "git")
        for d in os.environ["PATH"].split(os.pathsep)
        if os.access(os.path.join(d, "git"), os.X_OK)
    )
    script = folder / "git"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >>"{log}"\nexec "{real}" "$@"\n')
    script.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}, log


def commands(log: Path) -> collections.Counter[str]:
    known = ("ls-remote", "for-each-ref", "fetch", "push", "ls-tree", "diff-tree")
    lines = log.read_text().splitlines() if log.exists() else []
    return collections.Counter(next((w for w in line.split() if w in known), "other") for line in lines)


def test_a_sync_asks_the_remote_once_and_lists_no_refs_with_git(
    pair: tuple[Store, Store, Path], tmp_path: Path
) -> None:
    a, b, _ = pair
    mailbox.send(a, sender="api", to="web", subject="one")
    sync_now(a)
    sync_now(b)
    for _ in range(3):
        mailbox.send(a, sender="api", to="web", subject="more")
    path, log = counting_git(tmp_path)
    for store in (a, b):
        log.unlink(missing_ok=True)
        done = run_gitmail("sync", cwd=tmp_path, env={**as_machine(store), **path})
        assert done.returncode == 0, done.stderr
        counted = commands(log)
        assert counted["ls-remote"] == 1 and counted["for-each-ref"] == 0 and counted["ls-tree"] == 0, counted
    assert len(mailbox.pending(b, repo="web").directed) == 4


def test_the_remotes_state_is_read_by_difference_and_agrees_with_the_whole_tree(
    pair: tuple[Store, Store, Path],
) -> None:
    a, b, remote = pair
    for number in range(5):
        mailbox.send(a, sender="api", to="web", subject=f"m{number}")
    sync_now(a)
    sync_now(b)
    kept = a.own_dir / "sync" / "origin.state"
    first = kept.read_text().partition("\n")[0].removeprefix("2 ")
    sent = mailbox.send(a, sender="api", to="web", subject="later")
    done = mailbox.pending(b, repo="web").directed[0].message.id
    mailbox.done(b, repo="web", ids=[done])
    sync_now(b)  # its state: one archived
    assert sync_now(a).moved_here == 1  # read by difference with the state it pushed
    assert mailbox.show(a, done).state.value == "archived"
    head, _, rest = kept.read_text().partition("\n")
    state = head.removeprefix("2 ")
    assert state != first and state == git(remote, "rev-parse", REMOTE_ROOT + STATE).strip()  # its own push's
    assert rest.endswith("\nend\n")
    listed = set(rest.splitlines()[:-1])
    whole = {f"{oid} {ref}" for ref, oid in remote_places(remote).values()}
    assert listed == whole and any(sent.message.id in line for line in listed)
    assert sync_now(b).received == 1 and sync_now(a).quiet


def test_a_damaged_or_foreign_kept_listing_costs_only_a_whole_listing(pair: tuple[Store, Store, Path]) -> None:
    a, b, remote = pair
    mailbox.send(a, sender="api", to="web", subject="one")
    sync_now(a)
    (b.own_dir / "sync").mkdir(parents=True, exist_ok=True)
    (b.own_dir / "sync" / "origin.state").write_text("0" * 40 + "\nnot\ta listing\n")  # a state this mailbox lacks
    assert sync_now(b).received == 1
    state = remotestate.read_remote(b, "origin", {STATE: git(remote, "rev-parse", REMOTE_ROOT + STATE).strip()})
    assert len(state.listing) == 1


def test_the_command_line_answers_before_the_settle_wait_and_records_after_it(
    pair: tuple[Store, Store, Path], tmp_path: Path
) -> None:
    a, b, _ = pair
    mailbox.send(a, sender="api", to="web", subject="one")
    done = run_gitmail("sync", cwd=tmp_path, env=as_machine(a))
    assert done.returncode == 0 and done.stderr == "gitmail: synced with origin: 1 message new there\n"
    deadline = time.monotonic() + 10
    while quick.Record.load(a.path, "origin").fingerprint is None and time.monotonic() < deadline:
        time.sleep(0.05)  # the detached child records it once the ref files have settled
    assert quick.Record.load(a.path, "origin").fingerprint is not None
    quiet = run_gitmail("sync", cwd=tmp_path, env=as_machine(a))
    assert quiet.stderr == "gitmail: origin: up to date\n"
    sync_now(b)


def test_the_refs_compared_as_lines_are_the_refs_git_lists(pair: tuple[Store, Store, Path]) -> None:
    """The mailbox's refs as sync compares them (packed-refs lines, a loose file overriding its packed line, a
    peeled value or a ref outside the folder left out) are what `git for-each-ref` lists."""
    from gitmail.store import refs

    a, _, _ = pair
    sent = [mailbox.send(a, sender="api", to="web", subject=f"m{n}") for n in range(4)]
    git(a.path, "pack-refs", "--all", "--prune")
    mailbox.done(a, repo="web", ids=[sent[1].message.id])  # loose beside packed: moved since packing
    inbox = f"refs/gitmail/web/inbox/{sent[2].message.id}"
    git(a.path, "update-ref", inbox, sent[0].oid)  # a loose file overriding a packed line of the same ref

    def listed() -> set[bytes]:
        out = git(a.path, "for-each-ref", "--format=%(objectname) %(refname)", "refs/gitmail/")
        return {line.encode() for line in out.splitlines()}

    assert refs.lines(a.path, "refs/gitmail/") == listed()
    packed = (a.path / "packed-refs").read_text()
    (a.path / "packed-refs").write_text(packed + f"^{sent[3].oid}\n")  # a peeled value: no order to bisect in
    assert {refs.ref_line(line) for line in refs.lines(a.path, "refs/gitmail/")} - {None} == {
        (line.decode().split(" ")[1], line.decode().split(" ")[0]) for line in listed()
    }


def test_a_sync_clears_the_lock_files_a_killed_sync_left(pair: tuple[Store, Store, Path]) -> None:
    a, _, _ = pair
    mailbox.send(a, sender="api", to="web", subject="one")
    sync_now(a)
    stale = a.path / "refs" / "gitmail-remotes" / "origin" / "state.lock"
    stale.write_text("")
    mailbox.send(a, sender="api", to="web", subject="two")
    assert sync_now(a).sent == 1
    assert not stale.exists()
