"""Sync: bring this mailbox and a remote to the same state, both ways, through any git remote; and sync in the
background.

One sync: ask the remote what it holds (`git ls-remote`); if that and this mailbox's ref files are as the last sync
left them, stop there. Otherwise fetch (only when the remote moved), reconcile (reconcile.py, over the remote's
state as remotestate.py reads it: arrivals land through the store's writer), and push every ref that changed in one
atomic push, each ref leased on the value the remote had. When another machine pushed in between, fetch, reconcile
and push again, a bounded number of times.

Sync fetches and pushes outside the mailbox lock, under a sync lock of its own (one sync of a mailbox at a time):
sends and session starts are never held up by a slow network. It fetches and pushes in a small repository that
shares the mailbox's object store (`_network_repository`). What the remote held when last fetched or pushed is
kept in refs/gitmail-remotes/<remote>/… there and in the mailbox, and what the last sync left in
gitmail/sync/<remote>.json (quick.py).
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from gitmail.errors import GitmailError, Unwritable, UsageError
from gitmail.store import gitcmd, machines, refs
from gitmail.store.files import unwritable
from gitmail.store.log import problem
from gitmail.sync import background, leasestate, quick, reconcile, remotestate
from gitmail.sync.quick import Record, fingerprint
from gitmail.sync.remotes import (
    REMOTE_ROOT,
    STATE,
    TRACKING_ROOT,
    NotGitmail,
    Remote,
    SyncError,
    configured,
    find,
    forget,
    redact,
    url_problem,
)

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from gitmail.store.repository import Store
    from gitmail.values.mail import Move

ATTEMPTS = 8  # fetch, reconcile and push this often while other machines keep pushing in between
# Whether a sync leaves to `settle_later` the wait for the refs it wrote to settle and what follows a sync that
# changed mail (`after_sync`): the command line sets it, its answer is printed first. The fingerprints waiting, by
# remote, and the outcomes whose follow-up waits.
SETTLE_LATER = False
_UNSETTLED: dict[str, str] = {}
_AFTER: list[Outcome] = []
NETWORK_REPOSITORY = "fetch.git"  # in gitmail/sync/: where fetch and push run (see _network_repository)
NETWORK_TIMEOUT = 900.0  # seconds a fetch or push may take before it is given up


class Outcome(NamedTuple):
    """What one sync with one remote did."""

    remote: str
    received: int = 0  # messages new here
    moved_here: int = 0  # archived or retracted here because another machine did
    sent: int = 0  # messages new on the remote
    moved_there: int = 0  # archived or retracted on the remote because this machine did
    notes: int = 0  # notes refs that changed here or there (seen-sets, receipts)
    conflicts: int = 0  # ids that differ in content between here and there: neither copy is changed (the log)
    attempts: int = 1
    set_aside: int = 0  # arrivals larger than gitmail sends, set aside unread (see the log and gitmail doctor)
    said: tuple[Move, ...] = ()  # of moved_here, each as recorded: which machine, shown here or not
    for_person: tuple[str, ...] = ()  # ids of the messages received that are for the person (@user)
    leases_here: int = 0  # repositories whose leases of other machines came, changed or went here
    leases_there: bool = False  # this machine's leases changed there
    displaced: int = 0  # this machine's leases ended here: an earlier one taken on another machine stands

    @property
    def quiet(self) -> bool:
        return not (
            self.received or self.moved_here or self.sent or self.moved_there or self.notes or self.set_aside
            or self.leases_here or self.leases_there or self.displaced
        )  # fmt: skip


# -- the sync lock and what the last sync left ---------------------------------------------------------------


def remove_remote(store: Store, name: str) -> None:
    """Forget a remote: its settings and what this mailbox knew of it. The remote itself is not touched."""
    remote = find(store, name)
    with sync_lock(store, wait=60.0) as fd, store.locked():
        assert fd is not None
        for repository in (_network_repository(store), store.path):
            _move_tracking(repository, remote.name, {})
        forget(store, remote.name)
        Path(Record.path(store.path, remote.name)).unlink(missing_ok=True)
        remotestate.forget(store, remote.name)


@contextmanager
def sync_lock(store: Store, *, wait: float | None) -> Iterator[int | None]:
    """One sync of a mailbox at a time. With `wait` None, yields None at once when another sync holds it. The
    lock is passed on to git's fetch and push, so it stays held until they exit even if gitmail is killed."""
    import fcntl

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
        _network_repository(store)
        yield fd
    finally:
        os.close(fd)


