"""Sync: bring this mailbox and a remote to the same state, both ways, through any git remote.

How state travels. Here every message has its own ref (refs/gitmail/<repo>/<folder>/<id>): cheap to list for one
repo and plain to browse. Sent like that, every fetch would advertise every message's ref — 100,000 refs, about
8 MB, before anything moves. So the remote holds a few refs instead:

- refs/gitmail-sync/state: a commit whose tree lists every message and its state, as
  `<repo>/<folder>/<id[:2]>/<id>` -> the message's commit (a gitlink), and whose parents reach every message
  commit, so that fetching this one ref brings them all;
- refs/gitmail-sync/notes/<name>: each of gitmail's notes refs (refs/notes/gitmail-*: seen-sets, receipts).

Here, refs/gitmail-remotes/<remote>/… keep what the remote held when last fetched or pushed: the base that fetch
negotiates from. Sync changes refs/gitmail/ and refs/notes/ only through the store's writer (the lock, leases and
the journal); it fetches and pushes outside the mailbox lock, under a sync lock of its own.

Reconciliation is by message id and never goes backwards: a message on either side ends up on both; archived beats
pending and retracted beats active; the notes refs merge as a union of their lines; nothing is ever deleted. The
push is atomic and every ref it moves carries the value it expects; when another machine pushed in between, sync
fetches, reconciles and tries again, a bounded number of times.

A sync that finds nothing new costs one fetch: what the remote holds is compared with what the last sync left, and
the mailbox's refs with a fingerprint of their files taken then (see `fingerprint`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from gitmail import gitcmd
from gitmail.errors import GitmailError, UsageError
from gitmail.identity import RepoName
from gitmail.layout import ROOT, Change, Located, State, latest, locate
from gitmail.machine import Machine
from gitmail.message import BROADCAST, DOCUMENT_NAME, ID_PATTERN

if TYPE_CHECKING:
    from gitmail.message import Message
    from gitmail.store import Store, Writer

REMOTE_ROOT = "refs/gitmail-sync/"  # on the remote
STATE = "state"
NOTES = "notes/"
TRACKING_ROOT = "refs/gitmail-remotes/"  # here: what each remote held when last fetched or pushed
NOTES_ROOT = "refs/notes/"
NOTES_PREFIX = "gitmail-"  # every refs/notes/gitmail-* is gitmail's, and merges as a union of lines
FORMAT_PATH = "gitmail-sync"  # a file in the state's tree: what it is and which format
FORMAT_TEXT = "gitmail sync state\nformat: 1\n"
SETTINGS = "gitmail-remote"  # [gitmail-remote "<name>"] url, auto, interval in the mailbox's config
DEFAULT_INTERVAL = 300  # seconds between automatic syncs
ATTEMPTS = 6  # fetch, reconcile and push this often while other machines keep pushing in between
CARRIER_PARENTS = 256  # message commits per carrier commit (a state commit reaches new messages through these)
IMPORT_CHUNK = 1000  # ref changes per transaction when many messages arrive at once
PACK_AFTER = 1000  # refs imported in one sync after which the refs are packed
NETWORK_TIMEOUT = 900.0  # seconds a fetch or push may take before it is given up
RACY_SECONDS = 2.0  # a ref file changed this recently may change again within the same timestamp
SYNC_ACTOR = RepoName("gitmail-sync")  # the "who" in the reflog of refs sync moves
ZERO = "0" * 40
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}")
_TOKEN_USER = re.compile(r"(gh[pousr]_|github_pat_|glpat-)|[A-Za-z0-9_\-]{32,}$")


class SyncError(GitmailError):
    """A sync that could not be carried out: the remote is unreachable, refused it, or holds something else."""


class NotGitmail(SyncError):
    """The remote holds something other than gitmail's sync state: nothing of it may land here."""

    def __init__(self, remote: str, detail: str) -> None:
        super().__init__(f"{remote}: the remote holds something other than gitmail mail ({detail})")


class Remote(NamedTuple):
    name: str
    url: str
    auto: bool = False  # sync in the background: at session start (every `interval`) and after a send
    interval: int = DEFAULT_INTERVAL  # seconds


class Outcome(NamedTuple):
    """What one sync with one remote did."""

    remote: str
    received: int = 0  # messages new here
    moved_here: int = 0  # archived or retracted here because another machine did
    sent: int = 0  # messages new on the remote
    moved_there: int = 0  # archived or retracted on the remote because this machine did
    notes: int = 0  # notes refs that changed here or there (seen-sets, receipts)
    conflicts: int = 0  # ids that differ in content between here and there, left as they are (see the log)
    attempts: int = 1

    @property
    def quiet(self) -> bool:
        return not (self.received or self.moved_here or self.sent or self.moved_there or self.notes)


# -- remotes ---------------------------------------------------------------------------------------------------


def name_problem(raw: str) -> str | None:
    if not _NAME.fullmatch(raw):
        return "use letters, digits, '-' and '_' (at most 63), starting with a letter or digit"
    return None


def url_problem(url: str) -> str | None:
    """Why a URL cannot be a sync remote; None when it can. Credentials in a URL are refused: git would store them
    in plain text in the mailbox's config and show them in messages."""
    from urllib.parse import urlsplit

    if not url or url != url.strip() or any(ord(c) < 32 for c in url):
        return "it is empty or holds spaces or control characters at its ends"
    if url.startswith("-"):
        return "it starts with '-'"
    if "://" in url:
        try:
            parts = urlsplit(url)
            password, user = parts.password, parts.username
        except ValueError as error:
            return f"it does not parse ({error})"
        if password is not None:
            return "it embeds a password in plain text; use ssh keys or a git credential helper instead"
        if user and parts.scheme.lower() in ("http", "https") and _TOKEN_USER.match(user):
            return "it embeds an access token in plain text; use a git credential helper instead"
    return None


