"""What every group measures in: a sandbox (a temporary home, the mailboxes, the session repositories), mailboxes of
N archived and 20 pending messages, the hooks as installed, the payloads hosts hand them and what their answers
must be, and the bookkeeping that leaves a mailbox as a group found it."""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from .runner import BenchError, Detached, progress, run

PENDING = 20
RECIPIENT = "web"
SENDER = "api"
SYNC_BATCH = 10  # messages per "new messages" sync run
SEND_ARGS = ("send", "--to", RECIPIENT, "--subject", "bench", "--message", "hello")
ARCHIVE_EPOCH = datetime(2025, 1, 1, tzinfo=UTC)  # archived mail is dated before the pending mail gitmail writes


# -- the sandbox -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sandbox:
    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    def mailbox(self, size: int) -> Path:
        return self.root / f"mail-{size}.git"

    def repo(self, name: str) -> Path:
        return self.root / "work" / name

    def env(self, size: int = 0) -> dict[str, str]:
        """This process's environment with the mailbox of `size` archived messages, and nothing pointing at a real
        home, git config or repository."""
        kept = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "GITMAIL_", "XDG_"))}
        return {
            **kept,
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "GITMAIL_DIR": str(self.mailbox(size)),
            "GIT_CONFIG_NOSYSTEM": "1",
        }


@contextmanager
def sandbox() -> Iterator[Sandbox]:
    """A temporary home with the `web` and `api` repositories, entered by this process too, removed at the end."""
    saved = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="gitmail-bench-", ignore_cleanup_errors=True) as root:
        box = Sandbox(Path(root).resolve())
        box.home.mkdir()
        environment = box.env()  # made from this process's environment before it is replaced by it
        os.environ.clear()
        os.environ.update(environment)
        Detached.marker = str(box.root)
        try:
            for name in (RECIPIENT, SENDER):
                run(["git", "init", "-q", str(box.repo(name))])
            yield box
        finally:
            Detached.marker = None
            os.environ.clear()
            os.environ.update(saved)
            progress(f"removing {root}")


def gitmail_command() -> list[str]:
    """The installed console script beside this interpreter, else the module."""
    script = Path(sys.executable).parent / "gitmail"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "gitmail"]


def gitmail_package() -> str:
    """Where the installed gitmail package is (its hook.sh beside it)."""
    out = run([sys.executable, "-c", "import gitmail, os; print(os.path.dirname(gitmail.__file__))"])
    return out.decode().strip()


# -- mailboxes ---------------------------------------------------------------------------------------------------


def git(mailbox: Path, *args: str, stdin: bytes | None = None) -> bytes:
    return run(["git", "--git-dir", str(mailbox), *args], stdin=stdin)


def refs_under(mailbox: Path, prefix: str) -> list[str]:
    return git(mailbox, "for-each-ref", "--format=%(refname)", prefix).decode().split()


def inbox_prefix() -> str:
    return f"refs/gitmail/{RECIPIENT}/inbox/"


def archive_prefix() -> str:
    return f"refs/gitmail/{RECIPIENT}/archive/"


def delete_refs(mailbox: Path, refs: Sequence[str]) -> None:
    if refs:
        git(mailbox, "update-ref", "--stdin", stdin="".join(f"delete {ref}\n" for ref in refs).encode())


def fresh_ids(count: int, taken: set[str], rng: random.Random) -> list[str]:
    from gitmail.values.ids import ID_ALPHABET, ID_LENGTH

    ids: list[str] = []
    while len(ids) < count:
        candidate = "".join(rng.choices(ID_ALPHABET, k=ID_LENGTH))
        if candidate not in taken:
            taken.add(candidate)
            ids.append(candidate)
    return ids


