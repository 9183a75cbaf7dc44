"""Where a command or a session works: the git repository a directory is in, the mailbox name that gives it, and
who acts from there (a repository, through which program, in which host session).

A repository is named after its own folder, wherever its sessions work: the main work tree, any linked worktree
(`git worktree add`, Claude Code's `--worktree`), or a bare repository's worktrees all find the repository's
common git directory, as git does (a worktree's `.git` file names its git directory, whose `commondir` names the
common one), and take the name of the folder that holds it (`api` for ~/src/api/.git and for ~/src/api.git).
`git config gitmail.name NAME` in the repository chooses another name (for two unrelated repositories that share a
folder name). A small amount of I/O (a walk up the directory tree and a few small files), and no git process: the
hooks ask at every session start.
"""

from __future__ import annotations

import os

from gitmail.errors import GitmailError, UsageError
from gitmail.values.names import PERSON, RepoName, nfc, repo_problem

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple
else:
    from gitmail.values.tuples import NamedTuple

NAME_SETTING = "gitmail.name"  # in a repository's own git config: the mailbox name it goes by


class Place(NamedTuple):
    """A git work tree and the repository it belongs to."""

    top: str  # the work tree's top folder: where a session there works
    home: str  # the repository itself: its main work tree, or the bare repository
    worktree: str | None  # a linked worktree's folder name; None for the main work tree
    git_dir: str  # this work tree's git directory
    name: str  # the mailbox name, as the folder or gitmail.name gives it (not yet checked)
    named_by: str  # "folder" or "gitmail.name"
    config: str  # the repository's own config file, where gitmail.name is set (shared by its worktrees)

    def branch(self) -> str | None:
        """The branch checked out here (None when detached or unreadable)."""
        try:
            head = _read(os.path.join(self.git_dir, "HEAD")).strip()
        except OSError:
            return None
        return head.removeprefix("ref: refs/heads/") if head.startswith("ref: refs/heads/") else None


def current_directory() -> str:
    """Where the command runs; a usage error when that directory no longer exists (deleted, or moved away)."""
    try:
        return os.getcwd()
    except FileNotFoundError:
        raise UsageError("the current directory no longer exists; run gitmail from one that does") from None


def toplevel(start: str | os.PathLike[str]) -> str | None:
    """The git work tree containing `start` (as `git rev-parse --show-toplevel` finds it), or None."""
    directory = os.path.realpath(start)
    while True:
        dotgit = os.path.join(directory, ".git")
        if os.path.isdir(dotgit) and os.path.isfile(os.path.join(dotgit, "HEAD")):
            return directory
        if os.path.isfile(dotgit):  # linked worktrees and submodules point elsewhere with "gitdir: ..."
            try:
                if _read(dotgit).startswith("gitdir:"):
                    return directory
            except OSError:
                return None
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def place(start: str | os.PathLike[str]) -> Place | None:
    """The work tree `start` is in and its repository, or None outside one."""
    top = toplevel(start)
    if top is None:
        return None
    dotgit = os.path.join(top, ".git")
    git_dir = dotgit
    if os.path.isfile(dotgit):
        try:
            pointed = _read(dotgit).split(":", 1)[1].strip()
        except (OSError, IndexError):
            pointed = ""
        git_dir = os.path.realpath(os.path.join(top, pointed)) if pointed else dotgit
    common = git_dir
    try:
        common = os.path.realpath(os.path.join(git_dir, _read(os.path.join(git_dir, "commondir")).strip()))
    except OSError:
        pass  # no commondir: the main work tree, or a submodule (a repository of its own, named by its folder)
    linked = common != git_dir
    if linked:
        home = os.path.dirname(common) if os.path.basename(common) == ".git" else common
    else:
        home = top
    name, named_by = os.path.basename(home), "folder"
    if linked and os.path.basename(common) != ".git":  # a bare repository: api.git is `api`
        name = name.removesuffix(".git") or name
    chosen = _chosen_name(common)
    if chosen:
        name, named_by = chosen, NAME_SETTING
    return Place(
        top, home, os.path.basename(top) if linked else None, git_dir, name, named_by, os.path.join(common, "config")
    )


