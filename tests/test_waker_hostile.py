"""The Codex waker and session liveness against what others may plant: another user's process called `codex`, a
program anyone could have changed, a session record and `.live` file naming processes a hook never recorded, a
sandboxed process dressed as Codex's daemon, a zombie, pid 1. The processes are real, started here; the stand-in
`codex` is a small program that records who ran it (uid, arguments, environment, directory) when asked to queue."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from gitmail import mailbox, waking
from gitmail.store import hookfiles, processes, sessions
from gitmail.store.repository import Store
from gitmail.workspace import Session
from tests.conftest import RepoFactory, run_gitmail
from tests.hooked import Session as Hooked

THREAD = "019a-hostile-thread"
NOBODY = 65534
STAND_IN = r"""
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
extern char **environ;
/* `codex queue ...`: append who ran it to <its own path>.ran; anything else: wait to be killed. */
int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "queue") == 0) {
        char path[PATH_MAX], cwd[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", path, sizeof path - 8);
        if (n < 0 || !getcwd(cwd, sizeof cwd)) return 3;
        strcpy(path + n, ".ran");
        FILE *out = fopen(path, "a");
        if (!out) return 4;
        fprintf(out, "uid %d\ncwd %s\n", (int)getuid(), cwd);
        for (int i = 0; i < argc; i++) fprintf(out, "arg %s\n", argv[i]);
        for (char **e = environ; *e; e++) fprintf(out, "env %s\n", *e);
        fclose(out);
        puts("Queued message for the thread.");
        return 0;
    }
    for (;;) pause();
}
"""


def root_only() -> None:
    if os.geteuid() != 0:
        pytest.skip("starting another user's processes needs root")


@pytest.fixture(scope="session")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("a C compiler is needed to build the stand-in codex (a script's process runs its interpreter)")
    folder = tmp_path_factory.mktemp("stand-in")
    (folder / "codex.c").write_text(STAND_IN)
    subprocess.run([compiler, "-O", "-o", str(folder / "codex"), str(folder / "codex.c")], check=True)
    return folder / "codex"


class Ran(NamedTuple):
    uid: int
    cwd: str
    argv: list[str]
    env: dict[str, str]


class Machine:
    """Stand-in Codex programs and processes, and the session records that point at them."""

    def __init__(self, compiled: Path, box: Store, work: Path, codex_home: Path) -> None:
        self.compiled, self.box, self.work, self.codex_home = compiled, box, work, codex_home
        self.folders: list[Path] = []
        self.started: list[subprocess.Popen[bytes]] = []

    def program(self, *, owner: int | None = None, mode: int = 0o755, folder_mode: int = 0o755) -> Path:
        """A copy of the stand-in `codex`, in a folder of its own under /tmp (which every user can reach)."""
        folder = Path(tempfile.mkdtemp(prefix="gitmail-codex-", dir="/tmp"))
        self.folders.append(folder)
        exe = folder / "codex"
        shutil.copy(self.compiled, exe)
        exe.chmod(mode)
        folder.chmod(folder_mode)
        if owner is not None:
            os.chown(exe, owner, owner)
        return exe

    def start(
        self, exe: Path, *args: str, user: int | None = None, confine: bool = False, **env: str
    ) -> subprocess.Popen[bytes]:
        """A stand-in Codex process working in the work tree with the session's CODEX_HOME."""

        def no_new_privileges() -> None:  # as a host's sandbox confines the commands it runs
            ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS

        process = subprocess.Popen(
            [str(exe), *args],
            cwd=self.work,
            env={
                "PATH": "/usr/bin:/bin",
                "HOME": "/nonexistent-window-home",
                "CODEX_HOME": str(self.codex_home),
                **env,
            },
            user=user,
            group=user,
            extra_groups=[] if user is not None else None,
            preexec_fn=no_new_privileges if confine else None,
        )
        self.started.append(process)
        deadline = time.monotonic() + 10
        while (found := processes.stat(process.pid)) is None or found.comm != "codex":
            assert time.monotonic() < deadline, "the stand-in did not start"
            time.sleep(0.01)
        return process

    def daemon(self, exe: Path, *, user: int | None = None, confine: bool = False) -> subprocess.Popen[bytes]:
        """A stand-in of Codex's managed app-server daemon."""
        return self.start(exe, "app-server", "--managed-daemon", user=user, confine=confine)

    def thread(self, host_pid: int, source: str = "startup") -> Hooked:
        """The Codex session starting (or resuming) with its hooks run under `host_pid` (its `.live`), then idle."""
        time.sleep(0.02)  # after the windows started
        session = Hooked(self.work, THREAD, host="codex")
        session("session-start", source=source)
        found = processes.stat(host_pid)
        assert found is not None
        Path(hookfiles.session_files(self.box.path, f"codex-{THREAD}").live).write_text(f"{host_pid} {found.ticks}\n")
        return session

    def close(self) -> None:
        for process in self.started:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
            process.wait()
        for folder in self.folders:
            shutil.rmtree(folder, ignore_errors=True)


