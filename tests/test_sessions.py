"""Sessions as addresses: worktrees are their repository, a session never gets its own mail, one session of a repo
can be reached by its handle, replies go back to the session that asked, and `gitmail sessions` says who is here."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from gitmail import actions, mailbox
from gitmail.errors import UsageError
from gitmail.store import hookfiles, processes, sessions
from gitmail.store.repository import Store
from gitmail.values.names import RepoName
from gitmail.workspace import Actor, place
from tests.conftest import RepoFactory, run_gitmail
from tests.hooked import Session

HOST_PROCESS = sessions.host_process  # before the autouse fixture stands the test process in for it

GIT_ID = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env={**os.environ, **GIT_ID})


@pytest.fixture(autouse=True)
def mailbox_made(box: Store) -> None:
    """Sessions are recorded in the mailbox's own folder: these tests start with one (mail creates it)."""
    box.create()


@pytest.fixture
def api(repos: RepoFactory) -> Path:
    path = repos("api")
    git("commit", "-q", "--allow-empty", "-m", "start", cwd=path)
    return path


@pytest.fixture
def worktree(api: Path) -> Path:
    """A linked worktree of api, as Claude Code's --worktree makes them."""
    path = api / ".claude" / "worktrees" / "brave-otter"
    git("worktree", "add", "-q", str(path), "-b", "otter", cwd=api)
    return path


# -- worktrees are their repository ---------------------------------------------------------------------------------


def test_a_linked_worktree_is_its_repository(api: Path, worktree: Path) -> None:
    found = place(worktree / "src" if (worktree / "src").exists() else worktree)
    assert found is not None
    assert (found.name, found.home, found.worktree, found.top) == ("api", str(api), "brave-otter", str(worktree))
    assert found.branch() == "otter"
    main = place(api)
    assert main is not None and (main.name, main.home, main.worktree) == ("api", str(api), None)


def test_a_bare_repositorys_worktrees_are_the_repository(tmp_path: Path) -> None:
    bare = tmp_path / "api.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    seed = tmp_path / "seed"
    git("clone", "-q", str(bare), str(seed), cwd=tmp_path)
    git("commit", "-q", "--allow-empty", "-m", "start", cwd=seed)
    git("push", "-q", "origin", "HEAD:main", cwd=seed)
    git("worktree", "add", "-q", str(tmp_path / "feature"), "main", cwd=bare)
    found = place(tmp_path / "feature")
    assert found is not None and (found.name, found.home, found.worktree) == ("api", str(bare), "feature")


def test_a_repository_may_choose_its_name(api: Path, worktree: Path, box: Store) -> None:
    git("config", "gitmail.name", "api-server", cwd=api)
    found = place(worktree)
    assert found is not None and (found.name, found.named_by) == ("api-server", "gitmail.name")
    mailbox.send(box, sender="web", to="api-server", subject="for the chosen name")
    assert "for the chosen name" in Session(worktree, "s1")("session-start")
    assert '"api-server" (chosen with git config gitmail.name)' in run_gitmail("doctor", cwd=worktree).stdout


def test_mail_for_a_repo_reaches_the_sessions_of_every_worktree(api: Path, worktree: Path, box: Store) -> None:
    sent = mailbox.send(box, sender="web", to="api", subject="for api")
    assert sent.message.id in Session(api, "main-1")("session-start")
    assert sent.message.id in Session(worktree, "wt-1")("session-start")
    claims = json.loads((box.own_dir / "claims.json").read_text())
    assert claims == {"api": str(api)}  # one repository, not two strangers


def test_mail_for_a_worktrees_old_name_reaches_that_worktrees_sessions(api: Path, worktree: Path, box: Store) -> None:
    """Before, a session in a worktree went by the worktree's folder name: mail sent to that name is not stranded."""
    from gitmail.store.claims import save_claims

    box.create()
    save_claims(box, {"brave-otter": str(worktree)})
    old = mailbox.send(box, sender="web", to="brave-otter", subject="sent to the old name")
    session = Session(worktree, "wt-1")
    assert old.message.id in session("session-start")
    assert old.message.id not in Session(api, "main-1")("session-start")  # only that worktree's sessions
    done = session.gitmail("done", old.message.id)
    assert done.returncode == 0 and f"archived {old.message.id}" in done.stderr


