"""The operations people think in: send, broadcast, reply, retract, pending mail, hand-over, done, log, show.

This is the Python API the command line and the hooks call:

    from gitmail import mailbox
    box = mailbox.open_mailbox()                     # ~/.gitmail/mail.git, or $GITMAIL_DIR
    entry = mailbox.send(box, sender="api", to="web", subject="Schema v2 is live", body="...")
    for entry in mailbox.inbox(box, repo="web").directed: ...
    mailbox.done(box, repo="web", ids=[entry.message.id])
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import NamedTuple

from gitmail.errors import GitmailError, MailboxBusy, NotFound, UsageError
from gitmail.identity import RepoName
from gitmail.layout import (
    BROADCASTS,
    ROOT,
    Change,
    Located,
    State,
    archive_prefix,
    email,
    inbox_prefix,
    latest,
    locate,
    seen_set,
    seen_specs,
    state_prefix,
)
from gitmail.machine import Here
from gitmail.message import (
    BROADCAST,
    DOCUMENT_NAME,
    ID_ALPHABET,
    ID_LENGTH,
    BadDocument,
    Message,
    clean_body,
    clean_subject,
    new_id,
    parse,
    reply_subject,
)
from gitmail.store import Store


class Entry(NamedTuple):
    """A stored message and where it stands."""

    message: Message
    state: State
    oid: str  # the message's commit
    recipient: RepoName | None  # whose inbox or archive holds it; None for broadcasts


class Pending(NamedTuple):
    """What a repo has to read: directed mail until done, broadcasts until handed over once."""

    repo: RepoName
    directed: Sequence[Entry] = ()  # oldest first
    broadcasts: Sequence[Entry] = ()  # oldest first
    unreadable: Sequence[str] = ()  # ids whose document does not parse
    claimed_by: str | None = None  # another path that uses the same repo name, when there is one


class DoneResult(NamedTuple):
    archived: Sequence[str] = ()
    already: Sequence[str] = ()  # already archived, or broadcasts (nothing to archive)


def open_mailbox(path: str | os.PathLike[str] | None = None) -> Store:
    """The mailbox at `path`, or the default one; nothing is created until the first write."""
    return Store(path)


def now() -> datetime:
    return datetime.now(UTC).astimezone()


# -- sending ---------------------------------------------------------------------------------------------------


def send(
    store: Store,
    *,
    sender: str,
    to: str,
    subject: str,
    body: bytes | str = "",
    when: datetime | None = None,
) -> Entry:
    """Leave a message in `to`'s inbox; it stays pending there until `to` replies or marks it done."""
    recipient = RepoName.parse(to)
    message = _compose(sender=sender, to=recipient, subject=subject, body=body, when=when)
    with store.writing(actor=message.sender) as writer:
        message = _unique(writer.target, message, inbox_prefix(recipient))
        oid = writer.commit(message)
        writer.apply(
            [Change(inbox_prefix(recipient) + message.id, oid, None)], f"gitmail: {message.sender} sent {message.id}"
        )
    return Entry(message, State.PENDING, oid, recipient)


def broadcast(
    store: Store, *, sender: str, subject: str, body: bytes | str = "", when: datetime | None = None
) -> Entry:
    """Leave a message for every repo: each is handed it once; its sender never is."""
    message = _compose(sender=sender, to=BROADCAST, subject=subject, body=body, when=when)
    active = state_prefix(State.BROADCAST)
    with store.writing(actor=message.sender) as writer:
        message = _unique(writer.target, message, active)
        oid = writer.commit(message)
        writer.apply([Change(active + message.id, oid, None)], f"gitmail: {message.sender} broadcast {message.id}")
        writer.add_seen([oid], message.sender, message.date)
    return Entry(message, State.BROADCAST, oid, None)


