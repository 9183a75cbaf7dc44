from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitmail import mailbox
from gitmail.errors import MailboxError
from gitmail.store import packing
from gitmail.store.files import write_atomically
from gitmail.store.lock import GIT_LOCK_WAIT
from gitmail.store.repository import Store
from gitmail.store.writer import writing
from gitmail.values.layout import ROOT, State, annotated, latest, locate
from gitmail.values.message import Message
from gitmail.values.names import RepoName
from tests.conftest import WHEN
from tests.processes import AT_THE_LINE, StartingLine
from tests.reading import inbox as read_inbox


def test_refs_are_parsed_into_places_and_foreign_refs_ignored() -> None:
    oid = "a" * 40
    assert locate("refs/gitmail/My%20App/inbox/7kq2m9x4ab", oid) == (
        "refs/gitmail/My%20App/inbox/7kq2m9x4ab",
        oid,
        "7kq2m9x4ab",
        State.PENDING,
        "My App",
    )
    assert locate("refs/gitmail/_broadcast/retracted/7kq2m9x4ab", oid).state is State.RETRACTED  # type: ignore[union-attr]
    for foreign in (
        "refs/heads/main",
        "refs/gitmail/web/inbox/not-an-id",
        "refs/gitmail/web/elsewhere/7kq2m9x4ab",
        "refs/gitmail/_broadcast/inbox/7kq2m9x4ab",
        "refs/gitmail/web/active/7kq2m9x4ab",
        "refs/gitmail/%ZZ/inbox/7kq2m9x4ab",
    ):
        assert locate(foreign, oid) is None, foreign


def test_a_leftover_of_an_interrupted_move_yields_to_the_later_state() -> None:
    inbox = locate("refs/gitmail/web/inbox/7kq2m9x4ab", "a" * 40)
    archive = locate("refs/gitmail/web/archive/7kq2m9x4ab", "a" * 40)
    assert inbox and archive
    assert latest([inbox, archive]) == [archive]
    assert latest([archive, inbox]) == [archive]


def _message(subject: str) -> Message:
    return Message(id="7kq2m9x4ab", sender=RepoName("api"), to="web", subject=subject, body="", date=WHEN)


