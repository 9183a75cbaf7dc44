"""Leases over the store: taking one (refused where another holder's stands), renewing, releasing, and ending the
leases that lapsed, each in one checked transaction under the mailbox's lock. What is in force is decided by
`values.lease.standings`; what a refusal says is the action layer's."""

from __future__ import annotations

import time

from gitmail.errors import GitmailError
from gitmail.mailbox.writes import writer_for
from gitmail.store import lease_refs, machines, sessions, stamps
from gitmail.store.lock import attempts
from gitmail.values import lease as leases
from gitmail.values.ids import ObjectId, new_id
from gitmail.values.layout import Change
from gitmail.values.lease import Lease, Standing
from gitmail.values.names import RepoName

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import NamedTuple

    from gitmail.store.lease_refs import Stored
    from gitmail.store.repository import Store
    from gitmail.store.writer import Writer
else:
    from gitmail.values.tuples import NamedTuple


class Refused(GitmailError):
    """Another holder's lease stands where a lease was asked for."""

    def __init__(self, wanted: str, standing: Lease) -> None:
        super().__init__(f"{wanted} is leased by {standing.handle or standing.holder or 'the person'}")
        self.wanted, self.standing = wanted, standing


class Taken(NamedTuple):
    lease: Lease | None  # the new lease (None: every pattern asked for was the holder's already)
    renewed: tuple[Lease, ...] = ()  # the holder's own leases on patterns asked for again, renewed


def standing(store: Store, repo: RepoName, now: float | None = None) -> list[Standing]:
    """Every stored lease of the repository, with whether it is in force now."""
    found = lease_refs.listing(store, repo)
    here = machines.local_id(store) if found else None
    ended = _ended_sessions(store, {s.lease.holder for s in found})
    return leases.standings([s.lease for s in found], time.time() if now is None else now, here=here, ended=ended)


def held_here(store: Store, now: float | None = None) -> list[tuple[Lease, ObjectId]]:
    """The leases taken on this machine that are in force now, in every repository, each with its latest record:
    what sync sends of this machine's leases."""
    here = machines.local_id(store)
    found = []
    for repo in lease_refs.repos(store):
        stored = lease_refs.listing(store, repo)
        records = {s.lease.id: s.oid for s in stored}
        for state in _states(store, stored, time.time() if now is None else now):
            if state.held and state.lease.machine is not None and state.lease.machine.id == here:
                found.append((state.lease, records[state.lease.id]))
    return found


def take(
    store: Store,
    *,
    repo: RepoName,
    holder: str,
    handle: str,
    paths: Sequence[str],
    mode: str,
    duration: float,
    note: str = "",
    folded: bool = False,
    now: float | None = None,
) -> Taken:
    """Take a lease on these patterns for `holder`, unless another holder's lease that stands clashes with it
    (Refused names the first). Patterns the holder leases already are renewed instead; stored leases that no
    longer stand (expired, ended, displaced) are ended in the same step."""
    for attempt in attempts():
        with attempt, writer_for(store, actor=repo) as writer:
            at = time.time() if now is None else now
            stored = lease_refs.listing(store, repo)
            states = _states(store, stored, at)
            here = machines.current(store)
            wanted = Lease(new_id(), str(repo), tuple(paths), mode, holder, here, at, at, duration, note, "", handle)
            for state in states:
                if state.held and leases.clashes(state.lease, wanted, folded=folded):
                    raise Refused(_first_overlap(wanted, state.lease, folded), state.lease)
            mine = [s.lease for s in states if s.held and _same_holder(s.lease, wanted)]
            again = [lease for lease in mine if set(lease.paths) & set(wanted.paths)]
            renewed = [_renewed(lease, at, max(duration, lease.duration)) for lease in again]
            changes = _endings(writer, stored, states, at)
            for lease, fresh in zip(again, renewed, strict=True):
                changes += _renewal(writer, _stored_of(stored, lease), fresh)
            held_already = {p for lease in mine for p in lease.paths}
            rest = tuple(p for p in wanted.paths if p not in held_already)
            made = wanted._replace(paths=rest) if rest else None
            if made is not None:
                oid = _record(writer, made, [])
                changes += [Change(lease_refs.ref_of(repo, p), oid, None) for p in made.paths]
            writer.apply(_merged(changes), f"gitmail: {made.said() if made else 'leases renewed'}")
            others = [s.lease for s in states if s.held and s.lease not in again]
            _after(store, repo, [*others, *renewed, *([made] if made else [])])
    return Taken(made, tuple(renewed))