def reply(
    store: Store,
    *,
    sender: str,
    to_id: str,
    subject: str | None = None,
    body: bytes | str = "",
    when: datetime | None = None,
) -> Entry:
    """Answer a message: routed to its sender, threaded on it, and archiving it for the replier in one step."""
    me = RepoName.parse(sender)
    original = show(store, to_id)
    first = original.message
    if first.sender == me and first.is_broadcast:
        raise GitmailError(f"{first.id} is your own broadcast; send a new broadcast instead of a reply")
    # Answering your own directed message is a follow-up to its recipient.
    recipient = RepoName(first.to) if first.sender == me else first.sender
    message = _compose(
        sender=me,
        to=recipient,
        subject=subject if subject is not None else reply_subject(first.subject),
        body=body,
        when=when,
        reply_to=first.id,
    )
    with store.writing(actor=me) as writer:
        message = _unique(writer.target, message, inbox_prefix(recipient))
        oid = writer.commit(message, parents=[original.oid])
        changes = [Change(inbox_prefix(recipient) + message.id, oid, None)]
        mine = inbox_prefix(me) + first.id
        if writer.target(mine) == original.oid:
            changes += [Change(archive_prefix(me) + first.id, original.oid, None), Change(mine, None, original.oid)]
        writer.apply(changes, f"gitmail: {me} replied to {first.id} with {message.id}")
    return Entry(message, State.PENDING, oid, recipient)


def retract(store: Store, *, sender: str, message_id: str) -> bool:
    """Stop handing out one's own broadcast (repos that were handed it keep it). False if already retracted."""
    me = RepoName.parse(sender)
    entry = show(store, message_id)
    if not entry.message.is_broadcast:
        raise GitmailError(f"{entry.message.id} is not a broadcast; only broadcasts can be retracted")
    if entry.message.sender != me:
        raise GitmailError(
            f"{entry.message.id} was broadcast by {entry.message.sender!r}; only its sender can retract it"
        )
    if entry.state is State.RETRACTED:
        return False
    active = state_prefix(State.BROADCAST) + entry.message.id
    with store.writing(actor=me) as writer:
        if writer.target(active) != entry.oid:
            return False
        retracted = state_prefix(State.RETRACTED) + entry.message.id
        changes = [Change(retracted, entry.oid, None), Change(active, None, entry.oid)]
        writer.apply(changes, f"gitmail: {me} retracted {entry.message.id}")
    return True


def _compose(
    *,
    sender: str,
    to: str,
    subject: str,
    body: bytes | str,
    when: datetime | None,
    reply_to: str | None = None,
) -> Message:
    """Validate everything before anything is written."""
    return Message(
        id=new_id(),
        sender=RepoName.parse(sender),
        to=to,
        subject=clean_subject(subject),
        body=clean_body(body),
        date=when or now(),
        reply_to=reply_to,
    )


def _unique(target: Callable[[str], str | None], message: Message, prefix: str) -> Message:
    while target(prefix + message.id) is not None:  # 50 random bits: practically never loops
        message = message._replace(id=new_id())
    return message


# -- reading ---------------------------------------------------------------------------------------------------


def pending(store: Store, *, repo: str, timeout: float = 10.0) -> Pending:
    """A repo's pending directed mail and the broadcasts not yet handed to it. Writes nothing (unless a writer
    died mid-change: that change is finished first)."""
    me = RepoName.parse(repo)
    if not store.exists():
        return Pending(me)
    if (store.own_dir / "journal").exists():
        try:
            with store.locked(timeout=timeout):
                pass  # a writer died mid-change: the lock finishes it
        except MailboxBusy:
            pass  # a live writer holds the lock and will finish it; reading meanwhile is safe
    places = store.refs(inbox_prefix(me), state_prefix(State.BROADCAST))
    broadcast_places = [p for p in places if p.state is State.BROADCAST]
    documents = store.read(
        [f"{p.oid}:{DOCUMENT_NAME}" for p in places] + [s for p in broadcast_places for s in seen_specs(p.oid)]
    )
    entries, unreadable = _entries(places, documents[: len(places)], Here(store))
    notes = documents[len(places) :]
    seen = {p.oid: seen_set(notes[3 * i : 3 * i + 3]) for i, p in enumerate(broadcast_places)}
    directed = [e for e in entries if e.state is State.PENDING]
    broadcasts = [e for e in entries if e.state is State.BROADCAST and e.message.sender != me and me not in seen[e.oid]]
    return Pending(me, _oldest_first(directed), _oldest_first(broadcasts), unreadable)