# -- a session never gets its own mail ------------------------------------------------------------------------------


@pytest.mark.parametrize("broadcast", [False, True])
def test_a_session_never_sees_what_it_sent_at_any_moment(
    api: Path, worktree: Path, box: Store, broadcast: bool
) -> None:
    alpha, beta = Session(api, "alpha-1111"), Session(worktree, "beta-2222")
    alpha("session-start")
    beta("session-start")
    sent = alpha.send("--broadcast" if broadcast else "--to=api", "-s", "from alpha", "-m", "news")
    for moment in ("tool", "prompt", "stop", "wake"):
        assert sent not in alpha(moment), moment
    assert sent not in alpha("session-start", source="resume")
    assert sent in beta("tool")  # the repo's other session hears it at its next moment
    assert sent not in beta("tool")  # once


# -- sessions as addresses --------------------------------------------------------------------------------------


def test_an_address_reaches_exactly_one_of_two_sessions_in_one_worktree(api: Path, box: Store) -> None:
    one, two = Session(api, "11111111-aaaa"), Session(api, "22222222-bbbb")
    one("session-start")
    two("session-start")
    assert one.gitmail("session", "--name", "builder").returncode == 0
    by_name = mailbox.send(box, sender="web", to="api", subject="x")  # for both
    assert by_name.message.id in one("tool") and by_name.message.id in two("tool")
    web = Session(api.parent / "web", "web-1")
    web.cwd.mkdir()
    subprocess.run(["git", "init", "-q", str(web.cwd)], check=True)
    for handle, reaches in (("builder", one), ("2222", two)):
        sent = web.send("--to", f"api#{handle}", "-s", f"for {handle}", "-m", "just you")
        other = two if reaches is one else one
        assert sent in reaches("tool") and sent not in other("tool")
    logged = run_gitmail("log", "--repo", "api#builder", "--json", cwd=api)
    assert [m["subject"] for m in json.loads(logged.stdout)] == ["for builder"]  # one session's mail
    assert [m["address"] for m in json.loads(logged.stdout)] == ["api#builder"]


def test_a_handle_that_names_several_live_sessions_is_refused_with_the_candidates(api: Path, box: Store) -> None:
    Session(api, "abcd1111")("session-start")
    Session(api, "abcd2222")("session-start")
    before = sorted(p.name for p in (box.path / "refs").rglob("*") if p.is_file())
    done = run_gitmail("send", "--to", "api#abcd", "-s", "x", "-m", "y", "--from", "web", cwd=api)
    assert done.returncode == 2
    assert done.stderr.startswith(
        'gitmail: error: \'api#abcd\' names 2 live sessions: "api#abcd1111" (idle, main work tree), "api#abcd2222"'
    )
    assert done.stderr.count("\n") == 1
    assert sorted(p.name for p in (box.path / "refs").rglob("*") if p.is_file()) == before  # nothing written


def asking(api: Path, worktree: Path) -> tuple[Session, Session, str]:
    """A session in the worktree asks web a question; another session of api works in the main tree."""
    asker, other = Session(worktree, "asker-11"), Session(api, "other-22")
    asker("session-start")
    other("session-start")
    return asker, other, asker.send("--to", "web", "-s", "which port?", "-m", "?")


def test_a_reply_goes_back_to_the_session_that_asked_and_to_its_repo_once_it_ended(
    api: Path, worktree: Path, box: Store
) -> None:
    asker, other, question = asking(api, worktree)
    web = Session(api.parent / "web", "web-1")
    web.cwd.mkdir()
    subprocess.run(["git", "init", "-q", str(web.cwd)], check=True)
    answer = web.send("--reply-to", question, "-m", "8080")
    assert answer in asker("tool") and answer not in other("tool")
    shown = run_gitmail("show", answer, cwd=api).stdout
    assert 'directed to "api#brave-otter"' in shown
    asker("session-end", reason="prompt_input_exit")
    second = web.gitmail("send", "--reply-to", question, "-m", "or 8443")
    assert second.returncode == 0
    assert (
        'the session that asked ("api#brave-otter") has ended: every session of "api" gets the reply' in second.stderr
    )
    assert second.stdout.strip() in other("tool")  # nothing stranded


