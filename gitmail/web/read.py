"""The mailbox as people look at it: conversations drawn as threads, the repos with what waits for each, broadcasts
with the repos they reached, search, and every list in pages. Pure reads, for the web view and its export.

Ordering conversations by their latest message needs the date of every message, and git has no index of dates:
reading 100,000 commit headers costs ~0.6 s. So a `Snapshot` indexes every message's place, date, sender and
parent once and is then carried forward: when the change token moves, only the refs that changed are read again.
Documents (subjects, bodies) are read only for what a page shows, and kept by commit id, which never goes stale.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Generic, NamedTuple, TypeVar

from gitmail import mailbox
from gitmail.errors import GitmailError, NotFound
from gitmail.mailbox import Entry
from gitmail.store.claims import load_claims
from gitmail.store.gitcmd import GitFailed
from gitmail.store.machines import Here
from gitmail.store.repository import Store
from gitmail.values.attachments import Attachment
from gitmail.values.ids import BROADCAST
from gitmail.values.layout import ROOT, SEEN_NOTES, Located, State, latest, note_lines, note_specs
from gitmail.values.message import DOCUMENT_NAME, MAX_DOCUMENT_BYTES, BadDocument, Message, parse
from gitmail.values.names import RepoName

PER_PAGE = 25
WAITING_SHOWN = 10  # pending messages the overview lists; each repo's page lists all of them
_KEPT_DOCUMENTS = 20_000  # parsed documents kept between pages (a few MB)
_CHANGED_REFS_READ_ONE_BY_ONE = 500  # beyond this many changed refs, one listing of everything is cheaper

S = TypeVar("S")
T = TypeVar("T")


class Node(NamedTuple):
    """One message as the index knows it: where its ref is and what its commit says, not its document."""

    oid: str  # the message's commit
    id: str
    state: State
    recipient: RepoName | None  # None for broadcasts
    sender: RepoName | None  # from the commit's author; None when the commit is not in gitmail's form
    parent: str | None  # the commit of the message this one answers
    time: int  # send time in seconds since the epoch: enough to order by


class Page(NamedTuple, Generic[T]):
    items: Sequence[T]
    number: int  # from 1
    has_next: bool
    total: int | None = None  # None where counting would cost more than the page (search)

    @property
    def has_previous(self) -> bool:
        return self.number > 1

    @property
    def pages(self) -> int | None:
        return None if self.total is None else max(1, -(-self.total // PER_PAGE))


class Item(NamedTuple):
    """A message as a page shows it."""

    entry: Entry
    depth: int = 0  # how deep in its thread: a reply is one deeper than what it answers
    delivered: datetime | None = None  # when first shown to a session in the recipient repo; None without a receipt
    reached: tuple[str, ...] = ()  # broadcasts: the repos it was handed to, its sender left out
    sender: str = ""  # a message's own page: its sender's label (PEER, VERIFIED by whose key, UNVERIFIED and why)
    origin: str = ""  # a message's own page: ' on machine "laptop"' for mail from another machine (render.origin)


class Conversation(NamedTuple):
    """One thread in a list: what it is about, who took part, where its messages stand."""

    root: Entry  # the message that started it
    latest: Entry  # its newest message
    size: int  # how many messages
    participants: tuple[str, ...]  # senders and recipients, in order of appearance; "everyone" for broadcasts
    states: tuple[tuple[State, int], ...]  # how many messages are in each state, states in a fixed order


class Thread(NamedTuple):
    root_id: str
    items: tuple[Item, ...]  # in reading order: each message followed by its replies, oldest first
    unreadable: tuple[str, ...] = ()  # ids of members whose document does not parse


class Repo(NamedTuple):
    name: RepoName
    pending: int  # directed messages waiting for it
    oldest_pending: datetime | None  # since when the oldest of them waits
    unseen_broadcasts: int  # active broadcasts not yet handed to it
    path: str | None  # where the repository that first used the name is, when recorded


class Overview(NamedTuple):
    repos: tuple[Repo, ...]
    waiting: Page[Item]  # pending directed mail, oldest first
    broadcasts: tuple[Item, ...]  # active broadcasts, newest first
    conversations: Page[Conversation]


_STATE_ORDER = (State.PENDING, State.BROADCAST, State.ARCHIVED, State.RETRACTED)


# -- the change token ------------------------------------------------------------------------------------------


class RefFiles(NamedTuple):
    """Stat data of the files that hold the message refs and the seen-sets: git writes a ref by renaming a new
    file into place, so every write gives a new inode (and so a new value here) even within one clock tick."""

    packed: tuple[int, int, int] | None  # packed-refs: inode, mtime (ns), size
    loose: Mapping[str, tuple[int, int, int]]  # each loose ref under refs/gitmail/ and refs/notes/, by ref name

    @property
    def token(self) -> str:
        digest = hashlib.blake2b(repr((self.packed, sorted(self.loose.items()))).encode(), digest_size=16)
        return digest.hexdigest()


def change_token(store: Store) -> str:
    """A string that changes whenever a message ref or the seen-sets move. No process is started, and the archive
    adds nothing to the cost once it is packed (gitmail packs refs as it goes)."""
    files = ref_files(store)
    return files.token if files is not None else "absent"


def ref_files(store: Store) -> RefFiles | None:
    """None when there is no mailbox."""
    root = os.fspath(store.path)
    if not os.path.lexists(root):
        return None
    loose: dict[str, tuple[int, int, int]] = {}
    for top in (ROOT.rstrip("/"), SEEN_NOTES.rsplit("/", 1)[0]):
        for directory, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                path = os.path.join(directory, name)
                stamp = _stamp(path)
                if stamp is not None and not name.endswith(".lock"):
                    loose[os.path.relpath(path, root).replace(os.sep, "/")] = stamp
    return RefFiles(_stamp(os.path.join(root, "packed-refs")), loose)


def _stamp(path: str) -> tuple[int, int, int] | None:
    try:
        info = os.stat(path)
    except FileNotFoundError:  # moved while we looked: the next token differs anyway
        return None
    return (info.st_ino, info.st_mtime_ns, info.st_size)


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
        return [_entry(n, documents[n.oid]) for n in nodes]

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
            replies = sorted((nodes[c] for c in children.get(oid, ())), key=_by_time, reverse=True)
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
        for node in sorted(ready, key=_by_time):
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
        notes = store.read([spec for oid in oids for spec in note_specs(SEEN_NOTES, oid)], limit=MAX_DOCUMENT_BYTES)
        return {oid: frozenset(note_lines(notes[3 * i : 3 * i + 3])) for i, oid in enumerate(oids)}
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


def _entry(node: Node, message: Message | None) -> Entry | None:
    return Entry(message, node.state, node.oid, node.recipient) if message is not None else None


def _by_time(node: Node) -> tuple[int, str]:
    return (node.time, node.id)


# -- what the pages show -----------------------------------------------------------------------------------------


def overview(snap: Snapshot, *, page: int = 1) -> Overview:
    """The first page: the repos and what waits for each, the oldest waiting mail, active broadcasts and the
    conversations with the newest activity."""
    active = sorted((n for n in snap.index.broadcasts.values() if n.state is State.BROADCAST), key=_by_time)
    return Overview(
        repos=tuple(repos(snap)),
        waiting=waiting(snap, limit=WAITING_SHOWN),
        broadcasts=tuple(_items(snap, active[::-1])),
        conversations=conversations(snap, page=page),
    )


def repos(snap: Snapshot) -> list[Repo]:
    """Every repo that used the mailbox: recorded by a session, sent or received mail, or was handed a broadcast."""
    index = snap.index
    claims = load_claims(snap.store) if snap.exists else {}
    active = [n for n in index.broadcasts.values() if n.state is State.BROADCAST]
    reach = snap.reach() if index.broadcasts else {}
    names = set(claims) | index.names
    for seen in reach.values():
        names |= seen
    waiting_for: dict[str, list[Node]] = {}
    for node in sorted(index.pending.values(), key=_by_time):
        if node.recipient is not None:
            waiting_for.setdefault(node.recipient, []).append(node)
    firsts = [nodes[0] for nodes in waiting_for.values()]
    oldest = {node.oid: entry for node, entry in zip(firsts, snap.entries(firsts), strict=True)}
    found = []
    for name in sorted(names, key=lambda n: (n.casefold(), n)):
        try:
            repo = RepoName.parse(name)
        except GitmailError:  # a hand-edited claims file or seen-set: not a name gitmail would write
            continue
        mine = waiting_for.get(repo, [])
        first = oldest.get(mine[0].oid) if mine else None
        unseen = sum(1 for b in active if b.sender != repo and repo not in reach.get(b.oid, frozenset()))
        found.append(Repo(repo, len(mine), first.message.date if first else None, unseen, claims.get(repo)))
    return found


def waiting(snap: Snapshot, *, repo: str | None = None, page: int = 1, limit: int = PER_PAGE) -> Page[Item]:
    """Directed mail still pending, oldest first: what nobody has answered or marked done yet."""
    nodes = sorted((n for n in snap.index.pending.values() if repo is None or n.recipient == repo), key=_by_time)
    start = (page - 1) * limit
    return Page(_items(snap, nodes[start : start + limit]), page, start + limit < len(nodes), len(nodes))


def conversations(snap: Snapshot, *, repo: str | None = None, page: int = 1) -> Page[Conversation]:
    """Threads, the one with the newest message first; with `repo`, those it sent or received a message in."""
    keys = snap.index.per_repo.get(repo, []) if repo is not None else snap.index.order
    chosen, has_next = _newest_first(keys, page)
    return Page(_conversations(snap, [root for _, _, root in chosen]), page, has_next, len(keys))


def _newest_first(keys: Sequence[Key], page: int) -> tuple[list[Key], bool]:
    """One page of a list kept oldest first, read from its end."""
    end = max(len(keys) - (page - 1) * PER_PAGE, 0)
    start = max(end - PER_PAGE, 0)
    return list(reversed(keys[start:end])), start > 0


def _conversations(snap: Snapshot, roots: Sequence[str]) -> list[Conversation]:
    threads = [[node for node, _ in snap.members(root)] for root in roots]
    ends = [(members[0], max(members, key=_by_time)) for members in threads]
    documents = snap.documents(node.oid for pair in ends for node in pair)
    found = []
    for members, (first, newest) in zip(threads, ends, strict=True):
        root = _entry(first, documents[first.oid]) or _unreadable(first)
        last = _entry(newest, documents[newest.oid]) or _unreadable(newest)
        names: dict[str, None] = {}
        for node in sorted(members, key=_by_time):
            names.update({str(n): None for n in (node.sender, node.recipient or "everyone") if n is not None})
        counts = {state: sum(1 for n in members if n.state is state) for state in _STATE_ORDER}
        states = tuple((state, count) for state, count in counts.items() if count)
        found.append(Conversation(root, last, len(members), tuple(names), states))
    return found


def thread(snap: Snapshot, message_id: str) -> Thread:
    """The whole conversation a message belongs to, drawn as a tree."""
    root = snap.index.root[snap.node(message_id).oid]
    members = snap.members(root)
    documents = snap.documents(node.oid for node, _ in members)
    reach = snap.reach() if any(node.recipient is None for node, _ in members) else {}
    unreadable = [node.id for node, _ in members if documents[node.oid] is None]
    entries = _with_receipts(snap, [_entry(node, documents[node.oid]) or _unreadable(node) for node, _ in members])
    items = [
        Item(entry, depth, delivered=_delivered(entry), reached=_reached(node, reach))
        for (node, depth), entry in zip(members, entries, strict=True)
    ]
    return Thread(snap.nodes[root].id, tuple(items), tuple(unreadable))


def message(snap: Snapshot, message_id: str) -> tuple[Item, list[Item]]:
    """One message whole, and the replies to it."""
    node = snap.node(message_id)
    replies = sorted((snap.nodes[c] for c in snap.index.children.get(node.oid, ())), key=_by_time)
    items = _items(snap, [node, *replies])
    return _labelled(snap, node, items[0]), items[1:]


def _labelled(snap: Snapshot, node: Node, item: Item) -> Item:
    """The item with its sender's label, as the framing and `gitmail show` give it."""
    from gitmail import render

    message = item.entry.message
    if not snap.exists:
        return item
    machine = Here(snap.store).machine_of(message.id, message.machine)
    entry = item.entry._replace(message=message._replace(machine=machine))
    if machine is not None:
        place = Located("", node.oid, node.id, node.state, node.recipient)
        [verdict] = mailbox.vouched(snap.store, [(place, entry.message)])
        entry = entry._replace(verdict=verdict)
    return item._replace(
        entry=entry, sender=render.vouched(entry, load_claims(snap.store)), origin=render.origin(entry)
    )


