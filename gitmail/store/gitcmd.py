"""Running git on the mailbox: an allow-listed environment, no hooks, no user or system configuration, the process
spawned without the subprocess module, and one error for a git that failed. Reading objects through `git cat-file
--batch` is catfile.py's.

gitmail's git calls must do only what gitmail asks. A `reference-transaction` hook (from the mailbox's hooks/,
its config or a global `core.hooksPath`), an fsmonitor, a pager or a credential helper would run another
program on every send; a stray GIT_DIR or GIT_OBJECT_DIRECTORY would point git at another repository. So git gets
only the variables listed below, reads only the mailbox's own config, and runs no hook.

The one exception is `run_network`, for the commands that talk to a sync remote (fetch, push, ls-remote): they need
the user's own authentication, so they also get the user's git config and the variables listed in NETWORK_ENV —
and still run no hook. Every local command stays on `run`.

A remote git reaches through its local transport (a path, a `file://` URL, a symlink to either) is the one place
where someone else's repository could run code here: git starts upload-pack or receive-pack on this machine, as
this user, inside that repository, with its config and hooks, and without our `-c` settings (git clears them for
the child). So `run_network` names the program git starts there (`--upload-pack`, `--receive-pack`), carrying
settings of its own that no repository config can override: no hook of any kind, no command from config, no
automatic gc, no checkout into a work tree, no lazy fetch, no transport onwards (`remote_program`). A URL gitmail
does not take as local may not become one through the user's `url.<base>.insteadOf` (`protocol.file.allow=never`),
and no URL may use the transports that run commands (`ext::`, `fd::`).
"""

from __future__ import annotations

import os
import time

from gitmail.errors import MailboxError
from gitmail.values import jsontext

TYPE_CHECKING = False  # typing's own costs an import; only annotations need these
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from os import PathLike
    from typing import Any

# The variables passed on to git, each for a reason. Everything else (every GIT_* variable among them) is dropped.
KEPT_ENV = {
    "PATH": "git finds its own helper programs (and we find git) through it",
    "HOME": "git expands '~' with it; no config is read from it (GIT_CONFIG_GLOBAL is /dev/null)",
    "TMPDIR": "where git writes temporary files",
    "SYSTEMROOT": "git for Windows needs it to start at all",
}
FIXED_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",  # no /etc/gitconfig
    "GIT_CONFIG_GLOBAL": os.devnull,  # no ~/.gitconfig or XDG config: user settings must not change what we do
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_NO_REPLACE_OBJECTS": "1",  # a replace ref must not change what a message says
    "GIT_TERMINAL_PROMPT": "0",  # never wait on a terminal
    "GIT_OPTIONAL_LOCKS": "0",  # reads take no locks a writer could trip over
    "LC_ALL": "C",  # stable messages to parse
}
# Settings on the command line beat the mailbox's own config: no hook, no fsmonitor, no pager, nothing that runs.
SAFE_CONFIG = (
    "-c",
    f"core.hooksPath={os.devnull}",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.pager=cat",
)


GIT_MISSING = "git was not found on PATH; gitmail reads the mailbox with it"


def environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    kept = {name: os.environ[name] for name in KEPT_ENV if name in os.environ}
    return {**kept, **FIXED_ENV, **(extra or {})}


class GitFailed(MailboxError):
    """A git command on the mailbox exited non-zero."""

    def __init__(self, command: str, returncode: int, stderr: str) -> None:
        lines = stderr.strip().splitlines()
        said = lines[-1] if lines else str(returncode)
        garbled = said.partition("packed-refs: ")[2] if "unexpected line in " in said else ""
        self.packed_refs = bool(garbled)  # git stops on such a line for every ref: only a repair gets it going
        if garbled:
            super().__init__(
                f"the mailbox needs `gitmail doctor --repair`: its packed-refs holds a line that is no ref "
                f"({jsontext.dumps(garbled[:80])}), and git stops on it"
            )
        else:
            super().__init__(f"git {command} failed on the mailbox: {said}")
        self.returncode = returncode
        self.stderr = stderr


