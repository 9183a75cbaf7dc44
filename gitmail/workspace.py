"""Where a command or a session works: the git repository a directory is in, and the mailbox name that gives it.

A small amount of I/O (a walk up the directory tree, the way git looks for `.git`), and no git process: the hooks
ask at every session start.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from gitmail.errors import GitmailError, UsageError
from gitmail.values.names import RepoName, name_problem


def toplevel(start: str | os.PathLike[str]) -> Path | None:
    """The git work tree containing `start` (as `git rev-parse --show-toplevel` finds it), or None."""
    here = Path(os.path.realpath(start))
    for directory in (here, *here.parents):
        dotgit = directory / ".git"
        if dotgit.is_dir() and (dotgit / "HEAD").is_file():
            return directory
        if dotgit.is_file():  # linked worktrees and submodules point elsewhere with "gitdir: ..."
            try:
                if dotgit.read_text(errors="replace").startswith("gitdir:"):
                    return directory
            except OSError:
                return None
    return None


def repo_of(cwd: str | os.PathLike[str]) -> tuple[RepoName, Path]:
    """The name and toplevel of the repository `cwd` is in; refuses a directory outside any repository."""
    top = toplevel(cwd)
    if top is None:
        raise GitmailError(
            f"{os.fspath(cwd)} is not inside a git repository "
            "(run this in a repository, or name one with --from/--repo)"
        )
    problem = name_problem(top.name)
    if problem:
        raise UsageError(
            f"this repository's folder name {top.name!r} cannot be a mailbox name: {problem} "
            "(name one with --from/--repo)"
        )
    return RepoName(top.name), top


class Session(NamedTuple):
    """A host's session: which host, and the id it gives the session."""

    host: str  # claude, codex
    id: str


class Actor(NamedTuple):
    """Who acts: a repository by its mailbox name, where it is, through what, and in which host session."""

    repo: RepoName
    here: Path | None = None  # the repository's toplevel, when known (not for a name given explicitly)
    via: str = "api"  # what carried the request: claude, codex (their hooks), cli, mcp, api
    session: Session | None = None  # the host session it runs in, when the host names it


def actor_at(directory: str | os.PathLike[str], *, via: str, named: str | None = None) -> Actor:
    """The actor a command run in `directory` speaks for: the repository `named` (checked), else the git repository
    the directory is in (an error outside one); in the host session the environment names, if any."""
    session = session_from_environment()
    if named is not None:
        return Actor(RepoName.parse(named), None, via, session)
    name, top = repo_of(directory)
    return Actor(name, top, via, session)


def session_from_environment() -> Session | None:
    """The host and session a command runs in, when the host says (Claude Code and Codex name it to the shell
    commands a session runs)."""
    from gitmail.store.hookfiles import session_key

    for variable, host in (("CLAUDE_CODE_SESSION_ID", "claude"), ("CODEX_SESSION_ID", "codex")):
        session = os.environ.get(variable)
        if session and session_key(host, session):
            return Session(host, session)
    return None


def own_command() -> str:
    """How the caller's shell runs this gitmail: `gitmail` when that is what PATH finds, else its full path (a
    virtualenv that is not active, the plugin's own copy), or what GITMAIL_COMMAND says."""
    chosen = os.environ.get("GITMAIL_COMMAND")
    if chosen:
        return chosen
    import shlex
    import sys

    script = os.path.join(os.path.dirname(sys.executable), "gitmail")
    if not os.path.exists(script):
        return f"{shlex.quote(sys.executable)} -m gitmail"
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        found = os.path.join(folder or ".", "gitmail")
        if os.path.exists(found):
            try:
                return "gitmail" if os.path.samefile(found, script) else shlex.quote(script)
            except OSError:
                break
    return shlex.quote(script)
