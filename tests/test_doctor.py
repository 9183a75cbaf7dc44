"""`gitmail doctor`: one line per finding, each problem with its remedy, exit 1 while there is a problem; and
`--repair`, which fixes what is safe to fix under the lock and deletes no message."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gitmail import mailbox
from gitmail.install.hook_commands import MARK
from gitmail.store import keys, moves
from gitmail.store.claims import load_claims
from gitmail.store.repository import Store
from gitmail.values.layout import DAMAGED
from tests.conftest import CliRunner, RepoFactory, mailbox_snapshot
from tests.damage import fsck, git, keep_loose, lose, lose_object


def key_line(box: Store) -> str:
    own = keys.signer(box, create=False)
    assert own is not None
    return f"ok        keys: signs with ssh-ed25519 {own.fingerprint}: gitmail's own key {own.path}"


def notify_line() -> str:
    """What doctor says of the person's notifications here (tests/test_notify.py tests what each channel says)."""
    from gitmail import notify

    return "ok        notify: " + "; ".join(notify.notify_status())


def healthy_lines(box: Store, web: Path, pending: int = 1, stored: int = 1) -> list[str]:
    return [
        f"gitmail doctor: {box.path}",
        f"ok        mailbox: {box.path}: a bare git repository gitmail made, files ref format, owned by you, mode 700",
        f"ok        messages: {stored} message{'s' if stored != 1 else ''} stored, every one readable",
        key_line(box),
        f'ok        repository: "web" (its folder\'s name) at {web}, {pending} message{"s" if pending != 1 else ""} pending; the name is '
        "recorded for this path",
    ]


def test_a_healthy_mailbox_gets_one_ok_line_per_check(cli: CliRunner, box: Store, web: Path) -> None:
    mailbox.send(box, sender="api", to="web", subject="hello")
    assert cli("inbox", cwd=web).code == 0  # records web's path for its name
    result = cli("doctor", cwd=web)
    assert (result.code, result.err) == (0, "")
    assert result.out == "\n".join([*healthy_lines(box, web), notify_line(), "No problems found.", ""])


def test_no_mailbox_yet_is_healthy_and_nothing_is_created(cli: CliRunner, box: Store, tmp_path: Path) -> None:
    for args in (["doctor"], ["doctor", "--repair"]):
        result = cli(*args, cwd=tmp_path)
        assert result.code == 0, result
        assert result.out == (
            f"gitmail doctor: {box.path}\n"
            f"ok        mailbox: none yet at {box.path}; the first message sent creates it\n"
            "note      repository: not inside a git repository; run `gitmail doctor` in one to check its name and "
            "claim\n"
            f"{notify_line()}\n"
            "No problems found.\n"
        )
    assert not box.path.parent.exists()