def attachment(snap: Snapshot, message_id: str, name: str) -> tuple[Attachment, bytes]:
    """One of a message's attachments and its content (checked against what the message records of it)."""
    node = snap.node(message_id)
    entry = snap.entries([node])[0]
    if entry is None:
        raise NotFound(f"message {message_id} cannot be read")
    item = mailbox.attachment(entry, name)
    return item, mailbox.attachment_content(snap.store, entry, item)


def broadcasts(snap: Snapshot, *, page: int = 1) -> Page[Item]:
    """Every broadcast, active and retracted, newest first, with the repos it reached."""
    nodes = sorted(snap.index.broadcasts.values(), key=_by_time, reverse=True)
    start = (page - 1) * PER_PAGE
    return Page(_items(snap, nodes[start : start + PER_PAGE]), page, start + PER_PAGE < len(nodes), len(nodes))


def search(snap: Snapshot, query: str, *, page: int = 1) -> Page[Item]:
    """Messages whose subject or body contains `query` (any case), newest first; a whole message id finds its
    message. git finds the candidates (its grep also sees the trailers), the documents decide."""
    text = query.strip()
    if not text or not snap.nodes:
        return Page((), page, False, 0)
    rows = snap.store.log_refs(
        "--no-walk=sorted", "--regexp-ignore-case", "--fixed-strings", f"--grep={text}", f"--glob={ROOT}"
    )  # fmt: skip
    candidates = [snap.nodes[oid] for oid, _ in rows if oid in snap.nodes]
    exact = snap.nodes.get(snap.index.by_id.get(text.lower(), ""))
    if exact is not None:
        candidates = [exact, *(c for c in candidates if c is not exact)]
    wanted = page * PER_PAGE + 1  # one more than the page: it tells whether a next page exists
    needle = text.casefold()
    matches: list[Node] = []
    for start in range(0, len(candidates), 200):
        chunk = candidates[start : start + 200]
        documents = snap.documents(n.oid for n in chunk)
        for node in chunk:
            found = documents[node.oid]
            if node is exact or (found is not None and needle in f"{found.subject}\n{found.body}".casefold()):
                matches.append(node)
        if len(matches) >= wanted:
            break
    chosen = matches[(page - 1) * PER_PAGE : page * PER_PAGE]
    return Page(_items(snap, chosen), page, len(matches) >= wanted)