def _folder(store: Store) -> Path:
    return Path(background.folder(store))


def _clear_leftovers(store: Store, folder: Path) -> None:
    """Lock files and scratch indexes a killed sync left: whoever made them shared the lock we now hold."""
    for leftover in folder.glob("index-*"):
        leftover.unlink(missing_ok=True)
    for tracking in (store.path / TRACKING_ROOT, folder / NETWORK_REPOSITORY / TRACKING_ROOT):
        for where, _, names in os.walk(tracking):  # a folder a packer prunes meanwhile is passed over
            for name in names:
                if name.endswith(".lock"):
                    Path(where, name).unlink(missing_ok=True)


def _network_repository(store: Store) -> Path:
    """The repository sync's fetches and pushes run in: gitmail/sync/fetch.git, whose objects folder is a link to
    the mailbox's own. A fetch parses every ref tip of the repository it fetches into (1.5 s for the mailbox's
    100,000; 0.05 s here); what it fetches lands in the mailbox's object store all the same. Its refs are the
    tracking refs, mirrored into the mailbox (`_mirror`) so that everything stays reachable from the mailbox's
    own refs. Made once, whole: built aside and renamed into place."""
    folder = _folder(store)
    repository = folder / NETWORK_REPOSITORY
    if (repository / "HEAD").is_file():
        return repository
    import shutil
    import tempfile

    building = Path(tempfile.mkdtemp(prefix=".fetch-", dir=folder))
    try:
        gitcmd.run(building, "init", "--bare", "--quiet", "--template=")
        shutil.rmtree(building / "objects")
        os.symlink(os.path.join("..", "..", "..", "objects"), building / "objects")
        os.rename(building, repository)
    except OSError as error:
        raise unwritable(store.path, error) from None
    finally:
        if building.exists():
            shutil.rmtree(building, ignore_errors=True)
    return repository


# -- one sync ------------------------------------------------------------------------------------------------------


def sync_all(store: Store, name: str | None = None, *, wait: float = 120.0) -> list[Outcome | SyncError]:
    """Sync with the remote called `name`, or with every remote in turn: one Outcome, or the SyncError that
    stopped it, per remote (one remote failing does not stop the others). Waits up to `wait` seconds for a sync
    of this mailbox that is already running."""
    chosen = [find(store, name)] if name is not None else configured(store)
    if not chosen:
        raise UsageError("no remote to sync with (add one: gitmail remote add NAME URL)")
    results: list[Outcome | SyncError] = []
    with sync_lock(store, wait=wait) as fd:
        assert fd is not None
        for remote in chosen:
            try:
                results.append(sync(store, remote, lock_fd=fd))
            except SyncError as error:
                results.append(error)
    if SETTLE_LATER:
        _AFTER.extend(r for r in results if isinstance(r, Outcome))  # after the answer, in `settle_later`'s child
    else:
        after_sync(store, [r for r in results if isinstance(r, Outcome)])
    return results


def after_sync(store: Store, outcomes: Sequence[Outcome]) -> None:
    """What follows a sync that changed mail here, as a send is followed: the session-start answers made anew, idle
    Codex sessions woken, the person told of mail for them. Each is a detached start; none of it is needed for
    the mail to be seen: the writer moved the repositories' stamps when the mail landed, so no answer kept from
    before is served, and a session starting meanwhile is answered by Python."""
    from gitmail import arrivals

    if any(r.received or r.moved_here or r.leases_here for r in outcomes):
        arrivals.prepare_starts(store, None)  # what sessions start with changed: their answers are made anew
    if any(r.received for r in outcomes):
        arrivals.after_arrival(store, None)  # mail that came in wakes idle Codex sessions as a send does
    for_person = [i for r in outcomes for i in r.for_person]
    if for_person:
        arrivals.notify_person(store, for_person)  # as a send does: the person hears of mail for them


def _for_person(seen: reconcile.Comparison) -> tuple[str, ...]:
    aside = {place.id for place, _ in seen.oversized}
    return tuple(p.id for p in seen.arrivals if p.recipient is not None and p.recipient.is_person and p.id not in aside)


