"""Reading the mailbox's objects with `git cat-file --batch`, run as every git on the mailbox is (gitcmd.py): once
per read, or one git kept running for a process that reads many times; reading past objects git cannot read, and
stopping before ones larger than the reader would read.
"""

from __future__ import annotations

import os

from gitmail.errors import MailboxError
from gitmail.store.gitcmd import GIT_MISSING, SAFE_CONFIG, GitFailed, environment, spawn

TYPE_CHECKING = False  # typing's own costs an import; only annotations need these
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from os import PathLike
    from typing import Any

# What git says when it cannot read an object it has (a loose file cut short or garbled, a damaged pack): such an
# object is treated as missing, where git would stop answering altogether.
_UNREADABLE = r"corrupt|unable to (stream|unpack|parse|read)|inflate|bad object|hash mismatch|is empty|garbage at end"


def unreadable_object(stderr: str) -> str | None:
    """The object git names in a message saying it could not read it ("" when it names none); None when the
    message is about something else."""
    import re  # a failure's message: never read on the way that works

    if not re.search(_UNREADABLE, stderr):
        return None
    named = re.search(r"\b[0-9a-f]{40}\b", stderr)
    return named.group() if named else ""


def object_missing(stderr: str) -> bool:
    """Whether git's message says an object it was asked for is not there."""
    import re

    return re.search(r"\b(bad|missing) object\b", stderr) is not None


def cat_file(
    git_dir: str | PathLike[str],
    specs: Sequence[str],
    damaged: set[str] | None = None,
    *,
    check: str | None = None,
    limit: int | None = None,
) -> list[bytes | None]:
    """`git cat-file --batch` over these specs: each one's content, None where it names nothing, and where the
    object is larger than `limit` bytes: git is stopped as soon as it announces one (having sent at most a pipe's
    worth of it). An object git cannot read is answered None as a missing one is, and named in `damaged` (its id,
    else the spec): git dies on it. After either, the requests left are asked of a new git, once per such object.
    With `check` (a format), `--batch-check` instead: each answer is its line."""
    where = str(git_dir)
    batch = f"--batch-check={check}" if check is not None else "--batch"
    argv = ["git", "-C", where, "--git-dir", where, *SAFE_CONFIG, "cat-file", batch, "--buffer"]
    results: list[bytes | None] = []
    while len(results) < len(specs):
        rest = specs[len(results) :]
        watch = _Watch(limit) if limit is not None and check is None else None
        try:
            done = spawn(
                argv,
                environment(),
                stdin="".join(s + "\n" for s in rest).encode(),
                until=watch.feed if watch is not None else None,
            )
        except FileNotFoundError:
            raise MailboxError(GIT_MISSING) from None
        except OSError as error:
            raise MailboxError(f"could not run git: {error.strerror or error}") from None
        if watch is not None and watch.stopped:  # stopped at one too large: the whole answers before it, then None
            results += [*_answers(done.stdout, watch.answered), None]
            continue
        answers = _answers(done.stdout, len(rest), check is not None)
        if len(answers) == len(rest):
            return results + answers
        culprit: str | None = ""  # exited 0 all the same: it announced more bytes of an object than it gave
        if done.returncode != 0:
            culprit = unreadable_object(done.stderr.decode(errors="replace"))
            if culprit is None:
                raise GitFailed("cat-file", done.returncode, done.stderr.decode(errors="replace"))
        results += [*answers, None]
        if damaged is not None:
            damaged.add(culprit or rest[len(answers)])
    return results


class _Watch:
    """Follows `git cat-file --batch` output as it comes: how many answers are whole, and whether the next one
    announced a size over the limit (then the output must be read no further)."""

    def __init__(self, limit: int) -> None:
        self.limit, self.answered, self.stopped = limit, 0, False
        self.header = b""  # the part of a header line not yet ended
        self.skip = 0  # bytes of the current answer's content (and its newline) still to come

    def feed(self, data: bytes) -> bool:
        at = 0
        while at < len(data):
            if self.skip:
                taken = min(self.skip, len(data) - at)
                self.skip -= taken
                at += taken
                if not self.skip:
                    self.answered += 1
                continue
            end = data.find(b"\n", at)
            if end < 0:
                self.header += data[at:]
                return False
            header, self.header = self.header + data[at:end], b""
            at = end + 1
            size = _size(header)
            if size is None:
                self.answered += 1
            elif size > self.limit:
                self.stopped = True
                return True
            else:
                self.skip = size + 1  # its content and the newline after it
        return False


def _answers(out: bytes, count: int, check: bool = False) -> list[bytes | None]:
    """The whole answers at the start of `git cat-file --batch` output (at most `count`): a git that died mid-way
    leaves the answers before the object it died on. With `check` (`--batch-check` output), each answer is its
    line (None for "<spec> missing" or "ambiguous")."""
    results: list[bytes | None] = []
    at = 0
    while len(results) < count:
        end = out.find(b"\n", at)
        if end < 0:
            break
        if check:
            line = out[at:end]
            results.append(None if line.endswith((b" missing", b" ambiguous")) else line)
            at = end + 1
            continue
        size = _size(out[at:end])
        if size is None:
            results.append(None)
            at = end + 1
        elif len(out) >= end + size + 2 and out[end + 1 + size : end + 2 + size] == b"\n":
            results.append(out[end + 1 : end + 1 + size])
            at = end + size + 2
        else:
            break
    return results


