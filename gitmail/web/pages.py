"""The mailbox as people look at it: conversations drawn as threads, the repos with what waits for each, broadcasts
with the repos they reached, search, and every list in pages. Pure reads over a snapshot (snapshot.py), for the web
view and its export.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Generic, NamedTuple, TypeVar

from gitmail import mailbox
from gitmail.errors import GitmailError, NotFound
from gitmail.store.claims import load_claims
from gitmail.store.machines import Here
from gitmail.values.ids import BROADCAST
from gitmail.values.layout import ROOT, Located, State
from gitmail.values.mail import Entry, status
from gitmail.values.message import Message
from gitmail.values.names import PERSON, RepoName
from gitmail.web.snapshot import Key, Node, Snapshot, by_time, entry_of

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

    from gitmail.values.attachments import Attachment

PER_PAGE = 25
WAITING_SHOWN = 10  # pending messages the overview lists; each repo's page lists all of them

T = TypeVar("T")


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
    standing: tuple[str, ...] = ()  # where it stands for each recipient, from its receipts, oldest first


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


def overview(snap: Snapshot, *, page: int = 1) -> Overview:
    """The first page: the repos and what waits for each, the oldest waiting mail, active broadcasts and the
    conversations with the newest activity."""
    active = sorted((n for n in snap.index.broadcasts.values() if n.state is State.BROADCAST), key=by_time)
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
    for node in sorted(index.pending.values(), key=by_time):
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
        unseen = 0 if repo.is_person else unseen  # broadcasts are for the repositories' sessions
        found.append(Repo(repo, len(mine), first.message.date if first else None, unseen, claims.get(repo)))
    return found


def waiting(snap: Snapshot, *, repo: str | None = None, page: int = 1, limit: int = PER_PAGE) -> Page[Item]:
    """Directed mail still pending, oldest first: what nobody has answered or marked done yet."""
    nodes = sorted((n for n in snap.index.pending.values() if repo is None or n.recipient == repo), key=by_time)
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
    ends = [(members[0], max(members, key=by_time)) for members in threads]
    documents = snap.documents(node.oid for pair in ends for node in pair)
    found = []
    for members, (first, newest) in zip(threads, ends, strict=True):
        root = entry_of(first, documents[first.oid]) or _unreadable(first)
        last = entry_of(newest, documents[newest.oid]) or _unreadable(newest)
        names: dict[str, None] = {}
        for node in sorted(members, key=by_time):
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
    entries = _with_receipts(snap, [entry_of(node, documents[node.oid]) or _unreadable(node) for node, _ in members])
    items = [
        Item(entry, depth, delivered=_delivered(entry), reached=_reached(node, reach), standing=standing(entry))
        for (node, depth), entry in zip(members, entries, strict=True)
    ]
    return Thread(snap.nodes[root].id, tuple(items), tuple(unreadable))


def message(snap: Snapshot, message_id: str) -> tuple[Item, list[Item]]:
    """One message whole, and the replies to it."""
    node = snap.node(message_id)
    replies = sorted((snap.nodes[c] for c in snap.index.children.get(node.oid, ())), key=by_time)
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
    nodes = sorted(snap.index.broadcasts.values(), key=by_time, reverse=True)
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
        Item(entry, delivered=_delivered(entry), reached=_reached(node, reach), standing=standing(entry))
        for node, entry in zip(nodes, entries, strict=True)
    ]


def _with_receipts(snap: Snapshot, entries: Sequence[Entry]) -> list[Entry]:
    """The entries a page shows, with their receipts (one read for the page)."""
    return mailbox.with_receipts(snap.store, entries) if snap.exists else list(entries)


def standing(entry: Entry) -> tuple[str, ...]:
    """Where a message stands for each recipient, one line per receipt: "delivered 11-29 09:31 to api (claude,
    session-start)", "done 11-29 09:40 by api", "replied 11-29 09:41 by api with 5tgh0a1b2c", or "pending"."""
    from gitmail.values import receipts

    lines = []
    for record in sorted(entry.records, key=lambda r: r.at):
        at = record.at.strftime("%m-%d %H:%M")
        if record.event == receipts.DELIVERED:
            how = ", ".join(part for part in (record.host, record.moment) if part)
            lines.append(f"delivered {at} to {record.repo}" + (f" ({how})" if how else ""))
        elif record.event == receipts.REPLIED:
            lines.append(f"replied {at} by {record.repo}" + (f" with {record.reply}" if record.reply else ""))
        elif record.event in (receipts.DONE, receipts.REOPENED):
            lines.append(f"{record.event} {at} by {record.repo}")
    if not lines and entry.state is State.PENDING:
        lines.append("pending: waiting for you" if entry.recipient == PERSON else "pending: not delivered yet")
    return tuple(lines)


def _delivered(entry: Entry) -> datetime | None:
    """When the message was first put in front of a session of its recipient (for a broadcast: of any repo)."""
    return status(entry).reached[0].at if status(entry).reached else None


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
