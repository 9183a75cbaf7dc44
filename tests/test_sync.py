"""Sync through ordinary git remotes: three mailboxes standing for three machines and one shared bare repository,
by path and over a real `git daemon` on 127.0.0.1. Reconciliation never goes backwards, nothing is lost, and a
remote that is gone, refuses or holds something else costs one line and leaves the mailbox as it was."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gitmail import mailbox, render
from gitmail.errors import UsageError
from gitmail.store import keys, machines, moves
from gitmail.store.claims import claim, load_claims
from gitmail.store.repository import Store
from gitmail.store.writer import writing
from gitmail.sync import background, engine, quick, reconcile, remotes, remotestate
from gitmail.values.layout import Change, State
from gitmail.values.machine import ELSEWHERE
from gitmail.values.mail import status
from gitmail.values.message import Message
from gitmail.values.names import RepoName
from tests.conftest import CliRunner, at, run_gitmail
from tests.processes import kill_when, loaded
from tests.reading import inbox as read_inbox
from tests.syncing import (
    as_machine,
    bare_remote,
    fsck,
    git,
    git_daemon,
    places,
    refs_and_files,
    remote_places,
    seen,
    settle,
    sync_now,
    whole,
)
from tests.syncing import machine as make_machine


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    return bare_remote(tmp_path / "remote.git")


@pytest.fixture
def trio(tmp_path: Path, remote: Path) -> tuple[Store, Store, Store]:
    """Three machines sharing one remote by path."""
    a, b, c = (make_machine(tmp_path, name, str(remote)) for name in ("laptop", "server", "ci"))
    return a, b, c


@pytest.fixture(autouse=True)
def no_racy_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ref files a test just changed count as settled at once (the real margins are 0.1 and two seconds)."""
    monkeypatch.setattr(quick, "RACY_SECONDS", 0.0)
    monkeypatch.setattr(quick, "FINE_RACY_SECONDS", 0.0)


def state_of(store: Store, message_id: str) -> State:
    return mailbox.show(store, message_id).state


# -- reconciliation ------------------------------------------------------------------------------------------------


def test_mail_sent_on_one_machine_reaches_the_others_as_from_that_machine(
    trio: tuple[Store, Store, Store], remote: Path
) -> None:
    a, b, c = trio
    sent = mailbox.send(a, sender="api", to="web", subject="Schema v2", body="Orders have a status.", when=at(0))
    assert sync_now(a) == engine.Outcome("origin", sent=1)
    assert sync_now(b) == engine.Outcome("origin", received=1)
    assert sync_now(c) == engine.Outcome("origin", received=1)
    for other in (b, c):
        [entry] = mailbox.pending(other, repo="web").directed
        assert entry.oid == sent.oid  # the same commit, byte for byte
        assert entry.message.machine == machines.current(a)
        whole(other)
    assert mailbox.pending(a, repo="web").directed[0].message.machine is None  # written here
    assert remote_places(remote) == {sent.message.id: (f"refs/gitmail/web/inbox/{sent.message.id}", sent.oid)}
    fsck(remote)


def test_mail_from_another_machine_is_never_peer_and_says_where_it_came_from(
    trio: tuple[Store, Store, Store], tmp_path: Path
) -> None:
    a, b, _ = trio
    sent = mailbox.send(a, sender="api", to="web", subject="Hello", body="hi", when=at(0))
    sync_now(a), sync_now(b)
    api = tmp_path / "work" / "api"
    subprocess.run(["git", "init", "-q", str(api)], check=True)
    claim(b, repo=RepoName("api"), path=api)  # a repository called api exists on b too
    mail = mailbox.pending(b, repo="web")
    text = render.framing(mail, claims=load_claims(b))
    laptop = machines.current(a)
    key = keys.signer(a, create=False)
    assert key is not None
    assert (
        f'--- message 1 of 1: id {sent.message.id} · directed to "web" · from "api" on machine "laptop" (VERIFIED by '
        f'the key {key.fingerprint} of machine "laptop") · 2026-11-29 09:30 +0000 · subject "Hello"'
    ) in text
    assert (
        "Note: this message came from another machine through sync; the header line names it. A repository name "
        "used on this machine says nothing about who used it on another. Such a sender is VERIFIED only when the "
        "message is signed by the key this machine accepts for the machine it names: then that machine wrote it, "
        "under whatever repository name a session there used. Otherwise it is UNVERIFIED, with the reason, and "
        "anyone who can write to the sync remote could have written it."
    ) in text
    assert render.as_json(mail.directed[0])["machine"] == {"name": "laptop", "id": laptop.id}
    own = mailbox.send(b, sender="api", to="web", subject="Local", when=at(1))
    local_text = render.framing(mailbox.pending(b, repo="web"), claims=load_claims(b))
    assert f'id {own.message.id} · directed to "web" · from "api" (PEER)' in local_text


def test_two_machines_with_one_name_stay_apart(tmp_path: Path, remote: Path) -> None:
    first = make_machine(tmp_path / "one", "laptop", str(remote))
    second = make_machine(tmp_path / "two", "laptop", str(remote))
    sent = mailbox.send(first, sender="api", to="web", subject="same name")
    sync_now(first), sync_now(second)
    [entry] = mailbox.pending(second, repo="web").directed
    assert entry.message.machine is not None and entry.message.machine.name == "laptop"
    assert render.trust("api", {"api": str(tmp_path)}, entry.message.machine) == "UNVERIFIED"
    assert mailbox.pending(first, repo="web").directed[0].message.machine is None
    assert sent.message.id == entry.message.id


def test_old_mail_without_a_machine_that_arrives_by_sync_is_not_taken_for_local(
    trio: tuple[Store, Store, Store],
) -> None:
    a, b, _ = trio
    old = Message("7kq2m9x4ab", RepoName("api"), "web", "From before machines", "", at(0))  # no machine field
    with writing(a, actor=RepoName("api")) as writer:
        writer.objects.sign = None  # as an older gitmail wrote it: unsigned, no machine recorded
        oid = writer.objects.commit(old)
        writer.apply([Change("refs/gitmail/web/inbox/7kq2m9x4ab", oid, None)], "an old message")
    assert mailbox.show(a, old.id).message.machine is None  # on the machine that wrote it: local
    sync_now(a), sync_now(b)
    assert mailbox.show(b, old.id).message.machine == ELSEWHERE
    text = render.card(mailbox.show(b, old.id), claims={"api": "/"})
    assert 'from "api" on another machine (UNVERIFIED: not signed)' in text


