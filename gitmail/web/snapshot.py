"""What the web view reads: every message's place in the mailbox and in its thread, indexed once and carried
forward (`Snapshot`), the change token that says when to carry it, and message documents read as pages need them.
Pure reads through the store; pages.py shapes them for the pages.

Ordering conversations by their latest message needs the date of every message, and git has no index of dates:
reading 100,000 commit headers costs ~0.6 s. So a `Snapshot` indexes every message's place, date, sender and
parent once and is then carried forward: when the change token moves, only the refs that changed are read again.
Documents (subjects, bodies) are read only for what a page shows, and kept by commit id, which never goes stale.
"""

from __future__ import annotations

import bisect
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, NamedTuple

from gitmail.errors import NotFound
from gitmail.store import changes
from gitmail.store.gitcmd import GitFailed
from gitmail.values.layout import ROOT, SEEN_NOTES, Located, State, latest
from gitmail.values.mail import Entry
from gitmail.values.message import DOCUMENT_NAME, MAX_DOCUMENT_BYTES, BadDocument, Message, parse
from gitmail.values.names import RepoName

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from gitmail.store.repository import Store
    from gitmail.values.ids import ObjectId

_KEPT_DOCUMENTS = 20_000  # parsed documents kept between pages (a few MB)
_CHANGED_REFS_READ_ONE_BY_ONE = 500  # beyond this many changed refs, one listing of everything is cheaper


class Node(NamedTuple):
    """One message as the index knows it: where its ref is and what its commit says, not its document."""

    oid: ObjectId  # the message's commit
    id: str
    state: State
    recipient: RepoName | None  # None for broadcasts
    sender: RepoName | None  # from the commit's author; None when the commit is not in gitmail's form
    parent: str | None  # the commit of the message this one answers
    time: int  # send time in seconds since the epoch: enough to order by


# -- the change token: the store's (store/changes.py) -------------------------------------------------------

change_token = changes.change_token
ref_files = changes.ref_files
RefFiles = changes.RefFiles


# -- the index ---------------------------------------------------------------------------------------------------


class Snapshot:
    """Every message's place in the mailbox and in its thread, as of one change token. Never changed once built:
    `load` makes the next one from a copy, so pages being drawn meanwhile keep a consistent view."""

    def __init__(self, store: Store, files: RefFiles | None, index: _Index, documents: dict[str, Message | None]):
        self.store, self.files, self.index = store, files, index
        self.token = files.token if files is not None else "absent"
        self._documents = documents  # shared along the chain of snapshots: keyed by commit, never stale
        self._lock = threading.Lock()
        self._reach: dict[str, frozenset[str]] | None = None

    @property
    def exists(self) -> bool:
        return self.files is not None

    @property
    def nodes(self) -> Mapping[str, Node]:
        return self.index.nodes

    def node(self, message_id: str) -> Node:
        oid = self.index.by_id.get(message_id)
        if oid is None:
            raise NotFound(f"no message with id {message_id}")
        return self.index.nodes[oid]

    def documents(self, oids: Iterable[str]) -> dict[str, Message | None]:
        """The parsed documents of these commits (None where one does not parse), read in one `git cat-file`."""
        wanted = list(dict.fromkeys(oids))
        with self._lock:
            missing = [oid for oid in wanted if oid not in self._documents]
        if missing:
            read = self.store.read([f"{oid}:{DOCUMENT_NAME}" for oid in missing], limit=MAX_DOCUMENT_BYTES)
            parsed = {oid: _parse(data) for oid, data in zip(missing, read, strict=True)}
            with self._lock:
                if len(self._documents) + len(parsed) > _KEPT_DOCUMENTS:
                    self._documents.clear()
                self._documents.update(parsed)
            return {oid: self._documents.get(oid, parsed.get(oid)) for oid in wanted}
        with self._lock:
            return {oid: self._documents.get(oid) for oid in wanted}

    def entries(self, nodes: Sequence[Node]) -> list[Entry | None]:
        documents = self.documents(n.oid for n in nodes)
        return [entry_of(n, documents[n.oid]) for n in nodes]

    def reach(self) -> Mapping[str, frozenset[str]]:
        """For each broadcast commit, the repos that were handed it (its seen-set note)."""
        with self._lock:
            if self._reach is None:
                self._reach = _seen_sets(self.store, list(self.index.broadcasts))
            return self._reach

    def members(self, root: str) -> list[tuple[Node, int]]:
        """A thread in reading order with each message's depth: a message, then its replies, oldest first."""
        nodes, children = self.index.nodes, self.index.children
        found: list[tuple[Node, int]] = []
        stack = [(root, 0)]
        while stack:
            oid, depth = stack.pop()
            found.append((nodes[oid], depth))
            replies = sorted((nodes[c] for c in children.get(oid, ())), key=by_time, reverse=True)
            stack += [(reply.oid, depth + 1) for reply in replies]
        return found


