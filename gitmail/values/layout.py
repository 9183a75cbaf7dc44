"""Where things are in a mailbox: which refs hold which messages in which state, and gitmail's own files. Pure.

| ref | meaning |
|---|---|
| refs/gitmail/<repo>/inbox/<id> | directed mail pending for <repo> |
| refs/gitmail/<repo>/archive/<id> | done or replied to |
| refs/gitmail/_broadcast/active/<id> | a broadcast still handed out |
| refs/gitmail/_broadcast/retracted/<id> | a retracted broadcast |
| refs/gitmail/_damaged/<repo>/<folder>/<id> | a message ref set aside as damaged (`gitmail doctor --repair`) |
| refs/gitmail/_oversized/<repo>/<folder>/<id> | mail that arrived by sync larger than gitmail sends, set aside unread |
| refs/notes/gitmail-seen | notes on broadcast commits: the repos handed each one |
"""

from __future__ import annotations

from gitmail.errors import UsageError
from gitmail.values.ids import ID_PATTERN, ObjectId
from gitmail.values.names import RepoName, first_format_ref, nfc, nfd

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from enum import Enum
    from typing import NamedTuple
else:
    from gitmail.values.choices import Enum
    from gitmail.values.tuples import NamedTuple

ROOT = "refs/gitmail/"
BROADCASTS = ROOT + "_broadcast/"
DAMAGED = ROOT + "_damaged/"
OVERSIZED = ROOT + "_oversized/"
SEEN_NOTES = "refs/notes/gitmail-seen"
OWN_DIR = "gitmail"  # gitmail's own files inside the repository: lock, journal, claims


class State(Enum):
    PENDING = "pending"
    ARCHIVED = "archived"
    BROADCAST = "broadcast"
    RETRACTED = "retracted"


def inbox_prefix(repo: RepoName) -> str:
    return f"{ROOT}{repo.ref}/inbox/"


def leases_prefix(repo: RepoName) -> str:
    """Where a repository's running leases are (store/lease_refs.py keeps them)."""
    return f"{ROOT}{repo.ref}/leases/"


def archive_prefix(repo: RepoName) -> str:
    return f"{ROOT}{repo.ref}/archive/"


def state_prefix(state: State, repo: RepoName | None = None) -> str:
    if state is State.BROADCAST:
        return BROADCASTS + "active/"
    if state is State.RETRACTED:
        return BROADCASTS + "retracted/"
    assert repo is not None
    return inbox_prefix(repo) if state is State.PENDING else archive_prefix(repo)


class Located(NamedTuple):
    """Where a message's ref says it is."""

    ref: str
    oid: ObjectId
    id: str
    state: State
    recipient: RepoName | None  # None for broadcasts


class Change(NamedTuple):
    """One ref change: create (old None), update, or delete (new None)."""

    ref: str
    new: str | None
    old: str | None


_STATE_OF_FOLDER = {
    "inbox": State.PENDING,
    "archive": State.ARCHIVED,
    "active": State.BROADCAST,
    "retracted": State.RETRACTED,
}
# When a crash left one message under two refs, the later state is the true one.
_PRECEDENCE = {State.PENDING: 0, State.BROADCAST: 0, State.ARCHIVED: 1, State.RETRACTED: 1}


def locate(ref: str, oid: str) -> Located | None:
    """Where a ref of this name holding `oid` says a message is; None for a ref that is not a message's, or holds
    no object id."""
    parts = ref[len(ROOT) :].split("/") if ref.startswith(ROOT) else []
    if len(parts) != 3 or not ID_PATTERN.fullmatch(parts[2]):
        return None
    folder = _folder(parts[0], parts[1])
    commit = ObjectId.of(oid)
    if folder is None or commit is None:
        return None
    return Located(ref=ref, oid=commit, id=parts[2], state=folder[0], recipient=folder[1])


def located_in(prefix: str, refs: dict[str, str]) -> list[Located]:
    """`locate` of each of these refs (ref -> what it holds), all in the folder `prefix` ("refs/gitmail/web/inbox/"):
    what the folder's part of a name says is read once for them all. In the order given; foreign refs left out."""
    parts = prefix[len(ROOT) :].split("/") if prefix.startswith(ROOT) else []
    folder = _folder(parts[0], parts[1]) if len(parts) == 3 and not parts[2] else None
    if folder is None:
        return [p for ref, oid in refs.items() if (p := locate(ref, oid))]
    state, recipient = folder
    start, found = len(prefix), []
    for ref, oid in refs.items():
        name = ref[start:]
        commit = ObjectId.of(oid)
        if commit is not None and ref.startswith(prefix) and "/" not in name and ID_PATTERN.fullmatch(name):
            found.append(Located(ref=ref, oid=commit, id=name, state=state, recipient=recipient))
        elif (place := locate(ref, oid)) is not None:  # not a message of this folder after all: as locate says
            found.append(place)
    return found


