"""gitmail/hook.sh, the shell in front of every hook: with nothing new for the session it decides with shell
built-ins and starts no Python; a session start that would repeat the last is answered from what that one kept; with
anything new, or anything it cannot tell, Python decides.

"Starts no Python" is proven twice: by tracing every program the hook executes (strace), and with stand-ins for
the interpreter that record each run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gitmail import mailbox
from gitmail.install.hook_commands import hook_script
from gitmail.store import hookfiles
from gitmail.store.claims import claim
from gitmail.store.repository import Store
from gitmail.values.mail import status
from gitmail.values.names import RepoName
from tests.conftest import RepoFactory

SCRIPT = hook_script()
STRACE = shutil.which("strace")


@pytest.fixture
def no_python(tmp_path: Path) -> Recorder:
    return Recorder(tmp_path / "python-was-started")


class Recorder(str):
    """Stands in for the interpreter: a program that only notes it was started (and prints nothing)."""

    def __new__(cls, marker: Path) -> Recorder:
        program = marker.with_name("recorder")
        program.write_text(f"#!/bin/sh\necho \"$@\" >> '{marker}'\ncat >/dev/null\n")
        program.chmod(0o755)
        made = super().__new__(cls, str(program))
        made.marker = marker
        return made

    marker: Path

    def started(self) -> bool:
        found = self.marker.exists()
        self.marker.unlink(missing_ok=True)
        return found


def hook(moment: str, cwd: Path, *, host: str = "claude", python: str = sys.executable, session: str = "s-1") -> str:
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    if host == "claude":
        env["CLAUDE_CODE_SESSION_ID"] = session
    event = {"session-start": "SessionStart", "tool": "PostToolUse"}[moment]
    payload = json.dumps({"session_id": session, "cwd": str(cwd), "transcript_path": "/t", "hook_event_name": event})
    args = ["sh", str(SCRIPT), moment, host, python, *(["--watch"] if moment == "session-start" else [])]
    done = subprocess.run(args, cwd=cwd, input=payload, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("host", ["claude", "codex"])
def test_a_tool_call_with_nothing_new_starts_no_python(web: Path, box: Store, host: str, no_python: Recorder) -> None:
    sent = mailbox.send(box, sender="api", to="web", subject="hello")
    assert sent.message.id in hook("session-start", web, host=host)
    assert hook("tool", web, host=host, python=no_python) == "" and not no_python.started()
    news = mailbox.send(box, sender="api", to="web", subject="news")
    hook("tool", web, host=host, python=no_python)
    assert no_python.started()
    assert news.message.id in hook("tool", web, host=host)
    assert hook("tool", web, host=host, python=no_python) == "" and not no_python.started()


def test_a_session_start_that_repeats_the_last_is_answered_without_python(
    web: Path, box: Store, no_python: Recorder
) -> None:
    sent = mailbox.send(box, sender="api", to="web", subject="hello")
    first = hook("session-start", web, session="one")
    assert sent.message.id in first
    assert hook("session-start", web, session="two", python=no_python) == first and not no_python.started()
    hook("tool", web, session="two", python=no_python)  # the kept answer left the session's record
    assert not no_python.started()
    record = json.loads((box.own_dir / "sessions" / "claude-two.json").read_text())
    assert record["known"] == record["shown"] == [sent.message.id]


@pytest.mark.parametrize(
    "change",
    [
        lambda box: mailbox.send(box, sender="api", to="web", subject="another"),
        lambda box: mailbox.done(box, repo="web", ids=[mailbox.pending(box, repo="web").directed[0].message.id]),
        lambda box: mailbox.broadcast(box, sender="db", subject="everyone"),
        lambda box: claim(box, repo=RepoName("api"), path=box.path.parent.parent),
    ],
)
def test_any_change_to_what_a_start_shows_makes_python_answer_again(
    web: Path, box: Store, change: object, no_python: Recorder
) -> None:
    mailbox.send(box, sender="api", to="web", subject="hello")
    hook("session-start", web, session="one")
    hook("session-start", web, session="two", python=no_python)
    assert not no_python.started()
    change(box)  # type: ignore[operator]
    hook("session-start", web, session="three", python=no_python)
    assert no_python.started()


def test_a_repository_that_chooses_another_name_is_answered_under_it_by_the_next_start(
    web: Path, box: Store, no_python: Recorder
) -> None:
    mailbox.send(box, sender="api", to="web", subject="for web")
    hook("session-start", web, session="one")
    hook("session-start", web, session="two", python=no_python)
    assert not no_python.started()  # the answer is kept
    time.sleep(0.01)  # the config's modification time comes after the kept key's
    subprocess.run(["git", "config", "gitmail.name", "frontend"], cwd=web, check=True)
    renamed = mailbox.send(box, sender="api", to="frontend", subject="for frontend")
    assert renamed.message.id in hook("session-start", web, session="three")
    assert renamed.message.id in hook("session-start", web, session="four")  # kept again, under the new name


def test_a_start_that_hands_over_a_broadcast_is_not_kept(web: Path, box: Store, no_python: Recorder) -> None:
    cast = mailbox.broadcast(box, sender="api", subject="everyone")
    assert cast.message.id in hook("session-start", web, session="one")
    hook("session-start", web, session="two", python=no_python)
    assert no_python.started()
    assert cast.message.id not in hook("session-start", web, session="three")  # handed over once


def synced(box: Store) -> None:
    """Wait until the background sync a session start began has finished (its lock is free and it succeeded)."""
    import fcntl

    from gitmail.sync import quick

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if quick.Record.load(box.path, "origin").last_success is not None:
            fd = os.open(box.own_dir / "sync" / "lock", os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            finally:
                os.close(fd)
        time.sleep(0.05)
    raise AssertionError("the background sync did not finish")


def test_with_a_remote_that_syncs_by_itself_a_kept_start_holds_until_a_sync_is_due(
    web: Path, box: Store, no_python: Recorder, tmp_path: Path
) -> None:
    from gitmail.sync import remotes

    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    sent = mailbox.send(box, sender="api", to="web", subject="hello")
    first = hook("session-start", web, session="one")
    hook("session-start", web, session="two", python=no_python)
    assert not no_python.started()
    remotes.add_remote(box, name="origin", url=str(remote), auto=True, interval=3600)
    hook("session-start", web, session="three", python=no_python)
    assert no_python.started()  # a remote was added: a session start may have a sync to start
    assert hook("session-start", web, session="four") == first  # Python: starts the due sync, keeps the answer
    synced(box)
    attempt = box.own_dir / "sync" / "last-attempt"
    started = attempt.stat().st_mtime
    assert hook("session-start", web, session="five", python=no_python) == first and not no_python.started()
    os.utime(attempt, (started - 3601, started - 3601))  # an hour later, as far as the sync is concerned
    assert time.time() + 3500 < (kept_due(web)).stat().st_mtime <= started + 3600
    os.utime(kept_due(web), (started - 1, started - 1))
    hook("session-start", web, session="six", python=no_python)
    assert no_python.started()  # the sync is due: Python starts it
    assert sent.message.id in hook("session-start", web, session="seven")
    synced(box)
    assert attempt.stat().st_mtime > started - 3601  # and it did
    remotes.change_remote(box, "origin", auto=False)
    hook("session-start", web, session="eight")
    assert not (kept_due(web)).exists()
    hook("session-start", web, session="nine", python=no_python)
    assert not no_python.started()


def test_a_repository_with_no_mail_starts_without_python_after_the_first_start(
    web: Path, box: Store, no_python: Recorder
) -> None:
    mailbox.send(box, sender="api", to="docs", subject="not for web")
    assert hook("session-start", web, session="one") != ""  # only the watched paths
    watched = json.loads(hook("session-start", web, session="two", python=no_python))
    assert set(watched["hookSpecificOutput"]) == {"hookEventName", "watchPaths"} and not no_python.started()


def test_a_repository_holding_a_gitmail_package_of_its_own_cannot_take_over_the_hook(web: Path, box: Store) -> None:
    sent = mailbox.send(box, sender="api", to="web", subject="hello")
    planted = web / "gitmail"
    planted.mkdir()
    (planted / "__init__.py").write_text(f"open({str(web / 'taken-over')!r}, 'w').close()\n")
    (planted / "hooks.py").write_text("def main(argv): return 0\n")
    assert sent.message.id in hook("session-start", web)
    assert hook("tool", web) == "" and not (web / "taken-over").exists()


def kept_due(web: Path) -> Path:
    """Where a kept session-start answer of this work tree says when a sync is next due."""
    tree = hookfiles.tree_name(str(web))
    assert tree is not None
    return Path(hookfiles.kept(Store().path, "claude", tree).due)


# -- the quiet path inside a running session ----------------------------------------------------------------------

# How hook.sh starts Python: never importing a `gitmail` from the session's own directory.
PYTHON_RUN = "-P -c import sys; from gitmail.hooks import main; sys.exit(main(sys.argv[1:]))"


class Hooks:
    """The hooks of one session as a host runs them: in the session's directory, the payload on stdin (the
    session first, as both hosts send it), and for Claude Code the session in the environment too."""

    def __init__(self, repo: Path, host: str, session: str, python: str = sys.executable, **extra: str) -> None:
        self.repo, self.host, self.session, self.python, self.extra = repo, host, session, python, extra

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "CLAUDE_CODE_SESSION_ID"} | self.extra
        return {**env, "CLAUDE_CODE_SESSION_ID": self.session} if self.host == "claude" else env

    def payload(self, event: str) -> bytes:
        fields = {"session_id": self.session, "cwd": str(self.repo), "hook_event_name": event}
        return json.dumps({**fields, "tool_response": "x" * 4096}, separators=(",", ":")).encode()

    def start(self) -> None:
        argv = [sys.executable, "-m", "gitmail", "hook", "session-start", "--host", self.host]
        subprocess.run(argv, input=self.payload("SessionStart"), cwd=self.repo, env=self.env(), check=True)

    def run(self, moment: str, event: str = "PostToolUse") -> subprocess.CompletedProcess[bytes]:
        argv = ["sh", str(SCRIPT), moment, self.host, self.python]
        return subprocess.run(argv, input=self.payload(event), cwd=self.repo, env=self.env(), capture_output=True)

    def executed(self, moment: str, tmp_path: Path) -> list[str]:
        """The programs this run executed, in order (the shell itself first)."""
        assert STRACE is not None
        log = tmp_path / "execve.log"
        trace = [STRACE, "-f", "-qq", "-z", "-e", "trace=execve", "-e", "signal=none", "-o", str(log)]  # -z: done
        argv = [*trace, "sh", str(SCRIPT), moment, self.host, self.python]
        subprocess.run(argv, input=self.payload("PostToolUse"), cwd=self.repo, env=self.env(), capture_output=True)
        lines = [line for line in log.read_text().splitlines() if 'execve("' in line]
        return [Path(line.split('execve("', 1)[1].split('"', 1)[0]).name for line in lines]


@pytest.fixture
def recorder(tmp_path: Path) -> Path:
    """A stand-in for the interpreter that records each run, then runs the real one."""
    script = tmp_path / "python-recorder"
    script.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/python-runs\nexec {sys.executable} "$@"\n')
    script.chmod(0o755)
    return script


def runs(tmp_path: Path) -> list[str]:
    record = tmp_path / "python-runs"
    return record.read_text().splitlines() if record.exists() else []


@pytest.mark.parametrize(("host", "programs"), [("claude", ["sh"]), ("codex", ["sh", "dd"])])
@pytest.mark.skipif(STRACE is None, reason="strace is not installed")
def test_nothing_new_starts_no_python(
    repos: RepoFactory, box: Store, tmp_path: Path, host: str, programs: list[str]
) -> None:
    web = repos("web")
    mailbox.send(box, sender="api", to="web", subject="known")
    hooks = Hooks(web, host, "s1")
    hooks.start()
    for moment in ("tool", "prompt", "tool", "stop"):
        assert hooks.executed(moment, tmp_path) == programs, moment  # Codex's session: 512 bytes read by dd
    mailbox.send(box, sender="api", to="web", subject="new")
    assert Path(sys.executable).name in hooks.executed("tool", tmp_path)  # the trace would see Python run


def test_the_interpreter_runs_only_when_something_may_be_new(
    repos: RepoFactory, box: Store, tmp_path: Path, recorder: Path
) -> None:
    web = repos("web")
    mailbox.send(box, sender="api", to="web", subject="known")
    hooks = Hooks(web, "codex", "s2", python=str(recorder))
    hooks.start()
    quiet = hooks.run("tool")
    assert (quiet.returncode, quiet.stdout, quiet.stderr, runs(tmp_path)) == (0, b"", b"", [])
    mailbox.send(box, sender="api", to="web", subject="while working")
    news = hooks.run("tool")
    context = json.loads(news.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "while working" in context and "known" not in context
    assert runs(tmp_path) == [PYTHON_RUN + " tool --host codex"]
    assert hooks.run("tool").stdout == b"" and len(runs(tmp_path)) == 1  # told once; quiet again
    mailbox.send(box, sender="docs", to="api", subject="for another repository")
    assert hooks.run("tool").stdout == b"" and len(runs(tmp_path)) == 1  # its stamp is not web's


@pytest.mark.parametrize("name", ["my.app", "web_2-x", "café"])  # café: in a folder spelt beyond ASCII too
def test_names_gitmail_encodes_are_read_without_python(
    repos: RepoFactory, box: Store, tmp_path: Path, recorder: Path, name: str
) -> None:
    repo = repos(name)
    mailbox.send(box, sender="api", to=name, subject="known")
    hooks = Hooks(repo, "claude", "s3", python=str(recorder))
    hooks.start()
    assert hooks.run("tool").stdout == b"" and runs(tmp_path) == []


@pytest.mark.parametrize("case", ["no session id", "session id not first", "a relative GITMAIL_DIR"])
def test_whatever_it_cannot_tell_python_decides(
    repos: RepoFactory, box: Store, tmp_path: Path, recorder: Path, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = repos("web")
    mailbox.send(box, sender="api", to=repo.name, subject="known")
    hooks = Hooks(repo, "codex", "s4", python=str(recorder))
    hooks.start()
    env = hooks.env()
    payload = {"session_id": "s4", "cwd": str(repo), "hook_event_name": "PostToolUse"}
    if case == "no session id":
        del payload["session_id"]
    if case == "session id not first":
        payload = {"cwd": str(repo), "tool_response": "x" * 600, "session_id": "s4"}
    if case == "a relative GITMAIL_DIR":
        env["GITMAIL_DIR"] = "relative/mail.git"
    argv = ["sh", str(SCRIPT), "tool", "codex", str(recorder)]
    done = subprocess.run(argv, input=json.dumps(payload).encode(), cwd=repo, env=env, capture_output=True)
    assert done.returncode == 0 and runs(tmp_path) == [PYTHON_RUN + " tool --host codex"]


def test_a_wake_during_a_turn_wakes_nothing_and_the_turns_end_brings_the_mail(
    repos: RepoFactory, box: Store, tmp_path: Path, recorder: Path
) -> None:
    web = repos("web")
    mailbox.send(box, sender="docs", to="api", subject="a mailbox exists")
    hooks = Hooks(web, "claude", "s5", python=str(recorder))
    hooks.start()
    hooks.run("prompt", "UserPromptSubmit")  # the turn begins; nothing new, so no Python: hook.sh notes the moment
    assert runs(tmp_path) == []
    mailbox.send(box, sender="api", to="web", subject="mid-turn")
    wake = hooks.run("wake", "FileChanged")
    assert (wake.returncode, wake.stderr) == (0, b"")  # Python sees the session in its turn: no wake
    stop = json.loads(hooks.run("stop", "Stop").stdout)["hookSpecificOutput"]
    assert "mid-turn" in stop["additionalContext"]  # the turn goes on once, with the mail itself
    mailbox.send(box, sender="api", to="web", subject="while idle")
    wake = hooks.run("wake", "FileChanged")
    assert wake.returncode == 2 and b"1 new message" in wake.stderr  # idle now: woken with gitmail's notice


def test_without_an_interpreter_to_run_it_says_nothing(repos: RepoFactory, box: Store) -> None:
    web = repos("web")
    mailbox.send(box, sender="api", to="web", subject="pending")
    for argv in (["sh", str(SCRIPT), "tool", "claude"], ["sh", str(SCRIPT)]):
        done = subprocess.run(argv, input=b"{}", cwd=web, capture_output=True)
        assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


@pytest.mark.skipif(STRACE is None, reason="strace is not installed")
def test_the_plugins_quiet_path_starts_no_python_either(repos: RepoFactory, box: Store, tmp_path: Path) -> None:
    web = repos("web")
    mailbox.send(box, sender="api", to="web", subject="known")
    Hooks(web, "claude", "s6").start()
    plugin = Path(__file__).resolve().parent.parent
    env = {**os.environ, "CLAUDE_CODE_SESSION_ID": "s6", "CLAUDE_PLUGIN_ROOT": str(plugin)}
    env["GITMAIL_PLUGIN_VENV"] = str(Path(sys.executable).parent.parent)  # the plugin's own environment, made
    log = tmp_path / "execve.log"
    trace = [str(STRACE), "-f", "-qq", "-z", "-e", "trace=execve", "-e", "signal=none", "-o", str(log)]
    done = subprocess.run([*trace, str(plugin / "hooks" / "run"), "tool"], input=b"{}", cwd=web, env=env)
    assert done.returncode == 0
    executed = [line.split('execve("', 1)[1].split('"', 1)[0] for line in log.read_text().splitlines()]
    assert [Path(p).name for p in executed] == ["run", "sh"], executed


def test_wakes_follow_the_limit_window_and_kill_switch_in_the_mailbox_config(repos: RepoFactory, box: Store) -> None:
    web = repos("web")
    mailbox.send(box, sender="docs", to="api", subject="a mailbox exists")
    hooks = Hooks(web, "claude", "s7")
    hooks.start()

    def configure(key: str, value: str) -> None:
        subprocess.run(["git", "config", "--file", str(box.path / "config"), key, value], check=True)

    def wake_after_a_send(subject: str) -> int:
        mailbox.send(box, sender="api", to="web", subject=subject)
        return hooks.run("wake", "FileChanged").returncode

    configure("gitmail.wakeLimit", "1")
    assert wake_after_a_send("one") == 2
    assert wake_after_a_send("two") == 0  # one wake per window (300 s)
    configure("gitmail.wakeWindow", "0")
    assert wake_after_a_send("three") == 2  # the last wake is outside a window of no length
    configure("gitmail.wake", "false")
    assert wake_after_a_send("four") == 0
    configure("gitmail.wake", "true")
    assert wake_after_a_send("five") == 2
    hooks = Hooks(web, "claude", "s7", GITMAIL_WAKE="0")  # the same session, the switch in its environment
    assert wake_after_a_send("six") == 0


# -- answers made when mail changes ---------------------------------------------------------------------------------


def kept_is_fresh(box: Store, web: Path) -> bool:
    """Whether the answer kept for web's work tree was made at web's current stamps."""
    from gitmail.store import stamps

    tree = hookfiles.tree_name(str(web))
    assert tree is not None
    try:
        key = Path(hookfiles.kept(box.path, "claude", tree).key).read_text().split("\n", 1)[0]
    except OSError:
        return False
    return key.startswith(stamps.read(box.path, RepoName("web")) + ":")


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_new_mail_is_answered_at_the_next_start_without_python_and_its_receipt_written_after(
    web: Path, api: Path, box: Store, no_python: Recorder
) -> None:
    from tests.conftest import run_gitmail

    box.create()
    hook("session-start", web, session="one")  # a session started here before: its answer is kept
    sent = run_gitmail("send", "--to", "web", "-s", "news", "-m", "hello", cwd=api).stdout.strip()
    wait_until(lambda: kept_is_fresh(box, web), "the answer to be made again")
    answered = hook("session-start", web, session="two", python=no_python)
    assert sent in answered
    # the receipts are written by a detached process: it may start only after the answer
    wait_until(lambda: no_python.marker.exists() and no_python.marker.read_text().endswith("\n"), "the recorder")
    runs = no_python.marker.read_text().splitlines()
    assert runs and all(" record claude " in f" {run} " for run in runs)  # only the receipts, after the answer
    no_python.marker.unlink()
    assert hook("session-start", web, session="three") == answered  # the same, with the real Python recording

    def delivered() -> bool:
        return status(mailbox.show(box, sent)).name == "delivered"

    wait_until(delivered, "the first showing's receipt")


@pytest.mark.parametrize("host", ["claude", "codex"])
def test_a_start_never_shows_less_than_was_written_before_it_began(web: Path, api: Path, box: Store, host: str) -> None:
    """Writers and starts interleaved: every start's answer holds every message whose send returned before it began,
    whether the kept answer or Python gave it."""
    from tests.conftest import run_gitmail

    box.create()
    hook("session-start", web, host=host, session="first")
    written: list[tuple[float, str]] = []

    def write() -> None:
        for number in range(12):
            done = run_gitmail("send", "--to", "web", "-s", f"n{number}", "-m", "x", cwd=api)
            written.append((time.monotonic(), done.stdout.strip()))

    writer = threading.Thread(target=write)
    writer.start()
    starts = []
    number = 0
    while writer.is_alive() or number < 3:
        began = time.monotonic()
        starts.append((began, hook("session-start", web, host=host, session=f"start-{number}")))
        number += 1
    writer.join()
    assert len(written) == 12 and len(starts) > 3
    for began, answer in starts:
        missing = [m for at, m in written if at < began and m not in answer]
        assert not missing, (missing, answer[:200])


def test_an_answer_made_from_older_mail_never_replaces_one_made_from_newer(web: Path, api: Path, box: Store) -> None:
    """Two writers of one work tree's answer finishing out of order (the one that read the mail first, last): it
    writes nothing, so a start that read the newer key never prints the older answer beside it."""
    from gitmail.store import stamps, startcache
    from tests.conftest import run_gitmail

    box.create()
    hook("session-start", web, session="one")
    older = startcache.key(box.path, stamps.read(box.path, RepoName("web")), watch=False)
    sent = run_gitmail("send", "--to", "web", "-s", "news", "-m", "hello", cwd=api).stdout.strip()
    wait_until(lambda: kept_is_fresh(box, web), "the answer to be made again")
    tree = hookfiles.tree_name(str(web))
    assert tree is not None
    files = hookfiles.kept(box.path, "claude", tree)
    before = (Path(files.key).read_bytes(), Path(files.answer).read_bytes())
    startcache.keep(box.path, "claude", web, key=older, record={}, answer={"made": "from the older mail"})
    assert (Path(files.key).read_bytes(), Path(files.answer).read_bytes()) == before
    assert sent in hook("session-start", web, session="two")


def test_a_kept_answer_never_shows_a_session_its_own_mail(web: Path, box: Store) -> None:
    from tests.conftest import run_gitmail

    box.create()
    hook("session-start", web, session="writer")
    sent = run_gitmail("send", "--to", "web", "-s", "to my siblings", cwd=web, env={"CLAUDE_CODE_SESSION_ID": "writer"})
    assert sent.returncode == 0
    wait_until(lambda: kept_is_fresh(box, web), "the answer to be made again")
    assert sent.stdout.strip() not in hook("session-start", web, session="writer")  # resumed: its record, Python
    assert sent.stdout.strip() in hook("session-start", web, session="sibling")


def test_a_sync_that_brings_mail_answers_first_and_no_kept_answer_from_before_is_served(
    web: Path, box: Store, no_python: Recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gitmail.cli import sync
    from gitmail.sync import engine, remotes
    from tests.syncing import bare_remote, machine, sync_now

    remote = bare_remote(tmp_path / "remote.git")
    box.create()
    remotes.add_remote(box, name="origin", url=str(remote))
    hook("session-start", web, session="one")  # a session started here before: its answer is kept
    assert kept_is_fresh(box, web)
    laptop = machine(tmp_path / "elsewhere", "laptop", str(remote))
    sent = mailbox.send(laptop, sender="api", to="web", subject="from the laptop").message.id
    sync_now(laptop)
    later: list[Store] = []
    settle_later = engine.settle_later
    monkeypatch.setattr(engine, "settle_later", later.append)  # the answer is printed; the child not yet started
    assert sync.run("origin") == 0
    assert later and engine._AFTER  # what follows the sync waits for the child
    assert not kept_is_fresh(box, web)  # the stamps moved with the mail, before the answer: nothing kept is served
    assert sent in hook("session-start", web, session="two")  # Python answers, with the new mail
    settle_later(later[0])
    wait_until(lambda: kept_is_fresh(box, web), "the answer to be made again")
    assert sent in hook("session-start", web, session="three", python=no_python)
