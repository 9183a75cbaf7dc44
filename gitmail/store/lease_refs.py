"""Leases in the mailbox: where their refs are, reading them, writing their records, and the index hook.sh reads.

| ref | meaning |
|---|---|
| refs/gitmail/<repo>/leases/<key> | a lease on one pattern (its key: `lease.key`), at the commit of its latest record |
| refs/gitmail/<repo>/leases/<key><machine> | the same, of another machine's lease (sync brought it): its id follows |
| refs/gitmail/<repo>/leased/<id> | a lease that ended, at the commit that says how |

A lease's record is a commit whose tree holds `lease.json` (values/lease.py); its renewals and its end are commits
on top of it, so `git log refs/gitmail/<repo>/leased/<id>` shows who held what, and when. A lease on several
patterns has a ref for each, all at the same commit, moved together in one transaction. Taking one is a create-only
update of those refs, under the mailbox's lock.

Beside them, for hook.sh: `gitmail/stamps/<repo ref>.leases`, one line per lease that may still run, `holder` then
the fixed pieces of its patterns, tab-separated (`hook_line`). With an empty one, a tool call that edits a file
starts no Python; with lines, only one whose payload holds every fixed piece of some other holder's pattern does;
with none (never written, or a write that failed), Python decides, and writes it.
"""

from __future__ import annotations

import os
from pathlib import Path

from gitmail.errors import Unwritable, UsageError
from gitmail.store import hookfiles
from gitmail.store.files import write_atomically
from gitmail.values import lease as leases
from gitmail.values.ids import ObjectId
from gitmail.values.layout import ROOT, leases_prefix
from gitmail.values.names import RepoName

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import NamedTuple

    from gitmail.store.repository import Store
else:
    from gitmail.values.tuples import NamedTuple

ACTIVE, ENDED = "leases", "leased"
INDEX_SUFFIX = ".leases"
ALWAYS = "*"  # a fixed piece hook.sh cannot look for (it holds a tab, a quote or a backslash): Python decides


class Stored(NamedTuple):
    """A lease as the mailbox holds it."""

    lease: leases.Lease
    oid: ObjectId  # its latest record
    refs: tuple[str, ...]  # the refs at that record, one per pattern


def active_prefix(repo: RepoName) -> str:
    return leases_prefix(repo)


def ended_ref(repo: RepoName, lease_id: str) -> str:
    return f"{ROOT}{repo.ref}/{ENDED}/{lease_id}"


def ref_of(repo: RepoName, pattern: str, machine: str = "") -> str:
    """Where a lease on `pattern` is kept: taken here, under the pattern's key (so that takers here race for one
    ref); of another `machine` (sync brought it), under the key and that machine's id, so that leases two machines
    took on one pattern while apart are both kept, and readers decide which stands."""
    return active_prefix(repo) + leases.key(pattern) + machine


def foreign(ref: str) -> bool:
    """Whether a running lease's ref is one sync keeps of another machine's lease."""
    return len(ref.rpartition("/")[2]) > len(leases.key(""))


def is_lease_ref(ref: str) -> bool:
    """Whether a ref is where gitmail keeps a lease, running or ended."""
    parts = ref[len(ROOT) :].split("/") if ref.startswith(ROOT) else []
    return len(parts) == 3 and parts[1] in (ACTIVE, ENDED) and parts[2].isalnum()


def listing(store: Store, repo: RepoName) -> list[Stored]:
    """Every lease of the repository the mailbox holds as running (expired ones too: readers decide), oldest first.
    A record that does not read as a lease (a remote may send anything) is left out."""
    if not store.exists():
        return []
    found = store.refs_under(active_prefix(repo))
    by_commit: dict[str, list[str]] = {}
    for ref, oid in sorted(found.items()):
        by_commit.setdefault(oid, []).append(ref)
    commits = list(by_commit)
    documents = store.read([f"{oid}:{leases.DOCUMENT_NAME}" for oid in commits], limit=64 * 1024)
    stored = []
    for oid, document in zip(commits, documents, strict=True):
        commit = ObjectId.of(oid)
        if document is None or commit is None:
            continue
        try:
            lease = leases.parse(document)
        except UsageError:
            continue
        refs = tuple(by_commit[oid])
        machine = lease.machine.id if lease.machine is not None else ""
        places = {ref_of(repo, p, machine if foreign(ref) else "") for p in lease.paths for ref in refs[:1]}
        if lease.repo != repo or any(ref not in places for ref in refs):
            continue  # a record filed under another repository's or pattern's ref is not this one's
        stored.append(Stored(lease, commit, refs))
    return sorted(stored, key=lambda s: (s.lease.taken, s.lease.id))


def repos(store: Store) -> list[RepoName]:
    """The repositories that hold leases (running or not), by name: read from the ref files without a git process
    (each repository's loose `leases/` folder, and the packed refs that name one), since sync asks at every run."""
    if not store.exists():
        return []
    names = set()
    root = store.path / ROOT
    try:
        with os.scandir(root) as entries:
            folders = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
    except OSError:
        folders = []
    for name in folders:
        try:
            with os.scandir(root / name / ACTIVE) as inside:
                if any(not e.name.endswith(".lock") for e in inside):
                    names.add(name)
        except OSError:
            continue
    try:
        with open(store.path / "packed-refs", "rb") as handle:
            packed = handle.read()
    except OSError:
        packed = b""
    marker, at = f"/{ACTIVE}/".encode(), 0
    while (at := packed.find(marker, at)) >= 0:
        start = packed.rfind(b"\n", 0, at) + 1
        end = packed.find(b"\n", at)
        line = packed[start : end if end >= 0 else len(packed)].decode(errors="replace")
        ref = line.partition(" ")[2]
        parts = ref[len(ROOT) :].split("/") if ref.startswith(ROOT) else []
        if len(parts) == 3 and parts[1] == ACTIVE:
            names.add(parts[0])
        at = end if end >= 0 else len(packed)
    found = set()
    for name in names:
        try:
            found.add(RepoName.from_ref(name))
        except UsageError:
            continue
    return sorted(found)