def _folder(owner: str, kind: str) -> tuple[State, RepoName | None] | None:
    """The state and recipient of the messages in the folder refs/gitmail/<owner>/<kind>/; None for one that holds
    no messages."""
    state = _STATE_OF_FOLDER.get(kind)
    if state is None or (owner == "_broadcast") != (state in (State.BROADCAST, State.RETRACTED)):
        return None
    try:
        return state, None if owner == "_broadcast" else repo_of_component(owner)
    except UsageError:
        return None


def is_message_ref(ref: str) -> bool:
    """Whether a ref of this name is where gitmail keeps a message (whatever it holds)."""
    return locate(ref, "0" * 40) is not None


_COMPONENTS: dict[str, RepoName] = {}  # a few names recur in many thousand refs: each is decoded and checked once


def repo_of_component(component: str) -> RepoName:
    """The repo a ref component names: in the current encoding, or as the mailbox's first format spelled it (a
    mailbox not yet migrated, read by a process that cannot write it; or refs an older gitmail wrote since)."""
    found = _COMPONENTS.get(component)
    if found is None:
        try:
            found = RepoName.from_ref(component)
        except UsageError:
            found = RepoName.from_first_format_ref(component)
        if len(_COMPONENTS) >= 4096:
            _COMPONENTS.clear()
        _COMPONENTS[component] = found
    return found


def damaged_ref(ref: str) -> str:
    """Where a damaged ref is set aside: the same path below refs/gitmail/_damaged/ (refs/notes/x: notes/x)."""
    return DAMAGED + (ref[len(ROOT) :] if ref.startswith(ROOT) else ref[len("refs/") :])


def oversized_ref(ref: str) -> str:
    """Where mail that arrived too large is set aside: the same path below refs/gitmail/_oversized/."""
    return OVERSIZED + ref[len(ROOT) :]


def latest(places: Sequence[Located]) -> list[Located]:
    """One place per message id: the later state wins over a leftover of an interrupted move."""
    best: dict[str, Located] = {}
    for place in places:
        known = best.get(place.id)
        if known is None or _PRECEDENCE[place.state] > _PRECEDENCE[known.state]:
            best[place.id] = place
    return list(best.values())


NOTE_PLACES = 3  # the places `note_specs` names


def annotated(paths: Iterable[str]) -> list[ObjectId]:
    """The objects a notes tree holds notes on, from the paths of its files (whole ids, or fanned out into
    subdirectories as git does), sorted; a path that names no object is left out."""
    return sorted({oid for path in paths if (oid := ObjectId.of(path.replace("/", ""))) is not None})


def note_specs(notes_ref: str, oid: str) -> list[str]:
    """Where the note on `oid` may be: libgit2 writes it at the top of the notes tree; git fans notes out into
    subdirectories as they grow (after a sync, say)."""
    return [f"{notes_ref}:{oid}", f"{notes_ref}:{oid[:2]}/{oid[2:]}", f"{notes_ref}:{oid[:2]}/{oid[2:4]}/{oid[4:]}"]


def note_places(notes_ref: str, oid: str, top: set[bytes] | None) -> list[str]:
    """The NOTE_PLACES specs of a note, "" where the names at the top of its notes tree (`top`; None when they were
    not read) rule one out; none when they rule them all out."""
    whole, fanned = oid.encode(), oid[:2].encode()
    if top is None:
        return note_specs(notes_ref, oid)[:NOTE_PLACES]
    if whole not in top and fanned not in top:
        return []
    return [s if (whole if n == 0 else fanned) in top else "" for n, s in enumerate(note_specs(notes_ref, oid))]


def note_lines(notes: Sequence[bytes | None]) -> set[str]:
    """The lines of the first note found among the places `note_specs` names."""
    text = next((n for n in notes if n is not None), b"")
    return set(nfc(text.decode(errors="replace")).splitlines())  # names in notes compare in NFC


def email(repo: RepoName) -> str:
    """The author address of the repo's commits (readable, never a file name)."""
    return f"{repo.address}@gitmail"


def emails(repo: RepoName) -> list[str]:
    """Every author address the repo's commits may carry: before names were normalised, a name given in NFD
    (as macOS hands out folder names) was written as such."""
    spellings = {repo.address, first_format_ref(nfd(repo))}
    return [f"{spelling}@gitmail" for spelling in sorted(spellings)]
