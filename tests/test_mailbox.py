from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from gitmail import mailbox
from gitmail.errors import GitmailError, MailboxError, NotFound, UsageError
from gitmail.store import machines, moves
from gitmail.store.claims import load_claims
from gitmail.store.repository import Store
from gitmail.values.ids import BROADCAST
from gitmail.values.layout import SEEN_NOTES, State
from gitmail.values.mail import DoneResult
from tests.conftest import at, mailbox_snapshot
from tests.reading import inbox as read_inbox


def ids(entries: object) -> list[str]:
    return [e.message.id for e in entries]  # type: ignore[attr-defined]


def git(box: Store, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(box.path), *args], capture_output=True, text=True, check=True).stdout


# -- the store -------------------------------------------------------------------------------------------------


def test_reading_a_missing_mailbox_creates_nothing(box: Store, home: Path) -> None:
    assert not mailbox.pending(box, repo="web").directed
    assert not mailbox.log(box, repo="web")
    assert not read_inbox(box, repo="web", path=home).directed
    assert not (home / ".gitmail").exists()


def test_first_write_creates_a_private_bare_files_repository(box: Store, home: Path) -> None:
    mailbox.send(box, sender="api", to="web", subject="hello")
    assert box.path == home / ".gitmail" / "mail.git"
    assert stat.S_IMODE(box.path.stat().st_mode) == 0o700
    assert stat.S_IMODE(box.path.parent.stat().st_mode) == 0o700
    assert git(box, "rev-parse", "--is-bare-repository").strip() == "true"
    assert git(box, "config", "core.logAllRefUpdates").strip() == "false"  # no reflogs: the record of moves
    assert git(box, "config", "gc.auto").strip() == "0"
    assert "reftable" not in (box.path / "config").read_text()
    assert not list(box.path.parent.glob(".mail.git.new-*"))


def test_gitmail_dir_names_another_mailbox(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GITMAIL_DIR", str(tmp_path / "elsewhere.git"))
    entry = mailbox.send(Store(), sender="api", to="web", subject="hello")
    assert (tmp_path / "elsewhere.git" / "HEAD").is_file()
    assert mailbox.show(Store(tmp_path / "elsewhere.git"), entry.message.id) == entry


def test_every_ref_move_is_in_the_record_of_moves(box: Store) -> None:
    entry = mailbox.send(box, sender="api", to="web", subject="hello")
    mailbox.done(box, repo="web", ids=[entry.message.id])
    log = git(box, "log", "--format=%an %s%n%b", f"--grep={entry.message.id}", "refs/gitmail-moves")
    none, oid, ref = "0" * 40, entry.oid, f"refs/gitmail/web/%s/{entry.message.id}"
    receipts = git(box, "rev-parse", "refs/notes/gitmail-receipts").strip()
    keys = git(box, "rev-parse", "refs/notes/gitmail-keys").strip()
    receipt = next(m for m in moves.history(box, "refs/notes/gitmail-receipts") if m.new == receipts)
    assert log == (
        f"web gitmail: web marked done {entry.message.id}\n{none} {oid} {ref % 'archive'}\n{oid} {none} {ref % 'inbox'}"
        f"\n{receipt.old or none} {receipts} refs/notes/gitmail-receipts"
        f"\n\napi gitmail: api sent {entry.message.id}\n{none} {oid} {ref % 'inbox'}"
        f"\n{none} {keys} refs/notes/gitmail-keys\n\n"  # the first write published this machine's key
    )
    assert receipt.reason == f"gitmail: web marked done {entry.message.id}"
    assert not (box.path / "logs").exists() or not any((box.path / "logs").rglob("*"))  # no reflog at all


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda p: p.write_text("a file"), "is not a directory"),
        (lambda p: (p.mkdir(), (p / "notes.txt").write_text("x")), "is not a git repository"),
        (lambda p: (p / "HEAD").mkdir(parents=True), "is not a git repository"),
        (lambda p: subprocess.run(["git", "init", "-q", "--bare", str(p)], check=True), "gitmail did not create"),
    ],
)
def test_a_path_that_is_not_a_mailbox_is_refused_and_left_alone(tmp_path: Path, make: object, error: str) -> None:
    path = tmp_path / "mail.git"
    make(path)  # type: ignore[operator]
    before = mailbox_snapshot(path) if path.is_dir() else path.read_bytes()
    with pytest.raises(MailboxError, match=error):
        mailbox.send(Store(path), sender="api", to="web", subject="hi")
    with pytest.raises(MailboxError, match=error):
        mailbox.pending(Store(path), repo="web")
    assert (mailbox_snapshot(path) if path.is_dir() else path.read_bytes()) == before