def redact(url: str) -> str:
    """The URL with any password or token replaced, for messages."""
    return re.sub(r"://[^/@]*@", "://***@", url) if url_problem(url) and "://" in url else url


def remotes(store: Store) -> list[Remote]:
    """The configured remotes, in the order they were added."""
    if not store.exists():
        return []
    try:
        out = store.git("config", "--get-regexp", rf"^{SETTINGS}\.").decode(errors="replace")
    except gitcmd.GitFailed:  # none configured
        return []
    found: dict[str, dict[str, str]] = {}
    for line in out.splitlines():
        key, _, value = line.partition(" ")
        name, _, variable = key[len(SETTINGS) + 1 :].rpartition(".")
        found.setdefault(name, {})[variable] = value
    return [
        Remote(
            name,
            values.get("url", ""),
            values.get("auto", "false").lower() in ("true", "yes", "on", "1"),
            _seconds(values.get("interval")),
        )
        for name, values in found.items()
        if not name_problem(name)
    ]


def _seconds(raw: str | None) -> int:
    try:
        return max(1, int(raw)) if raw is not None else DEFAULT_INTERVAL
    except ValueError:
        return DEFAULT_INTERVAL


def find(store: Store, name: str) -> Remote:
    for remote in remotes(store):
        if remote.name == name:
            return remote
    known = ", ".join(r.name for r in remotes(store))
    raise UsageError(
        f"no remote named {name!r}" + (f" (known: {known})" if known else " (add one: gitmail remote add)")
    )


def add_remote(store: Store, *, name: str, url: str, auto: bool = False, interval: int = DEFAULT_INTERVAL) -> Remote:
    """Record a remote to sync with. Nothing is sent until the first sync."""
    for problem, what in ((name_problem(name), f"remote name {name!r}"), (url_problem(url), "URL")):
        if problem:
            raise UsageError(f"invalid {what}: {problem}")
    if interval < 1:
        raise UsageError("the interval must be at least 1 second")
    with store.locked():
        if any(r.name == name for r in remotes(store)):
            raise UsageError(f"a remote named {name!r} exists already (remove it first: gitmail remote remove {name})")
        _configure(store, name, url=url, auto=auto, interval=interval)
    return Remote(name, url, auto, interval)


def change_remote(store: Store, name: str, *, auto: bool | None = None, interval: int | None = None) -> Remote:
    if interval is not None and interval < 1:
        raise UsageError("the interval must be at least 1 second")
    with store.locked():
        remote = find(store, name)
        remote = remote._replace(
            auto=remote.auto if auto is None else auto, interval=remote.interval if interval is None else interval
        )
        _configure(store, name, auto=remote.auto, interval=remote.interval)
    return remote


def _configure(store: Store, name: str, *, url: str | None = None, auto: bool, interval: int) -> None:
    settings = {"url": url, "auto": "true" if auto else "false", "interval": str(interval)}
    for variable, value in settings.items():
        if value is not None:
            store.git("config", f"{SETTINGS}.{name}.{variable}", value)


def remove_remote(store: Store, name: str) -> None:
    """Forget a remote: its settings and what this mailbox knew of it. The remote itself is not touched."""
    remote = find(store, name)
    with sync_lock(store, wait=60.0) as fd, store.locked():
        assert fd is not None
        tips = _tracking(store, remote.name)
        if tips:
            commands = "".join(f"delete {TRACKING_ROOT}{remote.name}/{ref}\0{oid}\0" for ref, oid in tips.items())
            store.git("update-ref", "-z", "--stdin", stdin=commands.encode())
        store.git("config", "--remove-section", f"{SETTINGS}.{remote.name}")
        Record.path(store, remote.name).unlink(missing_ok=True)


# -- the sync lock and what the last sync left ---------------------------------------------------------------


