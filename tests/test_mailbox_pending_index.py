"""The pending index (store/pendingindex.py): a reader of pending mail reads the documents the index lacks and no
other; the index is mended wherever it disagrees with the refs (after a writer killed before it indexed, after a
sync, after mail was done), and what it shows is always what the refs hold: nothing stale, nothing missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from gitmail import mailbox
from gitmail.store import pendingindex
from gitmail.store.repository import Store
from gitmail.values.layout import inbox_prefix
from gitmail.values.names import RepoName
from tests.syncing import machine, sync_now

WEB = inbox_prefix(RepoName("web"))


def pending_ids(store: Store) -> list[str]:
    return [e.message.id for e in mailbox.pending(store, repo="web").directed]


def indexed_ids(store: Store) -> list[str]:
    return sorted(record[0] for record in pendingindex.load(store.own_dir, WEB).values())


def documents_read(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The document specs each later read of this store asks the objects for (notes are not counted)."""
    asked: list[str] = []
    original = Store.read_with_notes

    def counting(
        self: Store, specs: Sequence[str], notes: Mapping[str, Sequence[str]], *, limit: int | None = None
    ) -> tuple[list[bytes | None], dict[str, dict[str, set[str]]]]:
        asked.extend(specs)
        return original(self, specs, notes, limit=limit)

    monkeypatch.setattr(Store, "read_with_notes", counting)
    return asked