def hand_over(
    store: Store, *, repo: str, broadcasts: Sequence[Entry], when: datetime | None = None, timeout: float = 10.0
) -> list[Entry]:
    """Record `repo` as handed these broadcasts. Returns the ones this call handed over: a broadcast retracted or
    handed to the same repo by a concurrent reader meanwhile is left out, so each repo gets each one once."""
    me = RepoName.parse(repo)
    if not broadcasts:
        return []
    with store.writing(actor=me, timeout=timeout) as writer:
        active = [e for e in broadcasts if writer.target(state_prefix(State.BROADCAST) + e.message.id) == e.oid]
        added = set(writer.add_seen([e.oid for e in active], me, when or now()))
    return [e for e in active if e.oid in added]


def inbox(store: Store, *, repo: str, peek: bool = False, path: str | os.PathLike[str] | None = None) -> Pending:
    """Pending mail; unless `peek`, the unseen broadcasts are handed over (recorded as seen) by this read.
    With `path` (where the reading repository is), the name's first user is recorded, or reported if another."""
    claimed_by = claim(store, repo=RepoName.parse(repo), path=path) if path is not None and store.exists() else None
    mail = pending(store, repo=repo)._replace(claimed_by=claimed_by)
    if peek or not mail.broadcasts:
        return mail
    return mail._replace(broadcasts=hand_over(store, repo=repo, broadcasts=mail.broadcasts))


def claim(store: Store, *, repo: RepoName, path: str | os.PathLike[str], timeout: float = 10.0) -> str | None:
    """Record the first path that uses a repo name; return the recorded path when it is another one."""
    here = os.path.realpath(path)
    first = store.claims().get(repo)
    if first is None:
        with store.locked(timeout=timeout):
            claims = store.claims()
            first = claims.setdefault(repo, here)
            if first == here:
                store.write_claims(claims)
    return first if first != here else None


def show(store: Store, message_id: str) -> Entry:
    """One message, by id or any unique prefix of it."""
    place = resolve(store, message_id)
    entries, unreadable = _entries([place], store.read([f"{place.oid}:{DOCUMENT_NAME}"]), Here(store))
    if unreadable:
        raise GitmailError(f"message {place.id} is stored but its document cannot be read")
    return entries[0]


def resolve(store: Store, message_id: str) -> Located:
    prefix = message_id.strip().lower()
    if not prefix or len(prefix) > ID_LENGTH or any(c not in ID_ALPHABET for c in prefix):
        raise UsageError(f"{message_id!r} is not a message id (ids look like 7kq2m9x4ab; a prefix will do)")
    places = latest(store.refs(f"{ROOT}*/*/{prefix}*"))
    if not places:
        raise NotFound(f"no message with id {prefix}")
    if len(places) > 1:
        candidates = ", ".join(sorted(p.id for p in places))
        raise UsageError(f"id {prefix} is ambiguous: it matches {candidates}")
    return places[0]


def done(store: Store, *, repo: str, ids: Sequence[str] = (), everything: bool = False) -> DoneResult:
    """Archive directed mail without replying. Already archived mail and broadcasts are reported, not errors;
    another repo's message is refused, and then nothing is archived."""
    me = RepoName.parse(repo)
    if everything:
        places = store.refs(inbox_prefix(me))
    else:
        if not ids:
            raise UsageError("name the messages to mark done, or pass --all")
        places = [resolve(store, i) for i in ids]
    archived: list[str] = []
    already: list[str] = []
    todo: dict[str, Located] = {}
    for place in places:
        if place.recipient is None:
            already.append(place.id)
        elif place.recipient != me:
            raise GitmailError(
                f"{place.id} is addressed to {place.recipient!r}, not to {me!r}; "
                f"only {place.recipient!r} can mark it done"
            )
        elif place.state is State.ARCHIVED:
            already.append(place.id)
        else:
            todo[place.id] = place
    if not todo:
        return DoneResult(archived, already)
    with store.writing(actor=me) as writer:
        changes: list[Change] = []
        for place in todo.values():
            if writer.target(place.ref) != place.oid:  # a concurrent `done` got there first
                already.append(place.id)
                continue
            changes += [Change(archive_prefix(me) + place.id, place.oid, None), Change(place.ref, None, place.oid)]
            archived.append(place.id)
        if changes:
            writer.apply(changes, f"gitmail: {me} marked done {' '.join(archived)}")
    return DoneResult(archived, already)


