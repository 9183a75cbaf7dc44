"""The pending index's listing of a folder's refs (store/pendingindex.py, refs.listing_stamped): while the folder's
stamp holds, a reader takes the refs from the index instead of reading every ref file; whatever changed the refs
since (a writer that died before it indexed, mail done, a sync, git packing refs, a write in the same clock tick as
the listing) is shown as the refs say. A session start and an inbox at many pending show what they show without
an index."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from gitmail import hooks, mailbox
from gitmail.store import pendingindex, refs
from gitmail.store.repository import Store
from gitmail.values.layout import inbox_prefix
from gitmail.values.names import RepoName
from gitmail.values.receipts import RECEIPTS_NOTES
from tests.conftest import RepoFactory
from tests.reading import inbox as read_inbox
from tests.syncing import machine, sync_now

WEB = inbox_prefix(RepoName("web"))
MANY = 40


def pending_ids(store: Store) -> list[str]:
    return [e.message.id for e in mailbox.pending(store, repo="web").directed]


def settle(store: Store) -> None:
    """Make the refs' files look written a minute ago, and let readers list them (the first makes the index, the
    next one finds it older than what it lists): the index's stamp then vouches for its listing."""
    old = (os.stat(store.path).st_mtime_ns - 60 * 10**9,) * 2
    for folder, _, _ in os.walk(store.path / "refs"):
        os.utime(folder, ns=old)
    if (store.path / "packed-refs").exists():
        os.utime(store.path / "packed-refs", ns=old)
    pending_ids(store)
    pending_ids(store)