class Spawned:
    """What a finished process left: its exit code and everything it wrote."""

    __slots__ = ("returncode", "stdout", "stderr")

    def __init__(self, returncode: int, stdout: bytes, stderr: bytes) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def spawn(
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    stdin: bytes | None = None,
    pass_fds: Sequence[int] = (),
    timeout: float | None = None,
    until: Callable[[bytes], bool] | None = None,
) -> Spawned:
    """Run a program to its end with os.posix_spawnp, feeding it `stdin` and collecting its output, without the
    subprocess module (whose import costs the hooks and the quick commands milliseconds each). The fds in
    `pass_fds` stay open in it (the mailbox lock, which must outlive gitmail if it is killed); a process still
    running after `timeout` seconds is killed (returncode -9), and so is one whose output so far made `until`
    (called with each piece of standard output as it comes) say True. Raises FileNotFoundError when the program is
    missing."""
    import select

    child_in, feed = os.pipe() if stdin else (None, None)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        pid = os.posix_spawnp(argv[0], list(argv), dict(env), file_actions=_streams(child_in, out_w, err_w, pass_fds))
    finally:
        for fd in (child_in, out_w, err_w):
            if fd is not None:
                os.close(fd)
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    pending = memoryview(stdin or b"")
    poller = select.poll()
    poller.register(out_r, select.POLLIN)
    poller.register(err_r, select.POLLIN)
    if feed is not None:
        os.set_blocking(feed, False)
        poller.register(feed, select.POLLOUT)
    end = None if timeout is None else time.monotonic() + timeout
    open_fds = {out_r, err_r} | ({feed} if feed is not None else set())
    killed = False
    try:
        while open_fds and not killed:
            wait = None if end is None else max(0.0, end - time.monotonic())
            ready = poller.poll(None if wait is None else int(wait * 1000))
            if not ready and end is not None and time.monotonic() >= end:
                os.kill(pid, 9)
                killed = True
                break
            for fd, _ in ready:
                if fd == feed:
                    try:
                        written = os.write(fd, pending[:65536])
                    except BrokenPipeError:
                        written = len(pending)
                    pending = pending[written:]
                    if not pending:
                        poller.unregister(fd)
                        os.close(fd)
                        open_fds.discard(fd)
                    continue
                data = os.read(fd, 65536)
                if data:
                    chunks[fd].append(data)
                    if until is not None and fd == out_r and until(data):
                        os.kill(pid, 9)
                        killed = True
                        break
                else:
                    poller.unregister(fd)
                    open_fds.discard(fd)
    finally:
        for fd in open_fds:
            os.close(fd)
        for fd in (out_r, err_r):
            if fd not in open_fds:
                os.close(fd)
        _, status = os.waitpid(pid, 0)
    code = -9 if killed else os.waitstatus_to_exitcode(status)
    return Spawned(code, b"".join(chunks[out_r]), b"".join(chunks[err_r]))


def _streams(stdin: int | None, stdout: int, stderr: int, pass_fds: Sequence[int] = ()) -> list[tuple[Any, ...]]:
    """A spawned process's file actions: its standard streams (input from /dev/null when it is fed nothing), and
    the fds it keeps."""
    return [
        (os.POSIX_SPAWN_DUP2, stdin, 0) if stdin is not None else (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_DUP2, stdout, 1),
        (os.POSIX_SPAWN_DUP2, stderr, 2),
        *((os.POSIX_SPAWN_DUP2, fd, fd) for fd in pass_fds),  # the same fd: its close-on-exec flag is cleared
    ]


def run(
    git_dir: str | PathLike[str],
    *args: str,
    stdin: bytes | None = None,
    env: Mapping[str, str] | None = None,
    pass_fds: Sequence[int] = (),
) -> bytes:
    """Run one git command on the mailbox; its standard output, or GitFailed. git is started in the mailbox (`-C`):
    the caller's directory may be gone, and git must not care."""
    where = str(git_dir)
    try:
        done = spawn(
            ["git", "-C", where, "--git-dir", where, *SAFE_CONFIG, *args],
            environment(env),
            stdin=stdin,
            pass_fds=pass_fds,
        )
    except FileNotFoundError:
        raise MailboxError(GIT_MISSING) from None
    except OSError as error:
        raise MailboxError(f"could not run git: {error.strerror or error}") from None
    if done.returncode != 0:
        command = next((a for a in args if not a.startswith("-") and "=" not in a), "")
        raise GitFailed(command, done.returncode, done.stderr.decode(errors="replace"))
    return done.stdout