@pytest.mark.parametrize(
    "given", ["/m/mail.git", "/m/mail.git/", "/m//mail.git", "/m/./mail.git", "//m/mail.git", "///m", "rel/./x/", "."]
)
def test_the_mailbox_path_is_spelled_as_pathlib_spells_it(given: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`Store.root`, the str the store joins its paths to, is the path a Path would give (no trailing or doubled
    '/', no '.'), whether given or named by GITMAIL_DIR; `Store.path` is that path as a Path."""
    assert Store(given).root == str(Path(given)) and Store(Path(given)).path == Path(given)
    assert Store("~/m/").root == str(Path("~/m/").expanduser())
    if given.startswith("/"):
        monkeypatch.setenv("GITMAIL_DIR", given)
        assert Store().root == str(Path(given)) and Store().own_root == str(Path(given) / "gitmail")


def test_a_change_left_half_done_is_finished_by_the_next_lock_holder(box: Store) -> None:
    mailbox.send(box, sender="api", to="web", subject="seed")
    with writing(box, actor=RepoName("api")) as writer:
        oid = writer.commit(_message("half"))
    # A writer died after writing its journal and before moving any ref:
    (box.own_dir / "journal").write_text(json.dumps([[f"{ROOT}web/inbox/7kq2m9x4ab", oid, None]]))
    assert {e.message.subject for e in mailbox.pending(box, repo="web").directed} == {"seed", "half"}
    assert not (box.own_dir / "journal").exists()


def test_lock_files_a_dead_writers_journal_names_are_cleared_at_once(box: Store) -> None:
    first = mailbox.send(box, sender="api", to="web", subject="one")
    archived = f"{ROOT}web/archive/{first.message.id}"
    pending = f"{ROOT}web/inbox/{first.message.id}"
    # A `done` killed inside git update-ref: its journal is written, its ref locks are still there.
    (box.own_dir / "journal").write_text(json.dumps([[archived, first.oid, None], [pending, None, first.oid]]))
    for ref in (archived, pending):
        (box.path / f"{ref}.lock").parent.mkdir(parents=True, exist_ok=True)
        (box.path / f"{ref}.lock").write_text(first.oid + "\n")
    cast = mailbox.broadcast(box, sender="api", subject="all")  # the next writer finishes the change first
    assert [e.state for e in mailbox.log(box, repo="web")] == [State.BROADCAST, State.ARCHIVED]
    assert not list(box.path.rglob("*.lock"))
    assert [e.message.id for e in read_inbox(box, repo="web").broadcasts] == [cast.message.id]


def test_a_lock_file_a_live_git_may_hold_is_never_removed(box: Store) -> None:
    first = mailbox.send(box, sender="api", to="web", subject="one")
    subprocess.run(["git", "--git-dir", str(box.path), "pack-refs", "--all"], check=True)
    held = box.path / "packed-refs.lock"
    held.write_text("a user's git pack-refs at work")
    with pytest.raises(MailboxError, match=f"another git process holds {held} .*remove that file if no git process"):
        mailbox.done(box, repo="web", ids=[first.message.id])
    assert held.read_text() == "a user's git pack-refs at work"
    assert [e.message.id for e in mailbox.pending(box, repo="web").directed] == [first.message.id]


def test_a_lock_released_while_git_waits_for_it_costs_nothing(box: Store, tmp_path: Path) -> None:
    first = mailbox.send(box, sender="api", to="web", subject="one")
    subprocess.run(["git", "--git-dir", str(box.path), "pack-refs", "--all"], check=True)
    held = box.path / "packed-refs.lock"
    held.write_text("")
    # A stand-in for a user's `git pack-refs`: once started, it holds on for a quarter of git's own lock wait.
    line = StartingLine(tmp_path)
    releaser = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"{AT_THE_LINE}\nimport os, time\nat_the_line({str(line.go)!r})\n"
            f"time.sleep({GIT_LOCK_WAIT / 4})\nos.unlink({str(held)!r})",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    line.wait([releaser])
    line.let_go()
    try:
        assert [e.message.id for e in mailbox.done(box, repo="web", ids=[first.message.id]).archived] == [
            first.message.id
        ]
    finally:
        releaser.wait()


def test_a_lock_file_abandoned_long_ago_is_cleared_and_logged(box: Store) -> None:
    first = mailbox.send(box, sender="api", to="web", subject="one")
    subprocess.run(["git", "--git-dir", str(box.path), "pack-refs", "--all"], check=True)
    held = box.path / "packed-refs.lock"
    held.write_text("")
    long_ago = time.time() - 3600
    os.utime(held, (long_ago, long_ago))
    assert [e.message.id for e in mailbox.done(box, repo="web", ids=[first.message.id]).archived] == [first.message.id]
    assert not held.exists()
    assert f"removed {held}" in (box.path.parent / "gitmail.log").read_text()


def test_a_held_lock_makes_a_writer_give_up_with_a_clear_error(box: Store) -> None:
    mailbox.send(box, sender="api", to="web", subject="create")
    fd = os.open(box.own_dir / "lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(MailboxError, match="stayed locked by another gitmail process; try again"):
            with writing(box, actor=RepoName("api"), timeout=0.2):
                pass
    finally:
        os.close(fd)
    mailbox.send(box, sender="api", to="web", subject="after")


def test_packing_keeps_every_message_readable(box: Store) -> None:
    sent = [mailbox.send(box, sender="api", to="web", subject=f"m{i}") for i in range(5)]
    mailbox.done(box, repo="web", ids=[sent[0].message.id])
    packing.pack(box)
    assert (box.path / "packed-refs").read_text().count("refs/gitmail/") == 5
    assert list((box.path / "objects" / "pack").glob("*.pack"))
    assert not [p for p in (box.path / "objects").glob("??/*")]
    assert len(mailbox.pending(box, repo="web").directed) == 4
    assert [e.message.id for e in mailbox.done(box, repo="web", ids=[sent[1].message.id]).archived] == [
        sent[1].message.id
    ]
    fsck = subprocess.run(["git", "--git-dir", str(box.path), "fsck"], capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stderr


def test_git_environment_cannot_redirect_reads(box: Store, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    entry = mailbox.send(box, sender="api", to="web", subject="hello")
    decoy = tmp_path / "decoy.git"
    subprocess.run(["git", "init", "-q", "--bare", str(decoy)], check=True)
    monkeypatch.setenv("GIT_DIR", str(decoy))
    monkeypatch.setenv("GIT_NAMESPACE", "elsewhere")
    assert [e.message.id for e in mailbox.pending(box, repo="web").directed] == [entry.message.id]


def test_racing_creators_end_with_one_mailbox(tmp_path: Path) -> None:
    path = tmp_path / "mail.git"
    line = StartingLine(tmp_path)
    creator = (
        f"{AT_THE_LINE}\n"
        "from gitmail.store.repository import Store\n"
        f"at_the_line({str(line.go)!r})\n"
        f"Store({str(path)!r}).create()\n"
    )
    racers = [subprocess.Popen([sys.executable, "-c", creator], stderr=subprocess.PIPE, text=True) for _ in range(8)]
    line.wait(racers)  # every creator waits at the line
    line.let_go()
    for racer in racers:
        assert racer.wait(timeout=60) == 0, racer.stderr.read() if racer.stderr else ""
    assert Store(path).exists() and (path / "config").read_text().count("[gitmail]") == 1
    assert not list(tmp_path.glob(".mail.git.new-*"))  # every loser's half-built copy is gone
    entry = mailbox.send(Store(path), sender="api", to="web", subject="after the race")
    assert [e.message.id for e in mailbox.pending(Store(path), repo="web").directed] == [entry.message.id]


def test_seen_sets_are_found_and_extended_in_a_fanned_out_notes_tree(box: Store) -> None:
    """git fans notes out into subdirectories as they grow (a sync's `git notes merge` may): both readers and
    writers must find a broadcast's note there, and extend it in place."""
    cast = mailbox.broadcast(box, sender="api", subject="all")
    git = ["git", "--git-dir", str(box.path)]
    blob = subprocess.run([*git, "hash-object", "-w", "--stdin"], input="api\nold\n", capture_output=True, text=True)
    sub = subprocess.run(
        [*git, "mktree"], input=f"100644 blob {blob.stdout.strip()}\t{cast.oid[2:]}\n", capture_output=True, text=True
    ).stdout.strip()
    top = subprocess.run(
        [*git, "mktree"], input=f"040000 tree {sub}\t{cast.oid[:2]}\n", capture_output=True, text=True
    ).stdout.strip()
    commit = subprocess.run([*git, "commit-tree", "-m", "fanned out", top], capture_output=True, text=True).stdout
    subprocess.run([*git, "update-ref", "refs/notes/gitmail-seen", commit.strip()], check=True)
    assert not mailbox.pending(box, repo="old").broadcasts  # found in the subtree: "old" was handed it
    assert [e.message.id for e in read_inbox(box, repo="web").broadcasts] == [cast.message.id]
    shown = subprocess.run([*git, "notes", "--ref=gitmail-seen", "show", cast.oid], capture_output=True, text=True)
    assert shown.stdout == "api\nold\nweb\n"
    listed = subprocess.run(
        [*git, "ls-tree", "-r", "--name-only", "refs/notes/gitmail-seen"], capture_output=True, text=True
    ).stdout.split()
    assert listed == [f"{cast.oid[:2]}/{cast.oid[2:]}"]  # extended in place, not duplicated at the top


def test_every_ref_write_is_checked_against_what_it_expects(box: Store) -> None:
    from gitmail.values.layout import Change

    entry = mailbox.send(box, sender="api", to="web", subject="x")
    with pytest.raises(MailboxError, match="update-ref"):
        with writing(box, actor=RepoName("api")) as writer:
            writer.apply([Change(f"{ROOT}web/inbox/{entry.message.id}", None, "0" * 39 + "1")], "wrong old value")
    assert [e.message.id for e in mailbox.pending(box, repo="web").directed] == [entry.message.id]
    assert not (box.own_dir / "journal").exists()


# -- the cat-file kept running (long-lived processes) -----------------------------------------------------------


def _reading(box: Store) -> Store:
    kept = Store(box.path)
    kept.keep_reading()
    return kept


def test_a_kept_reader_answers_as_one_git_per_read_does(box: Store) -> None:
    sent = [mailbox.send(box, sender="api", to="web", subject=f"s{i}", body="x" * 30_000 * i) for i in range(3)]
    specs = [f"refs/gitmail/web/inbox/{m.message.id}:message.md" for m in sent]
    specs += ["refs/gitmail/web/inbox/0000000000:message.md", "refs/gitmail/nothing", "0" * 40]
    specs *= 400  # more requests than one chunk, and answers larger than a pipe holds
    kept = _reading(box)
    try:
        assert kept.read(specs) == box.read(specs)
        assert kept.read(specs[:4])[3] is None and kept.read(specs[:1])[0] is not None
    finally:
        kept.close()


def test_a_kept_reader_sees_what_was_written_and_packed_after_it_started(box: Store) -> None:
    first = mailbox.send(box, sender="api", to="web", subject="before")
    kept = _reading(box)
    try:
        assert kept.read([f"refs/gitmail/web/inbox/{first.message.id}:message.md"])[0]
        later = mailbox.send(box, sender="api", to="web", subject="after")
        spec = f"refs/gitmail/web/inbox/{later.message.id}:message.md"
        assert b"after" in (kept.read([spec])[0] or b"")
        # A user's maintenance moves every object into a new pack and deletes the old files.
        subprocess.run(["git", "--git-dir", str(box.path), "gc", "--prune=now", "-q"], check=True)
        subprocess.run(["git", "--git-dir", str(box.path), "repack", "-adf", "-q"], check=True)
        mailbox.done(box, repo="web", ids=[first.message.id])
        assert kept.read([f"refs/gitmail/web/inbox/{first.message.id}:message.md"]) == [None]
        assert kept.read([f"refs/gitmail/web/archive/{first.message.id}:message.md", spec])[0]
        assert [e.message.subject for e in read_inbox(kept, repo="web", peek=True).directed] == ["after"]
    finally:
        kept.close()


def test_a_kept_reader_whose_git_was_killed_starts_another(box: Store) -> None:
    sent = [mailbox.send(box, sender="api", to="web", subject=f"hello {i}") for i in range(2)]
    # Packed with a version 1 index, which store/packs.py leaves to git: read through git.
    subprocess.run(["git", "--git-dir", str(box.path), "-c", "pack.indexVersion=1", "repack", "-adq"], check=True)
    subprocess.run(["git", "--git-dir", str(box.path), "prune-packed"], check=True)
    first, second = (f"refs/gitmail/web/inbox/{m.message.id}:message.md" for m in sent)
    kept = _reading(box)
    try:
        assert kept.read([first])[0] and kept._reader is not None
        process = kept._reader._process
        assert process is not None
        os.kill(process.pid, signal.SIGKILL)
        assert kept.read([second]) == Store(box.path).read([second])  # not yet kept: read by a new git
        assert kept._reader._process is not process
    finally:
        kept.close()
    assert not process.alive() and kept._reader is None


def test_a_kept_reader_serves_threads_at_once(box: Store) -> None:
    from concurrent.futures import ThreadPoolExecutor

    sent = [mailbox.send(box, sender="api", to="web", subject=f"s{i}") for i in range(8)]
    specs = [f"refs/gitmail/web/inbox/{m.message.id}:message.md" for m in sent]
    kept = _reading(box)
    try:
        expected = box.read(specs)
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda turn: kept.read(specs[turn % 8 :] + specs[: turn % 8]), range(200)))
        assert all(a == expected[t % 8 :] + expected[: t % 8] for t, a in enumerate(answers))
    finally:
        kept.close()


