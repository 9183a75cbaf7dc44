"""Migration of a format-1 mailbox: names in NFC, refs spelled to survive case-insensitive file systems."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

import pytest

from gitmail import mailbox
from gitmail.store import lock, migrate, moves
from gitmail.store.opening import open_mailbox
from gitmail.store.repository import Store
from gitmail.values.layout import ROOT, Change
from gitmail.values.mail import status
from gitmail.values.names import RepoName
from tests.conftest import at
from tests.formats import as_format_1, git, refs, send_as_format_1, writing_as_format_2, writing_as_format_3
from tests.reading import inbox as read_inbox

NFD = unicodedata.normalize("NFD", "données")
NAMES = ("Web", "web", "My App", "données", "api")
View = dict[str, tuple[list[str], list[str]]]


def view(box: Store) -> View:
    """What each repo sees when a process opens the mailbox: its pending mail and its history (both read without
    writing anything, unless opening migrates the mailbox)."""
    box = open_mailbox(box.path)
    seen: View = {}
    for name in NAMES:
        mail = mailbox.pending(box, repo=name)
        pending = [e.message.id for e in [*mail.directed, *mail.broadcasts]]
        seen[name] = (pending, [e.message.id for e in mailbox.log(box, repo=name, limit=None)])
    return seen


@pytest.fixture
def old(box: Store) -> tuple[Store, View]:
    """A mailbox as format 1 left it, and what each repo saw in it then."""
    mailbox.send(box, sender="api", to="Web", subject="for Web", when=at(0))
    mailbox.send(box, sender="api", to="web", subject="for web", when=at(1))
    done = mailbox.send(box, sender="Web", to="My App", subject="for My App", when=at(2))
    mailbox.done(box, repo="My App", ids=[done.message.id])
    typed = mailbox.send(box, sender="api", to="données", subject="to NFC", when=at(3))
    handed = mailbox.send(box, sender="api", to="données", subject="to NFD", when=at(4))
    send_as_format_1(box, sender=NFD, to="api", subject="from NFD", when=at(5))
    mailbox.broadcast(box, sender="api", subject="for all", when=at(6))
    read_inbox(box, repo="Web")  # hands the broadcast over, with receipts
    before = view(box)
    assert before["données"][0][:2] == [typed.message.id, handed.message.id]
    as_format_1(box, spelled={handed.message.id: NFD}, claims={"Web": "/src/Web", NFD: "/src/données"})
    assert any("/donne%CC%81es/" in ref for ref in refs(box)) and any("/Web/" in ref for ref in refs(box))
    return Store(box.path), before


def version(box: Store) -> str:
    return git(box, "config", "gitmail.version").strip()


def canonical(ref: str) -> bool:
    component = ref[len(ROOT) :].split("/")[0]
    if component.startswith("_"):
        return True
    try:
        return RepoName.from_ref(component).ref == component
    except Exception:
        return False


def test_the_format_is_read_from_the_gitmail_section_of_the_config(tmp_path: Path) -> None:
    def version_of(config: str) -> int:
        (tmp_path / "config").write_text(config)
        return migrate.version(Store(tmp_path))

    config = "[core]\n\trepositoryformatversion = 0\n[gitmail]\n\tversion = 1\n[notes]\n\tversion = 7\n"
    assert version_of(config) == 1
    assert version_of(config + "[gitmail]\n\tversion = 2\n") == 2  # the last value wins, as in git
    assert version_of("[core]\n\tbare = true\n") == 0


def test_a_new_mailbox_is_of_the_current_format_and_is_never_migrated(box: Store) -> None:
    sent = mailbox.send(box, sender="api", to="Web", subject="hello")
    assert version(box) == str(migrate.VERSION)
    assert list(refs(box)) == [f"{ROOT}%57eb/inbox/{sent.message.id}"]
    assert [m.reason for m in moves.history(box, f"{ROOT}%57eb/inbox/{sent.message.id}")] == [
        f"gitmail: api sent {sent.message.id}"
    ]
    assert not (box.path / "logs" / "refs" / "gitmail").exists()


def test_a_process_that_cannot_write_reads_a_format_1_mailbox_whole(
    old: tuple[Store, View], monkeypatch: pytest.MonkeyPatch
) -> None:
    box, before = old
    written = refs(box)
    monkeypatch.setattr(Store, "writable", lambda self: False)
    assert view(box) == before
    assert mailbox.show(box, before["Web"][0][0][:4]).message.subject == "for Web"
    assert refs(box) == written and version(box) == "1"


def test_the_first_process_that_can_write_migrates_it_once(old: tuple[Store, View]) -> None:
    box, before = old
    assert view(box) == before
    assert version(box) == str(migrate.VERSION)
    after = refs(box)
    assert all(canonical(ref) for ref in after), after
    assert not [ref for ref in after if "_migrating" in ref]
    archived = next(ref for ref in after if "/archive/" in ref)
    assert archived.startswith(f"{ROOT}%4Dy%20%41pp/archive/")
    assert {"gitmail: renamed for mailbox format 2", "gitmail: written by format 1"} <= {
        m.reason for m in moves.history(box, archived)
    }
    assert not (box.path / "logs" / "refs" / "gitmail").exists()
    renamed = set(os.listdir(box.path / "gitmail" / "stamps")) - {"_broadcast", "_claims"}
    assert {"%57eb", "web", "%4Dy%20%41pp", "donn%C3%A9es"} <= renamed
    assert all(canonical(f"{ROOT}{name}/inbox/0000000000") for name in renamed), renamed
    assert json.loads((box.path / "gitmail" / "claims.json").read_text()) == {
        "Web": "/src/Web",
        "données": "/src/données",
    }
    again = Store(box.path)
    assert view(again) == before and refs(again) == after


def test_mail_sent_under_an_nfd_name_is_that_repos_own(old: tuple[Store, View]) -> None:
    box, before = old
    sent = [e for e in mailbox.log(box, repo="données") if e.message.subject == "from NFD"]
    assert [e.message.sender for e in sent] == ["données"]
    assert sent[0].message.id in before["données"][1]


def test_a_big_migration_goes_one_batch_per_process_and_reads_stay_whole(
    old: tuple[Store, View], monkeypatch: pytest.MonkeyPatch
) -> None:
    box, before = old
    monkeypatch.setattr(migrate, "BATCH", 1)
    monkeypatch.setattr(migrate, "BUDGET", 0.0)
    direct, _ = migrate.plan(box, migrate.folds_case(box.path))
    assert len(direct) == 3  # Web's inbox, My App's archive, the NFD spelling of données
    for step in range(1, len(direct)):
        assert view(Store(box.path)) == before
        assert version(box) == "1"
        assert len(migrate.plan(box, False)[0]) == len(direct) - step
    assert view(Store(box.path)) == before
    assert version(box) == str(migrate.VERSION)


def test_a_batch_a_killed_migration_left_half_done_is_finished(old: tuple[Store, View]) -> None:
    box, before = old
    direct, _ = migrate.plan(box, False)
    first = direct[0]
    lock.Journal(box.own_dir).record(
        [Change(first.to, first.oid, None), Change(first.ref, None, first.oid)], durable=True
    )
    assert view(box) == before
    assert version(box) == str(migrate.VERSION) and all(canonical(ref) for ref in refs(box))


def test_done_right_after_the_upgrade_archives_the_message(old: tuple[Store, View]) -> None:
    box, before = old
    pending = before["Web"][0][0]
    result = mailbox.done(box, repo="Web", ids=[pending])
    assert [e.message.id for e in result.archived] == [pending] and not result.already
    assert f"{ROOT}%57eb/archive/{pending}" in refs(box)


def test_processes_opening_it_at_once_migrate_it_once_and_lose_nothing(old: tuple[Store, View], tmp_path: Path) -> None:
    box, before = old
    ready, go = tmp_path / "ready", tmp_path / "go"
    ready.mkdir()
    start = (
        "import os, sys, time\n"
        "open(os.path.join(sys.argv[1], sys.argv[2]), 'w').close()\n"
        "while not os.path.exists(sys.argv[3]): time.sleep(0.001)\n"
        "from gitmail.__main__ import main\n"
        "sys.argv = ['gitmail', *sys.argv[4:]]\n"
        "sys.exit(main())\n"
    )
    env = {**os.environ, "GITMAIL_DIR": str(box.path)}
    readers = [
        subprocess.Popen(
            [sys.executable, "-c", start, str(ready), str(n), str(go), "inbox", "--peek", "--json", "--repo", name],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for n, name in enumerate(NAMES * 2)
    ]
    while len(os.listdir(ready)) < len(readers) and all(r.poll() is None for r in readers):
        time.sleep(0.005)  # polling the ready files; every reader then starts at once on `go`
    go.touch()
    for reader, name in zip(readers, NAMES * 2, strict=True):
        out, err = reader.communicate(timeout=60)
        assert reader.returncode == 0, err
        shown = json.loads(out)
        assert [m["id"] for m in [*shown["directed"], *shown["broadcasts"]]] == before[name][0]
    assert version(box) == str(migrate.VERSION)
    after = refs(box)
    assert all(canonical(ref) for ref in after)
    ids = [ref.rsplit("/", 1)[1] for ref in after]
    assert len(ids) == len(set(ids))  # every message in exactly one place
    fsck = subprocess.run(["git", "--git-dir", str(box.path), "fsck", "--no-dangling"], capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
    assert view(Store(box.path)) == before


def test_a_format_2_mailbox_brings_its_reflogs_into_the_record_and_its_log_is_unchanged(box: Store) -> None:
    with writing_as_format_2(box):
        done = mailbox.send(box, sender="api", to="web", subject="to be done", when=at(0))
        answered = mailbox.send(box, sender="api", to="web", subject="to be answered", when=at(1))
        back = mailbox.send(box, sender="db", to="web", subject="to be reopened", when=at(2))
        cast = mailbox.broadcast(box, sender="api", subject="to be retracted", when=at(3))
        read_inbox(box, repo="web")  # delivered: receipts with their times
        mailbox.done(box, repo="web", ids=[done.message.id, back.message.id])
        mailbox.reply(box, sender="web", to_id=answered.message.id, body="ok")
        mailbox.reopen(box, repo="web", message_id=back.message.id)
        mailbox.retract(box, sender="api", message_id=cast.message.id)
    assert version(box) == "2" and not git(box, "for-each-ref", "refs/gitmail-moves")
    logged = {ref: git(box, "reflog", "show", "--date=unix", "--format=%gd%x09%gn%x09%gs", ref) for ref in refs(box)}
    assert all(logged.values()) and len(logged) == 5
    before = mailbox.log(Store(box.path), limit=None)
    statuses = [(e.message.id, status(e)) for e in before]
    assert {s.name for _, s in statuses} >= {"done", "replied", "retracted", "delivered"}

    after = mailbox.log(open_mailbox(box.path), limit=None)
    assert version(box) == str(migrate.VERSION)
    assert list(after) == list(before) and [(e.message.id, status(e)) for e in after] == statuses
    assert not [p for p in (box.path / "logs").rglob("*") if p.is_file()]  # no reflog is left, nor made again
    recorded = {(m.ref, m.time, m.who, m.reason) for m in moves.history(box)}
    for ref, text in logged.items():
        for line in text.splitlines():
            selector, who, reason = line.split("\t")
            when = int(selector.rpartition("@{")[2].rstrip("}"))
            assert (ref, when, who, reason) in recorded, line
    assert git(box, "log", "--format=%s", "--grep", back.message.id, "refs/gitmail-moves").splitlines() == [
        f"gitmail: web reopened {back.message.id}",
        f"gitmail: web marked done {done.message.id} {back.message.id}",
    ]
    again = mailbox.send(open_mailbox(box.path), sender="api", to="web", subject="after", when=at(9))
    assert (
        moves.history(box, f"{ROOT}web/inbox/{again.message.id}")[0].reason == f"gitmail: api sent {again.message.id}"
    )
    assert not (box.path / "logs" / "refs" / "gitmail").exists()
    assert subprocess.run(["git", "--git-dir", str(box.path), "fsck"], capture_output=True).returncode == 0


def test_a_format_3_mailbox_brings_the_notes_refs_reflogs_into_the_record_and_keeps_none(box: Store) -> None:
    with writing_as_format_3(box):
        first = mailbox.send(box, sender="api", to="web", subject="first", when=at(0))
        read_inbox(box, repo="web")  # delivered: receipts, in the notes ref's reflog alone
        mailbox.done(box, repo="web", ids=[first.message.id])
    notes = "refs/notes/gitmail-receipts"
    logged = git(box, "reflog", "show", "--date=unix", "--format=%gd%x09%gn%x09%gs%x09%H", notes).splitlines()
    assert version(box) == "3" and len(logged) >= 2 and not moves.history(box, notes)
    before = mailbox.log(Store(box.path), limit=None)

    after = mailbox.log(open_mailbox(box.path), limit=None)
    assert version(box) == str(migrate.VERSION) and list(after) == list(before)
    assert not [p for p in (box.path / "logs").rglob("*") if p.is_file()]
    recorded = {(m.time, m.who, m.reason, m.new) for m in moves.history(box, notes)}
    for line in logged:
        selector, who, reason, new = line.split("\t")
        assert (int(selector.rpartition("@{")[2].rstrip("}")), who, reason, new) in recorded, line
    assert moves.given(box, notes)[-1] == git(box, "rev-parse", notes).strip()  # what a repair goes back to
    second = mailbox.send(open_mailbox(box.path), sender="api", to="web", subject="second", when=at(9))
    read_inbox(box, repo="web")
    mailbox.done(box, repo="web", ids=[second.message.id])
    assert moves.given(box, notes)[-1] == git(box, "rev-parse", notes).strip()
    assert not [p for p in (box.path / "logs").rglob("*") if p.is_file()]
