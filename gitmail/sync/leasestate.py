"""Leases across machines: the remote's lease state, read and checked, brought in here, and this machine's leases
sent there.

On a remote, refs/gitmail-sync/leases is a commit whose tree lists every machine's running leases as
`<machine id>/<repo ref>/<lease id>` -> the lease's latest record (a gitlink), beside a file saying the format; its
parents reach the records (the one before first, then this machine's records), so fetching the one ref brings them.
Each machine speaks only for its own leases: a sync puts this machine's folder as its leases stand here now (none:
no folder) and leaves every other machine's as the remote has it.

Here, another machine's lease is kept under refs/gitmail/<repo>/leases/<key><machine id> (store/lease_refs.py), so
that two leases taken on one pattern on two machines while they were apart are both kept, and the rules of
values/lease.py decide which stands (the one taken first). A lease this machine saw end is not brought back.

What a remote says of leases is checked as mail is: a record is taken only when it is a commit of gitmail's lease
document filed where it claims to be (its machine, repository and id), signed by the key this machine accepts for
the machine it names, with paths inside the repository, and not this machine's own; the rest is left out and
logged. A lease state of another shape is no gitmail state at all (NotGitmail: nothing of the sync lands).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, NamedTuple

from gitmail.errors import UsageError
from gitmail.store import lease_refs, pins, signatures
from gitmail.store.objects import BLOB, TREE, Entry, Objects, tree_entries
from gitmail.sync.remotes import REMOTE_ROOT, NotGitmail
from gitmail.sync.remotestate import object_info
from gitmail.values import lease as leases
from gitmail.values.ids import ID_PATTERN
from gitmail.values.layout import Change
from gitmail.values.names import RepoName
from gitmail.values.verdict import ACCEPTED, GOOD, Fact, Keys

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from gitmail.store.repository import Store
    from gitmail.values.lease import Lease
    from gitmail.values.machine import Machine

LEASES = "leases"  # the ref below REMOTE_ROOT
FORMAT_PATH = "gitmail-leases"
FORMAT_TEXT = "gitmail lease state\nformat: 1\n"
GITLINK = "160000"
MOST_MACHINES = 1000  # machines' folders a lease state is read for
MOST_LEASES = 1000  # leases of one machine read from a remote
_RECORD_LIMIT = 64 * 1024  # bytes of a lease record (commit, document) read
_TREE_LIMIT = 256 * 1024  # bytes of a lease state's tree read (1,000 entries take ~40 KB)
SYNC_ACTOR = RepoName("gitmail-sync")


class Record(NamedTuple):
    """A lease of another machine, as the remote lists it and as checked here."""

    lease: Lease
    oid: str  # its latest record


class LeaseState(NamedTuple):
    """The remote's lease state: its commit, and its folders by machine id (mode, tree id)."""

    commit: str | None
    folders: dict[str, str]


def read(store: Store, remote: str, tips: dict[str, str]) -> LeaseState:
    """The remote's lease state (empty without one); NotGitmail when it is not of the shape gitmail writes."""
    commit = tips.get(LEASES)
    if commit is None:
        return LeaseState(None, {})
    if object_info(store, [commit])[commit][0] != "commit":
        raise NotGitmail(remote, f"{REMOTE_ROOT}{LEASES} is not a commit")
    if store.read([f"{commit}:{FORMAT_PATH}"], limit=len(FORMAT_TEXT))[0] != FORMAT_TEXT.encode():
        raise NotGitmail(remote, f"{REMOTE_ROOT}{LEASES} is not a gitmail lease state of a format this gitmail reads")
    folders: dict[str, str] = {}
    for entry in _entries(store, f"{commit}^{{tree}}"):
        if entry.name == FORMAT_PATH and entry.mode == BLOB:
            continue
        if entry.mode != TREE or not entry.name.isalnum() or len(folders) >= MOST_MACHINES:
            raise NotGitmail(remote, f"an entry of its lease state is not a machine's leases: {entry.name!r}")
        folders[entry.name] = entry.oid
    return LeaseState(commit, folders)