def listings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The folders each later read lists from their ref files."""
    listed: list[str] = []
    original = refs.listing_stamped

    def counting(mailbox_path: Path, prefix: str) -> tuple[dict[str, str], refs.Stamp]:
        listed.append(prefix)
        return original(mailbox_path, prefix)

    monkeypatch.setattr(refs, "listing_stamped", counting)
    return listed


def unindexed_send(store: Store, monkeypatch: pytest.MonkeyPatch, subject: str) -> str:
    """Mail whose writer moved the ref but did not index it (as one that died in between)."""
    with monkeypatch.context() as patch:
        patch.setattr(pendingindex, "written", lambda *args: None)
        return mailbox.send(store, sender="api", to="web", subject=subject).message.id


def test_a_settled_folder_is_read_from_the_index_without_listing_its_ref_files(
    box: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent = [mailbox.send(box, sender="api", to="web", subject=f"m{n}").message.id for n in range(3)]
    settle(box)
    listed = listings(monkeypatch)
    assert pending_ids(box) == sent
    assert WEB not in listed


def test_mail_a_writer_did_not_index_is_shown_from_a_settled_index(box: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    first = mailbox.send(box, sender="api", to="web", subject="first").message.id
    settle(box)
    second = unindexed_send(box, monkeypatch, "second")
    listed = listings(monkeypatch)
    assert pending_ids(box) == [first, second]
    assert listed.count(WEB) == 1  # the stamp no longer held: listed once, and kept again


def test_a_writer_killed_after_its_ref_moved_leaves_mail_a_settled_index_shows(box: Store) -> None:
    first = mailbox.send(box, sender="api", to="web", subject="first").message.id
    settle(box)
    killed = (
        "import os, sys\n"
        "from gitmail import mailbox\n"
        "from gitmail.store import pendingindex\n"
        "from gitmail.store.repository import Store\n"
        "pendingindex.written = lambda *args: os._exit(9)\n"
        "mailbox.send(Store(sys.argv[1]), sender='api', to='web', subject='second')\n"
    )
    done = subprocess.run([sys.executable, "-c", killed, str(box.path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 9, done.stderr
    shown = pending_ids(box)
    assert len(shown) == 2 and shown[0] == first


def test_mail_done_after_settling_is_never_shown(box: Store) -> None:
    kept, done = (mailbox.send(box, sender="api", to="web", subject=s).message.id for s in ("kept", "done"))
    settle(box)
    mailbox.done(box, repo="web", ids=[done])
    assert pending_ids(box) == [kept]
    mailbox.done(box, repo="web", ids=[kept])  # the folder's last ref: git removes the folder
    assert pending_ids(box) == []


def test_refs_packed_after_settling_are_shown_as_before_and_done_packed_mail_is_gone(box: Store) -> None:
    sent = [mailbox.send(box, sender="api", to="web", subject=f"m{n}").message.id for n in range(3)]
    settle(box)
    subprocess.run(["git", "-C", str(box.path), "pack-refs", "--all"], check=True)
    assert pending_ids(box) == sent
    settle(box)
    mailbox.done(box, repo="web", ids=[sent[1]])
    assert pending_ids(box) == [sent[0], sent[2]]


def test_a_ref_written_in_the_same_clock_tick_as_a_listing_is_not_hidden(
    box: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = mailbox.send(box, sender="api", to="web", subject="first").message.id
    pending_ids(box)
    pending_ids(box)  # listed, with a stamp as recent as the folder's time
    folder = box.path / WEB
    before = os.stat(folder)
    second = unindexed_send(box, monkeypatch, "second")
    os.utime(folder, ns=(before.st_atime_ns, before.st_mtime_ns))  # the folder's time as it was: the same tick
    assert pending_ids(box) == [first, second]


def test_mail_a_sync_brings_into_a_settled_folder_is_shown(tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    laptop, server = machine(tmp_path, "laptop", str(remote)), machine(tmp_path, "server", str(remote))
    here = mailbox.send(server, sender="api", to="web", subject="written here").message.id
    settle(server)
    there = mailbox.send(laptop, sender="api", to="web", subject="from the laptop").message.id
    sync_now(laptop)
    sync_now(server)
    assert sorted(pending_ids(server)) == sorted([here, there])
    settle(server)
    mailbox.done(laptop, repo="web", ids=[there])
    sync_now(laptop)
    sync_now(server)
    assert pending_ids(server) == [here]


@pytest.fixture
def web(repos: RepoFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    return repos("web")


def many(box: Store) -> list[str]:
    """MANY pending messages of many lengths: a session start shows some, the inbox all."""
    return [
        mailbox.send(box, sender="api", to="web", subject=f"m{n}", body="line\n" * (n * 7 % 90 + 1)).message.id
        for n in range(MANY)
    ]


def start_text(web: Path, session: str, *, record: bool = False) -> str:
    """`record`: the receipts the hook writes once the host has its answer are written too."""
    payload = {"session_id": session, "cwd": str(web), "transcript_path": "/tmp/t.jsonl", "source": "startup"}
    answer = hooks.run("session-start", "claude", json.dumps({**payload, "hook_event_name": "SessionStart"}))
    assert answer.code == 0 and answer.stdout is not None
    if record and answer.after is not None:
        answer.after()
    return str(answer.stdout["hookSpecificOutput"]["additionalContext"])


def test_a_start_at_many_pending_shows_from_the_index_what_it_shows_without_one(web: Path, box: Store) -> None:
    sent = many(box)
    settle(box)
    indexed = start_text(web, "11111111-0f6a-4d8e-9a31-2f6c1d9e7a10")
    shutil.rmtree(box.own_dir / pendingindex.FOLDER)
    assert start_text(web, "22222222-0f6a-4d8e-9a31-2f6c1d9e7a10") == indexed
    shown = [i for i in sent if i in indexed]
    assert f"Showing {len(shown)} of {MANY}:" in indexed and 0 < len(shown) < MANY


def test_a_start_at_many_pending_reads_and_writes_the_receipts_of_what_it_shows_alone(
    web: Path, box: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent = many(box)
    settle(box)
    asked: list[str] = []
    original = Store.read_with_notes

    def counting(
        self: Store, specs: Sequence[str], notes: Mapping[str, Sequence[str]], *, limit: int | None = None
    ) -> tuple[list[bytes | None], dict[str, dict[str, set[str]]]]:
        asked.extend(notes.get(RECEIPTS_NOTES, ()))
        return original(self, specs, notes, limit=limit)

    monkeypatch.setattr(Store, "read_with_notes", counting)
    text = start_text(web, "33333333-0f6a-4d8e-9a31-2f6c1d9e7a10", record=True)
    shown = {i for i in sent if f"id {i}" in text}
    assert 0 < len(shown) < MANY
    pending = mailbox.pending(box, repo="web")
    by_oid: dict[str, str] = {e.oid: e.message.id for e in pending.directed}
    assert {by_oid[oid] for oid in asked} == shown  # asked of what it shows, nothing else
    assert pending.receipted.among(sent) == shown  # receipted: exactly what was shown
    tip = refs.resolve(box.path, [RECEIPTS_NOTES])
    assert start_text(web, "44444444-0f6a-4d8e-9a31-2f6c1d9e7a10", record=True) == text
    assert refs.resolve(box.path, [RECEIPTS_NOTES]) == tip  # shown before: no receipt written again


def test_the_inbox_at_many_pending_lists_every_message_from_the_index(web: Path, box: Store) -> None:
    sent = many(box)
    settle(box)
    text = read_inbox(box, repo="web", peek=True).text
    assert text is not None and all(i in text for i in sent)
    shutil.rmtree(box.own_dir / pendingindex.FOLDER)
    assert read_inbox(box, repo="web", peek=True).text == text


def test_notes_are_found_at_the_top_of_their_tree_or_fanned_out_as_when_every_place_is_asked(
    box: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    places = [mailbox.send(box, sender="api", to="web", subject=f"m{n}") for n in range(6)]
    oids = [str(p.oid) for p in places]
    git = ["git", "--git-dir", str(box.path)]

    def blob(text: str) -> str:
        made = subprocess.run([*git, "hash-object", "-w", "--stdin"], input=text, capture_output=True, text=True)
        return made.stdout.strip()

    def tree(lines: list[str]) -> str:
        return subprocess.run([*git, "mktree"], input="".join(lines), capture_output=True, text=True).stdout.strip()

    def entry(kind: str, oid: str, name: str) -> str:
        return f"{'100644 blob' if kind == 'blob' else '040000 tree'} {oid}\t{name}\n"

    top = [entry("blob", blob(f"top {n}\n"), oid) for n, oid in enumerate(oids[:2])]
    two = [entry("tree", tree([entry("blob", blob("two\n"), oids[2][2:])]), oids[2][:2])]
    deep = tree([entry("blob", blob("deep\n"), oids[3][4:])])
    three = [entry("tree", tree([entry("tree", deep, oids[3][2:4])]), oids[3][:2])]
    commit = subprocess.run(
        [*git, "commit-tree", "-m", "notes", tree(top + two + three)], capture_output=True, text=True
    )
    subprocess.run([*git, "update-ref", "refs/notes/test", commit.stdout.strip()], check=True)
    found = box.notes("refs/notes/test", oids)
    assert found == {
        oids[0]: {"top 0"},
        oids[1]: {"top 1"},
        oids[2]: {"two"},
        oids[3]: {"deep"},
        oids[4]: set(),
        oids[5]: set(),
    }
    assert box.notes("refs/notes/absent", oids) == dict.fromkeys(oids, set())
    monkeypatch.setattr(Store, "_note_tops", lambda self, notes: dict.fromkeys(notes))  # every place asked
    assert box.notes("refs/notes/test", oids) == found


def test_the_refs_of_a_folder_are_located_as_each_ref_alone_is() -> None:
    from gitmail.values.layout import locate, located_in

    oid = "ab" * 20
    for prefix in ("refs/gitmail/web/inbox/", "refs/gitmail/_broadcast/active/", "refs/gitmail/web/active/"):
        listing = {
            f"{prefix}7ygxn9bm6w": oid,
            f"{prefix}not-an-id": oid,
            f"{prefix}7ygxn9bm6x": "not an oid",
            f"{prefix}sub/7ygxn9bm6y": oid,
            "refs/gitmail/api/inbox/7ygxn9bm6z": oid,
        }
        expected = [p for ref, o in listing.items() if (p := locate(ref, o))]
        assert located_in(prefix, listing) == expected
        assert len(expected) == (2 if prefix != "refs/gitmail/web/active/" else 1)


def test_a_copy_of_a_mailbox_never_takes_the_originals_folders_for_its_own(box: Store, tmp_path: Path) -> None:
    """The stamp names the mailbox's own paths: a copy (a backup restored, a mailbox moved to another disk) whose
    original still stands lists its own refs, and shows mail sent to it alone."""
    first = mailbox.send(box, sender="api", to="web", subject="first").message.id
    settle(box)
    copy = Store(tmp_path / "copy.git")
    shutil.copytree(box.path, copy.path, symlinks=True)
    second = mailbox.send(copy, sender="api", to="web", subject="to the copy").message.id
    assert pending_ids(copy) == [first, second]
    assert pending_ids(box) == [first]