Key = tuple[int, str, str]  # a thread's place in a list: its newest message's time and id, and its root commit


class _Index:
    """The containers a snapshot reads; `copy` and the updates make the next snapshot's. Each container is
    replaced, never changed in place, once a snapshot holds it."""

    def __init__(self) -> None:
        self.listing: dict[str, str] = {}  # ref -> commit, for every ref under refs/gitmail/ (foreign ones too)
        self.places: dict[str, Located] = {}  # ref -> where it says a message is
        self.refs_of: dict[str, tuple[str, ...]] = {}  # commit -> the refs that name it (two after a crash)
        self.nodes: dict[str, Node] = {}  # commit -> message
        self.by_id: dict[str, str] = {}  # message id -> commit
        self.children: dict[str, tuple[str, ...]] = {}  # commit -> the commits of its replies
        self.orphans: dict[str, tuple[str, ...]] = {}  # a parent not (yet) in the mailbox -> its replies
        self.root: dict[str, str] = {}  # commit -> its thread's root commit
        self.newest: dict[str, tuple[int, str]] = {}  # root -> time and id of the thread's newest message
        self.order: list[Key] = []  # every thread, oldest activity first
        self.taking_part: dict[str, frozenset[str]] = {}  # root -> repos that sent or received a message in it
        self.per_repo: dict[str, list[Key]] = {}  # repo -> its threads, oldest activity first
        self.pending: dict[str, Node] = {}  # commit -> directed mail still pending
        self.broadcasts: dict[str, Node] = {}  # commit -> every broadcast, active or retracted
        self.names: frozenset[str] = frozenset()  # every repo that sent or received a message
        self._copied: set[str] = set()  # the per_repo lists this index owns (the rest its predecessor shares)

    def copy(self, *, listing: dict[str, str]) -> _Index:
        """A twin to carry forward, with a new listing (the one container `load` replaces rather than changes)."""
        twin = _Index()
        kept = {name: value.copy() for name, value in self.__dict__.items() if name not in ("listing", "_copied")}
        twin.__dict__.update(kept, listing=listing, _copied=set())
        return twin

    def fill(self, nodes: Sequence[Node]) -> None:
        """Index these messages at once (`add` keeps lists sorted one message at a time: quadratic for many).
        Written for 100,000 messages: plain loops, and one shared set per distinct group of repos."""
        known = self.nodes = {node.oid: node for node in nodes}
        self.by_id = {node.id: node.oid for node in nodes}
        self.pending = {node.oid: node for node in nodes if node.state is State.PENDING}
        self.broadcasts = {node.oid: node for node in nodes if node.recipient is None}
        children: dict[str, list[str]] = {}
        orphans: dict[str, list[str]] = {}
        root = self.root = {}
        replies = []
        for node in nodes:
            if node.parent is None:
                root[node.oid] = node.oid
            elif node.parent in known:
                children.setdefault(node.parent, []).append(node.oid)
                replies.append(node.oid)
            else:
                orphans.setdefault(node.parent, []).append(node.oid)
                root[node.oid] = node.oid
        self.children = {oid: tuple(found) for oid, found in children.items()}
        self.orphans = {oid: tuple(found) for oid, found in orphans.items()}
        for start in replies:
            path = []
            oid = start
            while oid not in root:
                path.append(oid)
                oid = known[oid].parent  # type: ignore[assignment]  # a reply's parent is known
            for step in path:
                root[step] = root[oid]
        shared: dict[frozenset[str], frozenset[str]] = {}
        pairs: dict[tuple[RepoName | None, RepoName | None], frozenset[str]] = {}
        newest, taking_part = self.newest, self.taking_part
        for node in nodes:
            top = root[node.oid]
            key = (node.time, node.id)
            pair = (node.sender, node.recipient)
            names = pairs.get(pair)
            if names is None:
                names = pairs[pair] = frozenset(str(n) for n in pair if n is not None)
                names = shared.setdefault(names, names)
            old = newest.get(top)
            if old is None:
                newest[top] = key
                taking_part[top] = names
                continue
            if old < key:
                newest[top] = key
            if not names <= taking_part[top]:
                union = taking_part[top] | names
                taking_part[top] = shared.setdefault(union, union)
        self.names = frozenset().union(*shared)
        self.order = sorted([(time, message_id, top) for top, (time, message_id) in newest.items()])
        per_repo: dict[str, list[Key]] = {}
        for place in self.order:
            for name in taking_part[place[2]]:
                per_repo.setdefault(name, []).append(place)
        self.per_repo = per_repo

    def add(self, node: Node) -> None:
        """A message new to the index; its parent, if it is a message, is already in."""
        self.nodes[node.oid] = node
        self.by_id[node.id] = node.oid
        self._file(node)
        parent = node.parent
        if parent is not None and parent in self.nodes:
            self.children[parent] = (*self.children.get(parent, ()), node.oid)
            root = self.root[parent]
        else:
            if parent is not None:
                self.orphans[parent] = (*self.orphans.get(parent, ()), node.oid)
            root = node.oid
        self.root[node.oid] = root
        names = {str(n) for n in (node.sender, node.recipient) if n is not None}
        self.names |= names
        old = self.newest.get(root)
        before = self.taking_part.get(root, frozenset())
        after = before | names
        key = max(old or (node.time, node.id), (node.time, node.id))
        if old == key and after == before:
            return
        self.newest[root] = key
        self.taking_part[root] = after
        old_key = (*old, root) if old is not None else None
        new_key = (*key, root)
        _move(self.order, old_key, new_key)
        for name in after:
            if name not in self._copied:
                self.per_repo[name] = list(self.per_repo.get(name, ()))
                self._copied.add(name)
            _move(self.per_repo[name], old_key if name in before else None, new_key)

    def restate(self, node: Node) -> None:
        """A known message whose ref moved (done, reply, retract)."""
        self.nodes[node.oid] = node
        self._file(node)

    def _file(self, node: Node) -> None:
        for kept, belongs in ((self.pending, node.state is State.PENDING), (self.broadcasts, node.recipient is None)):
            if belongs:
                kept[node.oid] = node
            else:
                kept.pop(node.oid, None)