def attempt(git_dir: str | PathLike[str], *args: str) -> tuple[int, bytes]:
    """Run one git command on the mailbox; its exit code and whatever it wrote out before it stopped (a walk that
    dies on a missing commit has printed the commits above it)."""
    where = str(git_dir)
    try:
        done = spawn(["git", "-C", where, "--git-dir", where, *SAFE_CONFIG, *args], environment(None))
    except FileNotFoundError:
        raise MailboxError(GIT_MISSING) from None
    except OSError as error:
        raise MailboxError(f"could not run git: {error.strerror or error}") from None
    return done.returncode, done.stdout


def run_into(git_dir: str | PathLike[str], out_fd: int, *args: str) -> None:
    """Run one git command on the mailbox with its standard output going straight into an open file (an attachment
    written out, never held in memory); GitFailed when it fails."""
    where = str(git_dir)
    err_r, err_w = os.pipe()
    argv = ["git", "-C", where, "--git-dir", where, *SAFE_CONFIG, *args]
    try:
        pid = os.posix_spawnp("git", argv, environment(), file_actions=_streams(None, out_fd, err_w))
    except FileNotFoundError:
        raise MailboxError(GIT_MISSING) from None
    finally:
        os.close(err_w)
    errors = []
    with os.fdopen(err_r, "rb") as stream:
        while chunk := stream.read(65536):
            errors.append(chunk)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        command = next((a for a in args if not a.startswith("-") and "=" not in a), "")
        raise GitFailed(command, code, b"".join(errors).decode(errors="replace"))


# -- commands that talk to a remote ------------------------------------------------------------------------------

# What a fetch or push needs from the user, each for a reason; added to KEPT_ENV. The user's system and global git
# config are read too (credential helpers, `url.<base>.insteadOf`, `core.sshCommand`, proxies, certificates).
NETWORK_ENV = {
    "XDG_CONFIG_HOME": "git's global config may live there",
    "GIT_CONFIG_GLOBAL": "the user's choice of global config file",
    "GIT_CONFIG_SYSTEM": "the user's choice of system config file",
    "GIT_CONFIG_NOSYSTEM": "the user's choice to skip the system config",
    "SSH_AUTH_SOCK": "the ssh agent that holds the user's keys",
    "GIT_SSH_COMMAND": "how the user runs ssh",
    "GIT_SSH": "how the user runs ssh (older form)",
    "GIT_SSH_VARIANT": "which ssh the user runs",
    "GIT_ASKPASS": "the program that asks for a password",
    "SSH_ASKPASS": "the program that asks for a key's passphrase",
    "SSH_ASKPASS_REQUIRE": "when ssh uses that program",
    "DISPLAY": "where a graphical password prompt appears",
    "GIT_TERMINAL_PROMPT": "whether git may prompt on the terminal (background syncs have none)",
    "http_proxy": "the user's proxy",
    "https_proxy": "the user's proxy",
    "HTTP_PROXY": "the user's proxy",
    "HTTPS_PROXY": "the user's proxy",
    "all_proxy": "the user's proxy",
    "ALL_PROXY": "the user's proxy",
    "no_proxy": "hosts reached without the proxy",
    "NO_PROXY": "hosts reached without the proxy",
    "GIT_SSL_CAINFO": "certificates the user trusts",
    "GIT_SSL_CAPATH": "certificates the user trusts",
    "SSL_CERT_FILE": "certificates the user trusts",
    "SSL_CERT_DIR": "certificates the user trusts",
    "CURL_CA_BUNDLE": "certificates the user trusts",
    "KRB5CCNAME": "the user's Kerberos tickets",
    "USER": "ssh and credential helpers may ask who the user is",
    "LOGNAME": "ssh and credential helpers may ask who the user is",
}
NETWORK_FIXED_ENV = {
    "GIT_NO_REPLACE_OBJECTS": "1",
    "LC_ALL": "C",  # stable messages to parse
}