def _settle(box: Store) -> None:
    """Date every file and folder of the mailbox ten seconds back: what a kept reader makes of them is kept."""
    then = time.time_ns() - 10 * 10**9
    for path in [box.path, *box.path.rglob("*")]:
        os.utime(path, ns=(then, then), follow_symlinks=False)


def test_a_kept_reader_keeps_pending_mail_while_nothing_changes_and_sees_every_change(box: Store) -> None:
    first, second = (mailbox.send(box, sender="api", to="web", subject=f"s{i}") for i in range(2))
    _settle(box)
    kept = _reading(box)
    try:
        before = mailbox.pending(kept, repo="web")
        again = mailbox.pending(kept, repo="web")
        assert again.directed is before.directed  # kept: nothing was read again
        third = mailbox.send(box, sender="api", to="web", subject="s2")
        assert [e.message.id for e in mailbox.pending(kept, repo="web").directed] == [
            first.message.id, second.message.id, third.message.id,
        ]  # fmt: skip
        _settle(box)
        mailbox.pending(kept, repo="web")
        mailbox.done(box, repo="web", ids=[first.message.id])
        assert [e.message.id for e in mailbox.pending(kept, repo="web").directed] == [
            second.message.id, third.message.id,
        ]  # fmt: skip
        _settle(box)
        mailbox.pending(kept, repo="web")
        subprocess.run(["git", "--git-dir", str(box.path), "pack-refs", "--all", "--prune"], check=True)
        cast = mailbox.broadcast(box, sender="api", subject="to all")
        assert [e.message.id for e in mailbox.pending(kept, repo="web").broadcasts] == [cast.message.id]
        _settle(box)
        assert mailbox.pending(kept, repo="web").broadcasts  # kept, then handed over: a note moves
        mailbox.record_shown(box, repo="web", shown=[], broadcasts=[cast], host="claude", moment="start")
        assert not mailbox.pending(kept, repo="web").broadcasts
        assert [e.message.id for e in mailbox.pending(kept, repo="web").directed] == [
            second.message.id, third.message.id,
        ]  # fmt: skip
    finally:
        kept.close()


