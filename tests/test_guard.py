"""The commit guard: `gitmail install --guard` puts a pre-commit hook in a repository that refuses a session's commit
of files another session leased exclusively, warns a person's and lets it through, runs the repository's own
pre-commit hook first, fails open, and comes out again leaving what was there byte for byte. Every test commits
with real git."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from gitmail import commit_guard, render
from gitmail.install import guard_hook
from gitmail.mailbox import leasing
from gitmail.store.repository import Store
from gitmail.values.names import RepoName
from tests.conftest import RepoFactory, run_gitmail
from tests.hooked import Session as Hooked

SESSION_VARIABLES = ("CLAUDE_CODE_SESSION_ID", "CODEX_THREAD_ID", "CODEX_SESSION_ID")


def git(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """git as a person runs it (a suite run from inside a host's session is not that session), or with `env`."""
    inherited = {k: v for k, v in os.environ.items() if k not in SESSION_VARIABLES}
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env={**inherited, **(env or {})})


def commit(cwd: Path, *paths: str, session: str | None = None, extra: tuple[str, ...] = ()) -> tuple[int, str]:
    """Change these files, stage them and commit, as a session (Claude Code names it to the commands it runs) or as
    the person; git's exit code and what the hooks said."""
    for path in paths:
        (cwd / path).parent.mkdir(parents=True, exist_ok=True)
        with open(cwd / path, "a") as handle:
            handle.write("changed\n")
        assert git("add", "--", path, cwd=cwd).returncode == 0
    env = {"CLAUDE_CODE_SESSION_ID": session} if session else {}
    done = git("commit", "-q", "-m", "change", *extra, cwd=cwd, env=env)
    return done.returncode, done.stderr


def head(cwd: Path) -> str:
    return git("rev-parse", "HEAD", cwd=cwd).stdout.strip()


@pytest.fixture
def api(repos: RepoFactory, box: Store) -> Path:
    path = repos("api")
    (path / "src").mkdir()
    for name in ("orders.py", "users.py", "sp ace.py"):
        (path / "src" / name).write_text(f"{name}\n")
    assert git("add", ".", cwd=path).returncode == 0
    assert git("commit", "-q", "-m", "start", cwd=path).returncode == 0
    box.create()
    return path


def session(cwd: Path, name: str, *, card: str | None = None) -> Hooked:
    hooked = Hooked(cwd, name)
    hooked("session-start")
    assert hooked.gitmail("session", "--name", name[:8], *(("--card", card) if card else ())).returncode == 0
    return hooked


def guarded(cwd: Path) -> None:
    done = run_gitmail("install", "--guard", cwd=cwd)
    assert done.returncode == 0, done.stderr


def until(box: Store, path: str) -> str:
    held = [s.lease for s in leasing.standing(box, RepoName("api")) if s.held and path in s.lease.paths]
    return render.until(held[0].expires)


# -- the verdicts -------------------------------------------------------------------------------------------------


def test_a_sessions_commit_of_another_sessions_leased_file_is_refused_naming_it(api: Path, box: Store) -> None:
    front = session(api, "front-01", card="splitting orders")
    assert front.gitmail("lease", "src/orders.py").returncode == 0
    session(api, "back-001")
    guarded(api)
    before = head(api)
    code, said = commit(api, "src/orders.py", "src/users.py", session="back-001")
    assert code == 1 and head(api) == before
    assert said == (
        f'gitmail: "src/orders.py" is leased exclusive by "api#front-01", whose card reads "splitting orders" until '
        f'{until(box, "src/orders.py")}; ask its holder: gitmail send --to api#front-01 -s "..."\n'
        "gitmail: this commit is refused: leave those files out of it (`git restore --staged PATH`), or ask the "
        "holder\n"
    )
    assert git("restore", "--staged", "src/orders.py", cwd=api).returncode == 0
    assert commit(api, session="back-001") == (0, "")  # the rest goes in
    code, said = commit(api, "src/orders.py", session="back-001", extra=("--no-verify",))
    assert (code, said) == (0, "")  # the documented way past


def test_the_holders_own_commit_goes_through_in_silence(api: Path, box: Store) -> None:
    front = session(api, "front-01")
    assert front.gitmail("lease", "src/orders.py").returncode == 0
    guarded(api)
    assert commit(api, "src/orders.py", session="front-01") == (0, "")


