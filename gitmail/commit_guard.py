"""`gitmail guard pre-commit`: the commit guard's Python half, which guard.sh starts when a lease may be in the way.

It reads the staged paths (from the index git is committing: `git commit -a` and `git commit PATH` name a temporary
one in GIT_INDEX_FILE), asks the action layer whether another holder's exclusive lease covers any (guarding.py
decides, as for the hosts' before-edit hooks), and answers as git's pre-commit hook: a session's commit refused
(exit 1) with one line per leased path, naming the holder, its card, when the lease ends and how to ask; a person's
commit warned in the same words and let through. Whatever goes wrong here (no mailbox to read, git failing) is one
line on standard error and the commit goes on: the guard never stops a commit for a fault of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys

from gitmail.edge import described, say

USAGE = "usage: gitmail guard pre-commit (run by the pre-commit hook `gitmail install --guard` adds)"
REFUSED = 1


def main(argv: list[str]) -> int:
    if argv != ["pre-commit"]:
        say(USAGE)
        return 2
    try:
        return pre_commit()
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    except Exception as error:  # the guard fails open: one line, and the commit goes on
        say(f"the lease guard could not check this commit ({described(error, 'guard pre-commit')}); it goes on")
        return 0


def pre_commit() -> int:
    """The guard's verdict on the commit being made in the current directory (git runs hooks at the work tree's
    top); its exit code for git."""
    from gitmail.actions import leases
    from gitmail.store.opening import open_mailbox
    from gitmail.workspace import actor_at, current_directory

    store = open_mailbox()
    if not store.exists():
        return 0
    here = current_directory()
    actor = actor_at(here, via="guard")
    verdict = leases.before_commit(store, actor, staged(here))
    if verdict.refused is not None:
        for line in verdict.refused.splitlines():
            say(line)
        say("this commit is refused: leave those files out of it (`git restore --staged PATH`), or ask the holder")
        return REFUSED
    if verdict.warned is not None:
        for line in verdict.warned.splitlines():
            say(f"warning: {line}")
        say("the commit goes on (leases keep sessions off each other's files, never a person); tell the holder")
    return 0


def staged(cwd: str) -> list[str]:
    """The paths the commit changes, relative to the work tree's top: added, changed and removed, a rename as both
    its ends. Read from the index git is committing, so git's own environment is kept."""
    done = subprocess.run(
        ["git", "diff", "--cached", "--name-only", "-z", "--no-renames", "--no-ext-diff", "--no-textconv"],
        cwd=cwd,
        capture_output=True,
        timeout=60,
        env=os.environ.copy(),
        check=False,
    )
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        raise RuntimeError(f"git diff --cached failed: {lines[-1] if lines else done.returncode}")
    return [name for name in done.stdout.decode(errors="surrogateescape").split("\0") if name]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
