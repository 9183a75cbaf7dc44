"""Who a repository is: validated repo names, their ref-safe encoding, and the git toplevel of a directory."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote

from gitmail.errors import GitmailError, UsageError

# Characters that stand for themselves in a ref component; everything else is %XX-encoded (UTF-8 bytes).
# '.' is encoded too, so no component can be '.', '..', contain '..' or end in '.lock'.
_REF_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
_MAX_ENCODED = 200  # a loose ref is a file: keep well under NAME_MAX (255 bytes)

# Control characters, line and paragraph separators, noncharacters and bidirectional overrides:
# none may appear in a name, and in free text (subjects) they collapse to a space.
UNSAFE_TEXT = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ufffe\uffff\u202a-\u202e\u2066-\u2069]")
# Lone surrogates: how Python hands over command-line arguments and file names whose bytes are not UTF-8.
NOT_UTF8 = re.compile("[\ud800-\udfff]")


class RepoName(str):
    """A repository's mailbox name: any directory basename except the reserved and the unsafe."""

    __slots__ = ()

    @classmethod
    def parse(cls, raw: str) -> RepoName:
        problem = name_problem(raw)
        if problem:
            raise UsageError(f"invalid repo name {raw!r}: {problem}")
        return cls(raw)

    @classmethod
    def from_ref(cls, component: str) -> RepoName:
        """The name a ref component encodes; only the canonical encoding gitmail writes is accepted."""
        name = cls.parse(unquote(component, errors="strict"))
        if name.ref != component:
            raise UsageError(f"{component!r} is not a gitmail ref name")
        return name

    @property
    def ref(self) -> str:
        """The reversible, ref-safe form used inside ref names (`My App` -> `My%20App`)."""
        return "".join(c if c in _REF_SAFE else "".join(f"%{b:02X}" for b in c.encode()) for c in self)


def name_problem(raw: str) -> str | None:
    if NOT_UTF8.search(raw):
        return "it is not valid UTF-8"
    if not raw or not raw.strip():
        return "it is empty"
    if "/" in raw:
        return "it contains '/'"
    if UNSAFE_TEXT.search(raw):
        return "it contains control characters"
    if raw.startswith("_"):
        return "names starting with '_' are reserved"
    if raw in (".", ".."):
        return "it is not a directory name"
    if len(RepoName(raw).ref) > _MAX_ENCODED:
        return "it is too long"
    return None


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