@contextmanager
def sync_lock(store: Store, *, wait: float | None) -> Iterator[int | None]:
    """One sync of a mailbox at a time. With `wait` None, yields None at once when another sync holds it. The
    lock is passed on to git's fetch and push, so it stays held until they exit even if gitmail is killed."""
    import fcntl

    from gitmail.lock import unwritable

    store.create()
    try:
        folder = _folder(store)
        fd = os.open(folder / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as error:
        raise unwritable(store.path, error) from None
    try:
        end = time.monotonic() + (wait or 0.0)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if wait is None:
                    yield None
                    return
                if time.monotonic() > end:
                    raise SyncError("another sync of this mailbox is still running; try again later") from None
                time.sleep(0.05)
        _clear_leftovers(store, folder)
        yield fd
    finally:
        os.close(fd)


def _folder(store: Store) -> Path:
    folder = store.own_dir / "sync"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def _clear_leftovers(store: Store, folder: Path) -> None:
    """Lock files and scratch indexes a killed sync left: whoever made them shared the lock we now hold."""
    for leftover in folder.glob("index-*"):
        leftover.unlink(missing_ok=True)
    tracking = store.path / TRACKING_ROOT
    if tracking.is_dir():
        for stale in tracking.rglob("*.lock"):
            stale.unlink(missing_ok=True)


class Record(NamedTuple):
    """What the last sync with a remote left: the remote's refs as both sides agreed on them, and a fingerprint
    of this mailbox's ref files at that moment (None when they were too fresh to trust)."""

    tips: dict[str, str] = {}
    fingerprint: str | None = None
    last_attempt: float | None = None
    last_success: float | None = None
    error: str | None = None

    @staticmethod
    def path(store: Store, name: str) -> Path:
        return store.own_dir / "sync" / f"{name}.json"

    @classmethod
    def load(cls, store: Store, name: str) -> Record:
        try:
            data = json.loads(cls.path(store, name).read_text())
            return cls(
                tips={str(k): str(v) for k, v in dict(data.get("tips", {})).items()},
                fingerprint=data.get("fingerprint"),
                last_attempt=data.get("last_attempt"),
                last_success=data.get("last_success"),
                error=data.get("error"),
            )
        except (OSError, ValueError, TypeError, AttributeError):
            return cls()

    def save(self, store: Store, name: str) -> None:
        from gitmail.lock import write_atomically

        _folder(store)
        write_atomically(self.path(store, name), json.dumps(self._asdict(), indent=1).encode(), durable=False)


def fingerprint(store: Store) -> str | None:
    """A digest of the files that hold the mailbox's message and notes refs: packed-refs (git rewrites it whole,
    under a new inode) and every directory of loose refs (creating, replacing or deleting a ref file changes its
    directory's modification time). None when something changed within RACY_SECONDS: a second change inside the
    same timestamp would go unseen."""
    now = time.time()
    newest = 0.0
    parts: list[str] = []
    packed = store.path / "packed-refs"
    try:
        info = packed.stat()
        parts.append(f"packed-refs {info.st_ino} {info.st_size} {info.st_mtime_ns}")
        newest = info.st_mtime
    except FileNotFoundError:
        parts.append("packed-refs -")
    pending = [store.path / ROOT.rstrip("/"), store.path / NOTES_ROOT.rstrip("/")]
    while pending:
        folder = pending.pop()
        try:
            info = folder.stat()
            with os.scandir(folder) as entries:
                pending += [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)]
        except FileNotFoundError:
            parts.append(f"{folder.relative_to(store.path)} -")
            continue
        parts.append(f"{folder.relative_to(store.path)} {info.st_ino} {info.st_mtime_ns}")
        newest = max(newest, info.st_mtime)
    if now - newest < RACY_SECONDS:
        return None
    return hashlib.sha256("\n".join(sorted(parts)).encode()).hexdigest()


# -- syncing ---------------------------------------------------------------------------------------------------


def sync(store: Store, remote: Remote, *, lock_fd: int) -> Outcome:
    """Sync with one remote, both ways. The caller holds the sync lock (`sync_lock`).

    The remote's refs are asked for first (`git ls-remote`, which reads no local ref): when they and this
    mailbox's ref files are as the last sync left them, that is all. A fetch reads every local ref tip (a
    third of a second at 100,000 messages), so it is made only when the remote has something new."""
    from gitmail import machine

    problem = url_problem(remote.url)
    if problem:
        raise SyncError(f"{remote.name}: refusing to sync with {redact(remote.url)}: {problem}")
    record = Record.load(store, remote.name)._replace(last_attempt=time.time())
    _touch_attempt(store)
    outcome = Outcome(remote.name)
    try:
        advertised = _advertised(store, remote, lock_fd)
        if advertised == record.tips and _unchanged_since(record, store):
            record = record._replace(last_success=time.time(), error=None)
            return outcome
        here = machine.current(store)
        for attempt in range(1, ATTEMPTS + 1):
            before = _tracking(store, remote.name)
            tips = before
            if attempt > 1 or before != advertised:
                _fetch(store, remote, lock_fd)
                tips = _tracking(store, remote.name)
            try:
                there = _read_remote(store, remote.name, tips)
                step, plan = _reconcile(store, there, here, remote.name)
            except NotGitmail:
                _restore_tracking(store, remote.name, before, tips)
                raise
            outcome = _add(outcome, step)._replace(attempts=attempt)
            if not plan.updates:
                record = Record(tips, fingerprint(store), record.last_attempt, time.time())
                return outcome
            if _push(store, remote, plan.updates, lock_fd):
                _record_pushed(store, remote.name, plan.updates)
                outcome = outcome._replace(sent=outcome.sent + plan.sent, moved_there=outcome.moved_there + plan.moved)
                outcome = outcome._replace(notes=outcome.notes + plan.notes)
                record = Record(_tracking(store, remote.name), fingerprint(store), record.last_attempt, time.time())
                return outcome
            time.sleep(min(2.0, 0.05 * 2**attempt) * (0.5 + _jitter()))
        raise SyncError(
            f"{remote.name}: other machines kept pushing while this sync ran ({ATTEMPTS} attempts); "
            "what arrived is here, run gitmail sync again to send the rest"
        )
    except GitmailError as error:
        record = record._replace(error=str(error))
        raise
    finally:
        record.save(store, remote.name)


def _unchanged_since(record: Record, store: Store) -> bool:
    return record.fingerprint is not None and record.fingerprint == fingerprint(store)


def _jitter() -> float:
    import random

    return random.random()


def _add(outcome: Outcome, step: Outcome) -> Outcome:
    return outcome._replace(
        received=outcome.received + step.received,
        moved_here=outcome.moved_here + step.moved_here,
        notes=outcome.notes + step.notes,
        conflicts=max(outcome.conflicts, step.conflicts),
    )


def _touch_attempt(store: Store) -> None:
    stamp = _folder(store) / "last-attempt"
    stamp.touch()
    os.utime(stamp)


# -- fetch -----------------------------------------------------------------------------------------------------