def sync(store: Store, remote: Remote, *, lock_fd: int) -> Outcome:
    """Sync with one remote, both ways (`_sync`), with no packer rewriting the mailbox's packs meanwhile: git's
    tree building reads objects a geometric repack may be moving from one pack into another. The caller holds the
    sync lock (`sync_lock`)."""
    from gitmail.store import packing

    with packing.held(store):  # made here if no packer ran yet: one may start from a write while this syncs
        return _sync(store, remote, lock_fd=lock_fd)


def _sync(store: Store, remote: Remote, *, lock_fd: int) -> Outcome:
    """Sync with one remote, both ways.

    The remote's refs are asked for first (`git ls-remote`): when they and this mailbox's ref files are as the
    last sync left them, that is all. Otherwise a fetch brings what the remote has that this mailbox lacks (only
    when the remote moved), reconcile.py brings it in and builds what the remote lacks, and one push sends it."""

    problem = url_problem(remote.url) or gitcmd.local_transport_problem(remote.url)
    if problem:
        raise SyncError(f"{remote.name}: refusing to sync with {redact(remote.url)}: {problem}")
    record = Record.load(store.path, remote.name)
    record.last_attempt = time.time()
    background.touch_attempt(store)
    outcome = Outcome(remote.name)
    try:
        listing = quick.advertised(store.path, remote.url, pass_fds=(lock_fd,))
        if listing.returncode != 0:
            raise SyncError(f"{remote.name}: cannot reach {redact(remote.url)}: {_reason(listing.stderr)}")
        advertised = quick.tips(listing.stdout)
        if record.in_step(remote.url, advertised, store.path):
            record.last_success, record.error = time.time(), None
            return outcome
        here = machines.current(store)
        _mirror(store, remote.name)  # after a sync killed between its fetch and its mirror
        for attempt in range(1, ATTEMPTS + 1):
            before = _tracking(store, remote.name)
            tips = before
            if attempt > 1:  # another machine pushed in between: what does the remote hold now?
                listing = quick.advertised(store.path, remote.url, pass_fds=(lock_fd,), again=True)
                if listing.returncode != 0:
                    raise SyncError(f"{remote.name}: cannot reach {redact(remote.url)}: {_reason(listing.stderr)}")
                advertised = quick.tips(listing.stdout)
            if attempt > 1 or before != advertised:
                _fetch(store, remote, sorted(advertised), lock_fd)
                tips = _tracking(store, remote.name)
            try:
                there = remotestate.read_remote(store, remote.name, tips)
                leased = leasestate.read(store, remote.name, tips)
                seen, plan = reconcile.reconcile(store, there, here, remote.name, since=before.get(STATE))
            except NotGitmail:
                _restore_tracking(store, remote.name, before)
                raise
            leases_here, displaced, lease_update = leasestate.exchange(store, remote.name, leased, here)
            updates = [*plan.updates, *([lease_update] if lease_update is not None else [])]
            outcome = outcome._replace(
                received=outcome.received + len(seen.arrivals) - len(seen.oversized),
                set_aside=outcome.set_aside + len(seen.oversized),
                said=outcome.said + tuple(seen.said),
                for_person=outcome.for_person + _for_person(seen),
                moved_here=outcome.moved_here + len(seen.moves_here),
                notes=outcome.notes + seen.notes_here,
                conflicts=len(seen.conflicts),
                attempts=attempt,
                leases_here=outcome.leases_here + leases_here,
                displaced=outcome.displaced + displaced,
            )
            if not updates:
                record = Record(remote.url, tips, _settled(store, remote.name), record.last_attempt, time.time())
                return outcome
            if _push(store, remote, updates, lock_fd):
                _record_pushed(store, remote.name, updates)
                outcome = outcome._replace(sent=outcome.sent + plan.sent, moved_there=outcome.moved_there + plan.moved)
                outcome = outcome._replace(notes=outcome.notes + plan.notes, leases_there=lease_update is not None)
                tips = _tracking(store, remote.name)
                record = Record(remote.url, tips, _settled(store, remote.name), record.last_attempt, time.time())
                return outcome
            time.sleep(min(2.0, 0.05 * 2**attempt) * (0.5 + _jitter()))
        raise SyncError(
            f"{remote.name}: other machines kept pushing while this sync ran ({ATTEMPTS} attempts); "
            "what arrived is here, run gitmail sync again to send the rest"
        )
    except GitmailError as error:
        record.error = str(error)
        raise
    finally:
        _save(record, store, remote.name)