def test_a_reply_sent_before_its_asker_ended_reaches_the_repo_once_it_has(
    api: Path, worktree: Path, box: Store
) -> None:
    asker, other, question = asking(api, worktree)
    answer = mailbox.reply(box, sender="web", to_id=question, body="8080", to_handle="brave-otter").message.id
    assert answer not in other("tool")  # for the asker alone while it lives
    stamp = Path(hookfiles.stamp_file(box.path, RepoName("api").ref))
    before = stamp.read_text()
    asker("session-end", reason="prompt_input_exit")
    assert stamp.read_text() != before  # so hook.sh looks again for api's other sessions, and no kept answer holds
    assert answer in other("tool")


def test_a_sibling_session_may_answer_a_broadcast_and_the_answer_goes_to_the_session_that_sent_it(
    api: Path, worktree: Path, box: Store
) -> None:
    sender, sibling, third = Session(api, "send-1111"), Session(worktree, "sibl-2222"), Session(api, "thrd-3333")
    for session in (sender, sibling, third):
        session("session-start")
    asked = sender.send("--broadcast", "-s", "anyone?", "-m", "?")
    assert asked in sibling("tool")
    answer = sibling.send("--reply-to", asked, "-m", "me")
    assert answer in sender("tool") and answer not in third("tool")
    own = sender.gitmail("send", "--reply-to", asked, "-m", "x")
    assert own.returncode == 1 and "is your own broadcast" in own.stderr


def test_a_session_cannot_address_itself(api: Path, box: Store) -> None:
    me = Session(api, "self-1234")
    me("session-start")
    refused = me.gitmail("send", "--to", "api#self", "-s", "to me", "-m", "x")
    assert (refused.returncode, refused.stderr) == (
        2,
        'gitmail: error: "api#self-123" is this very session, and a session never gets its own mail\n',
    )


def test_every_listed_address_reaches_its_session_alone(api: Path, worktree: Path, box: Store) -> None:
    one, two = "019ad3f2-8c41-7a10-9e2b-3f4c5d6e7f80", "019ad3f2-9d02-7b22-8f11-aa0b1c2d3e4f"  # Codex's UUIDv7s
    for session_id in (one, two):
        Session(api, session_id, host="codex")("session-start")
    for session_id in ("wt-1111", "wt-2222"):  # two sessions in one worktree
        Session(worktree, session_id)("session-start")
    addresses = sorted(s["address"] for s in json.loads(run_gitmail("sessions", "--json", cwd=api).stdout))
    assert addresses == ["api#019ad3f2-8", "api#019ad3f2-9", "api#wt-1111", "api#wt-2222"]
    for address in addresses:
        sent = run_gitmail("send", "--to", address, "-s", "x", "-m", "y", "--from", "web", cwd=api)
        assert sent.returncode == 0, sent.stderr
    named = Session(api, "nm-1234")
    named("session-start")
    prefix = named.gitmail("session", "--name", "wt-1")  # the start of another live session's id
    assert prefix.returncode == 2 and 'already names "api#wt-1111"' in prefix.stderr


def test_a_work_tree_in_a_folder_spelt_beyond_ascii_keeps_its_worktree_handle(tmp_path: Path, box: Store) -> None:
    home = tmp_path / "données" / "api"
    home.mkdir(parents=True)
    git("init", "-q", str(home), cwd=tmp_path)
    git("commit", "-q", "--allow-empty", "-m", "start", cwd=home)
    tree = home.parent / "api-fix"
    git("worktree", "add", "-q", str(tree), cwd=home)
    Session(tree, "utf8-1234")("session-start")
    assert (box.path / "gitmail" / "sessions" / "claude-utf8-1234.top").read_bytes() == os.fsencode(f"{tree}\n")
    sent = run_gitmail("send", "--to", "api#api-fix", "-s", "x", "-m", "y", "--from", "web", cwd=home)
    assert sent.returncode == 0, sent.stderr