def _move(keys: list[Key], old: Key | None, new: Key) -> None:
    if old is not None:
        at = bisect.bisect_left(keys, old)
        if at < len(keys) and keys[at] == old:
            del keys[at]
    bisect.insort(keys, new)


def load(store: Store, previous: Snapshot | None = None) -> Snapshot:
    """The mailbox as it is now: `previous` carried forward when given (only the refs that changed are read
    again), else read whole. Returns `previous` itself when nothing changed."""
    files = ref_files(store)  # taken first: a change while we read makes the next token differ again
    documents = previous._documents if previous is not None else {}
    if previous is not None and files == previous.files:
        return previous
    if files is None or not store.exists():
        return Snapshot(store, files, _Index(), documents)
    if previous is None or not previous.exists:
        return Snapshot(store, files, _whole(store), documents)
    old = previous.files
    assert old is not None
    listing = previous.index.listing
    if files.packed == old.packed:  # only loose refs moved: those are the ones to read again
        changed = {ref for ref in old.loose.keys() | files.loose.keys() if old.loose.get(ref) != files.loose.get(ref)}
        changed = {ref for ref in changed if ref.startswith(ROOT)}
        if changed:
            listing = dict(listing)
            for ref in changed:
                listing.pop(ref, None)
            listing.update(_listing(store, sorted(changed)))
    else:  # packed-refs was rewritten: compare everything
        now = _listing(store, [ROOT])
        changed = {ref for ref in listing.keys() | now.keys() if listing.get(ref) != now.get(ref)}
        listing = now
    if not changed:  # the seen-sets moved, or nothing that matters: the same index, broadcasts' reach read anew
        return Snapshot(store, files, previous.index, documents)
    if len(changed) > _CHANGED_REFS_READ_ONE_BY_ONE:
        return Snapshot(store, files, _whole(store), documents)
    index = previous.index.copy(listing=listing)
    if not _apply(store, index, changed):
        return Snapshot(store, files, _whole(store), documents)
    return Snapshot(store, files, index, documents)


def _listing(store: Store, patterns: Sequence[str]) -> dict[str, str]:
    out = store.git("for-each-ref", "--format=%(objectname) %(refname)", *patterns)
    return {line[41:]: line[:40] for line in out.decode(errors="surrogateescape").splitlines()}


def _apply(store: Store, index: _Index, changed: set[str]) -> bool:
    """Carry the index forward over these changed refs. False when only a whole rebuild is right: a message left
    the mailbox, or one arrived that earlier messages answer."""
    now = {p.ref: p for p in store.refs(*sorted(changed))}
    touched: set[str] = set()
    for ref in changed:
        was = index.places.pop(ref, None)
        if was is not None:
            index.refs_of[was.oid] = tuple(r for r in index.refs_of[was.oid] if r != ref)
            touched.add(was.oid)
        place = now.get(ref)
        if place is not None:
            index.places[ref] = place
            index.refs_of[place.oid] = (*index.refs_of.get(place.oid, ()), ref)
            touched.add(place.oid)
    winners = {}
    for oid in touched:
        refs = index.refs_of.get(oid, ())
        if not refs:
            return False
        winners[oid] = latest([index.places[r] for r in refs])[0]
    fresh = [oid for oid in winners if oid not in index.nodes]
    if any(oid in index.orphans for oid in fresh):
        return False
    for oid, place in winners.items():
        known = index.nodes.get(oid)
        if known is not None and (known.state, known.recipient) != (place.state, place.recipient):
            index.restate(known._replace(state=place.state, recipient=place.recipient))
    headers = _headers(store, fresh)
    waiting = [_node(winners[oid], headers[oid]) for oid in fresh if oid in headers]
    while waiting:  # parents before their replies
        ready = [n for n in waiting if n.parent is None or n.parent in index.nodes or n.parent not in winners]
        if not ready:
            return False
        for node in sorted(ready, key=by_time):
            index.add(node)
        waiting = [n for n in waiting if n.oid not in index.nodes]
    return True