def _settled(store: Store, name: str) -> str | None:
    """The fingerprint to record after a sync: the ref files as they are, once trustworthy. Refs written a moment
    ago are waited for here, or (SETTLE_LATER) by `settle_later` once the answer is out."""
    seen, wait = quick.unsettled(store.path)
    if wait <= 0:
        return seen
    if SETTLE_LATER and wait <= quick.SETTLE_SECONDS:
        _UNSETTLED[name] = seen
        return None
    return fingerprint(store.path, settle=True)


def settle_later(store: Store) -> None:
    """After the answer: a detached child starts what follows a sync that changed mail (`after_sync`), then waits
    for the refs the sync wrote to settle and records their fingerprint if nothing changed meanwhile, so that the
    next sync that finds nothing new takes the quick path."""
    if not _UNSETTLED and not _AFTER:
        return
    pending, outcomes = dict(_UNSETTLED), list(_AFTER)
    _UNSETTLED.clear()
    _AFTER.clear()
    try:
        child = os.fork()
    except OSError:
        _follow_up(store, pending, outcomes)
        return
    if child:
        return
    try:
        os.setsid()
        quiet = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(quiet, fd)
        _follow_up(store, pending, outcomes)
    finally:
        os._exit(0)


def _follow_up(store: Store, pending: dict[str, str], outcomes: Sequence[Outcome]) -> None:
    try:
        after_sync(store, outcomes)
    finally:
        if pending:
            _settle(store, pending)


def _settle(store: Store, pending: dict[str, str]) -> None:
    """Record the settled fingerprint for each remote whose record still waits for it, under the sync lock (a sync
    that holds it records its own), and only when the ref files are still as the sync left them."""
    try:
        with sync_lock(store, wait=None) as fd:
            if fd is None:
                return
            found = fingerprint(store.path, settle=True)
            for name, seen in pending.items():
                record = Record.load(store.path, name)
                if found is not None and found == seen and record.fingerprint is None:
                    record.fingerprint = found
                    record.save(store.path, name)
    except GitmailError:
        return


def _jitter() -> float:
    import random

    return random.random()


def _save(record: Record, store: Store, name: str) -> None:
    try:
        record.save(store.path, name)
    except Unwritable as error:  # said of the mailbox, as every other failure to write it is
        raise Unwritable(os.fspath(store.path), error.reason) from None


# -- talking to the remote --------------------------------------------------------------------------------------


def _fetch(store: Store, remote: Remote, names: Sequence[str], lock_fd: int) -> None:
    """Fetch these of gitmail's refs (quick.SYNCED, as the remote listed them) into the tracking refs, and drop
    every other tracking ref of the remote: nothing else the remote holds is brought here."""
    tracking = f"{TRACKING_ROOT}{remote.name}/"
    if names:
        done = gitcmd.run_network(
            _network_repository(store),
            "fetch",
            "--atomic",
            "--no-tags",
            "--no-write-fetch-head",
            "--no-auto-maintenance",
            "--no-recurse-submodules",
            "--no-show-forced-updates",
            "--quiet",
            f"--negotiation-tip={tracking}*",
            url=remote.url,
            refs=[f"+{REMOTE_ROOT}{name}:{tracking}{name}" for name in names],
            config=["fetch.fsckObjects=true", "fetch.writeCommitGraph=false"],  # what another machine wrote is checked
            pass_fds=(lock_fd,),
            timeout=NETWORK_TIMEOUT,
        )
        if done.returncode != 0:
            raise SyncError(f"{remote.name}: cannot fetch from {redact(remote.url)}: {_reason(done.stderr)}")
    fetched = _tracking(store, remote.name)
    _move_tracking(_network_repository(store), remote.name, {n: fetched[n] for n in names if n in fetched})
    _mirror(store, remote.name)