def test_every_kind_of_damage_is_one_line_and_repair_fixes_it_deleting_nothing(
    cli: CliRunner, box: Store, web: Path
) -> None:
    kept = mailbox.send(box, sender="api", to="web", subject="kept")
    gone = mailbox.send(box, sender="api", to="web", subject="gone")
    twice = mailbox.send(box, sender="api", to="web", subject="twice")
    mailbox.done(box, repo="web", ids=[twice.message.id])  # a receipt, and an archived message
    mailbox.done(box, repo="web", ids=[kept.message.id])  # the receipts tip this one writes is then pruned
    mailbox.reopen(box, repo="web", message_id=kept.message.id)
    assert cli("inbox", cwd=web).code == 0
    git(box, "update-ref", f"refs/gitmail/web/inbox/{twice.message.id}", twice.oid)  # an interrupted move's leftover
    lost = lose(box, f"refs/gitmail/web/inbox/{gone.message.id}")
    notes_tip = lose(box, "refs/notes/gitmail-receipts", whole=False)
    stale = box.path / "packed-refs.lock"
    stale.write_text("")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    git(box, "config", "gc.auto", "1")

    found = cli("doctor", cwd=web)
    assert (found.code, found.err) == (1, "")
    where = box.path
    assert found.out.splitlines() == [
        f"gitmail doctor: {where}",
        f"ok        mailbox: {where}: a bare git repository gitmail made, files ref format, owned by you, mode 700",
        "problem   settings: the mailbox's git settings differ from gitmail's: gc.auto is 1, gitmail sets 0 -- fix: "
        "gitmail doctor --repair sets them back",
        f"problem   locks: lock files left behind by git processes that are gone: {stale} -- fix: gitmail doctor "
        "--repair removes them",
        f"problem   messages: 1 message ref points at a commit the mailbox no longer has (a `git gc --prune=now` ran "
        f"while it was being written): {gone.message.id} (pending for web) -- fix: gitmail doctor --repair moves "
        "them under refs/gitmail/_damaged/, deleting nothing",
        f"problem   messages: 1 message is in two states at once (a move was interrupted; the later state counts): "
        f"{twice.message.id} (archived for web, also pending) -- fix: gitmail doctor --repair removes the leftover "
        "refs; the messages stay in their later state",
        f"problem   notes: refs/notes/gitmail-receipts points at {notes_tip}, which the mailbox no longer has (a "
        "`git gc --prune=now` ran while it was being written); its notes read as none until the next write -- fix: "
        "gitmail doctor --repair mends it from what is left",
        key_line(box),
        'ok        repository: "web" (its folder\'s name) at '
        + f"{web}, 1 message pending; the name is recorded for this path",
        notify_line(),
        "5 problems found.",
    ]
    assert git(box, "gc", "--quiet", check=False).returncode != 0  # git itself is stuck on the lost commit

    repaired = cli("doctor", "--repair", cwd=web)
    assert (repaired.code, repaired.err) == (0, ""), repaired
    receipts_before = git(box, "rev-parse", "refs/notes/gitmail-receipts").stdout.strip()
    assert repaired.out.splitlines()[:6] == [
        f"gitmail doctor: {where}",
        f"repaired  removed {stale}: left behind by a git process that is gone",
        "repaired  restored gitmail's settings: gc.auto=0",
        f"repaired  set aside {gone.message.id} (pending for web) as {DAMAGED}web/inbox/{gone.message.id}",
        f"repaired  removed refs/gitmail/web/inbox/{twice.message.id}: {twice.message.id} is archived "
        f"(refs/gitmail/web/archive/{twice.message.id})",
        f"repaired  mended refs/notes/gitmail-receipts: {receipts_before} holds every note still whole",
    ]  # found by the record of moves: the mailbox keeps no reflog, so none names the lost commit
    assert repaired.out.splitlines()[-1] == "No problems found."
    # Nothing of the message is deleted: its ref is kept, pointing at a record of what was lost.
    record = git(box, "log", "-1", "--format=%B", f"{DAMAGED}web/inbox/{gone.message.id}").stdout
    assert lost in record and gone.message.id in record
    moved = [m.reason for m in moves.history(box, f"{DAMAGED}web/inbox/{gone.message.id}")]
    assert moved == ["gitmail: doctor set aside what could not be read"]
    assert fsck(box).returncode == 0, fsck(box).stderr
    assert git(box, "gc", "--prune=now", "--quiet", check=False).returncode == 0
    assert {e.message.id for e in mailbox.pending(box, repo="web").directed} == {kept.message.id}
    assert mailbox.show(box, twice.message.id).state.value == "archived"
    again = cli("doctor", cwd=web)
    assert again.code == 0 and "note      messages: 1 message ref set aside as damaged earlier" in again.out