def _fetch(store: Store, remote: Remote, lock_fd: int) -> None:
    tracking = f"{TRACKING_ROOT}{remote.name}/"
    done = gitcmd.run_network(
        store.path,
        "-c",
        "fetch.fsckObjects=true",  # what another machine wrote is checked before it lands here
        "-c",
        "fetch.writeCommitGraph=false",
        "fetch",
        "--atomic",
        "--prune",  # only the tracking refs below: a ref gone from the remote is gone from what we know of it
        "--no-tags",
        "--no-write-fetch-head",
        "--no-auto-maintenance",
        "--no-recurse-submodules",
        "--no-show-forced-updates",
        "--quiet",
        f"--negotiation-tip={tracking}*",
        "--",
        remote.url,
        f"+{REMOTE_ROOT}*:{tracking}*",
        pass_fds=(lock_fd,),
        timeout=NETWORK_TIMEOUT,
    )
    if done.returncode != 0:
        raise SyncError(f"{remote.name}: cannot fetch from {redact(remote.url)}: {_reason(done.stderr)}")


def _advertised(store: Store, remote: Remote, lock_fd: int) -> dict[str, str]:
    """What the remote holds now, named as the tracking refs name it: {"state": oid, ...}."""
    done = gitcmd.run_network(
        store.path, "ls-remote", "--", remote.url, f"{REMOTE_ROOT}*", pass_fds=(lock_fd,), timeout=NETWORK_TIMEOUT
    )
    if done.returncode != 0:
        raise SyncError(f"{remote.name}: cannot reach {redact(remote.url)}: {_reason(done.stderr)}")
    tips = {}
    for line in done.stdout.decode(errors="replace").splitlines():
        oid, _, ref = line.partition("\t")
        if ref.startswith(REMOTE_ROOT):
            tips[ref[len(REMOTE_ROOT) :]] = oid
    return tips


def _tracking(store: Store, name: str) -> dict[str, str]:
    """What this mailbox last saw on the remote: {"state": oid, "notes/gitmail-seen": oid, ...}."""
    prefix = f"{TRACKING_ROOT}{name}/"
    out = store.git("for-each-ref", "--format=%(objectname) %(refname)", prefix).decode(errors="replace")
    tips = {}
    for line in out.splitlines():
        oid, _, ref = line.partition(" ")
        tips[ref[len(prefix) :]] = oid
    return tips


def _restore_tracking(store: Store, name: str, before: dict[str, str], after: dict[str, str]) -> None:
    """Put the tracking refs back as they were: a remote that holds something else leaves no trace here."""
    prefix = f"{TRACKING_ROOT}{name}/"
    commands = []
    for ref in sorted(set(before) | set(after)):
        old, new = after.get(ref), before.get(ref)
        if old == new:
            continue
        if new is None:
            commands.append(f"delete {prefix}{ref}\0{old}\0")
        else:
            commands.append(f"update {prefix}{ref}\0{new}\0{old or ''}\0")
    if commands:
        store.git("update-ref", "-z", "--stdin", stdin="".join(commands).encode())


class RemoteState(NamedTuple):
    """What a remote holds, read and checked."""

    state: str | None  # the state commit
    lines: list[str]  # every message place in its state, as `for-each-ref` shows a ref here: "<ref> <commit>"
    notes: dict[str, str]  # notes ref name ("gitmail-seen") -> notes commit


def _read_remote(store: Store, name: str, tips: dict[str, str]) -> RemoteState:
    """The remote's state from the tracking refs, or NotGitmail when it is not a gitmail sync state. Only the
    shape of each entry is checked here; the entries that differ from this mailbox are checked as messages when
    compared (`_compare`)."""
    state = tips.get(STATE)
    notes = {}
    for ref, oid in tips.items():
        if ref.startswith(NOTES) and ref[len(NOTES) :].startswith(NOTES_PREFIX) and "/" not in ref[len(NOTES) :]:
            notes[ref[len(NOTES) :]] = oid
    oids = [o for o in (state, *notes.values()) if o is not None]
    kinds = _object_types(store, oids)
    if any(kinds[o] != "commit" for o in oids):
        raise NotGitmail(name, f"its {REMOTE_ROOT} refs are not commits")
    if state is None:
        return RemoteState(None, [], notes)
    if store.read([f"{state}:{FORMAT_PATH}"])[0] != FORMAT_TEXT.encode():
        raise NotGitmail(name, f"{REMOTE_ROOT}{STATE} is not a gitmail sync state of a format this gitmail reads")
    out = store.git("ls-tree", "-r", "-z", "--full-tree", state).decode(errors="replace")
    lines = []
    for entry in out.split("\0"):
        meta, _, path = entry.partition("\t")
        parts = path.split("/")
        if len(parts) == 4 and meta.startswith("160000 commit ") and parts[2] == parts[3][:2]:
            lines.append(f"{ROOT}{parts[0]}/{parts[1]}/{parts[3]} {meta[14:]}")
        elif path != FORMAT_PATH and entry:
            raise NotGitmail(name, f"an entry of its state is not a message: {path!r}")
    return RemoteState(state, lines, notes)


_SAMPLE_ID = "0" * 10


def _places(pairs: Iterable[tuple[str, str]]) -> list[Located]:
    """Message places from (ref, oid) pairs, the same as `layout.locate` finds them, checking each repo and
    folder once rather than once per message (100,000 refs name a handful of them)."""
    known: dict[str, Located | None] = {}
    found = []
    for ref, oid in pairs:
        head, _, message_id = ref.rpartition("/")
        if head not in known:
            known[head] = locate(f"{head}/{_SAMPLE_ID}", ZERO)
        sample = known[head]
        if sample is not None and ID_PATTERN.fullmatch(message_id):
            found.append(Located(ref, oid, message_id, sample.state, sample.recipient))
    return found