def test_a_persons_commit_is_warned_naming_the_holder_and_goes_through(api: Path, box: Store) -> None:
    front = session(api, "front-01")
    assert front.gitmail("lease", "src/orders.py", "src/sp ace.py").returncode == 0
    guarded(api)
    before = head(api)
    code, said = commit(api, "src/orders.py", "src/sp ace.py", "src/users.py")
    assert code == 0 and head(api) != before
    ends = until(box, "src/orders.py")
    ask = 'ask its holder: gitmail send --to api#front-01 -s "..."'
    assert said == (
        f'gitmail: warning: "src/orders.py" is leased exclusive by "api#front-01" until {ends}; {ask}\n'
        f'gitmail: warning: "src/sp ace.py" is leased exclusive by "api#front-01" until {ends}; {ask}\n'
        "gitmail: the commit goes on (leases keep sessions off each other's files, never a person); tell the holder\n"
    )


def test_a_shared_lease_or_none_stops_no_commit(api: Path, box: Store) -> None:
    front = session(api, "front-01")
    assert front.gitmail("lease", "src/users.py", "--shared").returncode == 0
    session(api, "back-001")
    guarded(api)
    assert commit(api, "src/users.py", "src/orders.py", session="back-001") == (0, "")


def test_a_lease_taken_in_the_main_checkout_stops_a_commit_in_a_linked_worktree(api: Path, box: Store) -> None:
    other = api.parent / "api-wt"
    assert git("worktree", "add", "-q", "-b", "side", str(other), cwd=api).returncode == 0
    front = session(api, "front-01")
    assert front.gitmail("lease", "src/orders.py").returncode == 0
    session(other, "back-001")
    guarded(other)  # the hooks folder is the repository's, shared by its worktrees
    code, said = commit(other, "src/orders.py", session="back-001")
    assert code == 1 and '"src/orders.py" is leased exclusive by "api#front-01"' in said
    assert git("restore", "--staged", "src/orders.py", cwd=other).returncode == 0
    assert commit(other, "src/users.py", session="back-001") == (0, "")


def test_hostile_staged_names_are_read_whole(api: Path, box: Store) -> None:
    """Staged names are read NUL-separated: a name holding a line break and a leased path is not that path, and a
    leased name with a space is named whole."""
    front = session(api, "front-01")
    assert front.gitmail("lease", "src/orders.py", "src/sp ace.py").returncode == 0
    session(api, "back-001")
    guarded(api)
    assert commit(api, "x\nsrc/orders.py", "a b\tc.py", session="back-001") == (0, "")
    code, said = commit(api, "src/sp ace.py", "new\nline.py", session="back-001")
    assert code == 1 and said.count("\n") == 2 and said.startswith('gitmail: "src/sp ace.py" is leased exclusive')


def test_a_rename_away_from_a_leased_file_touches_it(api: Path, box: Store) -> None:
    front = session(api, "front-01")
    assert front.gitmail("lease", "src/orders.py").returncode == 0
    session(api, "back-001")
    guarded(api)
    assert git("mv", "src/orders.py", "src/moved.py", cwd=api).returncode == 0
    code, said = commit(api, session="back-001")
    assert code == 1 and said.startswith('gitmail: "src/orders.py" is leased')


# -- the repository's own hook ----------------------------------------------------------------------------------


def own_hook(api: Path, body: str, mode: int = 0o755) -> Path:
    hook = api / ".git" / "hooks" / "pre-commit"
    hook.write_bytes(b"#!/bin/sh\n" + body.encode() + b"\n")
    hook.chmod(mode)
    return hook


def test_the_repositorys_own_hook_runs_first_and_its_failure_stops_the_commit(api: Path, box: Store) -> None:
    ran = api.parent / "ran"
    own_hook(api, f'echo "$0" >> {ran}\necho own hook >&2\n[ ! -e {api.parent / "fail"} ] || exit 3')
    guarded(api)
    assert commit(api, "src/users.py") == (0, "own hook\n")
    assert ran.read_text() == f"{api / '.git' / 'hooks' / 'gitmail-chained' / 'pre-commit'}\n".replace(
        str(api) + "/", ""
    )  # git runs hooks at the top, by a relative path; the hook keeps its own name
    (api.parent / "fail").touch()
    before = head(api)
    code, said = commit(api, "src/users.py")
    assert (code, said, head(api)) == (1, "own hook\n", before)


def test_a_hook_git_would_not_run_is_not_run(api: Path, box: Store) -> None:
    ran = api.parent / "ran"
    own_hook(api, f"touch {ran}", mode=0o644)  # not executable: git ignores it, and so does the guard
    guarded(api)
    assert commit(api, "src/users.py")[0] == 0 and not ran.exists()