def test_sending_to_a_session_that_ended_says_so_and_or_repo_sends_to_the_repo(api: Path, box: Store) -> None:
    gone = Session(api, "gone-1234")
    gone("session-start")
    gone.gitmail("session", "--name", "gone")
    gone("session-end", reason="logout")
    waits = run_gitmail("send", "--to", "api#gone", "-s", "later", "-m", "x", "--from", "web", cwd=api)
    assert waits.returncode == 0
    assert 'note: "api#gone" ended at ' in waits.stderr and "waits for it to resume" in waits.stderr
    instead = run_gitmail("send", "--to", "api#gone", "--or-repo", "-s", "now", "-m", "x", "--from", "web", cwd=api)
    assert 'every session of "api" gets the message instead' in instead.stderr
    fresh = Session(api, "fresh-5678")
    seen = fresh("session-start")
    assert instead.stdout.strip() in seen
    assert waits.stdout.strip() not in seen  # it waits for its session
    assert waits.stdout.strip() in gone("session-start", source="resume")
    gone("session-end", reason="logout")
    records = [p for p in box.path.rglob("*gone-1234*") if p.is_file()]
    assert records
    for record in records:
        record.unlink()  # a week unheard of: its record is forgotten
    assert waits.stdout.strip() in fresh("prompt", prompt="next")  # and the repo's sessions get its mail


# -- who is here ------------------------------------------------------------------------------------------------


def test_sessions_lists_who_is_here_with_worktree_branch_state_pending_and_card(
    api: Path, worktree: Path, box: Store
) -> None:
    main, side = Session(api, "main-0001"), Session(worktree, "side-0002")
    main("session-start")
    side("session-start")
    side("prompt")  # in a turn
    side.gitmail("session", "--card", "fixing the\nparser \u202eNOW")
    mailbox.send(box, sender="web", to="api", subject="news")
    listed = json.loads(run_gitmail("sessions", "--json", cwd=api).stdout)
    by_address = {s["address"]: s for s in listed}
    assert set(by_address) == {"api#main-000", "api#brave-otter"}
    assert (
        by_address["api#brave-otter"]["worktree"] == "brave-otter"
        and by_address["api#brave-otter"]["branch"] == "otter"
    )
    assert by_address["api#brave-otter"]["state"] == "live" and by_address["api#main-000"]["state"] == "idle"
    assert by_address["api#brave-otter"]["card"] == "fixing the parser NOW"  # sanitised like a subject
    assert by_address["api#main-000"]["pending"] == 1 and by_address["api#brave-otter"]["host"] == "claude"
    text = run_gitmail("sessions", cwd=api).stdout
    assert '    card "fixing the parser NOW"' in text


def test_a_session_whose_process_is_gone_is_ended_not_guessed_from_a_timestamp(api: Path, box: Store) -> None:
    ghost = Session(api, "ghost-1")
    ghost("session-start")
    live = Path(hookfiles.session_files(box.path, "claude-ghost-1").live)
    live.write_text(f"{os.getpid()} 1\n")  # this process, but started at another time: a reused pid
    assert sessions.info(box.path, "claude", "ghost-1").state == "ended"  # type: ignore[union-attr]
    live.write_text(f"{os.getpid()} {processes.stat(os.getpid()).ticks}\n")  # type: ignore[union-attr]
    assert sessions.info(box.path, "claude", "ghost-1").state == "idle"  # type: ignore[union-attr]
    live.write_text("999999 12345\n")  # a process that does not run
    found = sessions.info(box.path, "claude", "ghost-1")
    assert found is not None and found.state == "ended" and found.end_reason == "its process is gone"