def test_archived_beats_pending_everywhere_and_never_comes_back(trio: tuple[Store, Store, Store], remote: Path) -> None:
    a, b, c = trio
    sent = mailbox.send(a, sender="api", to="web", subject="Please review")
    for box in (a, b, c):
        sync_now(box)
    assert [e.message.id for e in mailbox.done(b, repo="web", ids=[sent.message.id]).archived] == [sent.message.id]
    # The done travels with its receipt (when, and by whom, it was handled).
    assert sync_now(b) == engine.Outcome("origin", moved_there=1, notes=1)
    for box in (c, a):  # each says which machine the remote names, and that no session here was shown it
        outcome = sync_now(box)
        assert outcome._replace(said=()) == engine.Outcome("origin", moved_here=1, notes=1)
        [move] = outcome.said
        assert (move.id, move.state, move.machine, move.shown) == (
            sent.message.id,
            "archived",
            machines.current(b).field(),
            False,
        )
    for box in (a, b, c):
        assert state_of(box, sent.message.id) is State.ARCHIVED
        assert status(mailbox.show(box, sent.message.id)).name == "done"
        assert sync_now(box).quiet
        assert state_of(box, sent.message.id) is State.ARCHIVED
        whole(box)
    assert remote_places(remote)[sent.message.id][0] == f"refs/gitmail/web/archive/{sent.message.id}"
    moved = moves.history(c, f"refs/gitmail/web/archive/{sent.message.id}")
    assert [(m.who, m.reason) for m in moved] == [("gitmail-sync", "gitmail: sync from origin: 0 new, 1 moved")]


def test_archived_on_two_machines_while_apart_is_archived_once(trio: tuple[Store, Store, Store]) -> None:
    a, b, c = trio
    sent = mailbox.send(a, sender="api", to="web", subject="Both handle it")
    sync_now(a), sync_now(b), sync_now(c)
    mailbox.done(b, repo="web", ids=[sent.message.id])
    answer = mailbox.reply(c, sender="web", to_id=sent.message.id, body="Done here.")
    for box in (b, c, a, b):
        sync_now(box)
    for box in (a, b, c):
        assert state_of(box, sent.message.id) is State.ARCHIVED
        assert state_of(box, answer.message.id) is State.PENDING
        whole(box)
    thread = mailbox.log(a, thread=sent.message.id)
    assert [e.message.id for e in thread] == [sent.message.id, answer.message.id]  # the reply is threaded on it


def test_retracted_beats_active(trio: tuple[Store, Store, Store]) -> None:
    a, b, _ = trio
    cast = mailbox.broadcast(a, sender="api", subject="Freeze")
    sync_now(a), sync_now(b)
    assert mailbox.retract(a, sender="api", message_id=cast.message.id)
    sync_now(a)
    outcome = sync_now(b)
    assert outcome._replace(said=()) == engine.Outcome("origin", moved_here=1, notes=1)  # with the signed record of the
    assert [(m.id, m.state, m.machine) for m in outcome.said] == [  # retraction
        (cast.message.id, "retracted", machines.current(a).field())
    ]
    assert state_of(b, cast.message.id) is State.RETRACTED
    assert not mailbox.pending(b, repo="web").broadcasts