def test_uninstall_puts_back_the_hook_that_was_there_byte_for_byte(api: Path, box: Store) -> None:
    hook = api / ".git" / "hooks" / "pre-commit"
    hook.write_bytes(b"#!/bin/sh\n# \xff not utf-8, no final newline\r\nexit 0")
    hook.chmod(0o750)
    before = (hook.read_bytes(), stat.S_IMODE(hook.stat().st_mode), hook.stat().st_mtime_ns)
    listing = sorted(p.name for p in hook.parent.iterdir())
    guarded(api)
    assert guard_hook.is_ours(hook)
    done = run_gitmail("uninstall", "--guard", cwd=api)
    assert done.returncode == 0, done.stderr
    assert (hook.read_bytes(), stat.S_IMODE(hook.stat().st_mode), hook.stat().st_mtime_ns) == before
    assert sorted(p.name for p in hook.parent.iterdir()) == listing
    again = run_gitmail("uninstall", "--guard", cwd=api)
    assert (again.returncode, again.stderr) == (0, "gitmail: nothing to change\n")


def test_uninstall_where_there_was_no_hook_leaves_none(api: Path, box: Store) -> None:
    guarded(api)
    assert run_gitmail("uninstall", "--guard", cwd=api).returncode == 0
    assert not (api / ".git" / "hooks" / "pre-commit").exists()
    assert not (api / ".git" / "hooks" / "gitmail-chained").exists()


def test_installing_twice_changes_nothing(api: Path, box: Store) -> None:
    own_hook(api, "exit 0")
    guarded(api)
    folder = api / ".git" / "hooks"
    files = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    again = run_gitmail("install", "--guard", cwd=api)
    assert again.returncode == 0
    assert again.stderr == f"gitmail: {folder / 'pre-commit'}: unchanged\n"
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == files


def test_uninstall_leaves_a_hook_that_replaced_the_guard(api: Path, box: Store) -> None:
    guarded(api)
    hook = own_hook(api, "echo another tool's hook")
    done = run_gitmail("uninstall", "--guard", cwd=api)
    assert done.returncode == 0 and hook.read_bytes() == b"#!/bin/sh\necho another tool's hook\n"


# -- where it goes ------------------------------------------------------------------------------------------------


def test_a_global_hooks_path_is_refused_and_nothing_written(api: Path, box: Store, home: Path, tmp_path: Path) -> None:
    shared = tmp_path / "machine-hooks"
    (home / ".gitconfig").write_text(f"[core]\n\thooksPath = {shared}\n")
    done = run_gitmail("install", "--guard", cwd=api)
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert "core.hooksPath is set in your global git config" in done.stderr
    assert not shared.exists() and not (api / ".git" / "hooks" / "pre-commit").exists()


def test_a_hooks_path_of_the_repositorys_own_is_where_it_goes(api: Path, box: Store) -> None:
    assert git("config", "--local", "core.hooksPath", ".githooks", cwd=api).returncode == 0
    guarded(api)
    assert guard_hook.is_ours(api / ".githooks" / "pre-commit")
    assert guard_hook.guard_status(api)[:2] == (api / ".githooks" / "pre-commit", True)
    front = session(api, "front-01")
    assert front.gitmail("lease", "src/orders.py").returncode == 0
    assert commit(api, "src/orders.py", session="back-001")[0] == 1


def test_outside_a_repository_it_is_one_line(tmp_path: Path, box: Store) -> None:
    done = run_gitmail("install", "--guard", cwd=tmp_path)
    assert (done.returncode, done.stderr.count("\n")) == (2, 1)


def test_guard_status_says_what_is_installed(api: Path, box: Store) -> None:
    hook = api / ".git" / "hooks" / "pre-commit"
    assert guard_hook.guard_status(api) == guard_hook.GuardStatus(hook, False, False, None, None)
    own_hook(api, "exit 0")
    guarded(api)
    kept = hook.parent / "gitmail-chained" / "pre-commit"
    assert guard_hook.guard_status(api) == guard_hook.GuardStatus(hook, True, True, kept, None)
    guard_hook.install(api, python="/elsewhere/python3")
    assert guard_hook.guard_status(api).current is False


# -- failing open, and staying off Python -----------------------------------------------------------------------


def test_an_unreadable_mailbox_is_one_line_and_the_commit_goes_on(api: Path, box: Store) -> None:
    front = session(api, "front-01")
    assert front.gitmail("lease", "src/orders.py").returncode == 0
    session(api, "back-001")
    guarded(api)
    (box.path / "config").write_text("[not a config\n")
    before = head(api)
    code, said = commit(api, "src/orders.py", session="back-001")
    assert code == 0 and head(api) != before
    assert said.count("\n") == 1 and said.startswith("gitmail: the lease guard could not check this commit (")
    assert said.endswith("); it goes on\n")