def test_an_unreadable_mailbox_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "mail.git"
    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
    (path / "HEAD").unlink()
    (path / "HEAD").mkdir()  # reading it fails the way an unreadable file does, even for root
    with pytest.raises(MailboxError):
        mailbox.pending(Store(path), repo="web")


def test_a_reftable_mailbox_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "mail.git"
    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
    with (path / "config").open("a") as config:
        config.write("[extensions]\n\trefstorage = reftable\n")
    with pytest.raises(MailboxError, match="reftable"):
        mailbox.send(Store(path), sender="api", to="web", subject="hi")


def test_an_empty_directory_becomes_the_mailbox(tmp_path: Path) -> None:
    path = tmp_path / "mail.git"
    path.mkdir()
    entry = mailbox.send(Store(path), sender="api", to="web", subject="hi")
    assert ids(mailbox.pending(Store(path), repo="web").directed) == [entry.message.id]
    assert "logallrefupdates = false" in (path / "config").read_text().lower()


def test_a_projects_own_git_directory_is_refused_and_left_alone(tmp_path: Path) -> None:
    project = tmp_path / "project"
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    before = mailbox_snapshot(project / ".git")
    for attempt in (
        lambda: mailbox.send(Store(project / ".git"), sender="api", to="web", subject="hi"),
        lambda: mailbox.pending(Store(project / ".git"), repo="web"),
    ):
        with pytest.raises(MailboxError, match="is a project's git repository, not a gitmail mailbox"):
            attempt()
    assert mailbox_snapshot(project / ".git") == before


# -- sending and reading -----------------------------------------------------------------------------------------


def test_directed_mail_stays_pending_until_done(box: Store) -> None:
    first = mailbox.send(box, sender="api", to="web", subject="one", body="1", when=at(1))
    second = mailbox.send(box, sender="db", to="web", subject="two", body="2", when=at(0))
    mailbox.send(box, sender="api", to="other", subject="not for web")
    for _ in range(2):  # reading does not consume directed mail
        assert ids(read_inbox(box, repo="web").directed) == [second.message.id, first.message.id]
    result = mailbox.done(box, repo="web", ids=[first.message.id[:5]])
    assert (ids(result.archived), result.already) == ([first.message.id], [])
    assert [e.state for e in result.archived] == [State.ARCHIVED]
    assert ids(mailbox.pending(box, repo="web").directed) == [second.message.id]
    again = mailbox.done(box, repo="web", ids=[first.message.id])
    assert (ids(again.archived), again.already) == ([], [first.message.id])


def test_done_all_archives_every_pending_message_that_was_shown(box: Store) -> None:
    sent = [mailbox.send(box, sender="api", to="web", subject=f"m{i}") for i in range(3)]
    result = mailbox.done(box, repo="web", everything=True, seen=set(ids(sent)))
    assert sorted(ids(result.archived)) == sorted(ids(sent))
    assert not mailbox.pending(box, repo="web").directed
    assert {e.state for e in mailbox.log(box, repo="web")} == {State.ARCHIVED}


def test_a_repo_cannot_archive_another_repos_mail_and_nothing_moves(box: Store) -> None:
    mine = mailbox.send(box, sender="api", to="web", subject="for web")
    theirs = mailbox.send(box, sender="api", to="db", subject="for db")
    before = mailbox_snapshot(box.path)
    with pytest.raises(GitmailError, match="addressed to 'db'"):
        mailbox.done(box, repo="web", ids=[mine.message.id, theirs.message.id])
    assert mailbox_snapshot(box.path) == before


def test_done_on_a_broadcast_is_a_notice_not_an_error(box: Store) -> None:
    cast = mailbox.broadcast(box, sender="api", subject="all")
    assert mailbox.done(box, repo="web", ids=[cast.message.id]) == DoneResult((), [cast.message.id], [])


def test_send_keeps_the_message_whole(box: Store) -> None:
    body = "line one\r\n  indented\n\x1b[31mred\x1b[0m\n" + "✓" * 100
    entry = mailbox.send(box, sender="My App", to="données", subject="ünï\ncødé", body=body.encode(), when=at(0))
    shown = mailbox.show(box, entry.message.id)
    assert shown == entry
    assert shown.message.body == body
    assert shown.message.subject == "ünï cødé"
    assert shown.message.sender == "My App"
    assert shown.message.date == at(0)