def _read(path: str) -> str:
    with open(path, errors="replace") as file:
        return file.read()


def _chosen_name(common: str) -> str | None:
    """`gitmail.name` in the repository's own config, read as git reads it (no git process)."""
    from gitmail.store import gitcmd, gitconfig

    found = gitconfig.load(os.path.join(common, "config"))
    if found is None:  # something the reader does not follow: git decides
        try:
            return gitcmd.run(common, "config", "--includes", "--get", NAME_SETTING).decode().strip() or None
        except Exception:  # unset, or no git to ask: the folder's name
            return None
    return found.get(NAME_SETTING) or None


def repo_of(cwd: str | os.PathLike[str]) -> tuple[RepoName, Place]:
    """The name and place of the repository `cwd` is in; refuses a directory outside any repository."""
    found = place(cwd)
    if found is None:
        raise GitmailError(
            f"{os.fspath(cwd)} is not inside a git repository "
            "(run this in a repository, or name one with --from/--repo)"
        )
    problem = repo_problem(found.name)
    if problem:
        what = (
            f"this repository's {NAME_SETTING} {found.name!r}"
            if found.named_by == NAME_SETTING
            else f"this repository's folder name {found.name!r}"
        )
        raise UsageError(f"{what} cannot be a mailbox name: {problem} (name one with --from/--repo)")
    return RepoName(found.name), found


class Session(NamedTuple):
    """A host's session: which host, and the id it gives the session."""

    host: str  # claude, codex
    id: str
    transcript: str | None = None  # where the host keeps the session's transcript, as its hooks are told

    @property
    def key(self) -> str:
        """As messages and files name it: "claude:5b0e8d1c-..."."""
        return f"{self.host}:{self.id}"

    @classmethod
    def from_key(cls, key: str) -> Session | None:
        host, colon, session_id = key.partition(":")
        return cls(host, session_id) if colon and host and session_id else None


class Actor(NamedTuple):
    """Who acts: a repository by its mailbox name, where it is, through what, and in which host session."""

    repo: RepoName
    here: str | None = None  # the repository's own path (what its name's claim records), when known
    via: str = "api"  # what carried the request: claude, codex (their hooks), cli, mcp, api
    session: Session | None = None  # the host session it runs in, when the host names it
    place: Place | None = None  # the work tree it works in, when known


def actor_at(directory: str | os.PathLike[str], *, via: str, named: str | None = None) -> Actor:
    """The actor a command run in `directory` speaks for: the repository `named` (checked), else the git repository
    the directory is in (an error outside one); in the host session the environment names, if any."""
    session = session_from_environment()
    if named is not None and nfc(named) == PERSON:
        if session is not None:
            raise UsageError(f"{PERSON} is the person's address: a session cannot act as the person")
        return Actor(RepoName(PERSON), None, via)
    if named is not None:
        return Actor(RepoName.of_repository(named), None, via, session)
    name, found = repo_of(directory)
    return Actor(name, found.home, via, session, found)


def session_from_environment() -> Session | None:
    """The host and session a command runs in, when the host says (Claude Code and Codex name it to the shell
    commands a session runs)."""
    from gitmail.store.hookfiles import session_key

    for variable, host in (
        ("CLAUDE_CODE_SESSION_ID", "claude"),
        ("CODEX_THREAD_ID", "codex"),
        ("CODEX_SESSION_ID", "codex"),
    ):
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
    import sys

    from gitmail.store.gitcmd import quoted

    script = os.path.join(os.path.dirname(sys.executable), "gitmail")
    if not os.path.exists(script):
        return f"{quoted(sys.executable)} -m gitmail"
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        found = os.path.join(folder or ".", "gitmail")
        if os.path.exists(found):
            try:
                return "gitmail" if os.path.samefile(found, script) else quoted(script)
            except OSError:
                break
    return quoted(script)