def test_without_gitmail_it_is_one_line_and_the_commit_goes_on(api: Path, box: Store) -> None:
    front = session(api, "front-01")
    assert front.gitmail("lease", "src/orders.py").returncode == 0
    guard_hook.install(api, python="/gone/python3")
    code, said = commit(api, "src/orders.py", session="back-001")
    assert (code, said) == (0, "gitmail: the lease guard cannot run (no Python at /gone/python3, no gitmail on PATH); "
                            "the commit goes on\n")  # fmt: skip


def counting_python(tmp_path: Path) -> tuple[str, Path]:
    """An interpreter that notes each time it is started."""
    import sys

    runs = tmp_path / "python-runs"
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\necho run >> {runs}\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper), runs


def work_tree(repos: RepoFactory, kind: str) -> Path:
    """A work tree whose mailbox name guard.sh finds as workspace.py does: a plain repository, one whose name must
    be encoded, one named by gitmail.name, a linked worktree of a bare repository."""
    repo = repos({"plain": "api", "encoded": "My.App", "named": "folder", "bare": "seed"}[kind])
    (repo / "a.py").write_text("a\n")
    assert git("add", ".", cwd=repo).returncode == 0 and git("commit", "-qm", "a", cwd=repo).returncode == 0
    if kind == "named":
        assert git("config", "gitmail.name", "Shop.Front", cwd=repo).returncode == 0
    if kind == "bare":
        bare = repo.parent / "shop.git"
        assert git("clone", "-q", "--bare", str(repo), str(bare), cwd=repo.parent).returncode == 0
        repo = repo.parent / "shop-wt"
        assert git("worktree", "add", "-q", "-b", "w", str(repo), cwd=bare).returncode == 0
    return repo


@pytest.mark.parametrize("kind", ["plain", "encoded", "named", "bare"])
def test_where_nobody_else_holds_a_lease_no_python_starts(
    repos: RepoFactory, box: Store, tmp_path: Path, kind: str
) -> None:
    repo = work_tree(repos, kind)
    box.create()
    python, runs = counting_python(tmp_path)
    guard_hook.install(repo, python=python)
    assert commit(repo, "a.py")[0] == 0
    assert runs.read_text() == "run\n"  # no lease index yet: Python decides, and writes it
    assert commit(repo, "a.py")[0] == 0 and runs.read_text() == "run\n"  # an empty index: no Python
    front = session(repo, "front-01")
    assert front.gitmail("lease", "a.py").returncode == 0
    assert commit(repo, "a.py", session="front-01")[0] == 0 and runs.read_text() == "run\n"  # only its own
    assert commit(repo, "a.py", session="back-001")[0] == 1 and runs.read_text() == "run\nrun\n"


def test_an_expired_lease_leaves_the_index_once_a_commit_looks(api: Path, box: Store, tmp_path: Path) -> None:
    leasing.take(
        box, repo=RepoName("api"), holder="claude:gone-01", handle="api#gone-01", paths=["src/orders.py"],
        mode="exclusive", duration=60, now=1000,
    )  # fmt: skip
    from gitmail.store import lease_refs

    lease_refs.write_index(box, RepoName("api"), [s.lease for s in lease_refs.listing(box, RepoName("api"))])
    python, runs = counting_python(tmp_path)
    guard_hook.install(api, python=python)
    assert commit(api, "src/orders.py", session="back-001") == (0, "")
    assert commit(api, "src/orders.py", session="back-001") == (0, "")
    assert runs.read_text() == "run\n"


def test_a_dry_run_says_what_it_would_do_and_writes_nothing(api: Path, box: Store) -> None:
    hook = own_hook(api, "exit 0")
    before = sorted(p.name for p in hook.parent.iterdir())
    done = run_gitmail("install", "--guard", "--dry-run", cwd=api)
    assert done.returncode == 0
    kept = hook.parent / "gitmail-chained" / "pre-commit"
    assert done.stderr == (
        f"gitmail: would do: {hook}: moved to {kept} (the guard runs it first)\n"
        f"gitmail: would do: {hook}: the lease guard installed\n"
    )
    assert sorted(p.name for p in hook.parent.iterdir()) == before and not guard_hook.is_ours(hook)


def test_the_guard_loads_no_command_line_library(api: Path, box: Store) -> None:
    from tests.test_imports import imported

    front = session(api, "front-01")
    assert front.gitmail("lease", "src/orders.py").returncode == 0
    modules = imported("guard", "pre-commit", cwd=api)
    assert "gitmail.commit_guard" in modules and "gitmail.guarding" in modules
    assert not {m for m in modules if m.split(".")[0] in ("typer", "click", "rich")}


def test_guard_without_its_moment_is_one_line(api: Path) -> None:
    done = run_gitmail("guard", cwd=api)
    assert (done.returncode, done.stderr) == (2, f"gitmail: {commit_guard.USAGE}\n")
