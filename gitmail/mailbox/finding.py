"""Finding stored mail: a message by id or prefix, its document read and checked, with its receipts and whether
another machine vouches for it; whether a repository's name is known."""

from __future__ import annotations

from gitmail.errors import GitmailError, NotFound, UsageError
from gitmail.store import syncedreceipts
from gitmail.store.claims import load_claims
from gitmail.store.machines import Here
from gitmail.values import receipts
from gitmail.values.ids import ID_ALPHABET, ID_LENGTH
from gitmail.values.layout import (
    ROOT,
    Located,
    State,
    archive_prefix,
    inbox_prefix,
    latest,
    locate,
)
from gitmail.values.mail import Entry, Move
from gitmail.values.message import (
    DOCUMENT_NAME,
    MAX_DOCUMENT_BYTES,
    BadDocument,
    Message,
    parse,
)
from gitmail.values.receipts import RECEIPTS_NOTES

TYPE_CHECKING = False
if TYPE_CHECKING:  # what writes is loaded only to write
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from gitmail.store.repository import Store
    from gitmail.values.names import RepoName
    from gitmail.values.verdict import Verdict


CANDIDATES_LISTED = 10  # ids an ambiguous prefix's error names before "and N more"


def resolve(store: Store, message_id: str) -> Located:
    prefix = message_id.strip().lower()
    if not prefix or len(prefix) > ID_LENGTH or any(c not in ID_ALPHABET for c in prefix):
        raise UsageError(f"{message_id!r} is not a message id (ids look like 7kq2m9x4ab; a prefix will do)")
    places = latest(store.refs(f"{ROOT}*/*/{prefix}*"))
    if not places:
        raise NotFound(f"no message with id {prefix}")
    if len(places) > 1:
        ids = sorted(p.id for p in places)
        more = f" and {len(ids) - CANDIDATES_LISTED:,} more" if len(ids) > CANDIDATES_LISTED else ""
        raise UsageError(f"id {prefix} is ambiguous: it matches {', '.join(ids[:CANDIDATES_LISTED])}{more}")
    return places[0]


def show(store: Store, message_id: str) -> Entry:
    """One message, by id or any unique prefix of it, with its receipts."""
    place = resolve(store, message_id)
    entries, unreadable = parsed([place], documents_of(store, [place]), Here(store))
    if unreadable:
        raise damaged_error(place)
    return with_receipts(store, entries)[0]


def damaged_error(place: Located) -> GitmailError:
    return GitmailError(
        f"message {place.id} is stored but cannot be read (its commit or document is damaged); run `gitmail doctor`"
    )


def documents_of(store: Store, places: Iterable[Located]) -> list[bytes | None]:
    """Each message's document; None where it cannot be read, or is larger than any message gitmail writes."""
    return store.read([f"{p.oid}:{DOCUMENT_NAME}" for p in places], limit=MAX_DOCUMENT_BYTES)


def parsed(
    places: Sequence[Located],
    documents: Sequence[bytes | None],
    here: Here,
    *,
    known: Mapping[str, Message] | None = None,
) -> tuple[list[Entry], list[str]]:
    """The entries of these places from their documents; `known`: messages by commit that need no parsing (as the
    pending index holds them)."""
    entries: list[Entry] = []
    unreadable: list[str] = []
    elsewhere: list[tuple[int, Located]] = []
    known = known or {}
    for place, document in zip(places, documents, strict=True):
        try:
            if document is None:
                raise BadDocument("missing document")
            message = known.get(place.oid)
            if message is None:
                kept = here.store.kept
                message = kept.made_of("message", place.oid, _parsing(document)) if kept else parse(document)
            machine = here.machine_of(message.id, message.machine)
            if machine is not message.machine:  # most mail was written here: nothing to replace
                message = message._replace(machine=machine)
            if message.machine is not None:
                elsewhere.append((len(entries), place))
            entries.append(Entry(message, place.state, place.oid, place.recipient))
        except BadDocument:
            unreadable.append(place.id)
    if elsewhere:
        found = [(place, entries[i].message) for i, place in elsewhere]
        for (i, _), verdict in zip(elsewhere, vouched(here.store, found), strict=True):
            entries[i] = entries[i]._replace(verdict=verdict)
    return entries, unreadable


def vouched(store: Store, found: Sequence[tuple[Located, Message]]) -> list[Verdict]:
    """Whether the machine each of these messages names vouches for it, as found at its place (each commit's
    signature is checked once; its result is kept)."""
    from gitmail.store import signatures  # only where mail came from another machine

    return signatures.verdicts(store, found)


def with_receipts(store: Store, entries: Sequence[Entry]) -> list[Entry]:
    """The entries, each with its receipt records (one read for all), and for those a remote archived or retracted
    here, the record of it (store/remotemoves.py). A record made on this machine says so by naming no machine, as
    messages do; one made elsewhere (sync brought it) keeps the machine it names."""
    notes = store.notes(RECEIPTS_NOTES, [e.oid for e in entries], limit=MAX_DOCUMENT_BYTES)
    here, made_up = Here(store).id, syncedreceipts.load(store)
    moves: dict[str, Move] = {}
    if any(e.state in (State.ARCHIVED, State.RETRACTED) for e in entries):
        from gitmail.store import remotemoves  # log and show: the hooks never read it

        moves = remotemoves.load(store)

    def local(record: receipts.Record) -> receipts.Record:
        return record._replace(machine=None) if record.machine == here else record

    return [
        e._replace(
            records=tuple(local(r) for r in receipts.parse(notes[e.oid]) if r not in made_up[e.oid]),
            moved=m if (m := moves.get(e.message.id)) is not None and m.state == e.state.value else None,
        )
        for e in entries
    ]


def known(store: Store, repo: RepoName) -> bool:
    """Whether any repo of this name has used the mailbox (read or received mail) before."""
    # Cheapest first: the archive can hold many thousand refs, and listing them is what costs.
    return repo in load_claims(store) or store.holds_refs(inbox_prefix(repo), archive_prefix(repo))


def oldest_first(entries: list[Entry]) -> list[Entry]:
    return sorted(entries, key=lambda e: (e.message.date, e.message.id))


def newest_first(entries: list[Entry]) -> list[Entry]:
    return sorted(entries, key=lambda e: (e.message.date, e.message.id), reverse=True)


def from_rows(store: Store, rows: Sequence[tuple[str, list[str]]]) -> tuple[list[Entry], list[str]]:
    places = latest([p for oid, refs in rows for ref in refs if (p := locate(ref, oid))])
    return parsed(places, documents_of(store, places), Here(store))


def _parsing(document: bytes) -> Callable[[], Message]:
    """What parses this document, when called (functools.partial without loading functools)."""
    return lambda: parse(document)