def every_thread(snap: Snapshot, *, batch: int = 200) -> Iterator[Thread]:
    """Every thread, newest activity first, its documents read in batches so an archive of any size streams."""
    roots = [root for _, _, root in reversed(snap.index.order)]
    for start in range(0, len(roots), batch):
        chosen = roots[start : start + batch]
        snap.documents(node.oid for root in chosen for node, _ in snap.members(root))
        for root in chosen:
            yield thread(snap, snap.nodes[root].id)


def _items(snap: Snapshot, nodes: Sequence[Node]) -> list[Item]:
    reach = snap.reach() if any(n.recipient is None for n in nodes) else {}
    entries = _with_receipts(snap, [e or _unreadable(n) for n, e in zip(nodes, snap.entries(nodes), strict=True)])
    return [
        Item(entry, delivered=_delivered(entry), reached=_reached(node, reach))
        for node, entry in zip(nodes, entries, strict=True)
    ]


def _with_receipts(snap: Snapshot, entries: Sequence[Entry]) -> list[Entry]:
    """The entries a page shows, with their receipts (one read for the page)."""
    return mailbox.with_receipts(snap.store, entries) if snap.exists else list(entries)


def _delivered(entry: Entry) -> datetime | None:
    """When the message was first put in front of a session of its recipient (for a broadcast: of any repo)."""
    return mailbox.status(entry).reached[0].at if mailbox.status(entry).reached else None


def _reached(node: Node, reach: Mapping[str, frozenset[str]]) -> tuple[str, ...]:
    if node.recipient is not None:
        return ()
    seen = reach.get(node.oid, frozenset())
    return tuple(sorted((name for name in seen if name != node.sender), key=lambda n: (n.casefold(), n)))


def _unreadable(node: Node) -> Entry:
    """A stand-in for a message whose document does not parse: the page says so instead of failing."""
    message = Message(
        id=node.id,
        sender=node.sender or RepoName("unknown"),
        to=str(node.recipient) if node.recipient is not None else BROADCAST,
        subject="(this message's document cannot be read)",
        body="",
        date=datetime.fromtimestamp(node.time, UTC),
    )
    return Entry(message, node.state, node.oid, node.recipient)