def _whole(store: Store) -> _Index:
    index = _Index()
    index.listing = _listing(store, [ROOT])
    with ThreadPoolExecutor(1) as reader:  # git reads every commit header while this thread parses the refs
        headers = reader.submit(_headers, store, list(set(index.listing.values())))
        places = store.refs(ROOT)
        found = headers.result()
    for place in places:
        index.places[place.ref] = place
        index.refs_of[place.oid] = (*index.refs_of.get(place.oid, ()), place.ref)
    winners = {p.oid: p for p in latest(places)}
    missing = [oid for oid in winners if oid not in found]  # a ref that moved between the two reads
    found.update(_headers(store, missing))
    index.fill([_node(place, found[oid]) for oid, place in winners.items() if oid in found])
    return index


def _node(place: Located, header: tuple[str | None, int, RepoName | None]) -> Node:
    parent, time, sender = header
    return Node(place.oid, place.id, place.state, place.recipient, sender, parent, time)


def _headers(store: Store, oids: Sequence[str]) -> dict[str, tuple[str | None, int, RepoName | None]]:
    """Parent, author time and sending repo of each commit, from one `git log` that walks nowhere. Where git log
    cannot read one of them (gone, or damaged on disk), each is read on its own and those left out."""
    if not oids:
        return {}
    try:
        out = store.git(
            "log", "--no-walk=unsorted", "--stdin", "--format=%H%x00%P%x00%at%x00%ae", stdin="\n".join(oids).encode()
        )
    except GitFailed:
        out = _read_headers(store, oids)
    senders: dict[str, RepoName | None] = {}
    found = {}
    for line in out.decode(errors="surrogateescape").splitlines():
        oid, parents, time, email = line.split("\0")
        if email not in senders:
            senders[email] = _sender(email)
        found[oid] = (parents.split(" ")[0] or None, int(time), senders[email])
    return found


def _read_headers(store: Store, oids: Sequence[str]) -> bytes:
    """What `_headers`' git log prints, for the commits that can be read (read through `Store.read`, which reads
    around damage)."""
    lines = []
    for oid, commit in zip(oids, store.read(oids), strict=True):
        head = (commit or b"").split(b"\n\n", 1)[0].split(b"\n")
        parents = [line[7:] for line in head if line.startswith(b"parent ")]
        author = next((line for line in head if line.startswith(b"author ")), None)
        if author is None or b">" not in author:
            continue
        before, _, after = author.rpartition(b">")
        seconds = (after.split() or [b""])[0]
        if seconds.isdigit():
            fields = [oid.encode(), b" ".join(parents), seconds, before.rpartition(b"<")[2]]
            lines.append(b"\0".join(fields))
    return b"\n".join(lines)


def _sender(email: str) -> RepoName | None:
    local, at, domain = email.rpartition("@")
    try:
        return RepoName.from_ref(local) if at and domain == "gitmail" else None
    except Exception:  # not an encoding gitmail writes: a commit made by something else
        return None


def _seen_sets(store: Store, oids: Sequence[str]) -> dict[str, frozenset[str]]:
    if not oids:
        return {}
    try:
        out = store.git(
            "log",
            "--no-walk=unsorted",
            "--stdin",
            f"--notes={SEEN_NOTES}",
            "--format=%H%x00%N%x01",
            stdin="\n".join(oids).encode(),
        )
    except GitFailed:  # a broadcast's commit or its note cannot be read: read each around the damage
        notes = store.notes(SEEN_NOTES, oids, limit=MAX_DOCUMENT_BYTES)
        return {oid: frozenset(lines) for oid, lines in notes.items()}
    seen = {}
    for record in out.decode(errors="replace").split("\x01"):
        oid, _, note = record.strip("\n").partition("\0")
        if oid:
            seen[oid] = frozenset(line for line in note.splitlines() if line)
    return seen


def _parse(data: bytes | None) -> Message | None:
    try:
        return parse(data) if data is not None else None
    except BadDocument:
        return None


def entry_of(node: Node, message: Message | None) -> Entry | None:
    return Entry(message, node.state, node.oid, node.recipient) if message is not None else None


def by_time(node: Node) -> tuple[int, str]:
    return (node.time, node.id)