def _merged(changes: Sequence[Change]) -> list[Change]:
    """One change per ref: a lapsed lease's ref that a new lease takes at once moves from the one to the other."""
    by_ref: dict[str, Change] = {}
    for change in changes:
        earlier = by_ref.get(change.ref)
        if earlier is not None and earlier.new is None and change.old is None:
            change = Change(change.ref, change.new, earlier.old)
        by_ref[change.ref] = change
    return list(by_ref.values())


def _first_overlap(wanted: Lease, standing: Lease, folded: bool) -> str:
    return next(p for p in wanted.paths for q in standing.paths if leases.overlap(p, q, folded=folded))


def renew(store: Store, *, repo: RepoName, holder: str, now: float | None = None) -> list[Lease]:
    """Renew every lease of `holder` in the repository that stands, for its own duration from now."""
    renewed: list[Lease] = []
    for attempt in attempts():
        with attempt, writer_for(store, actor=repo) as writer:
            at = time.time() if now is None else now
            stored = lease_refs.listing(store, repo)
            states = _states(store, stored, at)
            changes = _endings(writer, stored, states, at)
            mine = [s for s in states if s.held and s.lease.holder == holder and _is_here(store, s.lease)]
            for state in mine:
                changes += _renewal(
                    writer, _stored_of(stored, state.lease), _renewed(state.lease, at, state.lease.duration)
                )
            if changes:
                writer.apply(changes, f"gitmail: leases of {holder or 'the person'} renewed")
            renewed = [_renewed(s.lease, at, s.lease.duration) for s in mine]
            others = [s.lease for s in states if s.held and s not in mine]
            _after(store, repo, [*others, *renewed])
    return renewed


def release(
    store: Store, *, repo: RepoName, holder: str, paths: Sequence[str] | None = None, why: str = leases.RELEASED
) -> list[Lease]:
    """End `holder`'s leases in the repository (on these patterns only, when given: a lease on others goes on
    with the rest). What was released, as its record says."""
    released: list[Lease] = []
    for attempt in attempts():
        with attempt, writer_for(store, actor=repo) as writer:
            at = time.time()
            stored = lease_refs.listing(store, repo)
            states = _states(store, stored, at)
            changes = _endings(writer, stored, states, at)
            released = []
            kept: list[Lease] = []
            for state in states:
                if not state.held:
                    continue
                lease = state.lease
                if lease.holder != holder or not _is_here(store, lease):
                    kept.append(lease)
                    continue
                ending = lease.paths if paths is None else tuple(p for p in lease.paths if p in paths)
                if not ending:
                    kept.append(lease)
                    continue
                entry = _stored_of(stored, lease)
                if len(ending) == len(lease.paths):
                    changes += _ending(writer, entry, why)
                else:
                    rest = lease._replace(paths=tuple(p for p in lease.paths if p not in ending))
                    oid = _record(writer, rest, [entry.oid])
                    changes += [Change(lease_refs.ref_of(repo, p), oid, entry.oid) for p in rest.paths]
                    changes += [Change(lease_refs.ref_of(repo, p), None, entry.oid) for p in ending]
                    kept.append(rest)
                released.append(lease._replace(paths=ending, ended=why))
            if changes:
                writer.apply(changes, f"gitmail: leases of {holder or 'the person'} ended ({why})")
            _after(store, repo, kept)
    return released