def test_a_reader_reads_only_the_documents_the_index_lacks(box: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    sent = [mailbox.send(box, sender="api", to="web", subject=f"m{n}").message.id for n in range(3)]
    asked = documents_read(box, monkeypatch)
    assert pending_ids(box) == sent  # no index yet: every document is read, and the index made
    assert len(asked) == 3 and indexed_ids(box) == sorted(sent)
    asked.clear()
    assert pending_ids(box) == sent
    assert asked == []
    later = mailbox.send(box, sender="api", to="web", subject="later").message.id  # the writer indexes it
    assert indexed_ids(box) == sorted([*sent, later])
    assert pending_ids(box) == [*sent, later] and asked == []


def test_what_the_index_shows_is_the_message_byte_for_byte(box: Store) -> None:
    sent = mailbox.send(box, sender="api", to="web", subject="whole", body="line one\nline two\n", urgency="now")
    first = mailbox.pending(box, repo="web").directed
    again = mailbox.pending(box, repo="web").directed  # from the index
    assert first == again and again[0].message == mailbox.show(box, sent.message.id).message
    [record] = pendingindex.load(box.own_dir, WEB).values()
    assert record[:3] == (sent.message.id, sent.message.date.isoformat(), "now")
    assert (record[4], record[5], record[6]) == ("api", "whole", "")
    assert (
        record[7]
        == subprocess.run(
            ["git", "--git-dir", str(box.path), "cat-file", "blob", f"{sent.oid}:message.md"],
            capture_output=True,
            check=True,
        ).stdout
    )


def test_mail_done_is_never_shown_from_the_index(box: Store) -> None:
    kept, done = (mailbox.send(box, sender="api", to="web", subject=s).message.id for s in ("kept", "done"))
    assert pending_ids(box) == [kept, done]
    mailbox.done(box, repo="web", ids=[done])
    assert pending_ids(box) == [kept]
    assert indexed_ids(box) == [kept]  # the reader dropped what no ref names any more


def test_a_writer_killed_before_it_indexed_leaves_mail_the_next_reader_shows_and_indexes(
    box: Store, tmp_path: Path
) -> None:
    first = mailbox.send(box, sender="api", to="web", subject="first").message.id
    assert pending_ids(box) == [first]
    killed = (
        "import json, os, sys\n"
        "from gitmail import mailbox\n"
        "from gitmail.store import pendingindex\n"
        "from gitmail.store.repository import Store\n"
        "def die(*args, **kwargs):\n"
        "    print(json.dumps(os.listdir(os.path.join(sys.argv[1], 'refs/gitmail/web/inbox'))), flush=True)\n"
        "    os._exit(9)\n"
        "pendingindex.written = die\n"
        "mailbox.send(Store(sys.argv[1]), sender='api', to='web', subject='second')\n"
    )
    done = subprocess.run([sys.executable, "-c", killed, str(box.path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 9, done.stderr
    refs = json.loads(done.stdout)  # the ref had moved when the writer died
    assert len(refs) == 2 and indexed_ids(box) == [first]
    shown = pending_ids(box)
    assert len(shown) == 2 and shown[0] == first and sorted(shown) == sorted(refs)
    assert indexed_ids(box) == sorted(shown)


def test_mail_a_sync_brings_in_or_takes_away_is_shown_as_the_refs_say(tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    laptop, server = machine(tmp_path, "laptop", str(remote)), machine(tmp_path, "server", str(remote))
    here = mailbox.send(server, sender="api", to="web", subject="written here").message.id
    assert pending_ids(server) == [here]  # the server's index holds its own mail
    there = [mailbox.send(laptop, sender="api", to="web", subject=f"from the laptop {n}").message.id for n in (1, 2)]
    sync_now(laptop)
    sync_now(server)
    assert sorted(pending_ids(server)) == sorted([here, *there])
    assert indexed_ids(server) == sorted([here, *there])
    mailbox.done(laptop, repo="web", ids=[there[0]])
    sync_now(laptop)
    sync_now(server)
    assert sorted(pending_ids(server)) == sorted([here, there[1]])
    assert indexed_ids(server) == sorted([here, there[1]])


@pytest.mark.parametrize("content", [b"", b"garbage", b"\xe3\x03\x00\x00\x00"])
def test_an_index_that_cannot_be_read_is_none_and_is_made_again(box: Store, content: bytes) -> None:
    sent = mailbox.send(box, sender="api", to="web", subject="hello").message.id
    pending_ids(box)
    Path(pendingindex.path(box.own_dir, WEB)).write_bytes(content)
    assert pending_ids(box) == [sent]
    assert indexed_ids(box) == [sent]


def test_a_record_that_does_not_match_its_folder_is_not_used(box: Store) -> None:
    sent = mailbox.send(box, sender="api", to="web", subject="hello")
    pending_ids(box)
    other = inbox_prefix(RepoName("ops"))
    os.replace(pendingindex.path(box.own_dir, WEB), pendingindex.path(box.own_dir, other))
    assert pendingindex.load(box.own_dir, other) == {}  # it names the folder it was made for
    assert pending_ids(box) == [sent.message.id]


def without_index(store: Store) -> list[object]:
    """The pending entries as the objects give them (the index set aside for the read, then put back)."""
    index = Path(pendingindex.path(store.own_dir, WEB))
    saved = index.read_bytes()
    index.unlink()
    try:
        return list(mailbox.pending(store, repo="web").directed)
    finally:
        index.write_bytes(saved)


def test_every_field_a_message_has_is_read_from_the_index_as_its_document_gives_it(box: Store) -> None:
    mailbox.send(
        box, sender="api", to="web", subject="for one session", body="body\n", from_session="claude:" + "a" * 36,
        to_session="codex:" + "b" * 36, to_handle="otter", urgency="low",
    )  # fmt: skip
    back = mailbox.send(box, sender="web", to="api", subject="back")
    mailbox.reply(box, sender="api", to_id=back.message.id, body="an answer")  # to web, threaded
    first = list(mailbox.pending(box, repo="web").directed)
    assert [e.message.reply_to for e in first] == [None, back.message.id]
    assert first[0].message.to_handle == "otter" and first[0].message.urgency == "low"
    assert len(first) == 2 and all(record[8] is not None for record in pendingindex.load(box.own_dir, WEB).values())
    assert list(mailbox.pending(box, repo="web").directed) == first == without_index(box)


def test_mail_from_another_machine_reads_from_the_index_as_from_its_objects(tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    laptop, server = machine(tmp_path, "laptop", str(remote)), machine(tmp_path, "server", str(remote))
    mailbox.send(laptop, sender="api", to="web", subject="from the laptop")
    sync_now(laptop)
    sync_now(server)
    first = list(mailbox.pending(server, repo="web").directed)
    assert first[0].message.machine is not None  # it says where it came from
    assert list(mailbox.pending(server, repo="web").directed) == first == without_index(server)