def _object_types(store: Store, oids: Sequence[str]) -> dict[str, str]:
    if not oids:
        return {}
    out = store.git(
        "cat-file", "--batch-check=%(objectname) %(objecttype)", stdin="".join(f"{o}\n" for o in oids).encode()
    )
    kinds = {}
    for oid, line in zip(oids, out.decode(errors="replace").splitlines(), strict=True):
        kinds[oid] = "missing" if line.endswith(" missing") else line.rpartition(" ")[2]
    return kinds


# -- reconcile -------------------------------------------------------------------------------------------------

_RANK = {State.PENDING: 0, State.BROADCAST: 0, State.ARCHIVED: 1, State.RETRACTED: 1}


class NotesStep(NamedTuple):
    """What to do with one notes ref: "take" the remote's (here), "push" ours, or "merge" both (here and there)."""

    name: str  # "gitmail-seen"
    action: str
    mine: str | None
    theirs: str | None


class Comparison(NamedTuple):
    """This mailbox against the remote's state, message by message and notes ref by notes ref."""

    arrivals: list[Located]  # new here
    moves_here: list[tuple[Located, Located]]  # (here, there): the remote's place is the later state
    additions: list[Located]  # new there
    moves_there: list[tuple[Located, Located]]  # (there, here): this mailbox's place is the later state
    conflicts: list[tuple[Located, Located]]  # one id, different commits or kinds: left as they are
    notes: list[NotesStep]

    @property
    def writes_here(self) -> bool:
        return bool(self.arrivals or self.moves_here or any(n.action != "push" for n in self.notes))


class Plan(NamedTuple):
    """What to push: (remote ref, new value, expected value) for each ref, and what it amounts to."""

    updates: list[tuple[str, str, str | None]]
    sent: int = 0
    moved: int = 0
    notes: int = 0


def _compare(store: Store, there: RemoteState, remote: str) -> Comparison:
    """Compare as text first: at 100,000 messages nearly every line is the same on both sides, and only the ids
    of lines that differ are looked at as messages."""
    out = store.git("for-each-ref", "--format=%(refname) %(objectname)", ROOT).decode(errors="replace")
    local_lines = out.splitlines()
    local_set, remote_set = set(local_lines), set(there.lines)
    touched = {_id_of(line) for line in local_set.symmetric_difference(remote_set)}
    local = _by_id(local_lines, touched)
    theirs_by_id = _by_id(there.lines, touched)
    pairs = [pair for found in theirs_by_id.values() for pair in found]
    remote_places = _places(pairs)
    if len(remote_places) != len(pairs):
        bad = sorted({ref for ref, _ in pairs} - {p.ref for p in remote_places})
        raise NotGitmail(remote, f"an entry of its state is not a message: {bad[0]!r}")
    theirs_at = {p.id: p for p in latest(remote_places)}
    if len(theirs_at) != len(remote_places):
        raise NotGitmail(remote, "its state holds a message in two places")
    mine_at = {p.id: p for p in latest(_places(pair for found in local.values() for pair in found))}
    seen = Comparison([], [], [], [], [], _compare_notes(store, there.notes))
    for message_id in touched:
        mine, theirs = mine_at.get(message_id), theirs_at.get(message_id)
        if mine is None and theirs is None:
            continue  # a ref that is no message here (a damaged one set aside, say)
        if theirs is None:
            assert mine is not None
            seen.additions.append(mine)
        elif mine is None:
            seen.arrivals.append(theirs)
        elif mine.ref == theirs.ref and mine.oid == theirs.oid:
            continue
        elif mine.oid != theirs.oid or _kind(mine) != _kind(theirs) or _RANK[mine.state] == _RANK[theirs.state]:
            seen.conflicts.append((mine, theirs))
        elif _RANK[theirs.state] > _RANK[mine.state]:
            seen.moves_here.append((mine, theirs))
        else:
            seen.moves_there.append((theirs, mine))
    return seen


def _id_of(line: str) -> str:
    ref = line[: line.rfind(" ")]
    return ref[ref.rfind("/") + 1 :]


def _by_id(lines: Iterable[str], ids: set[str]) -> dict[str, list[tuple[str, str]]]:
    """The (ref, commit) pairs among `lines` ("<ref> <commit>") of the given message ids."""
    found: dict[str, list[tuple[str, str]]] = {}
    for line in lines:
        ref, _, oid = line.rpartition(" ")
        message_id = ref[ref.rfind("/") + 1 :]
        if message_id in ids:
            found.setdefault(message_id, []).append((ref, oid))
    return found


def _compare_notes(store: Store, remote_notes: dict[str, str]) -> list[NotesStep]:
    out = store.git("for-each-ref", "--format=%(objectname) %(refname)", f"{NOTES_ROOT}{NOTES_PREFIX}*")
    local = {}
    for line in out.decode(errors="replace").splitlines():
        oid, _, ref = line.partition(" ")
        if "/" not in ref[len(NOTES_ROOT) :]:
            local[ref[len(NOTES_ROOT) :]] = oid
    steps = []
    for name in sorted(local.keys() | remote_notes.keys()):
        mine, theirs = local.get(name), remote_notes.get(name)
        if mine == theirs:
            continue
        if mine is None or theirs is None:
            action = "take" if mine is None else "push"
        else:
            base = _merge_base(store, mine, theirs)
            action = "push" if base == theirs else "take" if base == mine else "merge"
        steps.append(NotesStep(name, action, mine, theirs))
    return steps