def test_a_message_caught_mid_move_without_the_lock_is_not_brought_back(
    trio: tuple[Store, Store, Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, _ = trio
    cast = mailbox.broadcast(b, sender="api", subject="Freeze")
    sync_now(b), sync_now(a)
    active, retracted = (f"refs/gitmail/_broadcast/{f}/{cast.message.id}" for f in ("active", "retracted"))
    original = reconcile._compare
    calls: list[int] = []

    def mid_retract(store: Store, there: remotestate.RemoteState, remote: str) -> reconcile.Comparison:
        calls.append(1)
        if len(calls) > 1:
            return original(store, there, remote)
        # a retract on a, caught between its two steps (git deletes active/ before it creates retracted/)
        git(a.path, "update-ref", "-d", active)
        seen = original(store, there, remote)
        git(a.path, "update-ref", retracted, cast.oid)
        return seen

    mailbox.send(b, sender="api", to="web", subject="something new there")  # so that a has to fetch and compare
    sync_now(b)
    monkeypatch.setattr(reconcile, "_compare", mid_retract)
    outcome = sync_now(a)
    assert len(calls) == 2  # compared again under the lock
    assert outcome.received == 1 and outcome.moved_there == 1
    assert [ref for ref, _ in places(a)[cast.message.id]] == [retracted]
    monkeypatch.setattr(reconcile, "_compare", original)
    sync_now(b)
    assert state_of(b, cast.message.id) is State.RETRACTED


def test_seen_sets_are_unioned_and_each_repo_is_handed_a_broadcast_once(trio: tuple[Store, Store, Store]) -> None:
    a, b, c = trio
    cast = mailbox.broadcast(a, sender="api", subject="New lint rules")
    for box in (a, b, c):
        sync_now(box)
    assert [e.message.id for e in read_inbox(b, repo="web").broadcasts] == [cast.message.id]
    assert [e.message.id for e in read_inbox(c, repo="docs").broadcasts] == [cast.message.id]
    for box in (b, c, a, b):
        sync_now(box)
    for box in (a, b, c):
        assert seen(box, cast.oid) == ["api", "docs", "web"]
    # web was handed it on b; a session of web on a or c is not handed it again
    assert not read_inbox(a, repo="web").broadcasts
    assert not read_inbox(c, repo="web").broadcasts
    assert not read_inbox(b, repo="docs").broadcasts


def test_every_gitmail_notes_ref_is_unioned_receipts_too(trio: tuple[Store, Store, Store], remote: Path) -> None:
    a, b, _ = trio
    sent = mailbox.send(a, sender="api", to="web", subject="Receipts")
    sync_now(a), sync_now(b)
    receipts = "refs/notes/gitmail-receipts"
    for box, record in ((a, '{"delivered":"laptop"}'), (b, '{"delivered":"server"}')):
        with writing(box, actor=RepoName("web")) as writer:
            parent = writer.target(receipts)
            note = writer.objects.notes_commit(
                parent, {sent.oid: record + "\n"}, who=RepoName("web"), when=at(1), text="r"
            )
            writer.apply([Change(receipts, note, parent)], "a receipt")
    sync_now(a), sync_now(b), sync_now(a)
    for box in (a, b):
        shown = git(box.path, "notes", f"--ref={receipts}", "show", sent.oid).splitlines()
        assert shown == ['{"delivered":"laptop"}', '{"delivered":"server"}']
    assert (
        git(remote, "rev-parse", "refs/gitmail-sync/notes/gitmail-receipts").strip()
        == git(a.path, "rev-parse", receipts).strip()
    )


def test_a_new_machine_gets_everything_and_mail_sent_there_comes_back(
    tmp_path: Path, trio: tuple[Store, Store, Store]
) -> None:
    a, _, _ = trio
    ids = [mailbox.send(a, sender="api", to=f"r{i % 3}", subject=f"m{i}").message.id for i in range(12)]
    mailbox.done(a, repo="r0", ids=[ids[0]])
    sync_now(a)
    fresh = Store(tmp_path / "new" / "mail.git")  # not even created yet: sync makes it
    fresh_path = fresh.path
    fresh.path.parent.mkdir()
    remotes.add_remote(fresh, name="origin", url=str(tmp_path / "remote.git"))
    assert sync_now(fresh).received == 12
    assert state_of(fresh, ids[0]) is State.ARCHIVED
    assert sorted(places(fresh)) == sorted(ids)
    back = mailbox.send(Store(fresh_path), sender="r1", to="api", subject="from the new one")
    sync_now(fresh), sync_now(a)
    assert mailbox.pending(a, repo="api").directed[0].message.id == back.message.id


def test_many_arrivals_land_in_chunks_and_their_refs_are_packed(
    trio: tuple[Store, Store, Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, _ = trio
    monkeypatch.setattr(reconcile, "IMPORT_CHUNK", 7)
    monkeypatch.setattr(reconcile, "PACK_AFTER", 10)
    monkeypatch.setattr(remotestate, "CARRIER_PARENTS", 4)
    ids = [mailbox.send(a, sender="api", to="web", subject=f"m{i}").message.id for i in range(30)]
    sync_now(a)
    assert sync_now(b).received == 30
    assert sorted(places(b)) == sorted(ids)
    assert not any(p.is_file() for p in (b.path / "refs" / "gitmail").rglob("*"))  # all packed
    whole(b)


# -- quiet syncs and contention ------------------------------------------------------------------------------------


def test_a_sync_that_finds_nothing_new_changes_nothing(
    trio: tuple[Store, Store, Store], remote: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _, _ = trio
    mailbox.send(a, sender="api", to="web", subject="once")
    sync_now(a)
    tip = git(remote, "rev-parse", "refs/gitmail-sync/state")
    before = refs_and_files(a)
    calls: list[str] = []
    original = remotestate.read_remote

    def counting(store: Store, name: str, tips: dict[str, str]) -> remotestate.RemoteState:
        calls.append(name)
        return original(store, name, tips)

    monkeypatch.setattr(remotestate, "read_remote", counting)
    assert sync_now(a) == engine.Outcome("origin")
    assert calls == []  # recognised as quiet from the fetch and the fingerprint alone
    assert git(remote, "rev-parse", "refs/gitmail-sync/state") == tip
    assert refs_and_files(a) == before


def test_the_quick_check_says_up_to_date_only_when_nothing_changed(
    trio: tuple[Store, Store, Store], remote: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, _ = trio
    monkeypatch.setenv("GITMAIL_DIR", str(a.path))
    assert quick.up_to_date() is None  # never synced
    mailbox.send(a, sender="api", to="web", subject="first")
    sync_now(a), sync_now(b)
    assert quick.up_to_date() == ["origin"] and quick.up_to_date("origin") == ["origin"]
    assert quick.up_to_date("elsewhere") is None
    mailbox.send(b, sender="api", to="web", subject="there")
    sync_now(b)
    assert quick.up_to_date() is None  # the remote moved
    sync_now(a)
    assert quick.up_to_date() == ["origin"]
    mailbox.done(a, repo="web", ids=[e.message.id for e in mailbox.pending(a, repo="web").directed][:1])
    assert quick.up_to_date() is None  # a change here
    sync_now(a)
    assert quick.up_to_date() == ["origin"]
    config = (a.path / "config").read_text()
    (a.path / "config").write_text(config.replace(str(remote), str(remote) + "/"))  # the URL was edited by hand
    assert quick.up_to_date() is None
    (a.path / "config").write_text(config + '[includeIf "gitdir:/x/"]\n\tpath = elsewhere\n')  # unusual: ask git
    assert quick.up_to_date() is None
    (a.path / "config").write_text(config)
    assert quick.up_to_date() == ["origin"]


def test_a_quiet_sync_does_not_load_the_store(trio: tuple[Store, Store, Store], tmp_path: Path) -> None:
    a, _, _ = trio
    mailbox.send(a, sender="api", to="web", subject="once")
    sync_now(a)
    settle(a)
    done, modules = loaded("sync", env={"GITMAIL_DIR": str(a.path)}, cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "gitmail: origin: up to date\n")
    assert "gitmail.sync.quick" in modules
    assert not modules & {"gitmail.store.repository", "gitmail.sync.engine", "typing", "subprocess", "typer"}


def test_after_an_interrupted_sync_the_next_one_leaves_every_quiet_sync_quick(
    trio: tuple[Store, Store, Store], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sync killed mid-way leaves work for the next; that one, having written refs just now, waits out the short
    racy window before it records, so the quiet syncs after it are recognised from the fingerprint at once."""
    monkeypatch.setattr(quick, "RACY_SECONDS", 2.0)
    monkeypatch.setattr(quick, "FINE_RACY_SECONDS", 0.1)
    a, b, _ = trio
    probe_file = tmp_path / "probe"
    probe_file.write_text("")
    if probe_file.stat().st_mtime_ns % 1_000_000_000 == 0:
        pytest.skip("this file system keeps whole-second timestamps: the two-second window applies")
    # A packer rewrites the ref files, and a quiet sync after it reads them whole once more: not what this proves.
    subprocess.run(["git", "--git-dir", str(a.path), "config", "gitmail.autoPack", "false"], check=True)
    for i in range(20):
        mailbox.send(a, sender="api", to="web", subject=f"m{i}")
    environment = {**as_machine(a), "GITMAIL_DIR": str(a.path)}
    interrupted = subprocess.Popen([sys.executable, "-m", "gitmail", "sync"], env=environment, cwd=tmp_path)
    assert kill_when(interrupted, lambda argv: "push" in argv), "the sync finished before it pushed"
    mailbox.send(b, sender="docs", to="web", subject="after")  # the next sync brings mail here, writing refs
    sync_now(b)
    runs = [loaded("sync", env=environment, cwd=tmp_path, detached=True) for _ in range(3)]  # settled after each
    assert [(done.returncode, "gitmail.sync.engine" in modules) for done, modules in runs] == [
        (0, True),
        (0, False),
        (0, False),
    ], [done.stderr for done, _ in runs]


def test_a_change_made_here_since_the_last_sync_is_never_missed(
    trio: tuple[Store, Store, Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, _ = trio
    monkeypatch.setattr(quick, "RACY_SECONDS", 3600.0)  # every ref file counts as fresh: no fingerprint is trusted
    monkeypatch.setattr(quick, "FINE_RACY_SECONDS", 3600.0)
    for i in range(3):
        sent = mailbox.send(a, sender="api", to="web", subject=f"m{i}")
        assert sync_now(a).sent == 1
        sync_now(b)
        assert state_of(b, sent.message.id) is State.PENDING


def test_another_machine_pushing_in_between_makes_sync_fetch_and_try_again(
    trio: tuple[Store, Store, Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, c = trio
    mine = mailbox.send(a, sender="api", to="web", subject="from a")
    theirs = mailbox.send(b, sender="docs", to="web", subject="from b")
    original = engine._push
    raced: list[bool] = []

    def push_after_b(*args: object, **kwargs: object) -> bool:
        if not raced:
            raced.append(True)
            assert sync_now(b).sent == 1  # b gets in first
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(engine, "_push", push_after_b)
    outcome = sync_now(a)
    assert outcome.attempts == 2 and outcome.sent == 1 and outcome.received == 1
    monkeypatch.setattr(engine, "_push", original)
    sync_now(c)
    assert {e.message.id for e in mailbox.pending(c, repo="web").directed} == {mine.message.id, theirs.message.id}


def test_sync_gives_up_after_a_bounded_number_of_attempts(
    trio: tuple[Store, Store, Store], monkeypatch: pytest.MonkeyPatch, cli: CliRunner
) -> None:
    a, b, _ = trio
    monkeypatch.setattr(engine, "ATTEMPTS", 3)
    monkeypatch.setattr(engine, "_jitter", lambda: 0.0)
    original = engine._push
    counter = iter(range(100))

    def always_beaten(store: Store, *args: object, **kwargs: object) -> bool:
        if store is not b:  # b pushes just before a, every time
            mailbox.send(b, sender="docs", to="web", subject=f"b{next(counter)}")
            sync_now(b)
        return original(store, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(engine, "_push", always_beaten)
    mailbox.send(a, sender="api", to="web", subject="never first")
    monkeypatch.setenv("GITMAIL_DIR", str(a.path))
    result = cli("sync")
    assert result.code == 1 and result.out == ""
    assert result.err == (
        "gitmail: error: origin: other machines kept pushing while this sync ran (3 attempts); what arrived is "
        "here, run gitmail sync again to send the rest\n"
    )
    assert len(mailbox.pending(a, repo="web").directed) == 3  # its own, and b's first two: what arrived is here
    monkeypatch.setattr(engine, "_push", original)
    assert sync_now(a) == engine.Outcome("origin", received=1, sent=1)


# -- faults: one line, the mailbox as it was -----------------------------------------------------------------------


def failing_sync(cli: CliRunner, monkeypatch: pytest.MonkeyPatch, store: Store) -> str:
    monkeypatch.setenv("GITMAIL_DIR", str(store.path))
    before = refs_and_files(store)
    result = cli("sync")
    assert result.code == 1, result
    assert result.out == "" and result.err.startswith("gitmail: error: origin: ") and result.err.count("\n") == 1
    assert refs_and_files(store) == before
    whole(store)
    return result.err


def test_a_remote_that_is_gone_costs_one_line(
    trio: tuple[Store, Store, Store], remote: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _, _ = trio
    mailbox.send(a, sender="api", to="web", subject="stays here")
    sync_now(a)
    mailbox.send(a, sender="api", to="web", subject="not sent")
    shutil.rmtree(remote)
    err = failing_sync(cli, monkeypatch, a)
    assert err == (
        f"gitmail: error: origin: cannot reach {remote}: '{remote}' does not appear to be a git repository\n"
    )


def test_a_remote_that_refuses_the_push_costs_one_line(
    tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server's own hook refuses (a path remote's hooks never run: see test_hostile_remote.py)."""
    served = tmp_path / "served"
    served.mkdir()
    remote = bare_remote(served / "mail.git")
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'pushes are closed today' >&2\nexit 1\n")
    hook.chmod(0o755)
    with git_daemon(served) as base:
        a = make_machine(tmp_path, "laptop", f"{base}/mail.git")
        mailbox.send(a, sender="api", to="web", subject="refused")
        err = failing_sync(cli, monkeypatch, a)
    assert err == (
        f"gitmail: error: origin: {base}/mail.git refused the push: pre-receive hook declined (pushes are closed "
        "today)\n"
    )
    assert not git(remote, "for-each-ref")


@pytest.mark.parametrize("garbage", ["blob", "code", "missing commit", "wrong document", "bad path"])
def test_a_remote_that_holds_something_else_costs_one_line(
    trio: tuple[Store, Store, Store],
    remote: Path,
    cli: CliRunner,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    garbage: str,
) -> None:
    a, b, _ = trio
    mailbox.send(b, sender="api", to="web", subject="real mail")
    sync_now(b)
    mailbox.send(a, sender="api", to="web", subject="mine")
    sync_now(a)
    state = git(remote, "rev-parse", "refs/gitmail-sync/state").strip()
    other = Message("7kq2m9x4ab", RepoName("api"), "docs", "elsewhere", "", at(0))
    blob = (
        subprocess.run(
            ["git", "--git-dir", str(remote), "hash-object", "-w", "--stdin"],
            input=other.document(),
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .strip()
    )
    if garbage == "blob":
        target = blob
    elif garbage == "code":
        work = tmp_path / "code"
        subprocess.run(["git", "init", "-q", str(work)], check=True)
        (work / "main.py").write_text("print('hi')\n")
        subprocess.run(["git", "-C", str(work), "add", "."], check=True)
        subprocess.run(["git", "-C", str(work), "commit", "-qm", "code"], check=True)
        subprocess.run(["git", "-C", str(work), "push", "-q", str(remote), "HEAD:refs/heads/main"], check=True)
        target = git(remote, "rev-parse", "refs/heads/main").strip()
    else:
        if garbage == "missing commit":
            entry = f"160000 commit {'1' * 40}\tweb/inbox/7k/7kq2m9x4ab\n"
        elif garbage == "wrong document":
            document_tree = subprocess.run(
                ["git", "--git-dir", str(remote), "mktree"],
                input=f"100644 blob {blob}\tmessage.md\n",
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            commit = git(remote, "commit-tree", document_tree, "-m", "elsewhere").strip()
            entry = f"160000 commit {commit}\tweb/inbox/7k/7kq2m9x4ab\n"  # filed for web, addressed to docs
        else:
            entry = f"160000 commit {state}\tweb/inbox/zz/not-an-id\n"
        target = _state_with(remote, git(remote, "ls-tree", "-r", state) + entry, state)
    git(remote, "update-ref", "refs/gitmail-sync/state", target)
    before_remote = git(remote, "for-each-ref")
    err = failing_sync(cli, monkeypatch, a)
    assert err.startswith("gitmail: error: origin: the remote holds something other than gitmail mail ("), err
    assert git(remote, "for-each-ref") == before_remote  # and nothing was pushed over it


def _state_with(remote: Path, listing: str, parent: str) -> str:
    """A state commit on the remote whose tree lists `listing` (ls-tree -r lines), built with a scratch index."""
    env = {**os.environ, "GIT_INDEX_FILE": str(remote / "scratch-index")}
    command = ["git", "--git-dir", str(remote)]
    subprocess.run([*command, "update-index", "--add", "--index-info"], input=listing, text=True, check=True, env=env)
    tree = subprocess.run([*command, "write-tree"], capture_output=True, text=True, check=True, env=env).stdout
    (remote / "scratch-index").unlink()
    return git(remote, "commit-tree", tree.strip(), "-p", parent, "-m", "tampered").strip()


def test_urls_with_credentials_are_refused(
    trio: tuple[Store, Store, Store], cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _, _ = trio
    monkeypatch.setenv("GITMAIL_DIR", str(a.path))
    for url, why in (
        ("https://me:hunter2@example.com/mail.git", "embeds a password"),
        ("https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/me/mail.git", "embeds an access token"),
        ("ssh://me:hunter2@example.com/mail.git", "embeds a password"),
        ("--upload-pack=evil", "starts with '-'"),
    ):
        result = cli("remote", "add", "other", "--", url)
        assert result.code == 2 and why in result.err and "hunter2" not in result.err, result
    for fine in ("git@github.com:me/mail.git", "ssh://git@example.com/mail.git", "https://me@example.com/mail.git"):
        assert remotes.url_problem(fine) is None, fine
    # edited into the config by hand: refused at sync time, and never shown in full
    a.git("config", "gitmail-remote.origin.url", "https://me:hunter2@example.com/mail.git")
    result = cli("sync")
    assert result.code == 1
    assert result.err == (
        "gitmail: error: origin: refusing to sync with https://***@example.com/mail.git: it embeds a password in "
        "plain text; use ssh keys or a git credential helper instead\n"
    )


def test_credentials_in_any_spelling_and_command_transports_are_refused(
    trio: tuple[Store, Store, Store], cli: CliRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    a, _, _ = trio
    monkeypatch.setenv("GITMAIL_DIR", str(a.path))
    marker = tmp_path / "ran"
    for url, why, shown in (
        ("https://example.com/mail.git?access_token=hunter2", "holds a query", "https://example.com/mail.git?***"),
        ("https://example.com/mail.git?private_token=hunter2&x=1", "holds a query", "https://example.com/mail.git?***"),
        ("https://example.com/mail.git#hunter2", "or a fragment", "https://example.com/mail.git#***"),
        ("https://hunter2Hunter2hunter2XY@example.com/m.git", "access token", "https://***@example.com/m.git"),
        ("ssh://ghp_hunter2@example.com/mail.git", "access token", "ssh://***@example.com/mail.git"),
        ("glpat-hunter2@example.com:me/mail.git", "access token", "***@example.com:me/mail.git"),
        ("https://u%3Ahunter2@example.com/mail.git", "embeds a password", "https://***@example.com/mail.git"),
        ("https://u%3ahunter2@example.com/mail.git", "embeds a password", "https://***@example.com/mail.git"),
        (f"ext::sh -c touch% {marker}", "ext transport", None),
        ("EXT::sh -c true", "ext transport", None),
        ("ext://sh", "ext transport", None),
        ("fd::3", "fd transport", None),
    ):
        before = (a.path / "config").read_bytes()
        result = cli("remote", "add", "other", "--", url)
        assert result.code == 2 and result.out == "", (url, result)
        assert result.err.startswith("gitmail: error: invalid URL: it ") and result.err.count("\n") == 1, result
        assert why in result.err and "hunter2" not in result.err, (url, result)
        assert (a.path / "config").read_bytes() == before
        # edited into the config by hand: refused at sync time in one line, never shown in full, never run
        a.git("config", "gitmail-remote.origin.url", url)
        synced = cli("sync")
        assert synced.code == 1 and synced.err.count("\n") == 1, (url, synced)
        assert synced.err.startswith(f"gitmail: error: origin: refusing to sync with {shown or url}: it "), synced
        assert why in synced.err and "hunter2" not in synced.err, (url, synced)
        assert not marker.exists()
    for fine in (
        "https://me%40example.com@example.com/mail.git",
        "ssh://git@example.com:2222/mail.git",
        "me.myself@example.com:mail.git",
        str(tmp_path / "odd?name#dir"),
    ):
        assert remotes.url_problem(fine) is None, fine


def test_a_sync_recorded_under_older_rules_is_checked_again(
    tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the last sync left does not vouch for a URL the current rules refuse: the quick check goes the whole way,
    which refuses it."""
    odd = bare_remote(tmp_path / "mail.git#frag")
    url = f"file://{odd}"
    a = make_machine(tmp_path, "laptop", str(odd))
    mailbox.send(a, sender="api", to="web", subject="x")
    settle(a)
    a.git("config", "gitmail-remote.origin.url", url)
    record = json.loads(Path(quick.Record.path(a.path, "origin")).read_text())
    record.pop("rules", None)  # as a gitmail before the current rules wrote it
    record["url"] = url
    Path(quick.Record.path(a.path, "origin")).write_text(json.dumps(record))
    assert quick.up_to_date() is None
    monkeypatch.setenv("GITMAIL_DIR", str(a.path))
    result = cli("sync")
    assert (result.code, result.err) == (
        1,
        f"gitmail: error: origin: refusing to sync with file://{tmp_path}/mail.git#***: it holds a query (?...) or a "
        "fragment (#...), where access tokens are passed; a git remote needs neither (use a git credential helper "
        "instead)\n",
    )


# -- over a real network protocol ----------------------------------------------------------------------------------


def test_three_machines_over_git_daemon(tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    bare_remote(served / "mail.git")
    with git_daemon(served) as base:
        url = f"{base}/mail.git"
        a, b, c = (make_machine(tmp_path, name, url) for name in ("laptop", "server", "ci"))
        sent = mailbox.send(a, sender="api", to="web", subject="over the wire")
        cast = mailbox.broadcast(c, sender="ci", subject="build is red")
        for box in (a, b, c, a, b):
            sync_now(box)
        mailbox.done(b, repo="web", ids=[sent.message.id])
        assert [e.message.id for e in read_inbox(a, repo="web").broadcasts] == [cast.message.id]
        for box in (b, a, c, b):
            sync_now(box)
        for box in (a, b, c):
            assert state_of(box, sent.message.id) is State.ARCHIVED
            assert seen(box, cast.oid) == ["ci", "web"]
            assert sync_now(box).quiet
            whole(box)
    fsck(served / "mail.git")


def size_of(path: Path) -> int:
    return sum(p.stat().st_size for p in (path / "objects").rglob("*") if p.is_file())


def test_an_attachment_crosses_a_git_daemon_byte_for_byte_and_only_once(tmp_path: Path) -> None:
    """What a sync moves is measured as what it adds to the other side (the remote keeps every push as sent)."""
    from gitmail import actions
    from gitmail.workspace import Actor

    served = tmp_path / "served"
    served.mkdir()
    git(bare_remote(served / "mail.git"), "config", "receive.unpackLimit", "1")
    files = tmp_path / "files"
    files.mkdir()
    data = os.urandom(4 << 20)  # incompressible: what moves is the file itself
    (files / "dump.bin").write_bytes(data)
    (files / ".gitmodules").write_text('[submodule "x"]\n\tpath = -x\n\turl = --upload-pack=touch /tmp/pwned\n')
    (files / "copy.bin").write_bytes(data)
    api = Actor(RepoName("api"), str(files))
    with git_daemon(served) as base:
        url = f"{base}/mail.git"
        a, b = (make_machine(tmp_path, name, url) for name in ("laptop", "server"))
        first = actions.send(a, api, to="web", subject="dump", attach=["dump.bin", ".gitmodules"], base=files)
        pushed, fetched = size_of(served / "mail.git"), size_of(b.path)
        sync_now(a)
        assert sync_now(b).received == 1
        pushed, fetched = size_of(served / "mail.git") - pushed, size_of(b.path) - fetched
        assert len(data) < pushed < len(data) + 64 * 1024 and len(data) < fetched < len(data) + 64 * 1024
        there = mailbox.show(b, first.entry.message.id)
        assert there.message.attachments == first.entry.message.attachments
        assert mailbox.attachment_content(b, there, there.message.attachments[0]) == data
        os.chdir(tmp_path)
        saved = actions.save_attachment(b, first.entry.message.id, "dump.bin")
        assert saved.path is not None and saved.path.read_bytes() == data
        assert actions.save_attachment(b, first.entry.message.id, "_.gitmodules").path is not None
        assert (tmp_path / "_.gitmodules").read_bytes() == (files / ".gitmodules").read_bytes()

        # The same content attached again, under another name, on the other machine: nothing big moves.
        again = actions.send(b, api, to="web", subject="the dump again", attach=["copy.bin"], base=files)
        pushed, fetched = size_of(served / "mail.git"), size_of(a.path)
        sync_now(b)
        assert sync_now(a).received == 1
        pushed, fetched = size_of(served / "mail.git") - pushed, size_of(a.path) - fetched
        assert pushed < 64 * 1024 and fetched < 64 * 1024, (pushed, fetched)
        assert mailbox.show(a, again.entry.message.id).message.attachments[0].blob == there.message.attachments[0].blob
        for box in (a, b):
            assert sync_now(box).quiet
            whole(box)
    fsck(served / "mail.git")


def test_a_state_keeps_the_attachments_it_carried_within_reach_and_costs_nothing_without(
    trio: tuple[Store, Store, Store], remote: Path, tmp_path: Path
) -> None:
    from gitmail import actions
    from gitmail.workspace import Actor

    a, b, _ = trio

    def parents() -> list[str]:
        return git(remote, "log", "-1", "--format=%P", f"{remotes.REMOTE_ROOT}{remotes.STATE}").split()

    def messages(oids: list[str]) -> list[str]:
        return [git(remote, "log", "-1", "--format=%s", oid).strip() for oid in oids]

    mailbox.send(a, sender="api", to="web", subject="plain")
    sync_now(a)
    assert len(parents()) == 1  # the carrier of the first messages: no attachments, nothing more
    (tmp_path / "f.bin").write_bytes(b"\0" * 5000)
    sent = actions.send(
        a, Actor(RepoName("api"), str(tmp_path)), to="web", subject="f", attach=["f.bin"], base=tmp_path
    )
    sync_now(a)
    kept = parents()[2]
    assert messages(parents()[1:]) == [
        "gitmail sync: carries 1 messages",
        "gitmail sync: attachments the other side has",
    ]
    blob = sent.entry.message.attachments[0].blob
    assert git(remote, "ls-tree", "-r", "--format=%(path) %(objectname)", kept).split() == [f"attachments/{blob}", blob]
    mailbox.send(b, sender="web", to="api", subject="plain again")
    sync_now(b)
    assert parents()[2] == kept  # kept as a parent while nothing new is attached
    fsck(remote)


def test_a_daemon_that_refuses_pushes_costs_one_line(
    tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = tmp_path / "served"
    served.mkdir()
    git(bare_remote(served / "mail.git"), "config", "daemon.receivepack", "false")
    with git_daemon(served) as base:
        a = make_machine(tmp_path, "laptop", f"{base}/mail.git")
        mailbox.send(a, sender="api", to="web", subject="nowhere to go")
        err = failing_sync(cli, monkeypatch, a)
    assert err.startswith(f"gitmail: error: origin: {base}/mail.git refused the push: "), err


# -- the command line ------------------------------------------------------------------------------------------------


def test_remote_commands(cli: CliRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, remote: Path) -> None:
    box = make_machine(tmp_path, "laptop")
    monkeypatch.setenv("GITMAIL_DIR", str(box.path))
    result = cli("remote", "add", "origin", str(remote), "--auto", "--interval", "60")
    assert result.code == 0 and result.out == ""
    assert result.err == (
        f"gitmail: added remote 'origin' ({remote}) to sync automatically\n"
        "gitmail: note: sync sends the contents of every message to this remote: anyone who can read it can read "
        "your mail. Use a private repository. Run `gitmail sync` to sync now.\n"
    )
    assert cli("remote", "add", "origin", str(remote)).err.startswith("gitmail: error: a remote named 'origin' exists")
    here = machines.current(box)
    listed = cli("remote")
    assert listed.out == f"origin\t{remote}\tauto, every 60 s\tnever synced\n"
    assert listed.err == f"gitmail: this machine: laptop ({here.id})\n"
    sent = mailbox.send(box, sender="api", to="web", subject="x")
    done = cli("sync")
    assert (done.code, done.out, done.err) == (0, "", "gitmail: synced with origin: 1 message new there\n")
    assert cli("sync", "origin").err == "gitmail: origin: up to date\n"
    assert cli("sync", "--quiet").err == ""
    assert cli("sync", "elsewhere").err == "gitmail: error: no remote named 'elsewhere' (known: origin)\n"
    assert cli("remote", "set", "origin", "--no-auto").err == "gitmail: 'origin' syncs when asked\n"
    assert "\twhen asked\tlast synced " in cli("remote").out
    assert cli("remote", "remove", "origin").err == "gitmail: removed remote 'origin'\n"
    assert (
        cli("remote").err
        == f"gitmail: no remotes (add one: gitmail remote add NAME URL)\ngitmail: this machine: laptop ({here.id})\n"
    )
    assert not git(box.path, "for-each-ref", "refs/gitmail-remotes/")
    assert state_of(box, sent.message.id) is State.PENDING  # removing a remote removes no mail
    assert remote_places(remote)  # nor anything on the remote
    assert cli("sync").err == "gitmail: error: no remote to sync with (add one: gitmail remote add NAME URL)\n"


def test_changing_or_removing_an_unknown_remote_writes_nothing(cli: CliRunner, home: Path) -> None:
    box = Store()
    for command in (["remote", "set", "nope", "--auto"], ["remote", "remove", "nope"]):
        result = cli(*command)
        assert (result.code, result.err) == (
            2,
            "gitmail: error: no remote named 'nope' (add one: gitmail remote add)\n",
        )
        assert not box.path.exists()


def test_invalid_names_are_refused(tmp_path: Path, remote: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    box = make_machine(tmp_path, "laptop")
    with pytest.raises(UsageError, match="invalid remote name"):
        remotes.add_remote(box, name="a/b", url=str(remote))
    monkeypatch.setenv("GITMAIL_MACHINE", "my laptop")
    with pytest.raises(UsageError, match="invalid machine name 'my laptop' in GITMAIL_MACHINE"):
        mailbox.send(box, sender="api", to="web", subject="x")
    assert not places(box)


def test_the_installed_command_syncs_as_a_separate_process(tmp_path: Path, remote: Path) -> None:
    a = make_machine(tmp_path, "laptop", str(remote))
    b = make_machine(tmp_path, "server", str(remote))
    mailbox.send(a, sender="api", to="web", subject="by the real command")
    for box, said in ((a, "1 message new there"), (b, "1 message new here")):
        done = run_gitmail("sync", cwd=tmp_path, env={"GITMAIL_DIR": str(box.path)})
        assert (done.returncode, done.stdout, done.stderr) == (0, "", f"gitmail: synced with origin: {said}\n")
    assert len(mailbox.pending(b, repo="web").directed) == 1


# -- in the background -----------------------------------------------------------------------------------------------


def wait_for(condition: object, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "the background sync did not finish"
        time.sleep(0.05)


def test_a_send_pushes_in_the_background_when_the_remote_syncs_automatically(tmp_path: Path, remote: Path) -> None:
    a = make_machine(tmp_path, "laptop")
    remotes.add_remote(a, name="origin", url=str(remote), auto=True)
    api = tmp_path / "api"
    subprocess.run(["git", "init", "-q", str(api)], check=True)
    done = run_gitmail("send", "--to", "web", "-s", "background", cwd=api, env={"GITMAIL_DIR": str(a.path)})
    assert done.returncode == 0, done.stderr
    message_id = done.stdout.strip()
    wait_for(lambda: message_id in (remote_places(remote) if git(remote, "for-each-ref").strip() else {}))


def test_the_session_start_hook_starts_a_due_sync_without_waiting_for_it(
    tmp_path: Path, remote: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = make_machine(tmp_path, "laptop", str(remote))
    b = make_machine(tmp_path, "server")
    remotes.add_remote(b, name="origin", url=str(remote), auto=True, interval=3600)
    sent = mailbox.send(a, sender="api", to="web", subject="arrives by itself")
    sync_now(a)
    web = tmp_path / "web"
    subprocess.run(["git", "init", "-q", str(web)], check=True)
    payload = json.dumps({"cwd": str(web), "hook_event_name": "SessionStart", "source": "startup"})
    env = {"GITMAIL_DIR": str(b.path)}
    first = run_gitmail("hook", "session-start", cwd=web, stdin=payload, env=env)
    assert (first.returncode, first.stdout, first.stderr) == (0, "", "")  # nothing here yet; a sync was started
    wait_for(lambda: bool(mailbox.pending(b, repo="web").directed))
    second = run_gitmail("hook", "session-start", cwd=web, stdin=payload, env=env)
    assert sent.message.id in second.stdout and "on machine" in second.stdout
    started = (b.own_dir / "sync" / "last-attempt").stat().st_mtime
    assert background.start_if_due(b) == started + 3600  # within the interval: nothing started, due in an hour
    assert (b.own_dir / "sync" / "last-attempt").stat().st_mtime == started


def test_a_background_sync_leaves_at_once_when_another_sync_runs(tmp_path: Path, remote: Path) -> None:
    a = make_machine(tmp_path, "laptop")
    remotes.add_remote(a, name="origin", url=str(remote), auto=True)
    mailbox.send(a, sender="api", to="web", subject="waits")
    with engine.sync_lock(a, wait=5) as fd:
        assert fd is not None
        assert engine.run_background(a) == 0  # another sync holds the lock: it will see the request
    assert not git(remote, "for-each-ref")


def test_a_request_made_while_the_background_sync_runs_makes_it_go_again(
    tmp_path: Path, remote: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = make_machine(tmp_path, "laptop")
    remotes.add_remote(a, name="origin", url=str(remote), auto=True)
    first = mailbox.send(a, sender="api", to="web", subject="first")
    original = engine.sync
    runs: list[str] = []

    def syncing(store: Store, remote: remotes.Remote, *, lock_fd: int) -> engine.Outcome:
        runs.append(remote.name)
        outcome = original(store, remote, lock_fd=lock_fd)
        if len(runs) == 1:  # a send lands and asks for a sync while this one runs
            later = mailbox.send(a, sender="api", to="web", subject="later")
            runs.append(later.message.id)
            background.request(a)
        return outcome

    monkeypatch.setattr(engine, "sync", syncing)
    assert engine.run_background(a) == 0
    assert len(runs) == 3
    assert set(remote_places(remote)) == {first.message.id, runs[1]}


def test_mail_a_background_sync_brings_is_followed_up_as_a_sync_by_hand(
    tmp_path: Path, remote: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mail that comes in through `gitmail sync --auto` makes the session-start answers anew, wakes idle Codex
    sessions and tells the person of mail for them, as a sync by hand does."""
    from gitmail import arrivals

    a, b = make_machine(tmp_path, "laptop", str(remote)), make_machine(tmp_path, "server")
    remotes.add_remote(b, name="origin", url=str(remote), auto=True)
    asked = mailbox.send(a, sender="api", to="@user", subject="May I drop v1?")
    sync_now(a)
    followed: list[tuple[str, object]] = []
    monkeypatch.setattr(arrivals, "prepare_starts", lambda store, repos: followed.append(("starts", repos)))

    def woke(store: Store, repos: object) -> bool:
        followed.append(("wake", repos))
        return False

    monkeypatch.setattr(arrivals, "after_arrival", woke)
    monkeypatch.setattr(arrivals, "notify_person", lambda store, ids: followed.append(("person", list(ids))))
    assert engine.run_background(b) == 0
    assert followed == [("starts", None), ("wake", None), ("person", [asked.message.id])]


def test_mail_to_the_person_and_the_persons_answer_sync_like_any_mail(trio: tuple[Store, Store, Store]) -> None:
    a, b, _ = trio
    asked = mailbox.send(a, sender="api", to="@user", subject="May I drop v1?", when=at(0))
    assert sync_now(a) == engine.Outcome("origin", sent=1)
    assert sync_now(b) == engine.Outcome("origin", received=1, for_person=(asked.message.id,))
    [entry] = mailbox.pending(b, repo="@user").directed
    assert entry.oid == asked.oid and entry.message.to == "@user"
    answer = mailbox.reply(b, sender="@user", to_id=asked.message.id, body="Yes.", when=at(1))
    sync_now(b), sync_now(a)
    assert state_of(a, asked.message.id) is State.ARCHIVED
    [back] = mailbox.pending(a, repo="api").directed
    assert back.message.id == answer.message.id and back.verdict is not None and back.verdict.verified
    assert render.vouched(back, {}).startswith("PERSON by the key ")
    whole(a)