class NetworkResult:
    """What a command that talked to a remote did."""

    __slots__ = ("returncode", "stdout", "stderr")

    def __init__(self, returncode: int, stdout: bytes, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def network_environment() -> dict[str, str]:
    kept = {name: os.environ[name] for name in (*KEPT_ENV, *NETWORK_ENV) if name in os.environ}
    return {**kept, **NETWORK_FIXED_ENV}


def run_network(
    git_dir: str | PathLike[str],
    command: str,
    *options: str,
    url: str,
    refs: Sequence[str] = (),
    config: Sequence[str] = (),
    pass_fds: Sequence[int] = (),
    timeout: float | None = None,
) -> NetworkResult:
    """Run one git command that talks to a remote (`git [-c config...] command options... -- url refs...`), with
    the user's authentication and git config, no hook here, and nothing of the remote's run here (`remote_args`).
    Never raises for git's own failures: the caller reads the exit code and the messages."""
    # git 2.54's hooks from config run where refs change: receive-pack. (A sync refuses such a remote before it
    # starts; the quick check's ls-remote, which changes nothing there, spares itself asking git its version.)
    refused = local_transport_problem(url) if command == "push" else None
    if refused is not None:
        return NetworkResult(128, b"", f"fatal: {refused}")
    settings = [piece for setting in config for piece in ("-c", setting)]
    try:
        done = spawn(
            [
                "git",
                "--git-dir",
                str(git_dir),
                *SAFE_CONFIG,
                *settings,
                *remote_args(command, url),
                *options,
                "--",
                url,
                *refs,
            ],
            network_environment(),
            pass_fds=pass_fds,
            timeout=timeout,
        )
    except FileNotFoundError:
        raise MailboxError("git was not found on PATH; gitmail syncs with it") from None
    except OSError as error:
        raise MailboxError(f"could not run git: {error.strerror or error}") from None
    if done.returncode == -9:
        return NetworkResult(-1, b"", f"fatal: no answer within {timeout:g} seconds")
    return NetworkResult(done.returncode, done.stdout, done.stderr.decode(errors="replace"))


# Every hook event git knows (githooks(5), git 2.55). core.hooksPath=/dev/null stops the hooks/ folder and any
# core.hooksPath a repository sets; hook.<event>.enabled=false stops the hooks a config defines (git 2.55 and later;
# older gits ignore the setting, and before 2.54 there are no such hooks).
HOOK_EVENTS = (
    "applypatch-msg pre-applypatch post-applypatch pre-commit pre-merge-commit prepare-commit-msg commit-msg "
    "post-commit pre-rebase post-checkout post-merge pre-push pre-receive update proc-receive post-receive "
    "post-update reference-transaction push-to-checkout pre-auto-gc post-rewrite sendemail-validate "
    "fsmonitor-watchman p4-changelist p4-prepare-changelist p4-post-changelist p4-pre-submit post-index-change"
).split()
# The remote side's settings: the command line is the strongest config scope, above the repository's own config,
# what it includes and the user's global config.
REMOTE_SIDE_CONFIG = (
    f"core.hooksPath={os.devnull}",  # no hook from hooks/ or from a core.hooksPath the repository sets
    "core.fsmonitor=false",  # no fsmonitor command when an index is read
    "core.alternateRefsCommand=exit 0",  # objects/info/alternates: no command, no alternate refs advertised
    "receive.autogc=false",  # no `git gc --auto` after a push (its pre-auto-gc hook, its children)
    "gc.auto=0",
    "maintenance.auto=false",
    "receive.denyCurrentBranch=refuse",  # no updateInstead: no checkout into a work tree of the remote (filters,
    "receive.denyDeleteCurrent=refuse",  # fsmonitor, push-to-checkout, post-index-change)
    "receive.updateServerInfo=false",
    "core.logAllRefUpdates=false",  # no new reflog (an existing one is still appended to: by "gitmail", below)
    *(f"hook.{event}.enabled=false" for event in HOOK_EVENTS),
)
REMOTE_SIDE_ENV = (
    "GIT_NO_LAZY_FETCH=1",  # no lazy fetch from a promisor remote the repository's config names
    "GIT_ALLOW_PROTOCOL=",  # set and empty: no transport at all for whatever the remote side would start
    "GIT_COMMITTER_NAME=gitmail",  # the identity in the remote's reflog lines is ours, not its config's
    "GIT_COMMITTER_EMAIL=gitmail",
)
# On gitmail's own command, whatever the URL: no transport that runs a command or talks through a file descriptor.
TRANSPORT_CONFIG = ("-c", "protocol.ext.allow=never", "-c", "protocol.fd.allow=never")
CONFIG_HOOKS_ONLY = (2, 54)  # the git that runs hooks a config defines and has no switch to stop them


def is_local(url: str) -> bool:
    """Whether git reaches `url` through its local transport, as git decides it: `file://...`, or no ':' before
    the first '/' (a path). `<helper>::...` and `<scheme>://...` are not local."""
    end = 0
    while end < len(url) and (url[end].isalnum() or (end and url[end] in "+.-")):
        end += 1
    rest = url[end:]
    if rest.startswith("::"):
        return False
    if rest.startswith("://"):
        return url[:end].lower() == "file"
    colon, slash = url.find(":"), url.find("/")
    return colon < 0 or 0 <= slash < colon


def remote_args(command: str, url: str) -> list[str]:
    """What goes between gitmail's own settings and the options of a fetch, push or ls-remote of `url`."""
    if not is_local(url):
        return [*TRANSPORT_CONFIG, "-c", "protocol.file.allow=never", command]
    service = "receive-pack" if command == "push" else "upload-pack"
    return [*TRANSPORT_CONFIG, command, f"--{service}={remote_program(service)}"]


def remote_program(service: str) -> str:
    """The shell command line git runs for upload-pack or receive-pack in a local remote: our own git, by its
    path, with the remote side's settings and variables."""
    config = [piece for setting in REMOTE_SIDE_CONFIG for piece in ("-c", setting)]
    return " ".join([*REMOTE_SIDE_ENV, *(quoted(word) for word in [git_path(), *config, service])])


def local_transport_problem(url: str) -> str | None:
    """Why git cannot be trusted with this URL on this machine; None when it can. Only git 2.54 cannot: it runs
    hooks a repository's config defines, under names of the repository's choosing, and has no switch to stop
    them."""
    if not is_local(url) or git_version()[:2] != CONFIG_HOOKS_ONLY:
        return None
    return (
        "git 2.54 would run hooks that the remote repository's config defines, and cannot be told not to; "
        "sync with a path or file:// remote needs another git version (or reach the remote over ssh)"
    )


_found: dict[str, Any] = {}  # what git_path and git_version found, once per process


def git_path() -> str:
    """The git that PATH names (the one `spawn` runs), as an absolute path."""
    if "path" not in _found:
        for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
            candidate = os.path.join(os.path.abspath(folder or "."), "git")
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                _found["path"] = candidate
                break
        else:
            raise MailboxError("git was not found on PATH; gitmail syncs with it")
    return str(_found["path"])


def git_version() -> tuple[int, ...]:
    """The version of the git on PATH, as numbers ((2, 39, 5)); () when it cannot be told."""
    if "version" not in _found:
        try:
            said = spawn([git_path(), "version"], environment()).stdout.decode(errors="replace").split()
        except OSError:
            said = []
        numbers = []
        for part in (said[2] if len(said) > 2 else "").split("."):
            if not part.isdigit():
                break
            numbers.append(int(part))
        _found["version"] = tuple(numbers)
    return tuple(_found["version"])


def quoted(word: str) -> str:
    """`word` for a POSIX shell, as shlex.quote spells it (without importing shlex: the hooks use this)."""
    if word and all(c.isalnum() or c in "@%+=:,./-_" for c in word):
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"