def ran(exe: Path) -> list[Ran]:
    """Each run of that stand-in as `codex queue`."""
    record = exe.with_name(exe.name + ".ran")
    if not record.exists():
        return []
    runs: list[Ran] = []
    for line in record.read_text().splitlines():
        kind, _, value = line.partition(" ")
        if kind == "uid":
            runs.append(Ran(int(value), "", [], {}))
        elif kind == "cwd":
            runs[-1] = runs[-1]._replace(cwd=value)
        elif kind == "arg":
            runs[-1].argv.append(value)
        elif kind == "env":
            key, _, text = value.partition("=")
            runs[-1].env[key] = text
    return runs


@pytest.fixture
def machine(compiled: Path, box: Store, repos: RepoFactory, tmp_path: Path) -> Iterator[Machine]:
    box.create()
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir(mode=0o755)
    found = Machine(compiled, box, repos("web"), codex_home.resolve())
    yield found
    found.close()


def mail(box: Store) -> None:
    mailbox.send(box, sender="api", to="web", subject="Schema changed", body="Orders have a status.")


def wake(box: Store) -> str:
    """What the waker does for the session (waking.wake, as the detached waker runs it)."""
    return waking.wake(box, Session("codex", THREAD))


# -- 1. other users' processes, and programs others could change ----------------------------------------------------


@pytest.mark.parametrize("whose_program", ["the neighbour's", "root's"])
def test_another_users_codex_in_the_work_tree_is_never_run(machine: Machine, box: Store, whose_program: str) -> None:
    root_only()
    ours = machine.daemon(machine.program())
    neighbours = machine.program(owner=NOBODY if whose_program == "the neighbour's" else None)
    machine.start(neighbours, user=NOBODY)  # in the victim's work tree, with the victim's CODEX_HOME
    machine.thread(ours.pid)
    mail(box)
    assert wake(box) == "no Codex window shows it"
    assert ran(neighbours) == []


def test_an_other_users_process_is_no_daemon_of_a_session(machine: Machine, box: Store) -> None:
    root_only()
    theirs = machine.daemon(machine.program(owner=NOBODY), user=NOBODY)
    window = machine.program()
    machine.start(window)
    machine.thread(theirs.pid)
    mail(box)
    assert wake(box) == "not an idle session"  # its host is no process of ours: it has ended
    assert ran(window) == []


@pytest.mark.parametrize(
    "permissions",
    [{"mode": 0o775}, {"mode": 0o757}, {"folder_mode": 0o777}, {"folder_mode": 0o775}],
    ids=["group-writable", "world-writable", "in a world-writable folder", "in a group-writable folder"],
)
def test_a_codex_program_others_could_change_is_never_run(
    machine: Machine, box: Store, permissions: dict[str, int]
) -> None:
    daemon = machine.daemon(machine.program())
    window = machine.program(**permissions)
    machine.start(window)
    machine.thread(daemon.pid)
    mail(box)
    said = wake(box)
    assert said.startswith("its Codex program is not safe to run: ") and "writable by others" in said
    assert ran(window) == []
    listed = json.loads(run_gitmail("sessions", "--json", cwd=machine.work).stdout)
    assert [(s["state"], s["wakeable"]) for s in listed] == [("idle", False)]


def test_a_codex_daemon_others_could_change_hosts_no_wakeable_session(machine: Machine, box: Store) -> None:
    daemon = machine.daemon(machine.program(mode=0o777))
    window = machine.program()
    machine.start(window)
    machine.thread(daemon.pid)
    mail(box)
    assert wake(box) == "no Codex window shows it"
    assert ran(window) == []