def index_path(store: Store, repo: RepoName) -> str:
    return os.path.join(hookfiles.folder(store.root, hookfiles.STAMPS), repo.ref + INDEX_SUFFIX)


def hook_line(lease: leases.Lease, here: str | None = None) -> str:
    """What hook.sh needs of one lease: its holder, then for each pattern the fixed pieces of its last named part
    (a file's name: a tool call names it whatever its directory, `orders.py` from inside `src/` too), tab-separated,
    the patterns apart by `|`. A pattern whose pieces hook.sh could not look for is ALWAYS. The holder of a lease
    another machine holds (not `here`) is spelled with that machine's id, so that no session here is taken for it."""
    holder = lease.holder or "-"
    if lease.machine is not None and here is not None and lease.machine.id != here:
        holder = f"{holder}@{lease.machine.id}"
    patterns = []
    for pattern in lease.paths:
        named = [part for part in pattern.split("/") if leases.literals(part)]
        pieces = leases.literals(named[-1]) if named else []
        if not pieces or any(c in piece for piece in pieces for c in '\t"\\|') or pieces == ["|"]:
            return f"{holder}\t{ALWAYS}"
        patterns.append("\t".join(pieces))
    return f"{holder}\t" + "\t|\t".join(patterns)


def write_index(store: Store, repo: RepoName, running: Sequence[leases.Lease]) -> None:
    """The leases hook.sh must know of (empty when there are none: then no edit starts Python). The old index goes
    first, so one that cannot be written leaves none, and hook.sh asks Python: a failed write costs Python runs,
    never an edit let through."""
    from gitmail.store.machines import local_id

    path = Path(index_path(store, repo))
    here = local_id(store) if any(lease.machine is not None for lease in running) else None
    try:
        path.unlink(missing_ok=True)
        path.parent.mkdir(mode=0o700, exist_ok=True)
        write_atomically(path, "".join(hook_line(lease, here) + "\n" for lease in running).encode(), durable=False)
    except (OSError, Unwritable):
        pass


def ensure_index(store: Store, repo: RepoName, running: Sequence[leases.Lease]) -> None:
    """Write the index when there is none (a repository whose leases hook.sh has not been told of yet)."""
    if not Path(index_path(store, repo)).exists():
        write_index(store, repo, running)


def renewal_path(store: Store, holder: str) -> str | None:
    """The file whose time is when a session's leases are next renewed (hook.sh's `due`): the session's `.renew`,
    which also lists its leases (the repository's ref, then their ids), so that one that ended without it (expired,
    or with a session found dead) can be told of when it next looks."""
    return hookfiles.renewal_path(store.path, holder)


def write_renewals(store: Store, repo: RepoName, running: Sequence[leases.Lease], here: str | None) -> None:
    """Each session of this machine holding leases here: its `.renew` at the time they are next due. A session whose
    leases here all ended keeps the file, dated long past, until it is told (`told`)."""
    holders: dict[str, list[leases.Lease]] = {}
    for lease in running:
        if lease.holder and (lease.machine is None or lease.machine.id == here):
            holders.setdefault(lease.holder, []).append(lease)
    for holder, held in holders.items():
        path = renewal_path(store, holder)
        if path is None:
            continue
        try:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            known = hookfiles.listed_leases(path)
            ids = sorted({lease.id for lease in held} | (set(known[1]) if known and known[0] == repo.ref else set()))
            write_atomically(path, "".join(f"{line}\n" for line in [repo.ref, *ids]).encode(), durable=False)
            due = min(lease.due() for lease in held)
            os.utime(path, (due, due))
        except (OSError, Unwritable):
            continue


def tracked(store: Store, holder: str) -> tuple[str, list[str]] | None:
    """The repository (its ref) and the leases a session's `.renew` lists; None without one."""
    return hookfiles.tracked_leases(store.path, holder)


def told(store: Store, holder: str, ids: Sequence[str], *, still: Sequence[leases.Lease] = ()) -> None:
    """The session was told of these leases' end: they leave its `.renew`, which goes once none is left."""
    path = renewal_path(store, holder)
    found = tracked(store, holder)
    if path is None or found is None:
        return
    rest = [i for i in found[1] if i not in ids]
    try:
        if not rest:
            os.unlink(path)
            return
        write_atomically(path, "".join(f"{line}\n" for line in [found[0], *rest]).encode(), durable=False)
        due = min((lease.due() for lease in still), default=0.0)
        os.utime(path, (due, due))
    except (OSError, Unwritable):
        return


def ended_record(store: Store, repo: RepoName, lease_id: str) -> leases.Lease | None:
    """The record of a lease's end, when it ended."""
    oid = store.written([ended_ref(repo, lease_id)]).get(ended_ref(repo, lease_id))
    if oid is None:
        return None
    found = store.read([f"{oid}:{leases.DOCUMENT_NAME}"], limit=64 * 1024)[0]
    try:
        return leases.parse(found) if found is not None else None
    except UsageError:
        return None