def fast_import_message(mark: int, message_id: str, number: int, *, prefix: str | None = None) -> bytes:
    """One archived message as gitmail stores it: a root commit whose tree holds the document alone (under
    `prefix`, the archive unless it says otherwise)."""
    from gitmail.values.message import DOCUMENT_NAME, Message
    from gitmail.values.names import RepoName

    date = ARCHIVE_EPOCH + timedelta(minutes=number)
    message = Message(
        id=message_id,
        sender=RepoName(SENDER),
        to=RECIPIENT,
        subject=f"Archived message {number}",
        body=f"Body of archived message {number}.\n",
        date=date,
    )
    document, text = message.document(), message.commit_message().encode()
    who = f"{SENDER} <{SENDER}@gitmail> {int(date.timestamp())} +0000"
    return b"".join(
        [
            b"blob\nmark :%d\ndata %d\n%s\n" % (mark, len(document), document),
            f"commit {prefix or archive_prefix()}{message_id}\nauthor {who}\ncommitter {who}\n".encode(),
            b"data %d\n%s\nM 100644 :%d %s\n\n" % (len(text), text, mark, DOCUMENT_NAME.encode()),
        ]
    )


def import_archived(mailbox: Path, count: int, first_number: int) -> None:
    taken = {ref.rsplit("/", 1)[1] for ref in refs_under(mailbox, "refs/gitmail/")}
    ids = fresh_ids(count, taken, random.Random(first_number))
    importer = subprocess.Popen(
        ["git", "--git-dir", str(mailbox), "fast-import", "--quiet", "--done"],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert importer.stdin is not None
    for mark, message_id in enumerate(ids, start=1):
        importer.stdin.write(fast_import_message(mark, message_id, first_number + mark))
    _, errors = importer.communicate(b"done\n")
    if importer.returncode != 0:
        raise BenchError(f"git fast-import failed: {errors.decode().strip()}")


def grow_archive(mailbox: Path, size: int) -> None:
    """Bring the archive up to `size` messages, packed as gitmail packs them."""
    have = len(refs_under(mailbox, archive_prefix()))
    if size > have:
        import_archived(mailbox, size - have, have)
        git(mailbox, "pack-refs", "--all", "--prune")
        git(mailbox, "repack", "-a", "-d", "-q")


def reset_pending(mailbox: Path) -> None:
    """Exactly 20 pending messages for `web`, written (as loose refs and objects) by gitmail itself."""
    from gitmail import mailbox as api
    from gitmail.store.repository import Store

    delete_refs(mailbox, refs_under(mailbox, inbox_prefix()))
    store = Store(mailbox)
    for number in range(PENDING):
        api.send(store, sender=SENDER, to=RECIPIENT, subject=f"Pending message {number}", body="Please read this.\n")


def verify_mailbox(mailbox: Path, size: int) -> None:
    from gitmail import mailbox as api
    from gitmail.store.repository import Store
    from gitmail.values.layout import State

    store = Store(mailbox)
    archived = refs_under(mailbox, archive_prefix())
    pending = api.pending(store, repo=RECIPIENT)
    if len(archived) != size or len(pending.directed) != PENDING or pending.broadcasts or pending.unreadable:
        raise BenchError(
            f"the mailbox holds {len(archived)} archived and {len(pending.directed)} pending messages "
            f"({len(pending.unreadable)} unreadable); expected {size} and {PENDING}"
        )
    for ref in archived[:1] + archived[-1:]:  # imported messages read back as gitmail's own
        entry = api.show(store, ref.rsplit("/", 1)[1])
        if entry.state is not State.ARCHIVED or entry.message.sender != SENDER or entry.message.to != RECIPIENT:
            raise BenchError(f"the imported message {ref} does not read back as archived mail: {entry}")


def copy_mailbox(source: Path, target: Path) -> None:
    """A copy of a mailbox, taken while no packer (store/packing.py) rewrites it: one that runs is waited for, and a
    copy a packer started on meanwhile is taken again."""
    from gitmail.store.packing import held
    from gitmail.store.repository import Store

    for attempt in range(5):
        with held(Store(source)):
            try:
                shutil.copytree(source, target, symlinks=True)
                return
            except shutil.Error:
                if attempt == 4:
                    raise
                shutil.rmtree(target, ignore_errors=True)


def build_mailboxes(box: Sandbox, sizes: Sequence[int]) -> dict[int, float]:
    """One mailbox per size, each grown from a copy of the one before; the seconds each took."""
    from gitmail.store.repository import Store

    seconds: dict[int, float] = {}
    previous: Path | None = None
    for size in sizes:
        start = time.perf_counter()
        mailbox = box.mailbox(size)
        if previous is None:
            Store(mailbox).create()
        else:
            copy_mailbox(previous, mailbox)
        grow_archive(mailbox, size)
        reset_pending(mailbox)
        verify_mailbox(mailbox, size)
        seconds[size] = time.perf_counter() - start
        if size:
            progress(f"built {size:,} archived messages in {seconds[size]:.1f} s")
        previous = mailbox
    return seconds


def archive_of(box: Sandbox, size: int) -> tuple[dict[str, str], Any]:
    """A copy of the mailbox of 0 archived messages grown to `size` archived (and its 20 pending), the environment
    that uses it, and its Store."""
    from gitmail.store.repository import Store

    mailbox = box.root / f"mail-moments-{size}.git"
    copy_mailbox(box.mailbox(0), mailbox)
    grow_archive(mailbox, size)
    verify_mailbox(mailbox, size)
    return {**box.env(0), "GITMAIL_DIR": str(mailbox)}, Store(mailbox)


def syncing_by_itself(box: Sandbox) -> dict[str, str]:
    """A copy of the mailbox of 0 archived messages with a remote that syncs automatically every hour (a bare
    repository by path), synced once; the environment that uses it."""
    from gitmail.store.repository import Store
    from gitmail.sync import engine as sync
    from gitmail.sync import remotes

    copy, remote = box.root / "mail-auto.git", box.root / "remote-auto.git"
    copy_mailbox(box.mailbox(0), copy)
    run(["git", "init", "-q", "--bare", str(remote)])
    store = Store(copy)
    remotes.add_remote(store, name="origin", url=str(remote), auto=True, interval=3600)
    for outcome in sync.sync_all(store):
        if isinstance(outcome, Exception):
            raise BenchError(f"could not sync the mailbox that syncs by itself: {outcome}")
    return {**box.env(0), "GITMAIL_DIR": str(copy)}


# -- leaving a mailbox as it was found ---------------------------------------------------------------------------


def pending_refs(box: Sandbox, size: int) -> set[str]:
    return set(refs_under(box.mailbox(size), inbox_prefix()))


def remove_sent(box: Sandbox, size: int, before: set[str], expected: int, what: str) -> None:
    """Check that every message sent arrived pending, then remove them so the next run starts alike."""
    sent = sorted(pending_refs(box, size) - before)
    if len(sent) != expected:
        raise BenchError(f"{what}: {expected} messages were sent but {len(sent)} arrived pending")
    delete_refs(box.mailbox(size), sent)


@dataclass
class NewMail:
    """One new message for `repo`, sent before a run and archived after it, so that every run finds exactly one.
    `prepared`: sent as a command does (its repository's session-start answers are then made again, detached), and
    the run waits (untimed) until they are, as a session starting a moment after the mail does finds them."""

    store: Any
    repo: str
    waiting: list[str] = field(default_factory=list)
    prepared: bool = False

    def arrive(self) -> None:
        from gitmail import actions
        from gitmail import mailbox as api
        from gitmail.values.names import RepoName
        from gitmail.workspace import Actor

        if not self.prepared:
            sent = api.send(self.store, sender=SENDER, to=self.repo, subject="bench: new", body="New.\n")
            self.waiting.append(sent.message.id)
            return
        made = actions.send(self.store, Actor(RepoName(SENDER)), to=self.repo, subject="bench: new", body="New.\n")
        self.waiting.append(made.entry.message.id)
        wait_prepared(self.store, self.repo)

    def archive(self) -> None:
        from gitmail import mailbox as api

        api.done(self.store, repo=self.repo, ids=[self.waiting.pop()])


def wait_prepared(store: Any, repo: str, timeout: float = 10.0) -> None:
    """Until every kept session-start answer of `repo` was made at its current stamps."""
    from gitmail.store import hookfiles, stamps
    from gitmail.values.names import RepoName

    name = RepoName(repo)
    folder = Path(hookfiles.folder(store.path, hookfiles.CACHE))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = stamps.read(store.path, name)
        keys = [key for p in folder.glob("*.key") if (key := _first_line(p)) is not None]
        mine = [k for k in keys if k.startswith(name.ref + ":")]
        if mine and all(k.startswith(now + ":") for k in mine):
            return
        time.sleep(0.005)
    raise BenchError(f"the session-start answers of {repo} were not made again within {timeout:.0f} s")


def _first_line(path: Path) -> str | None:
    """A kept answer's key, or None when it went between listing and reading (an answer is made again meanwhile)."""
    try:
        return path.read_text().split("\n", 1)[0]
    except FileNotFoundError:
        return None


# -- the hooks, what hosts hand them, and what they must answer --------------------------------------------------


def installed_hook(moment: str, host: str) -> list[str]:
    """A moment's hook as `gitmail install` writes it: hook.sh, with Python behind it."""
    from gitmail.install.hook_commands import hook_script

    script = str(hook_script())
    if moment == "session-start":
        return ["sh", script, "session-start", host, sys.executable, "--watch"]
    return ["sh", script, moment, host, sys.executable]


def hook_payload(web: Path, session: str = "bench") -> bytes:
    payload = {
        "session_id": session,
        "transcript_path": None,
        "cwd": str(web),
        "hook_event_name": "SessionStart",
        "source": "startup",
    }
    return json.dumps(payload).encode()


_STARTED = itertools.count()  # one count for the whole run: groups share mailboxes, and each session is new


def new_sessions(web: Path, prefix: str = "bench-new") -> Callable[[], bytes]:
    """Session-start payloads, each for a session never seen in the run, as a host starts them: a session that
    starts again under the same id (resumed, cleared) may have sent mail of its own, and Python answers it."""
    return lambda: hook_payload(web, f"{prefix}-{next(_STARTED)}")


def tool_payload(web: Path, session: str, event: str) -> bytes:
    """A tool call's payload as the hosts send it: the session first, the tool's output (1 KB) last."""
    call = {"tool_name": "Bash", "tool_input": {"command": "ls -l"}, "tool_response": "x" * 1024}
    payload = {"session_id": session, "transcript_path": f"/tmp/{session}.jsonl", "cwd": str(web)}
    return json.dumps({**payload, "hook_event_name": event, "tool_calls": [call]}, separators=(",", ":")).encode()


def check_hook(output: bytes) -> None:
    try:
        context = json.loads(output)["hookSpecificOutput"]["additionalContext"]
    except (ValueError, KeyError, TypeError):
        raise BenchError(f"the session-start hook printed no JSON envelope: {output[:300]!r}") from None
    if not isinstance(context, str) or not context.strip():
        raise BenchError("the session-start hook's envelope has an empty additionalContext")
    if "could not check" in context:
        raise BenchError(f"the session-start hook reported a failure: {context}")


def check_inbox(output: bytes) -> None:
    if not output.strip():
        raise BenchError("gitmail inbox --peek printed nothing, though 20 messages are pending")


def check_quiet(output: bytes) -> None:
    if output:
        raise BenchError(f"the quiet path printed something, though nothing was new: {output[:300]!r}")


def check_sync_quiet(output: bytes) -> None:
    if output:
        raise BenchError(f"gitmail sync printed to standard output: {output[:200]!r}")
