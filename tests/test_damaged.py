"""A mailbox a `git gc --prune=now` raced: a ref whose commit is gone, a notes ref whose tip is gone, a killed
writer's change whose objects are gone; and a disk that tore an object file (git dies reading it). Every read skips
and names what it cannot read, `done` clears it, and nothing else breaks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gitmail import mailbox
from gitmail.store.repository import Store
from gitmail.values.layout import DAMAGED, State
from gitmail.values.receipts import RECEIPTS_NOTES
from gitmail.workspace import own_command
from tests.conftest import CliRunner, RepoFactory, Result, run_gitmail
from tests.damage import fsck, git, lose, lose_object, tear, tear_packed
from tests.reading import inbox as read_inbox


def sent(cli: CliRunner, cwd: Path, *args: str) -> str:
    result = cli("send", *args, cwd=cwd)
    assert result.code == 0, result
    return result.out.strip()


def one_line_error(result: Result, text: str) -> None:
    assert (result.code, result.out) == (1, ""), result
    assert result.err == f"gitmail: error: {text}\n"


def test_log_skips_a_message_whose_commit_is_gone_and_names_it(cli: CliRunner, api: Path, web: Path) -> None:
    kept = sent(cli, api, "--to", "web", "-s", "kept")
    gone = sent(cli, api, "--to", "web", "-s", "gone")
    lose(Store(), f"refs/gitmail/web/inbox/{gone}")
    note = f"gitmail: note: 1 message could not be read: {gone} (run `gitmail doctor`)\n"
    for args in (["log"], ["log", "--everyone"], ["log", "--json"]):
        result = cli(*args, cwd=web)
        assert (result.code, result.err) == (0, note), (args, result)
        assert kept in result.out and gone not in result.out
    # Another repo's log does not hear of web's damaged mail, but still shows what api sent.
    mine = cli("log", cwd=api)
    assert (mine.code, mine.err) == (0, "") and kept in mine.out


def test_a_thread_of_a_lost_message_is_one_line_and_other_threads_read_whole(
    cli: CliRunner, api: Path, web: Path
) -> None:
    question = sent(cli, api, "--to", "web", "-s", "question")
    answer = sent(cli, web, "--reply-to", question, "-m", "answer")
    gone = sent(cli, api, "--to", "web", "-s", "gone")
    lose(Store(), f"refs/gitmail/web/inbox/{gone}")
    text = f"message {gone} is stored but cannot be read (its commit or document is damaged); run `gitmail doctor`"
    one_line_error(cli("log", "--thread", gone), text)
    one_line_error(cli("show", gone), text)
    one_line_error(cli("send", "--reply-to", gone, "-m", "x", cwd=web), text)
    thread = cli("log", "--thread", answer)
    assert thread.code == 0 and [line.split()[0] for line in thread.out.splitlines()] == [question, answer]


def test_inbox_delivers_the_rest_and_names_the_lost_one(cli: CliRunner, api: Path, web: Path) -> None:
    kept = sent(cli, api, "--to", "web", "-s", "kept")
    gone = sent(cli, api, "--to", "web", "-s", "gone")
    lose(Store(), f"refs/gitmail/web/inbox/{gone}")
    shown = cli("inbox", cwd=web)
    assert shown.code == 0 and f"id {kept}" in shown.out
    assert f"Note: 1 message could not be read: {gone} (run `{own_command()} doctor`)." in shown.out
    assert json.loads(cli("inbox", "--json", cwd=web).out)["unreadable"] == [gone]


def test_done_sets_a_lost_message_aside_and_says_so(cli: CliRunner, api: Path, web: Path) -> None:
    box = Store()
    gone = sent(cli, api, "--to", "web", "-s", "gone")
    oid = lose(box, f"refs/gitmail/web/inbox/{gone}")
    result = cli("done", gone, cwd=web)
    assert (result.code, result.out) == (0, "")
    assert result.err == (
        f"gitmail: set aside {gone}: stored but unreadable, so not archived; kept under refs/gitmail/_damaged/ "
        "(see `gitmail doctor`)\n"
    )
    assert not box.refs("refs/gitmail/web/")
    stand_in = git(box, "log", "--format=%s", f"{DAMAGED}web/inbox/{gone}").stdout
    assert (
        stand_in
        == f"gitmail: message {gone} set aside: refs/gitmail/web/inbox/{gone} pointed at {oid}, which the mailbox no longer has whole\n"
    )
    assert cli("log", cwd=web).err == ""  # nothing unreadable is left in web's mail
    assert fsck(box).returncode == 0


def test_writes_go_on_when_a_notes_tip_was_pruned(cli: CliRunner, box: Store, api: Path, web: Path) -> None:
    first = sent(cli, api, "--to", "web", "-s", "first")
    second = sent(cli, api, "--to", "web", "-s", "second")
    cast = sent(cli, api, "--broadcast", "-s", "everyone")
    assert cli("done", first, cwd=web).code == 0  # a receipt: the notes ref moves
    kept = git(box, "rev-parse", RECEIPTS_NOTES).stdout.strip()
    assert cli("done", second, cwd=web).code == 0
    lose(box, RECEIPTS_NOTES, whole=False)  # the tip written by that `done`, pruned as its ref moved
    # Every write that adds a receipt or hands over a broadcast still works, and builds on what is left.
    shown = cli("inbox", cwd=web)
    assert shown.code == 0 and f"id {cast}" in shown.out
    answer = sent(cli, web, "--reply-to", first, "-m", "answer")
    assert cli("done", answer, cwd=api).code == 0
    assert kept in git(box, "rev-list", RECEIPTS_NOTES).stdout.split()
    log = (box.path.parent / "gitmail.log").read_text()
    assert f"{RECEIPTS_NOTES} pointed at" in log and f"went on from {kept}" in log
    assert [e.state for e in mailbox.log(box, repo="api", limit=None)] == [
        State.ARCHIVED,
        State.BROADCAST,
        State.ARCHIVED,
        State.ARCHIVED,
    ]


def test_writes_go_on_when_a_prune_took_part_of_a_notes_tip(box: Store) -> None:
    first = mailbox.send(box, sender="api", to="web", subject="first")
    second = mailbox.send(box, sender="api", to="web", subject="second")
    mailbox.done(box, repo="web", ids=[first.message.id])
    kept = git(box, "rev-parse", RECEIPTS_NOTES).stdout.strip()
    mailbox.done(box, repo="web", ids=[second.message.id])
    lose_object(box, f"{RECEIPTS_NOTES}^{{tree}}")  # the commit landed; its tree did not survive
    reopened = mailbox.reopen(box, repo="web", message_id=first.message.id)  # reads and writes receipts
    assert reopened.state is State.PENDING
    assert read_inbox(box, repo="web").directed[0].message.id == first.message.id
    history = git(box, "rev-list", RECEIPTS_NOTES).stdout.split()
    assert kept in history and len(history) == 3  # done, reopen, delivered: the damaged commit is not among them
    assert "which the mailbox no longer has whole; went on from" in (box.path.parent / "gitmail.log").read_text()


def test_the_hook_names_lost_mail_and_hands_over_despite_a_lost_seen_set(web: Path, box: Store) -> None:
    directed = mailbox.send(box, sender="api", to="web", subject="kept")
    gone = mailbox.send(box, sender="api", to="web", subject="gone")
    first = mailbox.broadcast(box, sender="api", subject="first broadcast")
    mailbox.broadcast(box, sender="api", subject="second broadcast")  # moves the seen-set ref again
    lose(box, f"refs/gitmail/web/inbox/{gone.message.id}")
    lose(box, "refs/notes/gitmail-seen", whole=False)
    payload = json.dumps({"session_id": "s1", "cwd": str(web), "hook_event_name": "SessionStart"})
    done = run_gitmail("hook", "session-start", cwd=web, stdin=payload)
    assert done.returncode == 0 and done.stderr == ""
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert f"id {directed.message.id}" in context and f"id {first.message.id}" in context
    assert f"Note: 1 message could not be read: {gone.message.id} (run `gitmail doctor`)." in context
    assert "could not be handed over" not in context
    seen = git(box, "notes", "--ref=gitmail-seen", "show", first.oid).stdout.split()
    assert seen == ["api", "web"]


def test_a_reply_killed_after_its_journal_then_a_prune_leaves_every_command_working(
    web: Path, repos: RepoFactory, box: Store
) -> None:
    api = repos("api")
    question = mailbox.send(box, sender="api", to="web", subject="question")
    # A git process holds one of the refs the reply moves, so the reply waits inside `git update-ref`, its
    # change journaled; there it is killed, with its git children, as a closed terminal or the OOM killer does.
    held = box.path / f"{RECEIPTS_NOTES}.lock"
    held.parent.mkdir(parents=True, exist_ok=True)
    held.write_text("")
    reply = subprocess.Popen(
        [sys.executable, "-m", "gitmail", "send", "--reply-to", question.message.id, "-m", "answer"],
        cwd=web,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    journal = box.own_dir / "journal"
    while not journal.exists():  # the reply's own ready signal: its change is written down
        assert reply.poll() is None, reply.communicate()
        time.sleep(0.001)
    os.killpg(reply.pid, signal.SIGKILL)
    out, _ = reply.communicate()
    assert reply.returncode == -signal.SIGKILL and out == b""  # it never reported success
    recorded = json.loads(journal.read_text())
    held.unlink()  # that git process finishes
    git(box, "gc", "--prune=now", "--quiet")  # and the user tidies the mailbox
    assert box.missing([new for _, new, _ in recorded if new]), "the prune took nothing: the test proves little"

    later = run_gitmail("send", "--to", "web", "-s", "later", cwd=api)
    assert later.returncode == 0, later.stderr
    for args, where in (
        (["inbox"], web),
        (["log"], web),
        (["log", "--everyone"], web),
        (["show", question.message.id], web),
        (["send", "--reply-to", question.message.id, "-m", "answer again"], web),
        (["done", later.stdout.strip()], web),
        (["inbox"], api),
    ):
        done = run_gitmail(*args, cwd=where)
        assert done.returncode == 0 and "error" not in done.stderr, (args, done)
    payload = json.dumps({"session_id": "s1", "cwd": str(api), "hook_event_name": "SessionStart"})
    hook = run_gitmail("hook", "session-start", cwd=api, stdin=payload)
    assert hook.returncode == 0 and "answer again" in hook.stdout and "could not" not in hook.stdout
    # The killed reply's change was set aside whole, kept for inspection and logged; nothing of it landed.
    kept = list(box.own_dir.glob("journal.set-aside-*"))
    assert len(kept) == 1 and json.loads(kept[0].read_text()) == recorded
    assert "set aside an unfinished change whose objects are gone" in (box.path.parent / "gitmail.log").read_text()
    assert [e.message.subject for e in mailbox.pending(box, repo="api").directed] == ["Re: question"]
    doctor = run_gitmail("doctor", cwd=web)
    assert doctor.returncode == 0, doctor.stdout
    assert "note      journal: 1 change that killed commands left could not be finished" in doctor.stdout
    assert fsck(box).returncode == 0


def hook(moment: str, where: Path, session: str = "s1") -> str:
    """What a Claude Code session in `where` is told at this moment (the hook run as the host runs it)."""
    event = {"session-start": "SessionStart", "tool": "PostToolBatch"}[moment]
    payload = json.dumps({"session_id": session, "cwd": str(where), "hook_event_name": event})
    done = run_gitmail("hook", moment, cwd=where, stdin=payload)
    assert done.returncode == 0 and done.stderr == "", done
    if not done.stdout.strip():
        return ""
    return str(json.loads(done.stdout)["hookSpecificOutput"].get("additionalContext", ""))


@pytest.mark.parametrize("part", ["{}", "{}^{{tree}}", "{}:message.md"])
def test_a_torn_object_is_read_around_and_named_at_every_moment(
    part: str, cli: CliRunner, box: Store, api: Path, web: Path, tmp_path: Path
) -> None:
    kept = sent(cli, api, "--to", "web", "-s", "kept")
    torn = sent(cli, api, "--to", "web", "-s", "torn")
    tear(box, part.format(f"refs/gitmail/web/inbox/{torn}"))
    named = f"1 message could not be read: {torn} (run `gitmail doctor`)"
    start = hook("session-start", web)
    assert f"id {kept}" in start and f"Note: {named}." in start and "could not check" not in start
    arrived = sent(cli, api, "--to", "web", "-s", "arrived after")  # healthy mail keeps arriving
    assert f"id {arrived}" in hook("tool", web)
    shown = cli("inbox", cwd=web)
    assert shown.code == 0 and f"id {kept}" in shown.out and f"id {arrived}" in shown.out
    assert f"Note: {named.replace('gitmail', own_command())}." in shown.out
    assert json.loads(cli("inbox", "--json", cwd=web).out)["unreadable"] == [torn]
    for args, where in ((["log"], web), (["log", "--everyone"], web), (["log", "--grep", "a"], web), (["log"], api)):
        result = cli(*args, cwd=where)
        assert result.code == 0 and kept in result.out and arrived in result.out, (args, result)
        assert result.err in ("", f"gitmail: note: {named}\n"), (args, result)
    assert cli("log", "--thread", kept).code == 0
    assert cli("view", "--export", str(tmp_path / "view.html")).code == 0
    assert "arrived after" in (tmp_path / "view.html").read_text()
    text = f"message {torn} is stored but cannot be read (its commit or document is damaged); run `gitmail doctor`"
    one_line_error(cli("show", torn), text)
    everything = cli("done", "--all", cwd=web)
    assert everything.code == 0 and f"archived {kept}" in everything.err and f"archived {arrived}" in everything.err
    assert cli("done", torn, cwd=web).err.startswith(f"gitmail: set aside {torn}: stored but unreadable")
    assert cli("log", cwd=web).err == ""


def test_doctor_names_a_torn_object_and_repair_sets_its_message_aside_deleting_nothing(
    cli: CliRunner, box: Store, api: Path, web: Path
) -> None:
    kept = sent(cli, api, "--to", "web", "-s", "kept")
    torn = sent(cli, api, "--to", "web", "-s", "torn")
    oid = tear(box, f"refs/gitmail/web/inbox/{torn}")
    damaged = box.path / "objects" / oid[:2] / oid[2:]
    torn_bytes = damaged.read_bytes()
    assert fsck(box).returncode != 0
    report = cli("doctor", cwd=web)
    assert report.code == 1 and report.err == "", report
    assert (
        "problem   objects: 1 object file is damaged (cut short or garbled on disk), so git cannot read it"
        in report.out
    )
    assert str(damaged) in report.out
    assert f"cannot be read (document missing or damaged): {torn} (pending for web)" in report.out
    repaired = cli("doctor", "--repair", cwd=web)
    assert repaired.code == 0, repaired
    kept_aside = box.own_dir / "damaged-objects" / oid
    assert kept_aside.read_bytes() == torn_bytes  # moved, not deleted
    assert f"repaired  set aside {torn} (pending for web) as {DAMAGED}web/inbox/{torn}" in repaired.out
    assert fsck(box).returncode == 0
    assert cli("doctor", cwd=web).code == 0
    assert git(box, "log", "-1", "--format=%s", f"{DAMAGED}web/inbox/{torn}").stdout.startswith(
        f"gitmail: message {torn} set aside"
    )
    assert json.loads(cli("inbox", "--json", cwd=web).out)["unreadable"] == []
    assert [e.message.id for e in mailbox.pending(box, repo="web").directed] == [kept]


def test_torn_receipts_stop_neither_reads_nor_writes(cli: CliRunner, box: Store, api: Path, web: Path) -> None:
    first = sent(cli, api, "--to", "web", "-s", "first")
    assert cli("inbox", cwd=web).code == 0  # a receipt: the notes ref has a commit
    tear(box, f"{RECEIPTS_NOTES}^{{tree}}")
    second = sent(cli, api, "--to", "web", "-s", "second")
    for args, where in ((["inbox"], web), (["log"], web), (["log"], api), (["show", first], web)):
        result = cli(*args, cwd=where)
        assert result.code == 0 and "error" not in result.err, (args, result)
    assert f"id {second}" in hook("session-start", web)
    assert cli("done", first, second, cwd=web).code == 0
    assert [e.state for e in mailbox.log(box, repo="web", limit=None)] == [State.ARCHIVED, State.ARCHIVED]
    assert cli("doctor", "--repair", cwd=web).code == 0
    assert fsck(box).returncode == 0


def test_a_damaged_packed_object_is_read_around_by_one_git_and_by_a_kept_one(box: Store) -> None:
    kept = mailbox.send(box, sender="api", to="web", subject="kept")
    torn = mailbox.send(box, sender="api", to="web", subject="torn")
    later = mailbox.send(box, sender="api", to="web", subject="later")
    oid = tear_packed(box, f"refs/gitmail/web/inbox/{torn.message.id}:message.md")
    assert not list(box.path.glob("objects/??/*")), "the objects are still loose: the test proves little"
    for keep in (False, True):  # `git cat-file` once per read, and one kept running (the MCP server's)
        reader = Store(box.path)
        if keep:
            reader.keep_reading()
        mail = mailbox.pending(reader, repo="web")
        assert [e.message.id for e in mail.directed] == [kept.message.id, later.message.id]
        assert list(mail.unreadable) == [torn.message.id] and reader.damaged == {oid}
        reader.close()


def test_threads_and_logs_walk_around_a_torn_message_that_a_healthy_reply_answers(
    cli: CliRunner, box: Store, api: Path, web: Path
) -> None:
    question = sent(cli, api, "--to", "web", "-s", "question")
    answer = sent(cli, web, "--reply-to", question, "-m", "answer")  # a healthy commit whose parent is torn below
    other = sent(cli, api, "--to", "web", "-s", "another thread")
    follow = sent(cli, web, "--reply-to", other, "-m", "follow-up")
    tear(box, f"refs/gitmail/web/archive/{question}")
    thread = cli("log", "--thread", other)  # git walks every ref's history for it: the torn one is left out
    assert thread.code == 0 and [line.split()[0] for line in thread.out.splitlines()] == [other, follow]
    everyone = cli("log", "--everyone", "-n", "1000")
    assert everyone.code == 0 and answer in everyone.out and follow in everyone.out, everyone
    assert everyone.err == f"gitmail: note: 1 message could not be read: {question} (run `gitmail doctor`)\n"