def test_a_kept_reader_keeps_nothing_that_changed_within_the_file_systems_tick(box: Store) -> None:
    first, second = (mailbox.send(box, sender="api", to="web", subject=f"s{i}") for i in range(2))
    _settle(box)
    folder = box.path / "refs" / "gitmail" / "web" / "inbox"
    lately = time.time_ns() + 60 * 10**9  # ahead of the clock: as fresh as can be for the whole test, however slow
    os.utime(folder, ns=(lately, lately))
    kept = _reading(box)
    try:
        assert len(mailbox.pending(kept, repo="web").directed) == 2
        # A change that leaves its folder's time as it was (made in the same tick of the clock): seen all the same.
        (folder / second.message.id).unlink()
        os.utime(folder, ns=(lately, lately))
        assert [e.message.id for e in mailbox.pending(kept, repo="web").directed] == [first.message.id]
    finally:
        kept.close()


def test_a_kept_reader_refuses_a_request_that_would_break_its_protocol(box: Store) -> None:
    kept = _reading(box)
    try:
        with pytest.raises(ValueError):
            kept.read(["HEAD\nrefs/gitmail/x"])
    finally:
        kept.close()


def test_an_atomic_write_is_private_unless_told_and_can_keep_the_mode_a_file_had(tmp_path: Path) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    umask = os.umask(0o077)
    try:
        ours, theirs = folder / "record", folder / "settings.json"
        write_atomically(ours, b"mine")
        write_atomically(theirs, b"{}", mode=0o644, keep_mode=True)  # new: exactly `mode`, whatever the umask
        assert (ours.stat().st_mode & 0o7777, theirs.stat().st_mode & 0o7777) == (0o600, 0o644)
        theirs.chmod(0o640)
        write_atomically(theirs, b'{"a": 1}', mode=0o644, keep_mode=True)  # there: the mode it had
        assert theirs.stat().st_mode & 0o7777 == 0o640 and theirs.read_bytes() == b'{"a": 1}'
        write_atomically(theirs, b"{}")
        assert theirs.stat().st_mode & 0o7777 == 0o600
    finally:
        os.umask(umask)
    assert sorted(p.name for p in folder.iterdir()) == ["record", "settings.json"]  # no temporary file left