def _reconcile(store: Store, there: RemoteState, here: Machine, remote: str) -> tuple[Outcome, Plan]:
    """Bring what the remote has into this mailbox, and build what the remote lacks. Comparing takes no lock:
    every change made here carries the value it expects, so one that a local write overtook is refused whole,
    and then the comparison is made again under the lock."""
    from gitmail.store import log_problem

    seen = _compare(store, there, remote)
    pushes: list[tuple[str, str, str | None]] = []
    if seen.writes_here:
        with store.writing(actor=SYNC_ACTOR) as writer:
            try:
                pushes = _apply(store, writer, seen, here, remote)
            except gitcmd.GitFailed:  # a local write landed between comparing and locking: compare again, locked
                seen = _compare(store, there, remote)
                pushes = _apply(store, writer, seen, here, remote)
    for notes in seen.notes:
        if notes.action == "push":
            assert notes.mine is not None
            pushes.append((f"{REMOTE_ROOT}{NOTES}{notes.name}", notes.mine, notes.theirs))
    for mine, theirs in seen.conflicts:
        log_problem(
            store,
            f"sync with {remote}: message {mine.id} is {mine.ref} {mine.oid} here and {theirs.ref} {theirs.oid} "
            "there; it is left as it is on both sides",
        )
    missing = store.missing([p.oid for p in seen.additions])
    sendable = [p for p in seen.additions if p.oid not in missing]
    if missing:
        log_problem(store, f"sync with {remote}: {len(missing)} messages whose commits are missing here were not sent")
    updates = list(pushes)
    if sendable or seen.moves_there:
        state = _new_state(store, there, sendable, seen.moves_there, here)
        updates.append((REMOTE_ROOT + STATE, state, there.state))
    step = Outcome(
        remote,
        received=len(seen.arrivals),
        moved_here=len(seen.moves_here),
        notes=sum(1 for n in seen.notes if n.action != "push"),
        conflicts=len(seen.conflicts),
    )
    return step, Plan(updates, len(sendable), len(seen.moves_there), len(pushes))


def _apply(
    store: Store, writer: Writer, seen: Comparison, here: Machine, remote: str
) -> list[tuple[str, str, str | None]]:
    """Change this mailbox (under the writer's lock): arrivals, later states, notes. Returns the notes pushes
    that merging made."""
    from gitmail import machine

    arrived = _check_arrivals(store, seen.arrivals, remote)
    # Recorded before their refs exist: a message that arrived is never taken for one written here.
    machine.remember_arrivals(store, [i for i, m in arrived.items() if m.machine is None or m.machine.id == here.id])
    changes = [[Change(p.ref, p.oid, None)] for p in seen.arrivals]
    changes += [[Change(new.ref, new.oid, None), Change(old.ref, None, old.oid)] for old, new in seen.moves_here]
    reason = f"gitmail: sync from {remote}: {len(seen.arrivals)} new, {len(seen.moves_here)} moved"
    for chunk in _chunks(changes, IMPORT_CHUNK):
        writer.apply(chunk, reason)
    if len(seen.arrivals) > PACK_AFTER:
        _pack_refs(store, writer)
    pushes: list[tuple[str, str, str | None]] = []
    for step in seen.notes:
        ref = NOTES_ROOT + step.name
        if step.action == "take":
            assert step.theirs is not None
            writer.apply([Change(ref, step.theirs, step.mine)], f"gitmail: sync from {remote}: {step.name}")
        elif step.action == "merge":
            assert step.mine is not None and step.theirs is not None
            merged = _union(writer, step.mine, step.theirs, step.name, remote)
            writer.apply([Change(ref, merged, step.mine)], f"gitmail: sync with {remote}: merged {step.name}")
            pushes.append((f"{REMOTE_ROOT}{NOTES}{step.name}", merged, step.theirs))
    return pushes


def _kind(place: Located) -> object:
    return (place.recipient, place.state in (State.BROADCAST, State.RETRACTED))


def _chunks(groups: Sequence[Sequence[Change]], size: int) -> Iterator[list[Change]]:
    """Changes in transactions of about `size`; the changes of one group (the two of a move) stay together."""
    chunk: list[Change] = []
    for group in groups:
        chunk += group
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _check_arrivals(store: Store, arrivals: Sequence[Located], remote: str) -> dict[str, Message]:
    """Every arriving message must be a commit here now, holding a gitmail document with its own id and
    addressed where the remote's state files it; else nothing arrives."""
    from gitmail.message import BadDocument, parse

    kinds = _object_types(store, [p.oid for p in arrivals])
    missing = [p for p in arrivals if kinds[p.oid] != "commit"]
    if missing:
        count = len(missing)
        raise NotGitmail(remote, f"{count} messages of its state are not commits it holds, e.g. {missing[0].id}")
    documents = store.read([f"{p.oid}:{DOCUMENT_NAME}" for p in arrivals])
    arrived = {}
    for place, document in zip(arrivals, documents, strict=True):
        try:
            if document is None:
                raise BadDocument("no message document")
            message = parse(document)
        except BadDocument as error:
            raise NotGitmail(remote, f"message {place.id}: {error}") from None
        to = BROADCAST if place.recipient is None else place.recipient
        if message.id != place.id or message.to != to:
            raise NotGitmail(remote, f"message {place.id} is filed under another id or recipient")
        arrived[place.id] = message
    return arrived


