"""Hermetic tests: every test gets its own HOME, git config and mailbox. Outside a test's own fixture HOME points
at a plain file, so anything that reaches for a home directory without isolation fails loudly."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gitmail.store import processes, sessions
from gitmail.store.repository import Store

REAL_HOME = Path(os.path.expanduser("~"))
WHEN = datetime(2026, 11, 29, 9, 30, tzinfo=UTC)


def at(minutes: int) -> datetime:
    """A pinned time, `minutes` after WHEN."""
    return WHEN + timedelta(minutes=minutes)


@pytest.fixture(autouse=True, scope="session")
def poisoned_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    poison = tmp_path_factory.mktemp("poison") / "not-a-home"
    poison.write_text("a test used HOME without isolation\n")
    before = _fingerprint(REAL_HOME / ".gitmail")
    saved = {k: os.environ.get(k) for k in ("HOME", "GITMAIL_DIR", "XDG_CONFIG_HOME")}
    os.environ["HOME"] = str(poison)
    os.environ.pop("GITMAIL_DIR", None)
    os.environ["XDG_CONFIG_HOME"] = str(poison)
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    assert _fingerprint(REAL_HOME / ".gitmail") == before, "a test wrote to the real ~/.gitmail"


def _fingerprint(path: Path) -> object:
    return path.stat().st_mtime_ns if path.exists() else None


@pytest.fixture(autouse=True, scope="session")
def host_stand_in() -> None:
    """The test process stands in for the host program of the sessions it drives, named as Claude Code's is: a
    session counts as live only while a host program of this user runs (store/sessions.py), and the commands and
    hook scripts a test starts find it as their host, as they would find the host that started them."""
    comm = Path("/proc/self/comm")
    if comm.exists():
        comm.write_text("claude")


@pytest.fixture(autouse=True)
def hooks_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hooks a test runs in this process are run by it, the host's stand-in (a hook's host is its parent's)."""
    found = processes.stat(os.getpid())
    if found is not None:
        monkeypatch.setattr(sessions, "host_process", lambda: (os.getpid(), found.ticks))


@pytest.fixture(autouse=True)
def hermetic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Tester")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "tester@example.com")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Tester")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "tester@example.com")
    monkeypatch.delenv("GITMAIL_DIR", raising=False)
    # DBUS_SESSION_BUS_ADDRESS: mail to the person would raise a notification on the desktop running the tests.
    for variable in ("GIT_DIR", "GIT_WORK_TREE", "CLAUDE_PROJECT_DIR", "DBUS_SESSION_BUS_ADDRESS"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)
    return home


@pytest.fixture
def home(hermetic: Path) -> Path:
    return hermetic


@pytest.fixture
def box(home: Path) -> Store:
    """The default mailbox of the test's HOME (not created yet)."""
    return Store()


@pytest.fixture
def repos(tmp_path: Path) -> RepoFactory:
    return RepoFactory(tmp_path / "work")


@pytest.fixture
def api(repos: RepoFactory) -> Path:
    """A git repository named api (a session's repository)."""
    return repos("api")


@pytest.fixture
def web(repos: RepoFactory) -> Path:
    """A git repository named web."""
    return repos("web")


class RepoFactory:
    """Real git repositories (work trees) to act from."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __call__(self, name: str) -> Path:
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(path)], check=True)
        return path


def run_gitmail(
    *args: str, cwd: Path, stdin: bytes | str | None = None, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """The installed program, as a user or a host runs it: a separate process, with the virtualenv's commands on
    PATH as when it is active."""
    data = stdin.encode() if isinstance(stdin, str) else stdin
    env = {"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""), **(env or {})}
    done = subprocess.run(
        [sys.executable, "-m", "gitmail", *args],
        cwd=cwd,
        input=data if data is not None else b"",
        capture_output=True,
        env={**os.environ, **env},
        timeout=timeout,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    )


class Result:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    def __repr__(self) -> str:
        return f"Result(code={self.code}, out={self.out!r}, err={self.err!r})"


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    return CliRunner(capsys, monkeypatch)


class CliRunner:
    """Runs `gitmail.cli.main` in-process: the same argument parsing and error policy as the installed command."""

    def __init__(self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        self.capsys, self.monkeypatch = capsys, monkeypatch

    def __call__(self, *args: str, cwd: Path | None = None, stdin: bytes | None = None) -> Result:
        from gitmail.cli.app import main

        if cwd is not None:
            self.monkeypatch.chdir(cwd)
        self.monkeypatch.setattr(sys, "stdin", _Stdin(stdin))
        self.capsys.readouterr()
        code = main(list(args))
        captured = self.capsys.readouterr()
        return Result(code, captured.out, captured.err)


class _Stdin(io.TextIOWrapper):
    def __init__(self, data: bytes | None) -> None:
        super().__init__(io.BytesIO(data or b""), encoding="utf-8")
        self._tty = data is None

    def isatty(self) -> bool:
        return self._tty


def mailbox_snapshot(path: Path) -> dict[str, bytes]:
    """Every file of a mailbox with its content: to prove a refused command changed nothing."""
    if not path.exists():
        return {}
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file() and p.name != "lock"
    }


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`-n 2`), the real-host tests and the multi-process stress tests run one after another on
    one worker: they time wakes and kill processes at random, and must not compete with each other for the cores."""
    for item in items:
        if item.get_closest_marker("hosts") or item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.xdist_group("serial"))
