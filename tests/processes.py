"""Barriers between a test and the processes it starts, on files instead of sleeps: a child that reaches the line
writes its ready file and waits there until the test lets it go; the test waits for every child's ready file (and
fails at once, with the child's error output, when one ended before it got there), then lets them all go together.
And what a process's children run at this moment, to stop a process in the middle of one phase of its work; and which
modules a gitmail process loaded, for the tests of what each entry point may import."""

from __future__ import annotations

import inspect
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import pytest

READY_WAIT = 120.0  # seconds a child may take to reach the line: interpreter start and imports on a loaded machine


def ready_file(go: str | Path, pid: int) -> Path:
    """The file the child `pid` writes once it waits at the line that `go` opens."""
    return Path(f"{go}.ready-{pid}")


def at_the_line(go: str) -> None:
    """In a child: say it is at the line, and wait there until the test lets it go."""
    import os
    import time

    open(f"{go}.ready-{os.getpid()}", "w").close()
    while not os.path.exists(go):
        time.sleep(0.001)


AT_THE_LINE = textwrap.dedent(inspect.getsource(at_the_line))  # for a `python -c` child: define it, then call it


class StartingLine:
    """A line the children of one test wait at: `go` is the file whose appearance lets them go."""

    def __init__(self, folder: Path, name: str = "go") -> None:
        self.go = folder / name

    def wait(self, processes: Iterable[subprocess.Popen[str]], timeout: float = READY_WAIT) -> None:
        """Until every process waits at the line."""
        deadline = time.monotonic() + timeout
        for process in processes:
            ready = ready_file(self.go, process.pid)
            while not ready.exists():
                if process.poll() is not None:
                    _, err = process.communicate()
                    pytest.fail(f"process {process.pid} ended ({process.returncode}) before the line: {err}")
                if time.monotonic() > deadline:
                    pytest.fail(f"process {process.pid} did not reach the line within {timeout} s")
                time.sleep(0.001)

    def let_go(self) -> None:
        self.go.touch()


def children(pid: int) -> list[list[str]]:
    """The command lines of the processes `pid` runs at this moment."""
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    argvs = []
    for kid in kids:
        try:
            argvs.append(Path(f"/proc/{kid}/cmdline").read_bytes().decode(errors="replace").split("\0"))
        except OSError:
            continue
    return argvs


def kill_when(
    process: subprocess.Popen[bytes] | subprocess.Popen[str],
    running: Callable[[list[str]], bool],
    *,
    whole_group: bool = False,
) -> bool:
    """SIGKILL `process` (or its whole process group, its children with it) as soon as one of its children runs a
    command line `running` picks. False when it finished first."""
    while process.poll() is None:
        if any(running(argv) for argv in children(process.pid)):
            if whole_group:
                os.killpg(process.pid, signal.SIGKILL)
            else:
                process.kill()
            process.wait()
            return True
        time.sleep(0.0005)
    return False


def loaded(
    *args: str,
    cwd: Path,
    stdin: str = "",
    env: Mapping[str, str] | None = None,
    missing: Iterable[str] = (),
    detached: bool = False,
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run `gitmail ARGS` in an interpreter of its own, as the console script does (with the packages `missing`
    unimportable, as if not installed): how it ended, and every module it had loaded by then. With `detached`, also
    wait for what it left running after its answer (a fork of it, as a sync's settling child) to end."""
    handle, name = tempfile.mkstemp(suffix=".json")
    os.close(handle)
    out = Path(name)
    probe = (
        "import atexit, json, sys\n"
        f"atexit.register(lambda: open({name!r}, 'w').write(json.dumps(sorted(sys.modules))))\n"
        + "".join(f"sys.modules[{module!r}] = None\n" for module in missing)
        + "from gitmail.__main__ import main\n"
        f"sys.argv = ['gitmail', *{list(args)!r}]\n"
        "sys.exit(main())\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", probe],
            cwd=cwd,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            env=None if env is None else {**os.environ, **env},
        )
        if detached:
            ended(name)
        return done, set(json.loads(out.read_text() or "[]"))
    finally:
        out.unlink()


def ended(marker: str, timeout: float = 60.0) -> None:
    """Wait until no process but this one has `marker` in its command line (a fork keeps its parent's; a detached
    child of gitmail's names the mailbox it works on)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = False
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    alive = alive or (int(pid) != os.getpid() and marker.encode() in handle.read())
            except OSError:
                continue
        if not alive:
            return
        time.sleep(0.05)
    raise AssertionError(f"a process left by the command was still running after {timeout:.0f} s")