def _pack_refs(store: Store, writer: Writer) -> None:
    """Many messages arrived as loose refs: pack them, or every later listing reads thousands of files."""
    store.git("-c", "core.packedRefsTimeout=2000", "pack-refs", "--all", "--prune", pass_fds=(writer.lock_fd,))


def _merge_base(store: Store, one: str, other: str) -> str | None:
    try:
        return store.git("merge-base", one, other).decode().strip() or None
    except gitcmd.GitFailed:  # no common history
        return None


def _union(writer: Writer, mine: str, theirs: str, name: str, remote: str) -> str:
    """A notes commit merging both copies: every annotated object gets the union of both notes' lines."""
    from datetime import UTC, datetime

    out = writer.store.git("diff-tree", "-r", "-z", "--no-renames", "--name-only", mine, theirs)
    annotated = {path.replace("/", "") for path in out.decode(errors="replace").split("\0") if path}
    notes = {}
    for oid in sorted(o for o in annotated if re.fullmatch(r"[0-9a-f]{40}", o)):
        ours = set(writer.objects.note(mine, oid).splitlines())
        both = (ours | set(writer.objects.note(theirs, oid).splitlines())) - {""}
        if both != ours - {""}:
            notes[oid] = "".join(f"{line}\n" for line in sorted(both))
    text = f"gitmail: merged {name} from {remote}\n"
    return writer.objects.notes_commit(mine, notes, who=SYNC_ACTOR, when=datetime.now(UTC), text=text, merged=theirs)


# -- the new state and the push ----------------------------------------------------------------------------------


def _path(place: Located) -> str:
    """Where a message sits in the state's tree: its ref below refs/gitmail/, fanned out by id."""
    folder = place.ref[len(ROOT) : -len(place.id)]
    return f"{folder}{place.id[:2]}/{place.id}"


def _new_state(
    store: Store,
    there: RemoteState,
    additions: Sequence[Located],
    moves: Sequence[tuple[Located, Located]],
    here: Machine,
) -> str:
    """The remote's state with this machine's news: a commit on top of the remote's, reaching the new messages."""
    import tempfile

    identity = _identity(here)
    form = store.git("hash-object", "-w", "--stdin", stdin=FORMAT_TEXT.encode()).decode().strip()
    lines = [f"0 {ZERO}\t{_path(old)}\n" for old, _ in moves]
    lines += [f"160000 {p.oid}\t{_path(p)}\n" for p in [*additions, *(new for _, new in moves)]]
    lines.append(f"100644 {form}\t{FORMAT_PATH}\n")
    handle, index = tempfile.mkstemp(prefix="index-", dir=_folder(store))
    os.close(handle)
    os.unlink(index)  # git makes its own index file there
    try:
        scratch = {"GIT_INDEX_FILE": index}
        if there.state is not None:
            store.git("read-tree", there.state, env=scratch)
        store.git("update-index", "--add", "--index-info", stdin="".join(lines).encode(), env=scratch)
        tree = store.git("write-tree", env=scratch).decode().strip()
    finally:
        Path(index).unlink(missing_ok=True)
    parents = [there.state] if there.state else []
    carrier = _carriers(store, additions, identity)
    if carrier is not None:
        parents.append(carrier)
    summary = f"gitmail sync from {here.name}: {len(additions)} new, {len(moves)} moved\n\nMachine: {here.field()}\n"
    flags = [f for p in parents for f in ("-p", p)]
    return store.git("commit-tree", tree, *flags, "-m", summary, env=identity).decode().strip()


