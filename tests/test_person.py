"""The person as an address: `@user` reaches the person who runs the sessions; no repository can be called so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gitmail import mailbox, render
from gitmail.store.repository import Store
from gitmail.values.address import Address
from gitmail.values.names import PERSON, RepoName, name_problem, repo_problem
from tests.conftest import CliRunner, RepoFactory
from tests.test_cli import one_line_error, send


def in_session(monkeypatch: pytest.MonkeyPatch, session_id: str = "5b0e8d1c-aaaa") -> None:
    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", session_id)


def test_the_person_has_a_reserved_address() -> None:
    assert Address.parse("@user") == Address(RepoName(PERSON))
    assert Address.parse("@user").repo.is_person and not RepoName("api").is_person
    assert name_problem("@user") is None  # a mailbox name: its mail has refs like any other
    assert repo_problem("@user") is not None  # but never a repository's
    assert name_problem("@bob") == "names starting with '@' are reserved (@user is the person's address)"
    with pytest.raises(Exception, match="has no sessions"):
        Address.parse("@user#front")


@pytest.mark.parametrize("how", ["folder", "gitmail.name"])
def test_a_repository_cannot_be_called_the_person(cli: CliRunner, repos: RepoFactory, how: str) -> None:
    if how == "folder":
        where = repos("@user")
    else:
        where = repos("plain")
        subprocess.run(["git", "-C", str(where), "config", "gitmail.name", "@user"], check=True)
    result = cli("send", "--to", "web", "-s", "hello", cwd=where)
    one_line_error(result, 2, "names starting with '@' are reserved (@user is the person's address")


def test_a_session_cannot_speak_as_the_person(cli: CliRunner, api: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    in_session(monkeypatch)
    one_line_error(cli("send", "--to", "web", "-s", "x", "--from", "@user", cwd=api), 2, "cannot act as the person")
    one_line_error(cli("send", "--to", "web", "-s", "x", "--from", "@bob", cwd=api), 2, "reserved")


def test_mail_to_the_person_is_stored_pending_and_its_sender_sees_the_answer(
    cli: CliRunner, api: Path, tmp_path: Path
) -> None:
    result = cli("send", "--to", "@user", "-u", "now", "-s", "May I drop v1?", "-m", "It has no callers.", cwd=api)
    assert result.code == 0, result
    message_id = result.out.strip()
    assert result.err == f"gitmail: sent {message_id} to the person (@user), urgency now\n"
    box = Store()
    assert box.refs(f"refs/gitmail/%40user/inbox/{message_id}")
    pending = mailbox.pending(box, repo="@user")
    assert [e.message.id for e in pending.directed] == [message_id]
    sent = cli("log", "--sent", cwd=api)
    assert "pending" in sent.out and "api -> @user" in sent.out
    # the person answers (outside any session): the question is archived, the answer threads back to api
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    answer = send(cli, outside, "--reply-to", message_id, "--from", "@user", "-m", "Yes, drop it.")
    assert mailbox.show(box, answer).message.reply_to == message_id
    assert mailbox.show(box, answer).message.sender == PERSON
    assert not mailbox.pending(box, repo="@user").directed
    after = cli("log", "--sent", cwd=api)
    assert f"replied {answer}" in after.out
    api_inbox = cli("inbox", cwd=api)
    assert '"@user" (PERSON)' in api_inbox.out and "> Yes, drop it." in api_inbox.out


def test_the_person_label_is_the_persons_alone() -> None:
    assert render.trust(PERSON, {}) == "PERSON"
    assert render.trust("api", {}) == "UNVERIFIED"


def test_every_framing_says_how_to_reach_the_person(cli: CliRunner, api: Path, web: Path) -> None:
    send(cli, web, "--to", "api", "-s", "hello")
    shown = cli("inbox", cwd=api).out
    assert "To reach the user (a decision you wait on), send to `@user`" in shown


def at_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)


def test_outside_any_repository_the_inbox_is_the_persons(cli: CliRunner, api: Path, tmp_path: Path) -> None:
    message_id = send(cli, api, "--to", "@user", "-s", "Which database?")
    outside = tmp_path / "desk"
    outside.mkdir()
    shown = cli("inbox", cwd=outside)
    assert shown.code == 0 and message_id in shown.out and '"Which database?"' in shown.out
    assert shown.err == (
        "gitmail: note: this is your own inbox (@user): answer with `gitmail send --from @user --reply-to ID`, mark "
        "done with `gitmail done --repo @user ID`, or do either from `gitmail view`\n"
    )
    assert cli("inbox", "--repo", "@user", cwd=api).out == shown.out


def test_a_terminal_read_counts_for_the_person(
    cli: CliRunner, api: Path, web: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = send(cli, web, "--to", "api", "-s", "first")
    assert "left pending" in cli("done", "--all", cwd=api).err  # nobody was shown it yet
    at_a_terminal(monkeypatch)
    assert first in cli("inbox", cwd=api).out
    later = send(cli, web, "--to", "api", "-s", "arrived after the reading")
    done = cli("done", "--all", cwd=api)
    assert done.code == 0, done
    assert first in done.err and f"left pending {later}" in done.err
    assert [e.message.id for e in mailbox.pending(Store(), repo="api").directed] == [later]


def test_a_read_of_another_repo_or_by_a_script_does_not_count(
    cli: CliRunner, api: Path, web: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    message_id = send(cli, web, "--to", "api", "-s", "only for api")
    cli("inbox", cwd=api)  # not a terminal: a script read it
    at_a_terminal(monkeypatch)
    cli("inbox", "--repo", "api", cwd=web)  # read from elsewhere
    cli("inbox", "--json", cwd=api)
    assert f"left pending {message_id}" in cli("done", "--all", cwd=api).err


def test_the_person_marks_their_own_mail_done_after_reading_it(
    cli: CliRunner, api: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    message_id = send(cli, api, "--to", "@user", "-s", "FYI: deployed")
    outside = tmp_path / "desk"
    outside.mkdir()
    at_a_terminal(monkeypatch)
    cli("inbox", cwd=outside)
    assert message_id in cli("done", "--all", "--repo", "@user", cwd=outside).err
    assert not mailbox.pending(Store(), repo="@user").directed
    assert "done" in cli("log", "--sent", cwd=api).out


def test_a_session_in_a_folder_called_like_the_person_gets_no_mail_of_theirs(
    cli: CliRunner, repos: RepoFactory, api: Path, box: Store
) -> None:
    from tests.hooked import Session

    send(cli, api, "--to", "@user", "-s", "for the person only")
    box.create()
    impostor = Session(repos("@user"), "55555555-eeee")
    assert "for the person only" not in impostor("session-start")
    assert "for the person only" not in impostor("prompt")
    assert mailbox.pending(box, repo="@user").directed  # still the person's, unread