def sweep(store: Store, repo: RepoName) -> list[Standing]:
    """End the stored leases that no longer stand (each with the reason it lapsed); what was ended."""
    ended: list[Standing] = []
    for attempt in attempts():
        with attempt, writer_for(store, actor=repo) as writer:
            stored = lease_refs.listing(store, repo)
            states = _states(store, stored, time.time())
            changes = _endings(writer, stored, states, time.time())
            if changes:
                writer.apply(changes, "gitmail: leases that lapsed ended")
            ended = [s for s in states if not s.held]
            _after(store, repo, [s.lease for s in states if s.held])
    return ended


# -- the records ---------------------------------------------------------------------------------------------------


def _record(writer: Writer, lease: Lease, parents: Sequence[str]) -> ObjectId:
    from gitmail.store.objects import BLOB, Entry

    writer.signing_key()
    blob = writer.objects.write("blob", lease.document())
    tree = writer.objects.tree([Entry(BLOB, leases.DOCUMENT_NAME, blob)])
    text = f"{lease.said()}\n\nLease-Id: {lease.id}\nPaths: {' '.join(lease.paths)}\nMode: {lease.mode}\n"
    return ObjectId(writer.objects.commit_tree(tree, list(parents), text, who=RepoName(lease.repo)))


def _renewal(writer: Writer, entry: Stored, fresh: Lease) -> list[Change]:
    oid = _record(writer, fresh, [entry.oid])
    return [Change(ref, oid, entry.oid) for ref in entry.refs]


def _renewed(lease: Lease, at: float, duration: float) -> Lease:
    return lease._replace(renewed=at, duration=duration)


def _ending(writer: Writer, entry: Stored, why: str) -> list[Change]:
    """The changes that end a stored lease: its record of the end under leased/, its running refs gone."""
    oid = _record(writer, entry.lease._replace(ended=why), [entry.oid])
    repo = RepoName(entry.lease.repo)
    return [
        Change(lease_refs.ended_ref(repo, entry.lease.id), oid, None),
        *(Change(r, None, entry.oid) for r in entry.refs),
    ]


def _endings(writer: Writer, stored: Sequence[Stored], states: Iterable[Standing], at: float) -> list[Change]:
    """End every stored lease that no longer stands."""
    by_id = {s.lease.id: s for s in stored}
    return [c for state in states if not state.held for c in _ending(writer, by_id[state.lease.id], state.why)]


def _states(store: Store, stored: Sequence[Stored], at: float) -> list[Standing]:
    here = machines.local_id(store, create=True)
    ended = _ended_sessions(store, {s.lease.holder for s in stored})
    return leases.standings([s.lease for s in stored], at, here=here, ended=ended)


def _stored_of(stored: Sequence[Stored], lease: Lease) -> Stored:
    return next(s for s in stored if s.lease.id == lease.id)


def _same_holder(one: Lease, other: Lease) -> bool:
    return one.holder == other.holder and (one.machine or None) == (other.machine or None)


def _is_here(store: Store, lease: Lease) -> bool:
    return lease.machine is None or lease.machine.id == machines.local_id(store)


def _ended_sessions(store: Store, holders: Iterable[str]) -> set[str]:
    """Of these holders, the sessions of this machine known to have ended."""
    found = set()
    for holder in holders:
        host, _, session_id = holder.partition(":")
        info = sessions.info(store.path, host, session_id) if session_id else None
        if info is not None and info.state == "ended":
            found.add(holder)
    return found


def _after(store: Store, repo: RepoName, running: Sequence[Lease]) -> None:
    """The index hook.sh reads, and the repository's stamp: what its sessions are shown changed."""
    lease_refs.write_index(store, repo, running)
    lease_refs.write_renewals(store, repo, running, machines.local_id(store))
    stamps.bump(store.path, [repo])