def test_notes_a_prune_took_part_of_are_mended_from_what_is_left(cli: CliRunner, box: Store, web: Path) -> None:
    sent = [mailbox.send(box, sender="api", to="web", subject=f"m{i}") for i in range(3)]
    for entry in sent:
        mailbox.done(box, repo="web", ids=[entry.message.id])  # three receipts commits
    whole = git(box, "rev-parse", "refs/notes/gitmail-receipts~1").stdout.strip()
    lost_note = lose_object(box, f"refs/notes/gitmail-receipts:{sent[2].oid[:2]}/{sent[2].oid[2:]}")
    found = cli("doctor", cwd=web)
    assert found.code == 1
    assert (
        "problem   notes: part of what refs/notes/gitmail-receipts holds is gone (a `git gc --prune=now` ran while "
        "notes were being written); git fsck and git gc fail on it -- fix: gitmail doctor --repair mends it from what "
        "is left"
    ) in found.out.splitlines()
    assert lost_note in fsck(box).stdout
    repaired = cli("doctor", "--repair", cwd=web)
    assert repaired.code == 0, repaired.out
    mended = git(box, "rev-parse", "refs/notes/gitmail-receipts").stdout.strip()
    assert f"repaired  mended refs/notes/gitmail-receipts: {mended} holds every note still whole" in repaired.out
    assert git(box, "log", "-1", "--format=%P %s", mended).stdout == (
        f"{whole} gitmail: refs/notes/gitmail-receipts mended after a prune took part of it (1 notes were lost)\n"
    )
    notes = git(box, "notes", "--ref=gitmail-receipts", "list").stdout.split()
    assert sent[0].oid in notes and sent[1].oid in notes and sent[2].oid not in notes
    assert fsck(box).returncode == 0
    assert git(box, "gc", "--prune=now", "--quiet", check=False).returncode == 0


def test_a_document_that_cannot_be_read_is_set_aside_with_its_commit(cli: CliRunner, box: Store, web: Path) -> None:
    mailbox.send(box, sender="api", to="web", subject="fine")
    blob = subprocess.run(
        ["git", "--git-dir", str(box.path), "hash-object", "-w", "--stdin"],
        input="garbage",
        capture_output=True,
        text=True,
    )
    tree = subprocess.run(
        ["git", "--git-dir", str(box.path), "mktree"],
        input=f"100644 blob {blob.stdout.strip()}\tmessage.md\n",
        capture_output=True,
        text=True,
    ).stdout.strip()
    commit = git(box, "commit-tree", "-m", "not a message", tree).stdout.strip()
    git(box, "update-ref", "refs/gitmail/web/inbox/0000000000", commit)
    found = cli("doctor", cwd=web)
    assert found.code == 1
    assert (
        "problem   messages: 1 message is stored but cannot be read (document missing or damaged): 0000000000 "
        "(pending for web) -- fix: gitmail doctor --repair moves them under refs/gitmail/_damaged/, deleting nothing"
    ) in found.out.splitlines()
    assert cli("doctor", "--repair", cwd=web).code == 0
    assert git(box, "rev-parse", f"{DAMAGED}web/inbox/0000000000").stdout.strip() == commit


