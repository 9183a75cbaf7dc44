"""hook.sh, the quiet path of the moments inside a running session: with nothing new for the session it decides with
shell built-ins and starts no Python; with anything new, or anything it cannot tell, Python decides.

"Starts no Python" is proven twice: by tracing every program the hook executes (strace), and with a stand-in for
the interpreter that records each run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gitmail import mailbox
from gitmail.install.hook_commands import hook_script
from gitmail.store.repository import Store
from tests.conftest import RepoFactory

SCRIPT = str(hook_script())
STRACE = shutil.which("strace")

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
        argv = ["sh", SCRIPT, moment, self.host, self.python]
        return subprocess.run(argv, input=self.payload(event), cwd=self.repo, env=self.env(), capture_output=True)

    def executed(self, moment: str, tmp_path: Path) -> list[str]:
        """The programs this run executed, in order (the shell itself first)."""
        assert STRACE is not None
        log = tmp_path / "execve.log"
        trace = [STRACE, "-f", "-qq", "-z", "-e", "trace=execve", "-e", "signal=none", "-o", str(log)]  # -z: done
        argv = [*trace, "sh", SCRIPT, moment, self.host, self.python]
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
    argv = ["sh", SCRIPT, "tool", "codex", str(recorder)]
    done = subprocess.run(argv, input=json.dumps(payload).encode(), cwd=repo, env=env, capture_output=True)
    assert done.returncode == 0 and runs(tmp_path) == [PYTHON_RUN + " tool --host codex"]


def test_a_wake_during_a_turn_starts_nothing_and_the_turns_end_brings_the_mail(
    repos: RepoFactory, box: Store, tmp_path: Path, recorder: Path
) -> None:
    web = repos("web")
    mailbox.send(box, sender="docs", to="api", subject="a mailbox exists")
    hooks = Hooks(web, "claude", "s5", python=str(recorder))
    hooks.start()
    hooks.run("prompt", "UserPromptSubmit")  # the turn begins; nothing new, so no Python to note it
    mailbox.send(box, sender="api", to="web", subject="mid-turn")
    wake = hooks.run("wake", "FileChanged")
    assert (wake.returncode, wake.stderr, runs(tmp_path)) == (0, b"", [])  # busy: no wake, no Python
    stop = json.loads(hooks.run("stop", "Stop").stdout)["hookSpecificOutput"]
    assert "mid-turn" in stop["additionalContext"]  # the turn goes on once, with the mail itself
    mailbox.send(box, sender="api", to="web", subject="while idle")
    wake = hooks.run("wake", "FileChanged")
    assert wake.returncode == 2 and b"1 new message" in wake.stderr  # idle now: woken with gitmail's notice


def test_without_an_interpreter_to_run_it_says_nothing(repos: RepoFactory, box: Store) -> None:
    web = repos("web")
    mailbox.send(box, sender="api", to="web", subject="pending")
    for argv in (["sh", SCRIPT, "tool", "claude"], ["sh", SCRIPT]):
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