def test_a_session_that_started_before_the_mailbox_is_recorded_when_it_first_acts(api: Path, box: Store) -> None:
    """No hook could record it at its start (there was no mailbox yet, and the quiet path starts no Python): its
    first command, or its first hook run that reaches Python, does, with its process."""
    early, later = Session(api, "early-1"), Session(api, "later-2")
    assert early.gitmail("session", "--name", "early").returncode == 0
    mailbox.send(box, sender="web", to="api", subject="news")
    later("tool")
    listed = {s["session"]: s for s in json.loads(run_gitmail("sessions", "--json", cwd=api).stdout)}
    assert {k: (v["handle"], v["state"]) for k, v in listed.items()} == {
        "early-1": ("early", "idle"),
        "later-2": ("later-2", "live"),
    }


def test_the_view_shows_a_repos_sessions_and_session_addresses(api: Path, worktree: Path, box: Store) -> None:
    from gitmail.web import httpd

    side = Session(worktree, "side-0002")
    side("session-start")
    side.gitmail("session", "--card", "fixing <b>the</b> parser")
    sent = actions.send(box, Actor(RepoName("web")), to="api#brave-otter", subject="for the otter only").entry
    served = httpd.Server(box)
    threading.Thread(target=served.serve_forever, daemon=True).start()
    try:
        pages = {}
        for path in ("/repo/api", f"/thread/{sent.message.id}"):
            connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
            connection.request("GET", path, headers={"Host": served.host, "Cookie": f"{served.cookie}={served.secret}"})
            pages[path] = connection.getresponse().read().decode()
            connection.close()
    finally:
        served.close()
    repo_page = pages["/repo/api"]
    assert "api#brave-otter" in repo_page and "worktree brave-otter" in repo_page and "on otter" in repo_page
    assert "fixing &lt;b&gt;the&lt;/b&gt; parser" in repo_page  # a card is text, never markup
    assert "#brave-otter</span>" in pages[f"/thread/{sent.message.id}"]


def test_a_session_name_is_unique_among_the_repos_live_sessions(api: Path, box: Store) -> None:
    one, two = Session(api, "one-1"), Session(api, "two-2")
    one("session-start")
    two("session-start")
    assert one.gitmail("session", "--name", "lead").returncode == 0
    taken = two.gitmail("session", "--name", "lead")
    assert taken.returncode == 2
    assert taken.stderr == "gitmail: error: the name 'lead' already names \"api#lead\" (claude:one-1): choose another\n"
    assert two.gitmail("session").stdout == "api#two-2\n"
    outside = run_gitmail("session", cwd=api)
    assert outside.returncode == 2 and "not inside a Claude Code or Codex session" in outside.stderr


# -- done --all: only what a session here was shown whole ----------------------------------------------------------


def test_done_all_outside_a_session_archives_only_what_a_session_here_was_shown(api: Path, box: Store) -> None:
    shown = mailbox.send(box, sender="web", to="api", subject="seen by a session")
    Session(api, "s-1")("session-start")
    unseen = mailbox.send(box, sender="web", to="api", subject="arrived later")
    run_gitmail("inbox", "--repo", "api", cwd=api.parent)  # a read outside any session: not a session's showing
    done = run_gitmail("done", "--all", cwd=api)
    assert f"archived {shown.message.id}" in done.stderr and f"left pending {unseen.message.id}" in done.stderr


def test_a_message_shown_only_as_a_summary_is_not_shown_until_read_whole(api: Path, box: Store) -> None:
    long = mailbox.send(box, sender="web", to="api", subject="long", body="x" * 20_000)
    session = Session(api, "s-1")
    assert "too long to show here" in session("session-start")
    assert f"left pending {long.message.id}" in session.gitmail("done", "--all").stderr
    assert session.gitmail("show", long.message.id).returncode == 0  # read whole
    assert f"archived {long.message.id}" in session.gitmail("done", "--all").stderr