def checked(store: Store, remote: str, state: LeaseState, here: str) -> list[Record]:
    """The leases of other machines the remote's state lists that pass every check; what fails is logged."""
    from gitmail.store.log import problem

    listed: list[tuple[str, str, str, str]] = []  # machine, repo ref, lease id, record
    refused: list[str] = []
    for machine, tree in sorted(state.folders.items()):
        if machine == here:
            continue  # this machine speaks for its own leases
        for repo_entry in _entries(store, tree)[:MOST_LEASES]:
            if repo_entry.mode != TREE:
                refused.append(f"{machine}/{repo_entry.name}: not a repository's leases")
                continue
            for lease_entry in _entries(store, repo_entry.oid)[:MOST_LEASES]:
                where = f"{machine}/{repo_entry.name}/{lease_entry.name}"
                if lease_entry.mode != GITLINK or not ID_PATTERN.fullmatch(lease_entry.name):
                    refused.append(f"{where}: not a lease")
                    continue
                listed.append((machine, repo_entry.name, lease_entry.name, lease_entry.oid))
    found = _records(store, listed, here, refused)
    for why in refused:
        problem(store.path, f"sync with {remote}: a lease of its state was left out: {why}")
    return found


def _records(store: Store, listed: Sequence[tuple[str, str, str, str]], here: str, refused: list[str]) -> list[Record]:
    """Each listed record read and checked: its shape, its place, its signature, its time."""
    oids = [oid for *_, oid in listed]
    info = object_info(store, oids + [f"{oid}:{leases.DOCUMENT_NAME}" for oid in oids])
    readable = [
        item
        for item in listed
        if info[item[3]][0] == "commit"
        and 0 < info[item[3]][1] <= _RECORD_LIMIT
        and info[f"{item[3]}:{leases.DOCUMENT_NAME}"][0] == "blob"
        and info[f"{item[3]}:{leases.DOCUMENT_NAME}"][1] <= _RECORD_LIMIT
    ]
    refused += [
        f"{m}/{r}/{i}: no lease record of gitmail's" for m, r, i, oid in listed if (m, r, i, oid) not in readable
    ]
    documents = store.read([f"{oid}:{leases.DOCUMENT_NAME}" for *_, oid in readable], limit=_RECORD_LIMIT)
    facts = signatures.facts(store, [oid for *_, oid in readable])
    keys = pins.known(store)
    now = time.time()
    found = []
    for (machine, repo_ref, lease_id, oid), document in zip(readable, documents, strict=True):
        where = f"{machine}/{repo_ref}/{lease_id}"
        try:
            lease = leases.parse(document or b"")
            repo = RepoName.from_ref(repo_ref)
            if any(leases.normal(path) != path for path in lease.paths):
                raise UsageError("a path not as gitmail keeps it")
        except UsageError as error:
            refused.append(f"{where}: {error}")
            continue
        if lease.id != lease_id or lease.repo != str(repo) or lease.machine is None or lease.machine.id != machine:
            refused.append(f"{where}: filed under another machine, repository or id than its record says")
        elif lease.ended:
            refused.append(f"{where}: a lease that ended")
        elif lease.expires > now + leases.LONGEST + leases.CLOCK_MARGIN:
            refused.append(f"{where}: it runs further ahead than a lease may")
        elif not _vouched(facts.get(oid), machine, keys):
            refused.append(f"{where}: not signed by a key this machine accepts for machine {machine}")
        else:
            found.append(Record(lease, oid))
    return found


def _entries(store: Store, tree: str) -> list[Entry]:
    """A tree's entries, read to a bound (a remote's tree may be anything); none when it is not a tree here."""
    data = store.read([tree], limit=_TREE_LIMIT)[0] or b""
    found: list[Entry] = []
    try:
        found.extend(tree_entries(data, "replace"))
    except ValueError:
        pass  # what came before the first entry that is none
    return found


def _vouched(fact: Fact | None, machine: str, keys: Keys) -> bool:
    return (
        fact is not None
        and fact.kind == GOOD
        and any(k.fingerprint == fact.key and k.state in ACCEPTED for k in keys.of(machine))
    )


def bring_in(store: Store, records: Sequence[Record], remote: str) -> list[RepoName]:
    """Make the other machines' leases kept here those the remote lists: new ones come, changed ones follow, those
    it no longer lists go. The repositories whose leases changed here."""
    if not _changes(store, records)[0]:
        return []
    from gitmail.store.writer import writing

    with writing(store, actor=SYNC_ACTOR) as writer:
        changes, touched = _changes(store, records)  # again, under the lock: a lease may have ended meanwhile
        if changes:
            writer.apply(changes, f"gitmail: sync from {remote}: leases of other machines")
    return touched