def test_a_file_written_atomically_in_pieces_lands_whole_or_not_at_all(tmp_path: Path) -> None:
    """`write_atomically` takes the pieces of a file too large to hold (the view's export) as well as bytes, with
    the permissions asked for less the umask; a write that fails midway leaves the old file and no stray."""
    from gitmail.store.files import write_atomically

    folder = tmp_path / "folder"
    folder.mkdir()
    target = folder / "out.html"
    target.write_bytes(b"old")
    write_atomically(target, iter([b"one ", b"two"]), durable=False, mode=0o644)
    mask = os.umask(0o022)
    os.umask(mask)
    assert target.read_bytes() == b"one two" and target.stat().st_mode & 0o777 == 0o644 & ~mask

    def failing() -> Iterator[bytes]:
        yield b"half"
        raise RuntimeError("stopped midway")

    with pytest.raises(RuntimeError):
        write_atomically(target, failing())
    assert target.read_bytes() == b"one two" and [p.name for p in folder.iterdir()] == ["out.html"]
    write_atomically(folder / "own", b"mine")
    assert (folder / "own").stat().st_mode & 0o777 == 0o600


def test_the_objects_a_notes_tree_annotates_are_read_from_its_paths_however_fanned_out() -> None:
    oid = "0123456789abcdef0123456789abcdef01234567"
    paths = [oid, f"{oid[:2]}/{oid[2:]}", f"{oid[:2]}/{oid[2:4]}/{oid[4:]}", "", "README", oid.upper(), oid[:39]]
    assert annotated(paths) == [oid]
    assert annotated(["f" * 40, "e" * 2 + "/" + "e" * 38]) == ["e" * 40, "f" * 40]