def _tracking(store: Store, name: str, repository: Path | None = None) -> dict[str, str]:
    """What this mailbox last saw on the remote: {"state": oid, "notes/gitmail-seen": oid, ...}, as the network
    repository (or `repository`) holds it."""
    prefix = f"{TRACKING_ROOT}{name}/"
    where = repository if repository is not None else _network_repository(store)
    return {ref[len(prefix) :]: oid for ref, oid in refs.listing(where, prefix).items()}


def _move_tracking(repository: Path, name: str, tips: dict[str, str]) -> None:
    """Set a repository's tracking refs for a remote to `tips` (those not named there are deleted)."""
    prefix = f"{TRACKING_ROOT}{name}/"
    held = {ref[len(prefix) :]: oid for ref, oid in refs.listing(repository, prefix).items()}
    commands = [
        f"update {prefix}{ref}\0{oid}\0{held.get(ref, '')}\0" for ref, oid in tips.items() if held.get(ref) != oid
    ]
    commands += [f"delete {prefix}{ref}\0{oid}\0" for ref, oid in held.items() if ref not in tips]
    if commands:
        gitcmd.run(repository, "update-ref", "-z", "--stdin", stdin="".join(commands).encode())


def _mirror(store: Store, name: str) -> None:
    """The mailbox's copy of the tracking refs follows the network repository's."""
    _move_tracking(store.path, name, _tracking(store, name))


def _restore_tracking(store: Store, name: str, before: dict[str, str]) -> None:
    """Put the tracking refs back as they were: a remote that holds something else leaves no trace here."""
    _move_tracking(_network_repository(store), name, before)
    _mirror(store, name)


# Why a push was refused when another machine pushed first: as git says it (the lease was stale, or the ref moved
# on) and as the remote says it when the ref moved between its answer and our update (a failed ref lock).
_CONTENDED = {"stale info", "fetch first", "non-fast-forward", "atomic push failed"}
_REFUSED_IN_A_RACE = {"atomic transaction failed", "failed to update ref", "failed to lock"}
_RACE_MARKS = ("but expected", "reference already exists", "File exists", "cannot lock ref")


def _push(store: Store, remote: Remote, updates: Sequence[tuple[str, str, str | None]], lock_fd: int) -> bool:
    """Push every update or none, each leased on the value the remote had when fetched. False when another
    machine pushed in between (fetch and try again); SyncError when the remote refused for another reason."""
    leases = [f"--force-with-lease={ref}:{expect or ''}" for ref, _, expect in updates]
    done = gitcmd.run_network(
        _network_repository(store),
        "push",
        "--atomic",
        "--porcelain",
        "--no-verify",
        "--no-follow-tags",
        "--no-signed",
        "--no-recurse-submodules",
        *leases,
        url=remote.url,
        refs=[f"{new}:{ref}" for ref, new, _ in updates],
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
    if reasons and reasons - _CONTENDED <= _REFUSED_IN_A_RACE and any(m in done.stderr for m in _RACE_MARKS):
        return False
    refused = ", ".join(sorted(reasons - _CONTENDED))
    said = _reason(done.stderr, prefer_remote=True)
    why = f"{refused} ({said})" if refused else said
    raise SyncError(f"{remote.name}: {redact(remote.url)} refused the push: {why}")


def _record_pushed(store: Store, name: str, updates: Sequence[tuple[str, str, str | None]]) -> None:
    """The tracking refs follow what the remote now holds, so the next fetch negotiates from there."""
    tips = _tracking(store, name)
    tips.update({ref[len(REMOTE_ROOT) :]: new for ref, new, _ in updates})
    _move_tracking(_network_repository(store), name, tips)
    _mirror(store, name)


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


def run_background(store: Store) -> int:
    """The background sync (`gitmail sync --auto`): every automatic remote, errors to the log, and again as long
    as new requests came in while it ran. Leaves at once when another sync holds the lock: that one goes again."""
    while True:
        token = background.wanted(store)
        outcomes: list[Outcome] = []
        with sync_lock(store, wait=None) as fd:
            if fd is None:
                return 0
            for remote in background.automatic(store):
                try:
                    outcomes.append(sync(store, remote, lock_fd=fd))
                except GitmailError as error:
                    problem(store.path, f"background sync: {error}")
        after_sync(store, outcomes)  # followed up as a sync by hand is
        if background.wanted(store) == token:
            return 0
