"""The commit guard in a repository: `gitmail install --guard` puts a pre-commit hook where git looks for the
repository's hooks (`git rev-parse --git-path hooks`, which follows a core.hooksPath set in the repository's own
config), `gitmail uninstall --guard` puts back what was there, and `guard_status` says what is installed (for
doctor).

The hook is a small marked shim (`MARK`): it runs the repository's own pre-commit hook first, when there was one
(moved aside, untouched, into `gitmail-chained/pre-commit` beside it: its name stays `pre-commit` for hook managers
that go by it) and stops with that hook's failure; then guard.sh, with this interpreter, or `gitmail` on PATH when
this gitmail is gone, or one line saying the guard could not run, and the commit goes on. A core.hooksPath from the
user's or the system's config is refused: a guard there would run in every repository of the machine. Installing
twice changes nothing; uninstalling moves the set-aside hook back, so it is what it was, byte for byte.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

from gitmail.errors import GitmailError, Unwritable
from gitmail.store.files import write_atomically

HOOK = "pre-commit"
MARK = "# gitmail:guard"
CHAINED = "gitmail-chained"  # the folder beside the hook where the repository's own pre-commit hook is kept
SHIM_MODE = 0o755
OWN_SCOPES = ("local", "worktree")  # where a core.hooksPath is the repository's own choice


class GuardStatus(NamedTuple):
    """The commit guard in one repository, as doctor reports it."""

    hook: Path | None  # where git runs the repository's pre-commit hook (None: git could not say)
    installed: bool  # gitmail's shim is there
    current: bool  # it is the one this gitmail would install now (interpreter and guard.sh where they are)
    chained: Path | None  # the repository's own pre-commit hook it runs first, when there is one
    problem: str | None  # why the guard cannot be installed here (a core.hooksPath outside the repository's config)


def guard_script() -> Path:
    """guard.sh as installed with this gitmail (package data beside commit_guard.py)."""
    return Path(__file__).resolve().parent.parent / "guard.sh"


def shim(*, python: str | None = None) -> str:
    """The pre-commit hook gitmail installs, naming this interpreter and guard.sh."""
    interpreter, script = shlex.quote(python or sys.executable), shlex.quote(str(guard_script()))
    return f"""#!/bin/sh
{MARK}: the lease guard `gitmail install --guard` put here (`gitmail uninstall --guard` puts back what was).
# A session's commit of files another session leased exclusively is refused; `git commit --no-verify` skips it.
chained="${{0%/*}}/{CHAINED}/{HOOK}"
if [ -x "$chained" ]; then
    "$chained" "$@" || exit $?
fi
if [ -r {script} ]; then
    exec sh {script} {interpreter}
elif command -v gitmail >/dev/null 2>&1; then
    exec gitmail guard pre-commit
fi
echo "gitmail: the lease guard cannot run (gitmail was moved or removed); the commit goes on" >&2
exit 0
"""


def is_ours(path: Path) -> bool:
    """Whether the file at `path` is gitmail's shim."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(256)
    except OSError:
        return False
    return head.startswith(b"#!/bin/sh\n" + MARK.encode())


def hooks_folder(top: Path) -> Path:
    """Where git runs this repository's hooks from; a one-line error for a core.hooksPath set outside the
    repository's own config (a guard there would run for every repository that config reaches)."""
    scope = _git(top, "config", "--show-scope", "--get", "core.hooksPath", check=False)
    if scope:
        where = scope.split("\t", 1)[0]
        if where not in OWN_SCOPES:
            raise GitmailError(
                f"core.hooksPath is set in your {where} git config, so git runs one hooks folder for every "
                "repository: the guard is installed only into a repository's own hooks (set core.hooksPath with "
                "`git config --local`, or unset the other, then run this again)"
            )
    answer = _git(top, "rev-parse", "--git-path", "hooks")
    if not answer:
        raise GitmailError(f"git does not say where the hooks of {top} are")
    return Path(os.path.normpath(top / answer))


def install(top: Path, *, python: str | None = None, dry_run: bool = False) -> list[str]:
    """Put the guard in the repository at `top`; what was done, one line each."""
    folder = hooks_folder(top)
    hook, kept = folder / HOOK, folder / CHAINED / HOOK
    wanted = shim(python=python)
    if is_ours(hook):
        if _text(hook) == wanted:
            return [f"{hook}: unchanged"]
        if not dry_run:
            _write(hook, wanted)
        return [f"{hook}: updated (the guard, with this gitmail)"]
    done = []
    if os.path.lexists(hook):
        if os.path.lexists(kept):
            raise GitmailError(
                f"{kept} is a pre-commit hook gitmail set aside before, and {hook} is another now: move one of them "
                "away, then run this again"
            )
        if not dry_run:
            kept.parent.mkdir(exist_ok=True)
            os.rename(hook, kept)
        done.append(f"{hook}: moved to {kept} (the guard runs it first)")
    if not dry_run:
        folder.mkdir(parents=True, exist_ok=True)
        _write(hook, wanted)
    done.append(f"{hook}: the lease guard installed")
    return done


def uninstall(top: Path, *, dry_run: bool = False) -> list[str]:
    """Take the guard out of the repository at `top`, and put back the hook it ran; what was done, one line each."""
    folder = hooks_folder(top)
    hook, kept = folder / HOOK, folder / CHAINED / HOOK
    if not is_ours(hook):
        if os.path.lexists(kept):
            return [f"{hook} is not gitmail's guard: left as it is, and {kept} beside it (put it back yourself)"]
        return []
    done = []
    if not dry_run:
        os.unlink(hook)
    done.append(f"{hook}: the lease guard removed")
    if os.path.lexists(kept):
        if not dry_run:
            os.rename(kept, hook)
            try:
                kept.parent.rmdir()
            except OSError:
                pass  # something else is kept there too: it stays
        done.append(f"{hook}: put back as it was")
    return done


def guard_status(top: Path) -> GuardStatus:
    """What the commit guard is in the repository at `top`."""
    try:
        folder = hooks_folder(top)
    except (GitmailError, OSError) as error:
        return GuardStatus(None, False, False, None, str(error))
    hook, kept = folder / HOOK, folder / CHAINED / HOOK
    installed = is_ours(hook)
    return GuardStatus(
        hook,
        installed,
        installed and _text(hook) == shim(),
        kept if installed and os.path.lexists(kept) else None,
        None,
    )


def _git(top: Path, *args: str, check: bool = True) -> str:
    """git's one-line answer about the repository at `top`, with the user's config (it decides where hooks are),
    and without any variable that points git at another repository."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR")
    }
    try:
        done = subprocess.run(["git", *args], cwd=top, capture_output=True, timeout=30, env=env, check=False)
    except (OSError, subprocess.SubprocessError) as error:
        raise GitmailError(f"cannot run git in {top}: {error}") from None
    if done.returncode != 0:
        if not check:
            return ""
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        raise GitmailError(f"git {args[0]} failed in {top}: {lines[-1] if lines else done.returncode}")
    return done.stdout.decode(errors="surrogateescape").strip()


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return None


def _write(path: Path, text: str) -> None:
    try:
        write_atomically(path, text.encode(), mode=SHIM_MODE)
    except OSError as error:
        raise GitmailError(f"cannot write {path}: {error.strerror or error}") from None
    except Unwritable as error:
        raise GitmailError(f"cannot write {path}: {error.reason}") from None