def test_a_hash_always_addresses_a_session_though_a_forged_repo_of_that_name_is_known(
    repos: RepoFactory, box: Store
) -> None:
    """`web#fixer` is read one way only: mail a remote forged for a "repo" called `web#fixer` (its refs arrive with
    a sync) makes no such repo known, and the live session stays the one addressed; the send line says so."""
    web = repos("web")
    git("commit", "-q", "--allow-empty", "-m", "start", cwd=web)
    fixer = Session(web, "f1x3r000-aaaa")
    fixer("session-start")
    assert fixer.gitmail("session", "--name", "fixer").returncode == 0
    planted = mailbox.send(box, sender="evil", to="web", subject="carrier")
    forged = f"refs/gitmail/{'web%23fixer'}/inbox/{planted.message.id[:-1]}x"
    subprocess.run(["git", "update-ref", forged, planted.oid], cwd=box.path, check=True)
    api = repos("api")
    sent = run_gitmail("send", "--to", "web#fixer", "-s", "for the fixer", cwd=api)
    assert sent.returncode == 0, sent.stderr
    message_id = sent.stdout.strip()
    assert sent.stderr == f'gitmail: sent {message_id} to the session "web#fixer"\n'
    assert message_id in fixer("tool")
    to_repo = run_gitmail("send", "--to", "web", "-s", "for everyone", cwd=api)
    assert to_repo.stderr == f'gitmail: sent {to_repo.stdout.strip()} to the repository "web"\n'


def test_a_folder_or_chosen_name_holding_a_hash_is_refused_as_a_repository_name(repos: RepoFactory) -> None:
    odd = repos("web#fixer")
    done = run_gitmail("send", "--to", "api", "-s", "hi", cwd=odd)
    assert done.returncode == 2
    assert done.stderr == (
        "gitmail: error: this repository's folder name 'web#fixer' cannot be a mailbox name: it contains '#', which "
        "separates a repository from one of its sessions (name one with --from/--repo)\n"
    )
    git("config", "gitmail.name", "a#b", cwd=repos("plain"))
    assert "gitmail.name 'a#b' cannot be a mailbox name" in run_gitmail("inbox", cwd=repos("plain")).stderr


def test_an_address_splits_at_its_first_hash_and_no_repo_name_holds_one() -> None:
    from gitmail.values.address import Address

    with pytest.raises(UsageError, match="invalid session handle 'lib#s1'"):
        Address.parse("c#lib#s1")
    assert Address.parse("api#s1") == Address(RepoName("api"), "s1")
    with pytest.raises(UsageError, match="it contains '#'"):
        RepoName.parse("c#lib")


def test_mail_to_a_linked_worktrees_folder_name_is_refused_naming_the_repository_and_its_session(
    api: Path, worktree: Path, box: Store
) -> None:
    """A session live in the worktree `brave-otter` of `api`: mail to "brave-otter" would wait for a repository that
    will never exist; it is refused, naming where to send instead, and nothing is written."""
    there = Session(worktree, "0773r000-bbbb")
    there("session-start")
    before = sorted(p.ref for p in box.refs("refs/gitmail/"))
    done = run_gitmail("send", "--from", "web", "--to", "brave-otter", "-s", "for the otter", cwd=api.parent)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        'gitmail: error: "brave-otter" is a worktree of "api", not a repository: send to "api" (every session of '
        'it) or to "api#brave-otter" (the session working there)\n'
    )
    assert sorted(p.ref for p in box.refs("refs/gitmail/")) == before
    reached = run_gitmail("send", "--from", "web", "--to", "api#brave-otter", "-s", "for the otter", cwd=api.parent)
    assert reached.returncode == 0 and reached.stdout.strip() in there("tool")


@pytest.mark.parametrize(("sandboxed", "found"), [(True, None), (False, (1, 77))])
def test_a_sandboxed_command_does_not_take_its_sandbox_for_its_host(
    monkeypatch: pytest.MonkeyPatch, sandboxed: bool, found: tuple[int, int] | None
) -> None:
    """Codex runs a session's commands in a pid namespace of their own, where its sandbox is pid 1: a `gitmail`
    command there that records its session's host would record a process nobody outside can find, and the
    session (and its leases) would be taken for ended. Outside a sandbox, a host at pid 1 (a container's) is one."""
    monkeypatch.setattr(os, "getppid", lambda: 1)
    monkeypatch.setattr(processes, "stat", lambda pid: processes.Stat("codex", "S", 0, 77))
    monkeypatch.setattr(processes, "sandboxed", lambda: sandboxed)
    assert HOST_PROCESS() == found