def test_commits_read_like_mail_in_plain_git_log(box: Store) -> None:
    entry = mailbox.send(box, sender="api", to="web", subject="Schema v2", body="Details.", when=at(0))
    out = git(box, "log", "--format=%an|%aI|%s%n%b", "--glob=gitmail/web")
    here = machines.current(box)
    trailers = f"Message-Id: {entry.message.id}\nFrom: api\nTo: web\nMachine: {here.name} {here.id}\n"
    assert out == f"api|2026-11-29T09:30:00+00:00|Schema v2\nDetails.\n\n{trailers}\n"


def test_invalid_input_writes_nothing(box: Store) -> None:
    mailbox.send(box, sender="api", to="web", subject="exists")
    before = mailbox_snapshot(box.path)
    for bad in (
        dict(sender="api", to="web", subject=""),
        dict(sender="api", to="web", subject="x", body=b"\xff"),
        dict(sender="api", to="web", subject="x", body=b"x" * 70000),
        dict(sender="_me", to="web", subject="x"),
        dict(sender="api", to="a/b", subject="x"),
        dict(sender="api\nFrom: boss", to="web", subject="x"),
    ):
        with pytest.raises(UsageError):
            mailbox.send(box, **bad)
    assert mailbox_snapshot(box.path) == before


def test_invalid_input_creates_no_mailbox(box: Store) -> None:
    with pytest.raises(UsageError):
        mailbox.send(box, sender="api", to="web", subject="   ")
    assert not box.path.exists()


# -- ids ------------------------------------------------------------------------------------------------------