def test_a_killed_writers_change_is_a_problem_until_finished_and_a_note_while_a_writer_works(
    cli: CliRunner, box: Store, web: Path
) -> None:
    entry = mailbox.send(box, sender="api", to="web", subject="hello")
    journal = box.own_dir / "journal"
    archive, inbox = f"refs/gitmail/web/archive/{entry.message.id}", f"refs/gitmail/web/inbox/{entry.message.id}"
    journal.write_text(json.dumps([[archive, entry.oid, None], [inbox, None, entry.oid]]))
    import fcntl

    fd = os.open(box.own_dir / "lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        busy = cli("doctor", cwd=web)
    finally:
        os.close(fd)
    assert busy.code == 0 and "note      journal: a gitmail writer is at work on the mailbox now" in busy.out
    found = cli("doctor", cwd=web)
    assert found.code == 1
    assert (
        f"problem   journal: a killed gitmail left a change of 2 refs unfinished ({journal}); the next write finishes "
        "it -- fix: gitmail doctor --repair does it now"
    ) in found.out.splitlines()
    repaired = cli("doctor", "--repair", cwd=web)
    assert repaired.code == 0
    assert "repaired  finished the change a killed writer left" in repaired.out.splitlines()
    assert mailbox.show(box, entry.message.id).state.value == "archived"


def test_a_mailbox_others_can_change_is_reported_and_left_alone(cli: CliRunner, box: Store, web: Path) -> None:
    mailbox.send(box, sender="api", to="web", subject="hello")
    os.chmod(box.path, 0o770)
    before = mailbox_snapshot(box.path)
    for args in (["doctor"], ["doctor", "--repair"]):
        result = cli(*args, cwd=web)
        assert result.code == 1
        assert result.out.splitlines()[1] == (
            f"problem   mailbox: {box.path} can be changed by other users (mode 770); gitmail refuses such a mailbox "
            f"(fix: chmod -R go-rwx {box.path})"
        )
    assert mailbox_snapshot(box.path) == before
    assert stat.S_IMODE(box.path.stat().st_mode) == 0o770


@pytest.mark.parametrize(
    ("reftable", "line"),
    [
        (False, "{path} is a git repository gitmail did not create; point GITMAIL_DIR at a new or empty path"),
        (
            True,
            "mailbox at {path} uses the reftable ref format, which gitmail cannot use; move it away and gitmail will "
            "create a new one",
        ),
    ],
)
def test_a_repository_gitmail_cannot_use_is_reported_and_left_alone(
    cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reftable: bool, line: str
) -> None:
    other = tmp_path / "other.git"
    subprocess.run(["git", "init", "-q", "--bare", str(other)], check=True)
    if reftable:
        with (other / "config").open("a") as config:
            config.write("[extensions]\n\trefstorage = reftable\n")
    monkeypatch.setenv("GITMAIL_DIR", str(other))
    before = mailbox_snapshot(other)
    result = cli("doctor", "--repair", cwd=tmp_path)
    assert result.code == 1
    assert result.out.splitlines()[1] == "problem   mailbox: " + line.format(path=other)
    assert mailbox_snapshot(other) == before


def test_the_name_claimed_by_another_path_and_mail_for_unused_names(
    cli: CliRunner, box: Store, repos: RepoFactory
) -> None:
    first = repos("one/web")
    second = repos("two/web")
    assert cli("send", "--to", "Web", "-s", "misspelt", cwd=first).code == 0
    assert cli("inbox", cwd=first).code == 0
    result = cli("doctor", cwd=second)
    assert result.code == 1
    assert result.out.splitlines()[4:6] == [
        f'problem   repository: "web" (its folder\'s name) at {second}, 0 messages pending; the name was first used by '
        f"{first}, so the two repositories share one mailbox -- fix: rename the folder, or choose a name with "
        "`git config gitmail.name NAME` in the repository",
        'note      repository: mail waits for names no repository on this machine has used yet: "Web" (1) -- a '
        "repository's mailbox name is its folder's (or its gitmail.name); mail to a misspelt one never arrives "
        "(resend it)",
    ]
    # The first repository moves away: the name's record points nowhere, and --repair records the new place.
    first.rename(first.parent / "moved")
    moved = cli("doctor", cwd=second)
    assert moved.code == 1 and f"the name is recorded for {first}, which no longer exists" in moved.out
    repaired = cli("doctor", "--repair", cwd=second)
    assert repaired.code == 0
    assert f'repaired  recorded {second} for the name "web" instead of {first}' in repaired.out.splitlines()
    assert load_claims(box)["web"] == str(second)


def fake_interpreter(path: Path, version: str) -> Path:
    """An interpreter that answers `-m gitmail --version` as an older gitmail would."""
    path.write_text(f"#!/bin/sh\necho 'gitmail {version}'\n")
    path.chmod(0o755)
    return path


def claude_settings(home: Path, *commands: str, plugin: bool = False) -> Path:
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    hooks = [{"type": "command", "command": command, "timeout": 10} for command in commands]
    data: dict[str, object] = {"hooks": {"SessionStart": [{"matcher": "startup", "hooks": hooks}]}}
    if plugin:
        data["enabledPlugins"] = {"gitmail@gitmail": True}
    settings.write_text(json.dumps(data))
    return settings


def test_installed_hooks_are_found_and_their_command_run(
    cli: CliRunner, box: Store, web: Path, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gitmail import __version__

    monkeypatch.setenv("PATH", str(tmp_path / "no-gitmail-here") + os.pathsep + "/usr/bin:/bin")
    current = f"{sys.executable} -m gitmail hook session-start || gitmail hook session-start || true {MARK}"
    settings = claude_settings(home, current)
    (home / ".codex").mkdir()
    result = cli("doctor", cwd=web)
    assert result.code == 0
    assert result.out.splitlines()[-4:] == [
        f"ok        claude: installed in {settings} (start); runs ({sys.executable} -m gitmail: gitmail {__version__})",
        f"note      codex: gitmail's hooks are not installed in {home / '.codex' / 'hooks.json'}: sessions get mail "
        "only from `gitmail inbox` -- gitmail install --codex",
        notify_line(),
        "No problems found.",
    ]

    old = fake_interpreter(tmp_path / "old-python", "0.0.9")
    claude_settings(home, f"{old} -m gitmail hook session-start || true {MARK}")
    result = cli("doctor", cwd=web)
    assert (
        f"note      claude: installed in {settings} (start); runs ({old} -m gitmail: gitmail 0.0.9); this is gitmail "
        f"{__version__} -- gitmail install --claude, from the one you use"
    ) in result.out.splitlines()

    gone = tmp_path / "deleted-venv" / "bin" / "python"
    claude_settings(home, f"{gone} -m gitmail hook session-start || gitmail hook session-start || true {MARK}")
    result = cli("doctor", cwd=web)
    assert result.code == 1
    assert (
        f"problem   claude: installed in {settings} (start); {gone} no longer runs gitmail (reinstall: gitmail "
        "install): sessions get no mail -- fix: gitmail install --claude"
    ) in result.out.splitlines()

    claude_settings(home, current, plugin=True)
    result = cli("doctor", cwd=web)
    assert result.code == 1
    assert (
        f"problem   claude: gitmail is both installed in {settings} and enabled as a plugin: sessions get their mail "
        "twice -- fix: gitmail uninstall --claude, or disable it"
    ) in result.out.splitlines()


def test_json_lists_every_finding_with_everything_it_concerns(cli: CliRunner, box: Store, web: Path) -> None:
    keep_loose(box)
    entries = [mailbox.send(box, sender="api", to="web", subject=f"m{i}") for i in range(12)]
    for entry in entries:
        lose(box, f"refs/gitmail/web/inbox/{entry.message.id}")
    result = cli("doctor", "--json", cwd=web)
    assert result.code == 1
    report = json.loads(result.out)
    assert (report["mailbox"], report["healthy"], report["repaired"]) == (str(box.path), False, [])
    lost = next(f for f in report["findings"] if f["level"] == "problem" and f["topic"] == "messages")
    assert sorted(lost["items"]) == sorted(f"refs/gitmail/web/inbox/{e.message.id}" for e in entries)
    assert lost["text"].endswith("and 2 more")  # the line names the first ten; the items list every one
    assert set(lost) == {"topic", "level", "text", "remedy", "items"}


def test_a_journal_that_is_not_json_is_called_so_and_set_aside_as_such(cli: CliRunner, box: Store, web: Path) -> None:
    mailbox.send(box, sender="api", to="web", subject="hello")
    journal = box.own_dir / "journal"
    journal.write_text("{not json")
    found = cli("doctor", cwd=web)
    assert found.code == 1
    assert (
        f"problem   journal: a killed gitmail left a journal gitmail cannot read ({journal}: not JSON); the change it "
        "was meant to record cannot be finished, and the next write sets it aside -- fix: gitmail doctor --repair "
        "sets it aside now (deleting nothing)"
    ) in found.out.splitlines()
    repaired = cli("doctor", "--repair", cwd=web)
    (kept,) = box.own_dir.glob("journal.set-aside-*")
    assert (
        f"repaired  set aside the change a killed writer left ({kept.name}): it could not be read (not JSON)"
        in repaired.out.splitlines()
    )
    assert kept.read_text() == "{not json"


def test_a_ref_file_holding_garbage_is_reported_and_given_back_its_commit(
    cli: CliRunner, box: Store, web: Path
) -> None:
    kept = mailbox.send(box, sender="api", to="web", subject="kept")
    garbled = mailbox.send(box, sender="api", to="web", subject="garbled")
    ref = f"refs/gitmail/web/inbox/{garbled.message.id}"
    (box.path / ref).write_text("garbage\n")
    assert fsck(box).returncode != 0
    found = cli("doctor", cwd=web)
    assert found.code == 1 and found.err == ""
    assert (
        f'problem   refs: 1 ref file holds no object id, so git skips it and `git fsck` fails: {ref} ("garbage") -- '
        f"fix: gitmail doctor --repair moves it to {box.own_dir / 'damaged-refs'} (deleting nothing) and gives each "
        "ref back the commit its reflog last gave it, or sets it aside"
    ) in found.out.splitlines()
    repaired = cli("doctor", "--repair", cwd=web)
    assert repaired.code == 0, repaired
    assert f"repaired  gave {ref} back {garbled.oid}, the commit its reflog last gave it" in repaired.out
    (aside,) = (box.own_dir / "damaged-refs").rglob(f"{garbled.message.id}.*")
    assert aside.read_text() == "garbage\n"
    assert fsck(box).returncode == 0
    assert cli("doctor", cwd=web).code == 0
    pending = mailbox.pending(box, repo="web").directed
    assert [e.message.id for e in pending] == [kept.message.id, garbled.message.id]


def test_a_garbage_line_in_packed_refs_is_reported_and_left_out(cli: CliRunner, box: Store, web: Path) -> None:
    kept = mailbox.send(box, sender="api", to="web", subject="kept")
    garbled = mailbox.send(box, sender="api", to="web", subject="garbled")
    git(box, "pack-refs", "--all")
    packed = box.path / "packed-refs"
    lines = packed.read_text().splitlines(keepends=True)
    bad = next(i for i, line in enumerate(lines) if garbled.message.id in line)
    garbage = lines[bad] = "zz" + lines[bad][2:]  # its object id garbled
    lines.insert(1, "junk zzz\n")  # and a line that is nothing at all, sorting after every ref
    packed.write_text("".join(lines))
    # Reads go on: every ref git would list is found, through the bisection of the sorted file too.
    assert [e.message.id for e in mailbox.pending(box, repo="web").directed] == [kept.message.id]
    found = cli("doctor", cwd=web)
    assert found.code == 1 and found.err == "", found
    assert (
        f"problem   refs: {packed} has 2 lines that are not a ref, so git stops on them and nothing can be written: "
        f'line 2 ("junk zzz"), line {bad + 2} ("{garbage.strip()}")'
    ) in found.out
    repaired = cli("doctor", "--repair", cwd=web)
    assert repaired.code == 0, repaired
    assert (box.own_dir / "damaged-refs").glob("packed-refs.*")
    assert f"gave refs/gitmail/web/inbox/{garbled.message.id} back {garbled.oid}" in repaired.out
    assert fsck(box).returncode == 0 and cli("doctor", cwd=web).code == 0
    assert cli("send", "--to", "api", "-s", "after", cwd=web).code == 0


def test_a_name_no_path_is_recorded_for_yet_is_said_in_a_whole_sentence(cli: CliRunner, box: Store, web: Path) -> None:
    mailbox.send(box, sender="api", to="web", subject="hello")
    result = cli("doctor", cwd=web)
    assert result.code == 0
    assert (
        f'ok        repository: "web" (its folder\'s name) at {web}, 1 message pending; no path is recorded for the '
        "name yet: the first session start or inbox here records this one"
    ) in result.out.splitlines()