def _changes(store: Store, records: Sequence[Record]) -> tuple[list[Change], list[RepoName]]:
    wanted: dict[RepoName, dict[str, str]] = {}
    for record in records:
        repo, lease = RepoName(record.lease.repo), record.lease
        assert lease.machine is not None
        refs = wanted.setdefault(repo, {})
        for pattern in lease.paths:
            refs[lease_refs.ref_of(repo, pattern, lease.machine.id)] = record.oid
    ended = store.written([lease_refs.ended_ref(RepoName(r.lease.repo), r.lease.id) for r in records])
    seen_ended = {ref.rpartition("/")[2] for ref in ended}
    kept = {r.oid for r in records if r.lease.id in seen_ended}
    changes, touched = [], []
    for repo in sorted(set(wanted) | set(lease_refs.repos(store))):
        held = {
            ref: oid for ref, oid in store.refs_under(lease_refs.active_prefix(repo)).items() if lease_refs.foreign(ref)
        }
        want = {ref: oid for ref, oid in wanted.get(repo, {}).items() if oid not in kept}
        moves = [Change(ref, oid, held.get(ref)) for ref, oid in want.items() if held.get(ref) != oid]
        moves += [Change(ref, None, oid) for ref, oid in held.items() if ref not in want]
        if moves:
            changes += moves
            touched.append(repo)
    return changes, touched


def folder(objects: Objects, running: Iterable[tuple[Lease, str]]) -> str | None:
    """This machine's folder of the lease state: a tree per repository of its leases' records; None for none."""
    by_repo: dict[str, list[Entry]] = {}
    for lease, oid in running:
        by_repo.setdefault(RepoName(lease.repo).ref, []).append(Entry(GITLINK, lease.id, oid))
    if not by_repo:
        return None
    return objects.tree([Entry(TREE, repo, objects.tree(entries)) for repo, entries in by_repo.items()])


def new_state(
    objects: Objects, state: LeaseState, mine: str | None, records: Sequence[str], here: Machine
) -> str | None:
    """The remote's lease state with this machine's folder as `mine`; None when that is what it holds already."""
    if state.folders.get(here.id) == mine:
        return None
    folders = {**state.folders, here.id: mine} if mine is not None else {
        k: v for k, v in state.folders.items() if k != here.id
    }  # fmt: skip
    form = objects.write("blob", FORMAT_TEXT.encode())
    tree = objects.tree([Entry(BLOB, FORMAT_PATH, form), *(Entry(TREE, m, t) for m, t in folders.items())])
    parents = list(dict.fromkeys([*([state.commit] if state.commit else []), *records]))
    text = f"gitmail sync from {here.name}: its leases\n\nMachine: {here.field()}\n"
    return objects.commit_of(tree, parents, text, who=SYNC_ACTOR)


def exchange(
    store: Store, remote: str, state: LeaseState, here: Machine
) -> tuple[int, int, tuple[str, str, str | None] | None]:
    """Bring the other machines' leases in (after the mail, whose keys they are checked with), end what they
    displace here (its holder is told at its next moment), and build the update that puts this machine's leases
    there. How many repositories' leases changed here, how many of this machine's leases gave way, and the update
    (None: the remote has them already)."""
    from gitmail.mailbox import leasing

    touched = bring_in(store, checked(store, remote, state, here.id), remote)
    displaced = 0
    for repo in touched:
        ended = leasing.sweep(store, repo)  # the lease index, the holders' .renew files and the stamps follow
        displaced += sum(1 for s in ended if s.why == leases.DISPLACED and _mine(s.lease, here))
    running = leasing.held_here(store)
    objects = Objects(store)
    try:
        mine = folder(objects, running)
        new = new_state(objects, state, mine, [oid for _, oid in running], here)
    finally:
        objects.close()
    return len(touched), displaced, (REMOTE_ROOT + LEASES, new, state.commit) if new is not None else None


def _mine(lease: Lease, here: Machine) -> bool:
    return lease.machine is None or lease.machine.id == here.id