def log(
    store: Store,
    *,
    repo: str | None = None,
    limit: int | None = 20,
    grep: str | None = None,
    thread: str | None = None,
) -> list[Entry]:
    """History, newest first: a repo's mail (to it, from it, and broadcasts), or everyone's when `repo` is None.
    With `thread`, the whole conversation that message belongs to, oldest first."""
    if not store.exists():
        return []
    if thread is not None:
        return _oldest_first(_thread(store, resolve(store, thread)))
    common = ["--no-walk=sorted"] + (["--regexp-ignore-case", "--fixed-strings", f"--grep={grep}"] if grep else [])
    common += [f"--max-count={limit}"] if limit is not None else []
    if repo is None:
        rows = store.log_refs(*common, f"--glob={ROOT}")
    else:
        me = RepoName.parse(repo)
        received = _from_rows(store, store.log_refs(*common, f"--glob={ROOT}{me.ref}", f"--glob={BROADCASTS}"))
        sent = _from_rows(
            store, store.log_refs(*common, "--fixed-strings", f"--glob={ROOT}", f"--author=<{email(me)}>")
        )
        mine = {e.message.id: e for e in received + [e for e in sent if e.message.sender == me]}
        return _newest_first(list(mine.values()))[:limit]
    entries = _newest_first(_from_rows(store, rows))
    return entries[:limit] if limit is not None else entries


def _thread(store: Store, place: Located) -> list[Entry]:
    root = store.git("rev-list", "--max-parents=0", place.oid).decode().split()[0]
    rows = store.log_refs("--no-walk", root) + store.log_refs("--ancestry-path", f"^{root}", f"--glob={ROOT}")
    return _from_rows(store, rows)


def _from_rows(store: Store, rows: Sequence[tuple[str, list[str]]]) -> list[Entry]:
    places = latest([p for oid, refs in rows for ref in refs if (p := locate(ref, oid))])
    entries, _ = _entries(places, store.read([f"{p.oid}:{DOCUMENT_NAME}" for p in places]), Here(store))
    return entries


def _entries(places: Sequence[Located], documents: Sequence[bytes | None], here: Here) -> tuple[list[Entry], list[str]]:
    entries, unreadable = [], []
    for place, document in zip(places, documents, strict=True):
        try:
            if document is None:
                raise BadDocument("missing document")
            message = parse(document)
            message = message._replace(machine=here.machine_of(message.id, message.machine))
            entries.append(Entry(message, place.state, place.oid, place.recipient))
        except BadDocument:
            unreadable.append(place.id)
    return entries, unreadable


def _oldest_first(entries: list[Entry]) -> list[Entry]:
    return sorted(entries, key=lambda e: (e.message.date, e.message.id))


def _newest_first(entries: list[Entry]) -> list[Entry]:
    return sorted(entries, key=lambda e: (e.message.date, e.message.id), reverse=True)


def known(store: Store, repo: RepoName) -> bool:
    """Whether any repo of this name has used the mailbox (read or received mail) before."""
    # Cheapest first: the archive can hold many thousand refs, and listing them is what costs.
    return (
        repo in store.claims()
        or bool(store.refs(inbox_prefix(repo), count=1))
        or bool(store.refs(archive_prefix(repo), count=1))
    )