def _size(header: bytes) -> int | None:
    """The size a `git cat-file --batch` answer's header announces; None for "<spec> missing" or "ambiguous"."""
    fields = header.split(b" ")
    return int(fields[2]) if len(fields) == 3 and fields[2].isdigit() else None


# -- a reader kept running ---------------------------------------------------------------------------------------

BATCH_CHUNK = 16_384  # bytes of requests written before their answers are read: well under a pipe's buffer, so
# neither side can block the other


class BatchReader:
    """One `git cat-file --batch` kept running for a process that reads many times (the MCP server, a writer reading
    notes), so that each read costs a round trip through a pipe instead of a git process. It sees what the mailbox
    holds when it is asked: a ref in a request is resolved then, and git looks for new packs when an object is not
    where it last looked. Thread-safe. A git that stops (it dies on an object it cannot read) is replaced, and the
    request it stopped on is asked alone of a git whose messages are heard (`cat_file`)."""

    def __init__(self, git_dir: str | PathLike[str]) -> None:
        import _thread  # the threading module costs the hooks an import; a plain lock is all this needs

        self.git_dir = str(git_dir)
        self._lock = _thread.allocate_lock()
        self._process: _Piped | None = None

    def read(
        self, specs: Sequence[str], *, limit: int | None = None, damaged: set[str] | None = None
    ) -> list[bytes | None]:
        """As `git cat-file --batch` answers each spec (`<oid>:<path>`, `<ref>:<path>`); None where missing, where
        the object is larger than `limit` bytes (then not one byte of it is read), or where git cannot read the
        object (named in `damaged`, as `cat_file` does)."""
        if any("\n" in spec for spec in specs):
            raise ValueError("a cat-file request cannot hold a newline")
        with self._lock:
            results: list[bytes | None] = []
            while len(results) < len(specs):
                try:
                    self._read(specs[len(results) :], limit, results)
                except (OSError, ValueError, EOFError):  # the git behind it stopped: on the spec it was answering?
                    self._stop()
                    try:  # asked alone, of a git whose last words are heard: damage is answered None, else it fails
                        results += cat_file(self.git_dir, [specs[len(results)]], damaged, limit=limit)
                    except MailboxError as error:
                        raise MailboxError(f"could not read the mailbox with git cat-file: {error}") from None
            return results

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _read(self, specs: Sequence[str], limit: int | None, results: list[bytes | None]) -> None:
        """Answers into `results` as they come, so that a git that stops leaves those it gave; up to and including
        the first one too large (its content is never read: this git goes, and a new one answers the rest)."""
        process = self._running()
        for chunk in _chunks(specs):
            process.stdin.write("".join(spec + "\n" for spec in chunk).encode())
            process.stdin.flush()
            for _ in chunk:
                answer = _answer(process.stdout, limit)
                if answer is TOO_LARGE:
                    self._stop()
                    results.append(None)
                    return
                results.append(answer if isinstance(answer, bytes) else None)

    def _running(self) -> _Piped:
        if self._process is None or not self._process.alive():
            self._stop()
            where = self.git_dir
            argv = ["git", "-C", where, "--git-dir", where, *SAFE_CONFIG, "cat-file", "--batch"]
            try:
                self._process = _Piped(argv, environment())
            except FileNotFoundError:
                raise MailboxError(GIT_MISSING) from None
        return self._process

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            process.stop()


class _Piped:
    """A process whose standard input and output are pipes to this one (its errors go nowhere)."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str]) -> None:
        child_in, feed = os.pipe()
        drain, child_out = os.pipe()
        actions = [
            (os.POSIX_SPAWN_DUP2, child_in, 0),
            (os.POSIX_SPAWN_DUP2, child_out, 1),
            (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
        ]
        try:
            self.pid = os.posix_spawnp(argv[0], list(argv), dict(env), file_actions=actions)
        except BaseException:
            for fd in (child_in, feed, drain, child_out):
                os.close(fd)
            raise
        os.close(child_in)
        os.close(child_out)
        self.stdin = os.fdopen(feed, "wb")
        self.stdout = os.fdopen(drain, "rb")
        self.code: int | None = None

    def alive(self) -> bool:
        if self.code is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.code = os.waitstatus_to_exitcode(status)
        return self.code is None

    def stop(self) -> None:
        for stream in (self.stdin, self.stdout):
            try:
                stream.close()
            except OSError:
                pass
        if self.code is None:
            try:
                os.kill(self.pid, 9)
            except ProcessLookupError:
                pass
            os.waitpid(self.pid, 0)
            self.code = -9


def _chunks(specs: Sequence[str]) -> Iterator[Sequence[str]]:
    start, size = 0, 0
    for end, spec in enumerate(specs):
        if size and size + len(spec) + 1 > BATCH_CHUNK:
            yield specs[start:end]
            start, size = end, 0
        size += len(spec) + 1
    if start < len(specs):
        yield specs[start:]


TOO_LARGE = object()  # an answer larger than the reader would read


def _answer(stdout: Any, limit: int | None = None) -> bytes | None | object:
    header = stdout.readline()
    if not header.endswith(b"\n"):
        raise EOFError("git cat-file stopped answering")
    size = _size(header[:-1])
    if size is None:
        return None
    if limit is not None and size > limit:
        return TOO_LARGE
    data = stdout.read(size + 1)
    if len(data) != size + 1:
        raise EOFError("git cat-file stopped answering")
    return bytes(data[:size])