def test_our_own_codex_is_asked_to_queue_with_an_environment_of_our_own(machine: Machine, box: Store) -> None:
    """The positive path, through a real send: the detached waker runs the window's program, from nowhere in
    particular, with PATH, HOME and LANG of ours and the session's CODEX_HOME, and nothing of the window's."""
    daemon = machine.daemon(machine.program())
    window = machine.program()
    machine.start(window, LD_PRELOAD="/nonexistent/evil.so", WINDOW_ONLY="1")
    machine.thread(daemon.pid)
    done = run_gitmail(
        "send",
        "--to",
        "web",
        "-s",
        "Schema changed",
        "-m",
        "Orders have a status.",
        "--from",
        "api",
        cwd=machine.work.parent,
    )
    assert done.returncode == 0, done.stderr
    deadline = time.monotonic() + 20
    while not ran(window) and time.monotonic() < deadline:
        time.sleep(0.05)
    [run] = ran(window)
    assert run.uid == os.getuid() and run.cwd == "/"
    assert run.argv[:4] == [str(window), "queue", "--thread", THREAD] and run.argv[4] == "--message"
    assert run.argv[5].startswith('gitmail: 1 new message for "web" arrived while this session was idle.')
    assert set(run.env) <= {"PATH", "HOME", "CODEX_HOME", "LANG"}
    assert run.env["HOME"] == os.environ["HOME"] and run.env["CODEX_HOME"] == str(machine.codex_home)


# -- 2. records and `.live` files a session could plant -------------------------------------------------------------


@pytest.mark.parametrize("confined", ["daemon", "window"])
def test_a_sandboxed_process_dressed_as_codex_is_never_run(machine: Machine, box: Store, confined: str) -> None:
    """A command in Codex's sandbox may write the mailbox and start processes of our own user, but not ones free
    of its confinement: what it starts is neither a session's daemon nor a window to run."""
    daemon = machine.daemon(machine.program(), confine=confined == "daemon")
    window = machine.program()
    machine.start(window, confine=confined == "window")
    machine.thread(daemon.pid)
    mail(box)
    assert wake(box) == "no Codex window shows it"
    assert ran(window) == []


# -- 3. a thread whose window closed --------------------------------------------------------------------------------


def test_a_codex_thread_no_window_shows_has_ended_for_routing(machine: Machine, box: Store) -> None:
    daemon = machine.daemon(machine.program())
    thread = machine.thread(daemon.pid)
    other = Hooked(machine.work, "other-22")
    other("session-start")
    question = thread.send("--to", "api", "-s", "which port?", "-m", "?")
    listed = json.loads(run_gitmail("sessions", "--json", cwd=machine.work).stdout)
    mine = next(s for s in listed if s["session"] == THREAD)
    assert (mine["state"], mine["end_reason"], mine["wakeable"]) == ("ended", "its window is closed", False)
    answer = run_gitmail("send", "--reply-to", question, "-m", "8080", "--from", "api", cwd=machine.work.parent)
    assert 'has ended: every session of "web" gets the reply' in answer.stderr
    assert answer.stdout.strip() in other("tool")  # not held back for a week


def test_a_codex_thread_a_window_shows_keeps_its_replies(machine: Machine, box: Store) -> None:
    daemon = machine.daemon(machine.program())
    machine.start(machine.program())
    thread = machine.thread(daemon.pid)
    other = Hooked(machine.work, "other-22")
    other("session-start")
    question = thread.send("--to", "api", "-s", "which port?", "-m", "?")
    listed = json.loads(run_gitmail("sessions", "--json", cwd=machine.work).stdout)
    assert next(s for s in listed if s["session"] == THREAD)["state"] == "idle"
    answer = run_gitmail("send", "--reply-to", question, "-m", "8080", "--from", "api", cwd=machine.work.parent)
    assert "has ended" not in answer.stderr
    assert answer.stdout.strip() not in other("tool")


def test_a_resumed_codex_thread_is_shown_by_the_window_it_was_resumed_in(machine: Machine, box: Store) -> None:
    daemon = machine.daemon(machine.program())
    machine.thread(daemon.pid)  # first seen in a window long closed
    time.sleep(1.5)  # a window's start is matched to a thread's within a second
    window = machine.program()
    machine.start(window)
    machine.thread(daemon.pid, source="resume")  # `codex resume` in a new window
    listed = json.loads(run_gitmail("sessions", "--json", cwd=machine.work).stdout)
    assert [(s["state"], s["wakeable"]) for s in listed] == [("idle", True)]
    mail(box)
    assert wake(box).startswith("queued")
    assert [run.argv[1:4] for run in ran(window)] == [["queue", "--thread", THREAD]]


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
        Path(hookfiles.session_files(box.path, "claude-ghost-1").live).write_text(f"{pid} {found.ticks}\n")
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