def _carriers(store: Store, additions: Sequence[Located], identity: dict[str, str]) -> str | None:
    """A chain of commits whose parents are the new messages, oldest first, each dated like its newest message.
    git walks history newest first through one date-sorted list: a single commit dated now with thousands of
    older parents would put them all in that list at once, and each insertion costs its length (100,000 messages
    took a minute of CPU to list). Chained this way, the walk holds one carrier's messages at a time."""
    if not additions:
        return None
    out = store.git(
        "log",
        "--no-walk=unsorted",
        "--format=%H %ct",
        "--stdin",
        stdin="".join(f"{p.oid}\n" for p in additions).encode(),
    )
    dated = sorted((int(line.split()[1]), line.split()[0]) for line in out.decode().splitlines())
    store.git("hash-object", "-t", "tree", "-w", "--stdin", stdin=b"")  # the carriers' empty tree
    carrier: str | None = None
    for start in range(0, len(dated), CARRIER_PARENTS):
        chunk = dated[start : start + CARRIER_PARENTS]
        parents = ([carrier] if carrier else []) + [oid for _, oid in chunk]
        when = f"{chunk[-1][0]} +0000"
        env = {**identity, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
        message = f"gitmail sync: carries {len(chunk)} messages\n"
        flags = [f for p in parents for f in ("-p", p)]
        carrier = store.git("commit-tree", EMPTY_TREE, *flags, "-m", message, env=env).decode().strip()
    return carrier


def _identity(here: Machine) -> dict[str, str]:
    email = f"{here.id}@machine.gitmail"
    return {
        "GIT_AUTHOR_NAME": here.name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": here.name,
        "GIT_COMMITTER_EMAIL": email,
    }


_CONTENDED = {"stale info", "fetch first", "non-fast-forward", "atomic push failed"}
_REFUSED_IN_A_RACE = {"atomic transaction failed", "failed to update ref", "failed to lock"}
_RACE_MARKS = ("but expected", "reference already exists", "File exists", "cannot lock ref")


def _push(store: Store, remote: Remote, updates: Sequence[tuple[str, str, str | None]], lock_fd: int) -> bool:
    """Push every update or none, each leased on the value the remote had when fetched. False when another
    machine pushed in between (fetch and try again); SyncError when the remote refused for another reason."""
    leases = [f"--force-with-lease={ref}:{expect or ''}" for ref, _, expect in updates]
    done = gitcmd.run_network(
        store.path,
        "push",
        "--atomic",
        "--porcelain",
        "--no-verify",
        "--no-follow-tags",
        "--no-signed",
        "--no-recurse-submodules",
        *leases,
        "--",
        remote.url,
        *(f"{new}:{ref}" for ref, new, _ in updates),
        pass_fds=(lock_fd,),
        timeout=NETWORK_TIMEOUT,
    )
    if done.returncode == 0:
        return True
    reasons = set()
    for line in done.stdout.decode(errors="replace").splitlines():
        if line.startswith("!\t"):
            summary = line.split("\t")[-1]
            reasons.add(summary[summary.find("(") + 1 : summary.rfind(")")] if "(" in summary else summary)
    if reasons and reasons <= _CONTENDED:
        return False
    # The remote checks each lease again when it moves the ref: another push that landed between its answer to
    # our fetch and our update shows there as a failed ref lock, and is contention all the same.
    if reasons and reasons - _CONTENDED <= _REFUSED_IN_A_RACE and any(m in done.stderr for m in _RACE_MARKS):
        return False
    refused = sorted(reasons - _CONTENDED)
    said = _reason(done.stderr, prefer_remote=True)
    why = f"{', '.join(refused)}" + (f" ({said})" if said and refused else "") if refused else said
    raise SyncError(f"{remote.name}: {redact(remote.url)} refused the push: {why}")


def _record_pushed(store: Store, name: str, updates: Sequence[tuple[str, str, str | None]]) -> None:
    """The tracking refs follow what the remote now holds, so the next fetch negotiates from there."""
    prefix = f"{TRACKING_ROOT}{name}/"
    commands = "".join(
        f"update {prefix}{ref[len(REMOTE_ROOT) :]}\0{new}\0{expect or ''}\0" for ref, new, expect in updates
    )
    store.git("update-ref", "-z", "--stdin", stdin=commands.encode())


def _reason(stderr: str, *, prefer_remote: bool = False) -> str:
    """git's own reason, in one line: a remote's message, else the first fatal or error line, else the last."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    if prefer_remote:
        said = [line.removeprefix("remote:").strip() for line in lines if line.startswith("remote:")]
        said = [line for line in said if line]
        if said:
            return said[0].removeprefix("fatal: ").removeprefix("error: ")
    for marker in ("fatal: ", "error: "):
        for line in lines:
            if line.startswith(marker):
                return line[len(marker) :]
    return lines[-1] if lines else "git gave no reason"


# -- in the background -------------------------------------------------------------------------------------------


def start_if_due(store: Store) -> bool:
    """For the session-start hook: start a background sync of the automatic remotes when the last sync is older
    than their interval. Costs a read of the config, a stat and a spawn; never raises, never waits."""
    try:
        due = [r for r in _automatic(store) if _since_last_attempt(store) >= r.interval]
        if not due:
            return False
        _touch_attempt(store)
        return _start(store)
    except Exception as error:  # a background sync must never cost a session anything
        _log(store, f"could not start a background sync: {error}")
        return False


def after_send(store: Store) -> bool:
    """For the command line after a send: push the new message in the background when a remote syncs
    automatically. Never raises, never waits."""
    try:
        return bool(_automatic(store)) and _start(store)
    except Exception as error:
        _log(store, f"could not start a background sync: {error}")
        return False


def _automatic(store: Store) -> list[Remote]:
    try:
        if SETTINGS not in (store.path / "config").read_text(errors="replace"):
            return []  # the common case, without starting git
    except OSError:
        return []
    return [r for r in remotes(store) if r.auto]


def _since_last_attempt(store: Store) -> float:
    try:
        return time.time() - (store.own_dir / "sync" / "last-attempt").stat().st_mtime
    except FileNotFoundError:
        return float("inf")


def request(store: Store) -> None:
    """Ask for a background sync: a running one sees the request when it is done and goes again."""
    import secrets

    from gitmail.lock import write_atomically

    write_atomically(_folder(store) / "wanted", secrets.token_hex(8).encode(), durable=False)


def _start(store: Store) -> bool:
    """Ask for a background sync and start one (which leaves at once if another runs: that one goes again)."""
    import subprocess

    request(store)
    subprocess.Popen(
        [sys.executable, "-P", "-m", "gitmail", "sync", "--auto"],  # -P: no folder of the cwd shadows gitmail
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd="/",
        env={**os.environ, "GITMAIL_DIR": str(store.path)},
        start_new_session=True,  # detached: no terminal to prompt on, not killed with the session's process group
    )
    return True


def run_background(store: Store) -> int:
    """The background sync (`gitmail sync --auto`): every automatic remote, errors to the log, and again as long
    as new requests came in while it ran. Leaves at once when another sync holds the lock: that one goes again."""
    wanted = _folder(store) / "wanted"
    while True:
        token = _read(wanted)
        with sync_lock(store, wait=None) as fd:
            if fd is None:
                return 0
            for remote in _automatic(store):
                try:
                    sync(store, remote, lock_fd=fd)
                except GitmailError as error:
                    _log(store, f"background sync: {error}")
        if _read(wanted) == token:
            return 0


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _log(store: Store, text: str) -> None:
    from gitmail.store import log_problem

    log_problem(store, text)
