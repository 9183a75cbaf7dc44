"""The user's own files and repository, as attachments come from them and patches go back to them: files read for
`send --attach`, patches made by git for `send --patch`, and patches applied with git for `gitmail apply`.

gitmail runs git in a user's repository only here, and with care. Making a patch only reads (`git format-patch
--stdout`, `git diff-index`, `git rev-parse`, `git ls-files`: plumbing that never rewrites the index), so the
repository is left exactly as it was; `apply` is the one command that changes it. Every such git runs with the
repository's hooks off (`core.hooksPath=/dev/null`), no fsmonitor, no pager, no external diff or textconv program,
and without the GIT_* variables that would point it at another repository, index or object store or add config;
settings that would change a patch's form (`diff.noprefix`, `diff.mnemonicPrefix`, `diff.relative`, colour, cover
letters) are overridden. The user's own git config is still read: it holds the identity `git am` commits with, and
line-ending and filter settings a diff of the working tree needs.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path
from typing import IO, TYPE_CHECKING, NamedTuple

from gitmail.errors import GitmailError, UsageError
from gitmail.store import gitcmd
from gitmail.values import attachments, jsontext
from gitmail.values.attachments import COMMITS, PATCH_TYPE, UNCOMMITTED, safe_name, size_text
from gitmail.values.names import has_surrogates, has_unsafe
from gitmail.values.outgoing import Outgoing
from gitmail.workspace import current_directory

if TYPE_CHECKING:
    from collections.abc import Callable

# Settings that beat the repository's and the user's config on every git run here.
SAFE_CONFIG = (
    f"core.hooksPath={os.devnull}",
    "core.fsmonitor=false",
    "core.pager=cat",
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "diff.relative=false",
    "diff.external=",
    "color.ui=false",
    "log.showSignature=false",
)
# The GIT_* variables passed on: the user's identity and their choice of config files. Every other one is dropped
# (GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE, GIT_OBJECT_DIRECTORY, GIT_CONFIG_PARAMETERS, GIT_EXTERNAL_DIFF, ...).
KEPT_GIT_ENV = frozenset(
    {
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
        "GIT_CONFIG_NOSYSTEM",
        "GIT_EXEC_PATH",
    }
)
COMMITS_NAME = "commits.patch"
UNCOMMITTED_NAME = "uncommitted.patch"
_MBOX_FROM = re.compile(rb"^From [0-9a-f]{40} Mon Sep 17 00:00:00 2001$", re.MULTILINE)
_IN_PROGRESS = {
    "rebase-apply": "a `git am` or `git rebase`",
    "rebase-merge": "a `git rebase`",
    "MERGE_HEAD": "a `git merge`",
    "CHERRY_PICK_HEAD": "a `git cherry-pick`",
    "REVERT_HEAD": "a `git revert`",
}


class Gathered(NamedTuple):
    """What one `--attach` or `--patch` found: the attachment to write, and what the sender should be told."""

    outgoing: Outgoing
    notes: tuple[str, ...] = ()


# -- files --------------------------------------------------------------------------------------------------------


def read_file(given: str | os.PathLike[str], *, base: Path | None = None, within: Path | None = None) -> Gathered:
    """A file to attach, opened (the caller closes it) and checked: a regular file (a directory, device or pipe is
    refused), its size taken once, so what is written is what was measured. Relative paths are read from `base`
    (default: the current directory). A symbolic link is followed: its target's content is attached under the
    link's own name, and the note says so. With `within`, a path that leads outside that directory (itself, or
    through a link) is refused, and so is anything in its .git."""
    label = shown(os.fspath(given))
    if "\0" in os.fspath(given):
        raise UsageError(f"cannot attach {label}: a path cannot hold a NUL character")
    path = Path(base or current_directory()) / os.fspath(given)
    notes: list[str] = []
    if within is not None:
        root = Path(os.path.realpath(within))
        real = Path(os.path.realpath(path))
        if real != root and root not in real.parents:
            raise UsageError(f"{label} is outside the repository {root}; only files inside it can be attached")
        if ".git" in real.relative_to(root).parts:
            raise UsageError(f"{label} is inside the repository's .git folder; it cannot be attached")
        path = real
    try:
        if os.path.islink(path):
            notes.append(f"{label} is a symbolic link: attached the file it points to, {shown(os.path.realpath(path))}")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO must not block the open
    except FileNotFoundError:
        raise UsageError(f"cannot attach {label}: no such file") from None
    except OSError as error:
        raise UsageError(f"cannot attach {label}: {error.strerror or error}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise UsageError(f"cannot attach {label}: it is a directory (attach its files, or an archive of it)")
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"cannot attach {label}: it is not a regular file")
        os.set_blocking(fd, True)
        try:
            head = os.pread(fd, 8192, 0)
        except OSError as error:  # /proc and /sys files, a failing disk
            raise UsageError(f"cannot attach {label}: it cannot be read ({error.strerror or error})") from None
    except BaseException:
        os.close(fd)
        raise
    handle: IO[bytes] = os.fdopen(fd, "rb")
    name = safe_name(os.fspath(given))
    if name != os.path.basename(os.fspath(given)):
        notes.append(f"{label} is attached as {quoted(name)}")
    outgoing = Outgoing(name, info.st_size, guess_type(name, head), source=handle, label=label)
    return Gathered(outgoing, tuple(notes))


def shown(text: str) -> str:
    """A path as given, for a message: as it is when it prints on one line as itself, else JSON-quoted."""
    return jsontext.dumps(text) if has_unsafe(text) or has_surrogates(text) else text


def quoted(name: str) -> str:
    """A (safe) attachment name in a message: JSON-quoted, as gitmail quotes names everywhere."""
    return jsontext.dumps(name, ensure_ascii=False)


def guess_type(name: str, head: bytes) -> str:
    """A MIME type for display: from the name's extension, else text or binary by the content's first bytes."""
    import mimetypes

    guessed, _ = mimetypes.guess_type(name, strict=False)
    if guessed:
        return guessed.lower()
    return "text/plain" if attachments.is_text(head) else attachments.BINARY_TYPE


def write_out(target: Path, fill: Callable[[int], None], *, force: bool = False) -> None:
    """Write a file whole or not at all: `fill` writes its content into a temporary file beside it, which is synced
    and then given the name. An existing file (or link, or anything else by that name) is replaced only with
    `force`; without it the name is taken only if it is still free at that moment."""
    import tempfile

    if os.path.isdir(target):
        raise UsageError(f"{target} is a directory")
    if os.path.exists(target) and not os.path.isfile(target):  # a device, a FIFO, a socket: never replaced
        raise UsageError(f"{target} is not a regular file; write to a file, or to standard output with -o -")
    if os.path.lexists(target) and not force:
        raise UsageError(f"{target} exists; pass --force to replace it, or -o PATH to write it elsewhere")
    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{target.name[:60]}.", suffix=".part", dir=target.parent)
    except OSError as error:
        raise GitmailError(f"cannot write {target}: {error.strerror or error}") from None
    try:
        try:
            try:
                fill(fd)
            except gitcmd.GitFailed:  # git could not stream it into the file: this file's disk, not the mailbox
                written = os.fstat(fd).st_size
                raise GitmailError(f"cannot write {target}: the write stopped after {written:,} bytes") from None
            os.fchmod(fd, 0o666 & ~_umask())
            os.fsync(fd)
        finally:
            os.close(fd)
        if force:
            os.replace(temporary, target)
        else:
            try:
                os.link(temporary, target)
            except FileExistsError:
                raise UsageError(
                    f"{target} exists; pass --force to replace it, or -o PATH to write it elsewhere"
                ) from None
            except OSError as error:
                if error.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                    raise
                if os.path.lexists(target):  # a file system without hard links: checked, then renamed
                    raise UsageError(f"{target} exists; pass --force to replace it") from None
                os.rename(temporary, target)
    except OSError as error:
        raise GitmailError(f"cannot write {target}: {error.strerror or error}") from None
    finally:
        try:
            os.unlink(temporary)
        except OSError:
            pass


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# -- making a patch -----------------------------------------------------------------------------------------------


def make_patch(top: Path, revisions: str) -> Gathered:
    """The patch `send --patch` attaches: the commits `revisions` selects as `git format-patch` writes them, or with
    no revisions ("") the uncommitted changes to tracked files against HEAD (staged or not, binary included)."""
    return uncommitted(top) if not revisions.strip() else commits(top, revisions.strip())


def commits(top: Path, revisions: str) -> Gathered:
    if revisions.startswith("-") or any(c in revisions for c in "\n\r\0"):
        raise UsageError(f"{revisions!r} is not a revision range (e.g. HEAD~3, or main..topic)")
    flags = ["--stdout", "--binary", "--no-cover-letter", "--no-base", "--no-attach", "--no-thread", "--no-signoff"]
    done = git(top, "format-patch", *flags, "--end-of-options", revisions, "--")
    if done.returncode != 0:
        raise GitmailError(f"git format-patch {revisions} failed in {top}: {_last_line(done.stderr)}")
    data = done.stdout
    count = len(_MBOX_FROM.findall(data))
    if not count:
        raise UsageError(f"{revisions} selects no commits in {top} (as `git format-patch {revisions}` reads it)")
    note = (
        f"--patch {revisions}: attached {count} commit{'s' if count != 1 else ''} as `git format-patch` writes "
        f"them, in {COMMITS_NAME} ({size_text(len(data))}); the recipient applies them with `gitmail apply`"
    )
    outgoing = Outgoing(COMMITS_NAME, len(data), PATCH_TYPE, data=data, label=f"--patch {revisions}", patch=COMMITS)
    return Gathered(outgoing, (note,))


def uncommitted(top: Path) -> Gathered:
    head = git(top, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    if head.returncode != 0:
        raise UsageError(f"{top} has no commits yet: the uncommitted changes need a HEAD to be made against")
    base = head.stdout.decode().strip()
    flags = ["-p", "--binary", "--full-index", "--no-ext-diff", "--no-textconv", "--no-color"]
    flags += ["--src-prefix=a/", "--dst-prefix=b/"]
    done = git(top, "diff-index", *flags, base, "--")
    if done.returncode != 0:
        raise GitmailError(f"git diff-index failed in {top}: {_last_line(done.stderr)}")
    data = done.stdout
    others = git(top, "ls-files", "-z", "--others", "--exclude-standard")
    untracked = others.stdout.count(b"\0") if others.returncode == 0 else 0
    left_out = (
        f"; {untracked} untracked file{'s are' if untracked != 1 else ' is'} not included (`git add -N FILE` "
        "includes one)"
        if untracked
        else ""
    )
    if not data:
        raise UsageError(f"--patch: {top} has no uncommitted changes to tracked files against HEAD{left_out}")
    files = data.count(b"\ndiff --git ") + data.startswith(b"diff --git ")
    note = (
        f"--patch: attached the uncommitted changes against HEAD ({base[:12]}), {files} file"
        f"{'s' if files != 1 else ''}, staged or not, in {UNCOMMITTED_NAME} ({size_text(len(data))}){left_out}"
    )
    outgoing = Outgoing(
        UNCOMMITTED_NAME, len(data), PATCH_TYPE, data=data, label="--patch", patch=UNCOMMITTED, base=base
    )
    return Gathered(outgoing, (note,))


# -- applying a patch ---------------------------------------------------------------------------------------------


class Applied(NamedTuple):
    """What `apply_patch` did."""

    ok: bool
    output: str  # what git said, for the user
    conflict: bool = False  # git stopped with the repository in the middle of the change (conflicts to resolve)
    stopped: bool = False  # `git am` stopped in the middle without a conflict: it could not apply a commit at all


def apply_patch(top: Path, data: bytes, kind: str) -> Applied:
    """Apply a patch to the repository at `top`: commits with `git am --3way`, uncommitted changes with `git apply
    --index --3way`. Refused before anything is touched when the repository has uncommitted changes to tracked files
    (they would mix with the patch's) or is in the middle of another operation. A conflict leaves the repository
    exactly as git left it."""
    git(top, "update-index", "-q", "--refresh", reading=False)  # a file touched but unchanged is no change
    check_clean(top)
    stopped = False
    if kind == COMMITS:
        done = git(top, "am", "--3way", stdin=data, reading=False)
        # git am stops in the middle whatever went wrong: a conflict, or a patch it refused (a path it does not
        # take, a change that does not apply): only unmerged paths make it a conflict.
        stopped = done.returncode != 0 and _in_progress(top) is not None
        conflict = stopped and _unmerged(top)
    else:
        done = git(top, "apply", "--index", "--3way", "--whitespace=nowarn", "-", stdin=data, reading=False)
        conflict = done.returncode != 0 and _unmerged(top)
    output = (done.stdout + done.stderr).decode(errors="replace")
    return Applied(done.returncode == 0, output, conflict, stopped and not conflict)


def check_clean(top: Path) -> None:
    operation = _in_progress(top)
    if operation is not None:
        raise GitmailError(f"{operation} is in progress in {top}; finish it or abort it first (nothing was applied)")
    status = git(top, "status", "--porcelain=v1", "-z", "--untracked-files=no")
    if status.returncode != 0:
        raise GitmailError(f"git status failed in {top}: {_last_line(status.stderr)}")
    if status.stdout:
        changed = status.stdout.count(b"\0")
        raise GitmailError(
            f"{top} has uncommitted changes ({changed} file{'s' if changed != 1 else ''}): commit or stash them "
            "first, so the patch's changes do not mix with them (nothing was applied)"
        )


def _in_progress(top: Path) -> str | None:
    done = git(top, "rev-parse", "--absolute-git-dir")
    if done.returncode != 0:
        raise GitmailError(f"{top} is not a git repository git can read: {_last_line(done.stderr)}")
    git_dir = Path(done.stdout.decode().strip())
    for name, operation in _IN_PROGRESS.items():
        if (git_dir / name).exists():
            return operation
    return None


def _unmerged(top: Path) -> bool:
    done = git(top, "ls-files", "-z", "--unmerged")
    return done.returncode == 0 and bool(done.stdout)


# -- git in the user's repository ---------------------------------------------------------------------------------


def git(top: Path, *args: str, stdin: bytes | None = None, reading: bool = True) -> gitcmd.Spawned:
    """Run git in the user's repository at `top` (see the module's notes); what it did. `reading`: a command that
    only reads, which must take no optional lock (a `git status` would otherwise refresh the index)."""
    settings = [word for setting in SAFE_CONFIG for word in ("-c", setting)]
    try:
        return gitcmd.spawn(["git", "-C", str(top), *settings, *args], environment(reading=reading), stdin=stdin)
    except FileNotFoundError:
        raise GitmailError("git was not found on PATH") from None
    except OSError as error:
        raise GitmailError(f"could not run git: {error.strerror or error}") from None


def environment(*, reading: bool = True) -> dict[str, str]:
    kept = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in KEPT_GIT_ENV}
    kept.update(GIT_TERMINAL_PROMPT="0", GIT_PAGER="cat", GIT_EDITOR=":")
    if reading:
        kept["GIT_OPTIONAL_LOCKS"] = "0"
    return kept


def _last_line(stderr: bytes) -> str:
    lines = [line for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1].removeprefix("fatal: ").removeprefix("error: ") if lines else "no reason given"