def test_ids_resolve_by_unique_prefix_and_refuse_ambiguity(box: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    made = iter(["aaaa111111", "aaaa222222", "bbbb333333"])
    monkeypatch.setattr("gitmail.mailbox.composing.new_id", lambda: next(made))
    for _ in range(3):
        mailbox.send(box, sender="api", to="web", subject="s")
    assert mailbox.show(box, "b").message.id == "bbbb333333"
    assert mailbox.show(box, "AAAA1").message.id == "aaaa111111"
    with pytest.raises(UsageError, match="ambiguous: it matches aaaa111111, aaaa222222"):
        mailbox.show(box, "aaaa")
    with pytest.raises(NotFound, match="no message with id cccc"):
        mailbox.show(box, "cccc")
    with pytest.raises(UsageError, match="not a message id"):
        mailbox.show(box, "not-an-id!")


# -- replies and threads --------------------------------------------------------------------------------------


def test_reply_goes_to_the_sender_threads_and_archives_in_one_step(box: Store) -> None:
    question = mailbox.send(box, sender="api", to="web", subject="Which port?", when=at(0))
    answer = mailbox.reply(box, sender="web", to_id=question.message.id[:4], body="8080", when=at(1))
    assert answer.message.to == "api"
    assert answer.message.subject == "Re: Which port?"
    assert answer.message.reply_to == question.message.id
    assert not mailbox.pending(box, repo="web").directed
    assert ids(mailbox.pending(box, repo="api").directed) == [answer.message.id]
    assert git(box, "rev-parse", f"{answer.oid}^").strip() == question.oid  # the thread is commit ancestry
    follow_up = mailbox.reply(box, sender="api", to_id=answer.message.id, subject="Thanks", when=at(2))
    thread = mailbox.log(box, thread=answer.message.id)
    assert ids(thread) == [question.message.id, answer.message.id, follow_up.message.id]
    assert [e.state for e in thread] == [State.ARCHIVED, State.ARCHIVED, State.PENDING]


def test_a_thread_includes_every_branch_of_replies(box: Store) -> None:
    root = mailbox.broadcast(box, sender="api", subject="RFC", when=at(0))
    one = mailbox.reply(box, sender="web", to_id=root.message.id, when=at(1))
    two = mailbox.reply(box, sender="db", to_id=root.message.id, when=at(2))
    mailbox.send(box, sender="api", to="web", subject="unrelated", when=at(3))
    assert ids(mailbox.log(box, thread=two.message.id)) == [root.message.id, one.message.id, two.message.id]


def test_replying_to_your_own_message_follows_up_with_its_recipient(box: Store) -> None:
    first = mailbox.send(box, sender="api", to="web", subject="one")
    again = mailbox.reply(box, sender="api", to_id=first.message.id, body="also")
    assert again.message.to == "web"
    own = mailbox.broadcast(box, sender="api", subject="all")
    with pytest.raises(GitmailError, match="your own broadcast"):
        mailbox.reply(box, sender="api", to_id=own.message.id)


# -- broadcasts -----------------------------------------------------------------------------------------------


def test_broadcasts_reach_each_repo_once_and_never_the_sender(box: Store) -> None:
    cast = mailbox.broadcast(box, sender="api", subject="Spec changed")
    assert not mailbox.pending(box, repo="api").broadcasts
    assert ids(read_inbox(box, repo="web", peek=True).broadcasts) == [cast.message.id]
    assert ids(read_inbox(box, repo="web").broadcasts) == [cast.message.id]
    assert not read_inbox(box, repo="web").broadcasts
    assert ids(read_inbox(box, repo="db").broadcasts) == [cast.message.id]
    notes = git(box, "notes", f"--ref={SEEN_NOTES}", "show", cast.oid)
    assert notes == "api\ndb\nweb\n"


def test_retract_stops_delivery_keeps_history_and_is_idempotent(box: Store) -> None:
    cast = mailbox.broadcast(box, sender="api", subject="oops")
    read_inbox(box, repo="web")
    with pytest.raises(GitmailError, match="only its sender"):
        mailbox.retract(box, sender="web", message_id=cast.message.id)
    assert mailbox.retract(box, sender="api", message_id=cast.message.id) is True
    assert mailbox.retract(box, sender="api", message_id=cast.message.id) is False
    assert not mailbox.pending(box, repo="db").broadcasts
    assert [(e.message.id, e.state) for e in mailbox.log(box, repo="db")] == [(cast.message.id, State.RETRACTED)]
    direct = mailbox.send(box, sender="api", to="web", subject="not a broadcast")
    with pytest.raises(GitmailError, match="not a broadcast"):
        mailbox.retract(box, sender="api", message_id=direct.message.id)


def test_hand_over_skips_what_a_concurrent_reader_already_took(box: Store) -> None:
    cast = mailbox.broadcast(box, sender="api", subject="once")
    seen_early = mailbox.pending(box, repo="web").broadcasts
    assert ids(mailbox.record_shown(box, repo="web", shown=(), broadcasts=seen_early, host="api", moment="inbox")) == [
        cast.message.id
    ]
    assert mailbox.record_shown(box, repo="web", shown=(), broadcasts=seen_early, host="api", moment="inbox") == []


def test_hand_over_skips_a_broadcast_retracted_meanwhile(box: Store) -> None:
    cast = mailbox.broadcast(box, sender="api", subject="soon retracted")
    seen_early = mailbox.pending(box, repo="web").broadcasts
    mailbox.retract(box, sender="api", message_id=cast.message.id)
    assert mailbox.record_shown(box, repo="web", shown=(), broadcasts=seen_early, host="api", moment="inbox") == []


# -- history --------------------------------------------------------------------------------------------------


def test_log_shows_a_repos_mail_both_ways_newest_first_with_states(box: Store) -> None:
    got = mailbox.send(box, sender="api", to="web", subject="to web", when=at(0))
    sent = mailbox.send(box, sender="web", to="db", subject="from web", when=at(1))
    cast = mailbox.broadcast(box, sender="db", subject="to all", when=at(2))
    mailbox.send(box, sender="api", to="db", subject="not web's", when=at(3))
    mailbox.done(box, repo="web", ids=[got.message.id])
    history = mailbox.log(box, repo="web")
    assert [(e.message.id, e.state) for e in history] == [
        (cast.message.id, State.BROADCAST),
        (sent.message.id, State.PENDING),
        (got.message.id, State.ARCHIVED),
    ]
    assert len(mailbox.log(box)) == 4
    assert ids(mailbox.log(box, repo="web", limit=1)) == [cast.message.id]
    assert ids(mailbox.log(box, grep="FROM WEB")) == [sent.message.id]


def test_a_recipients_history_is_one_plain_git_log(box: Store) -> None:
    a = mailbox.send(box, sender="api", to="My App", subject="one", when=at(0))
    b = mailbox.send(box, sender="db", to="My App", subject="two", when=at(1))
    mailbox.send(box, sender="db", to="other", subject="three", when=at(2))
    mailbox.done(box, repo="My App", ids=[a.message.id])
    out = git(box, "log", "--format=%s", "--glob=gitmail/%4Dy%20%41pp")
    assert out.split() == ["two", "one"]
    assert {a.message.id, b.message.id} <= set(git(box, "log", "--format=%b", "--glob=gitmail/%4Dy%20%41pp").split())


# -- identity claims ------------------------------------------------------------------------------------------


def test_the_first_path_to_use_a_name_is_recorded_and_another_is_reported(box: Store, tmp_path: Path) -> None:
    mailbox.send(box, sender="api", to="web", subject="hello")
    first, second = tmp_path / "a" / "web", tmp_path / "b" / "web"
    first.mkdir(parents=True)
    second.mkdir(parents=True)
    assert read_inbox(box, repo="web", path=first).claimed_by is None
    assert read_inbox(box, repo="web", path=first).claimed_by is None
    assert read_inbox(box, repo="web", path=second).claimed_by == os.path.realpath(first)
    assert len(read_inbox(box, repo="web", path=second).directed) == 1  # a warning, not a refusal
    assert load_claims(box) == {"web": os.path.realpath(first)}


def test_known_names_are_those_that_read_or_received_mail(box: Store, tmp_path: Path) -> None:
    from gitmail.values.names import RepoName

    mailbox.send(box, sender="api", to="web", subject="hello")
    assert mailbox.known(box, RepoName("web"))
    assert not mailbox.known(box, RepoName("nobody"))
    read_inbox(box, repo="reader", path=tmp_path)
    assert mailbox.known(box, RepoName("reader"))


def test_the_broadcast_address_is_no_repo_anyone_can_send_to_or_read_as(box: Store) -> None:
    cast = mailbox.broadcast(box, sender="api", subject="x")
    assert cast.message.to == BROADCAST
    for attempt in (
        lambda: mailbox.send(box, sender="api", to=BROADCAST, subject="sneaking in"),
        lambda: mailbox.send(box, sender=BROADCAST, to="web", subject="posing as everyone"),
        lambda: mailbox.pending(box, repo=BROADCAST),
    ):
        with pytest.raises(UsageError, match="reserved"):
            attempt()
    assert [p.id for p in box.refs("refs/gitmail/")] == [cast.message.id]


def test_the_readme_git_recipes_answer_what_they_claim(box: Store) -> None:
    kept = mailbox.send(box, sender="api", to="web", subject="still pending", when=at(0))
    handled = mailbox.send(box, sender="api", to="web", subject="handled", when=at(1))
    mailbox.done(box, repo="web", ids=[handled.message.id])
    cast = mailbox.broadcast(box, sender="db", subject="to all", when=at(2))
    read_inbox(box, repo="web")
    mailbox.send(box, sender="rapid", to="db", subject="not from api", when=at(3))

    def subjects(*args: str) -> list[str]:
        return git(box, "log", "--format=%s", *args).splitlines()

    assert subjects("--glob=gitmail/web") == ["handled", "still pending"]
    assert subjects("--glob=gitmail/web/inbox") == ["still pending"]
    assert subjects("--glob=gitmail/_broadcast") == ["to all"]
    assert subjects("--author=<api@gitmail>", "--glob=gitmail") == ["handled", "still pending"]
    assert subjects("--glob=gitmail", f"--grep=Message-Id: {kept.message.id[:4]}") == ["still pending"]
    notes = git(box, "log", "--format=%s%n%N", "--notes=gitmail-seen", "--glob=gitmail/_broadcast")
    assert notes.split() == ["to", "all", "db", "web"]
    moves = git(box, "log", "--format=%an: %s", f"--grep={handled.message.id}", "refs/gitmail-moves")
    assert moves.splitlines()[0] == f"web: gitmail: web marked done {handled.message.id}"
    assert cast.oid in git(box, "notes", "--ref=gitmail-seen", "list")


def test_done_all_never_archives_mail_no_session_was_shown(box: Store) -> None:
    seen = mailbox.send(box, sender="api", to="web", subject="seen")
    unseen = mailbox.send(box, sender="db", to="web", subject="arrived after the last read")
    result = mailbox.done(box, repo="web", everything=True, seen={seen.message.id})
    assert ids(result.archived) == [seen.message.id]
    assert [(e.message.sender, e.message.subject) for e in result.archived] == [("api", "seen")]
    assert result.unshown == [unseen.message.id]
    assert ids(mailbox.pending(box, repo="web").directed) == [unseen.message.id]


def test_reopen_undoes_done_and_records_the_move(box: Store) -> None:
    entry = mailbox.send(box, sender="api", to="web", subject="oops")
    mailbox.done(box, repo="web", ids=[entry.message.id])
    reopened = mailbox.reopen(box, repo="web", message_id=entry.message.id[:4])
    assert reopened.state is State.PENDING
    assert ids(mailbox.pending(box, repo="web").directed) == [entry.message.id]
    log = git(box, "log", "--format=%s", f"--grep={entry.message.id}", "refs/gitmail-moves")
    assert log.splitlines()[0] == f"gitmail: web reopened {entry.message.id}"
    with pytest.raises(GitmailError, match="already pending"):
        mailbox.reopen(box, repo="web", message_id=entry.message.id)
    with pytest.raises(GitmailError, match="not to 'db'"):
        mailbox.reopen(box, repo="db", message_id=entry.message.id)
