"""Session liveness and the Codex waker against what others may plant: a session record and `.live` file naming
processes a hook never recorded, a zombie, pid 1, another user's host program. The processes are real, started
here."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gitmail.store import hookfiles, processes, sessions
from gitmail.store.repository import Store
from tests.conftest import RepoFactory
from tests.hooked import Session as Hooked

NOBODY = 65534


def root_only() -> None:
    if os.geteuid() != 0:
        pytest.skip("starting another user's processes needs root")


# -- 4. processes that are no host ----------------------------------------------------------------------------------


def named(tmp_path: Path, name: str, program: str) -> Path:
    """A program called `name` (a link: the process's command name is the name it was started by)."""
    link = tmp_path / "bin" / name
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(shutil.which(program) or f"/bin/{program}")
    return link


@pytest.fixture
def planted(repos: RepoFactory, box: Store) -> Callable[[int], str]:
    """A Claude Code session whose `.live` names this process (its pid and start); its state, as listed."""
    box.create()
    session = Hooked(repos("api"), "ghost-1")
    session("session-start")

    def state(pid: int) -> str:
        found = processes.stat(pid)
        assert found is not None
        hookfiles.session_files(box.path, "claude-ghost-1").live.write_text(f"{pid} {found.ticks}\n")
        info = sessions.info(box.path, "claude", "ghost-1")
        assert info is not None
        return info.state

    return state


def test_a_zombie_host_is_no_live_session(tmp_path: Path, planted: Callable[[int], str]) -> None:
    exited = subprocess.Popen([str(named(tmp_path, "claude", "true"))])
    try:
        deadline = time.monotonic() + 10
        while (found := processes.stat(exited.pid)) is None or found.state != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert planted(exited.pid) == "ended"
    finally:
        exited.wait()


def test_a_live_file_naming_a_process_that_is_no_host_of_ours_is_no_live_session(
    tmp_path: Path, planted: Callable[[int], str]
) -> None:
    assert planted(1) == "ended"  # forged: pid 1 runs as long as the machine
    sleeper = subprocess.Popen([str(named(tmp_path, "sleep", "sleep")), "30"])
    host = subprocess.Popen([str(named(tmp_path, "claude", "sleep")), "30"])
    try:
        assert planted(sleeper.pid) == "ended"
        assert planted(host.pid) == "idle"
    finally:
        for process in (sleeper, host):
            process.kill()
            process.wait()


def test_another_users_host_program_is_no_live_session_of_ours(tmp_path: Path, planted: Callable[[int], str]) -> None:
    root_only()
    folder = Path(tempfile.mkdtemp(prefix="gitmail-host-", dir="/tmp"))
    folder.chmod(0o755)
    (folder / "claude").symlink_to(shutil.which("sleep") or "/bin/sleep")
    theirs = subprocess.Popen([str(folder / "claude"), "30"], user=NOBODY, group=NOBODY, extra_groups=[])
    try:
        deadline = time.monotonic() + 10
        while (found := processes.stat(theirs.pid)) is None or found.comm != "claude":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert planted(theirs.pid) == "ended"
    finally:
        theirs.kill()
        theirs.wait()
        shutil.rmtree(folder, ignore_errors=True)
