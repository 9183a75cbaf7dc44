"""Damage as `git gc --prune=now` does it to a mailbox it races: objects gone from under a ref."""

from __future__ import annotations

import subprocess

from gitmail.store.repository import Store


def git(box: Store, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Plain git on the mailbox, as a user runs it."""
    return subprocess.run(["git", "--git-dir", str(box.path), *args], capture_output=True, text=True, check=check)


def lose(box: Store, ref: str, *, whole: bool = True) -> str:
    """Remove the commit `ref` points at (with its tree and document when `whole`), as a prune does to a commit
    written just before its ref moved; returns the commit id. gitmail writes loose objects, so each is a file."""
    oid = git(box, "rev-parse", ref).stdout.strip()
    doomed = [oid]
    if whole:
        doomed += [git(box, "rev-parse", f"{oid}^{{tree}}").stdout.strip()]
        doomed += [git(box, "rev-parse", f"{oid}:message.md").stdout.strip()]
    for gone in doomed:
        loose = box.path / "objects" / gone[:2] / gone[2:]
        assert loose.is_file(), f"{gone} is not a loose object"
        loose.unlink()
    assert git(box, "cat-file", "-e", oid, check=False).returncode != 0
    return oid


def lose_object(box: Store, spec: str) -> str:
    """Remove one object (`<commit>^{tree}`, `<ref>:<path>`, ...), as a prune takes part of what a writer wrote."""
    oid = git(box, "rev-parse", spec).stdout.strip()
    loose = box.path / "objects" / oid[:2] / oid[2:]
    assert loose.is_file(), f"{oid} is not a loose object"
    loose.unlink()
    return oid


def fsck(box: Store) -> subprocess.CompletedProcess[str]:
    return git(box, "fsck", "--no-progress", "--no-dangling", check=False)
