"""Reconciling a mailbox with a remote's state (remotestate.py), message by message: what arrives here, what moves
here, what the remote lacks; merging gitmail's notes refs as a union of lines; and what to push there.

Reconciliation never goes backwards: archived beats pending, retracted beats active, and nothing is ever removed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from gitmail.store import gitcmd, keys, refs, remotemoves, signatures, syncedreceipts
from gitmail.store.writer import writing
from gitmail.sync.limits import over_attachment_limit
from gitmail.sync.quick import SYNCED
from gitmail.sync.remotes import (
    NOTES,
    NOTES_ROOT,
    REMOTE_ROOT,
    STATE,
    NotGitmail,
)
from gitmail.sync.remotestate import ZERO, RemoteState, new_state, object_info, state_path
from gitmail.values.ids import BROADCAST, ID_PATTERN, ObjectId
from gitmail.values.layout import (
    OVERSIZED,
    ROOT,
    Change,
    Located,
    State,
    annotated,
    archive_prefix,
    inbox_prefix,
    latest,
    locate,
    oversized_ref,
    state_prefix,
)
from gitmail.values.mail import Move
from gitmail.values.message import DOCUMENT_NAME, MAX_BODY_BYTES, MAX_DOCUMENT_BYTES, MAX_SUBJECT_CHARS
from gitmail.values.names import RepoName
from gitmail.values.receipts import RECEIPTS_NOTES

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

    from gitmail.store.repository import Store
    from gitmail.store.writer import Writer
    from gitmail.values.machine import Machine
    from gitmail.values.message import Message

IMPORT_CHUNK = 1000  # ref changes per transaction when many messages arrive at once
PACK_AFTER = 1000  # refs imported in one sync after which the refs are packed
SYNC_ACTOR = RepoName("gitmail-sync")  # the "who" in the reflog of refs sync moves
_SAMPLE_ID = "0" * 10
_RANK = {State.PENDING: 0, State.BROADCAST: 0, State.ARCHIVED: 1, State.RETRACTED: 1}
KEYS = keys.KEYS_NOTES[len(NOTES_ROOT) :]  # "gitmail-keys": the notes ref machines publish their keys in


def _places(pairs: Iterable[tuple[str, str]]) -> list[Located]:
    """Message places from (ref, oid) pairs, the same as `layout.locate` finds them, checking each repo and
    folder once rather than once per message (100,000 refs name a handful of them)."""
    known: dict[str, Located | None] = {}
    found = []
    for ref, oid in pairs:
        head, _, message_id = ref.rpartition("/")
        if head not in known:
            known[head] = locate(f"{head}/{_SAMPLE_ID}", ZERO)
        sample = known[head]
        commit = ObjectId.of(oid)
        if sample is not None and commit is not None and ID_PATTERN.fullmatch(message_id):
            found.append(Located(ref, commit, message_id, sample.state, sample.recipient))
    return found


class NotesStep(NamedTuple):
    """What to do with one notes ref: "take" the remote's (here), "push" ours, or "merge" both (here and there)."""

    name: str  # "gitmail-seen"
    action: str
    mine: str | None
    theirs: str | None


class Comparison(NamedTuple):
    """This mailbox against the remote's state, message by message and notes ref by notes ref."""

    arrivals: list[Located]  # new here (those too large to take are set aside instead: `oversized`)
    moves_here: list[tuple[Located, Located]]  # (here, there): the remote's place is the later state
    additions: list[Located]  # new there
    moves_there: list[tuple[Located, Located]]  # (there, here): this mailbox's place is the later state
    conflicts: list[tuple[Located, Located]]  # one id, different commits or kinds: neither copy is changed
    notes: list[NotesStep]
    oversized: list[tuple[Located, str]]  # arrivals set aside unread (`_apply` fills it): the place, and why
    said: list[Move]  # moves_here as recorded here (`_apply` fills it): which machine the remote says made each

    @property
    def notes_here(self) -> int:
        """Notes refs of mail (seen-sets, receipts) that change here. Published keys are not counted: they travel
        with the mail they sign."""
        return sum(1 for n in self.notes if n.action != "push" and n.name != KEYS)

    @property
    def writes_here(self) -> bool:
        return bool(self.arrivals or self.moves_here or any(n.action != "push" for n in self.notes))


class Plan(NamedTuple):
    """What to push: (remote ref, new value, expected value) for each ref, and what it amounts to."""

    updates: list[tuple[str, str, str | None]]
    sent: int = 0
    moved: int = 0
    notes: int = 0


def _compare(store: Store, there: RemoteState, remote: str) -> Comparison:
    """Compare as sets of lines first: at 100,000 messages nearly every line is the same on both sides, and only
    the ids of lines that differ are looked at as messages."""
    local_lines = refs.lines(store.path, ROOT)
    set_aside = {ref[ref.rfind("/") + 1 :] for ref in refs.listing(store.path, OVERSIZED)}  # arrived too large
    differ = local_lines.symmetric_difference(there.listing)
    touched = {_id_of(line) for line in differ}
    mine_lines = _of_ids(local_lines, touched)  # the one pass over every line
    theirs_lines = [line for line in differ if line not in local_lines]
    theirs_lines += [line for line in mine_lines if line in there.listing]
    local, _ = _by_id(mine_lines)  # a line that holds no ref is passed over, as git lists none
    theirs_by_id, unreadable = _by_id(theirs_lines)
    pairs = [pair for found in theirs_by_id.values() for pair in found]
    remote_places = _places(pairs)
    if len(remote_places) != len(pairs) or unreadable:
        bad = sorted({ref for ref, _ in pairs} - {p.ref for p in remote_places}) or [
            unreadable[0].decode("utf-8", "replace")
        ]
        raise NotGitmail(remote, f"an entry of its state is not a message: {bad[0]!r}")
    theirs_at = {p.id: p for p in latest(remote_places)}
    if len(theirs_at) != len(remote_places):
        raise NotGitmail(remote, "its state holds a message in two places")
    mine_at = {p.id: p for p in latest(_places(pair for found in local.values() for pair in found))}
    seen = Comparison([], [], [], [], [], _compare_notes(store, there.notes), [], [])
    for message_id in touched:
        mine, theirs = mine_at.get(message_id), theirs_at.get(message_id)
        if mine is None and (theirs is None or message_id in set_aside):
            continue  # a ref that is no message here (a damaged one set aside, say), or mail set aside unread
        if theirs is None:
            assert mine is not None
            seen.additions.append(mine)
        elif mine is None:
            seen.arrivals.append(theirs)
        elif mine.ref == theirs.ref and mine.oid == theirs.oid:
            continue
        elif mine.oid != theirs.oid or _kind(mine) != _kind(theirs) or _RANK[mine.state] == _RANK[theirs.state]:
            seen.conflicts.append((mine, theirs))
        elif _RANK[theirs.state] > _RANK[mine.state]:
            seen.moves_here.append((mine, theirs))
        else:
            seen.moves_there.append((theirs, mine))
    return seen


def _id_of(line: bytes) -> str:
    """The last part of a line's ref (b"<oid> <ref>"): a message's id, where the ref is a message's."""
    return line[line.rfind(b"/") + 1 :].decode(errors="replace")


def _of_ids(lines: Iterable[bytes], ids: set[str]) -> list[bytes]:
    """The lines (b"<oid> <ref>") whose refs end in one of these ids: picked by how each line ends (b"/<id>"), so
    that 100,000 lines cost a slice and a look-up each."""
    ends: dict[int, set[bytes]] = {}
    for message_id in ids:
        end = f"/{message_id}".encode()
        ends.setdefault(len(end), set()).add(end)
    return [line for width, wanted in ends.items() for line in lines if line[-width:] in wanted]


def _by_id(lines: Iterable[bytes]) -> tuple[dict[str, list[tuple[str, str]]], list[bytes]]:
    """The (ref, commit) pairs these lines (b"<oid> <ref>") hold by message id, and the lines that hold no ref."""
    found: dict[str, list[tuple[str, str]]] = {}
    unreadable = []
    for line in lines:
        pair = refs.ref_line(line)
        if pair is None:
            unreadable.append(line)
        else:
            found.setdefault(pair[0][pair[0].rfind("/") + 1 :], []).append(pair)
    return found, unreadable


def _compare_notes(store: Store, remote_notes: dict[str, str]) -> list[NotesStep]:
    synced = [NOTES_ROOT + ref[len(NOTES) :] for ref in SYNCED if ref.startswith(NOTES)]
    local = {ref[len(NOTES_ROOT) :]: oid for ref, oid in refs.resolve(store.path, synced).items()}
    steps = []
    for name in sorted(local.keys() | remote_notes.keys()):
        mine, theirs = local.get(name), remote_notes.get(name)
        if mine == theirs:
            continue
        if mine is None or theirs is None:
            action = "take" if mine is None else "push"
        else:
            base = _merge_base(store, mine, theirs)
            action = "push" if base == theirs else "take" if base == mine else "merge"
        steps.append(NotesStep(name, action, mine, theirs))
    return steps


def reconcile(
    store: Store, there: RemoteState, here: Machine, remote: str, since: str | None = None
) -> tuple[Comparison, Plan]:
    """Bring what the remote has into this mailbox, and build what the remote lacks. Comparing takes no lock:
    every change made here carries the value it expects, so one that a local write overtook is refused whole,
    and then the comparison is made again under the lock. `since`: the remote's state as last fetched (where to
    look back to for who moved a message)."""
    from gitmail.store.log import problem

    seen = _compare(store, there, remote)
    pushes: list[tuple[str, str, str | None]] = []
    if seen.writes_here:
        with writing(store, actor=SYNC_ACTOR) as writer:
            if not _still_absent(store, seen.arrivals):
                seen = _compare(store, there, remote)  # a local write landed meanwhile: compare again, locked
            try:
                pushes = _apply(store, writer, seen, here, remote, there.state, since)
            except gitcmd.GitFailed:  # a local write overtook a change: it was refused whole; compare again
                seen = _compare(store, there, remote)
                pushes = _apply(store, writer, seen, here, remote, there.state, since)
    for notes in seen.notes:
        if notes.action == "push":
            assert notes.mine is not None
            pushes.append((f"{REMOTE_ROOT}{NOTES}{notes.name}", notes.mine, notes.theirs))
    for mine, theirs in seen.conflicts:
        problem(
            store.path,
            f"sync with {remote}: message {mine.id} is {mine.ref} {mine.oid} here and {theirs.ref} {theirs.oid} "
            "there; sync changed neither copy",
        )
    missing = store.missing([p.oid for p in seen.additions])
    sendable = [p for p in seen.additions if p.oid not in missing]
    if missing:
        problem(store.path, f"sync with {remote}: {len(missing)} messages whose commits are missing here were not sent")
    updates = list(pushes)
    if sendable or seen.moves_there:
        state = new_state(store, there, sendable, seen.moves_there, here, remote)
        updates.append((REMOTE_ROOT + STATE, state, there.state))
    mail_notes = sum(1 for ref, _, _ in pushes if ref != f"{REMOTE_ROOT}{NOTES}{KEYS}")
    return seen, Plan(updates, len(sendable), len(seen.moves_there), mail_notes)


def _still_absent(store: Store, arrivals: Sequence[Located]) -> bool:
    """Whether no arriving message is here in either of its places yet. Only a change's own ref is checked by
    its transaction, and a reader without the lock can miss a message in mid-move (git moves refs in name order:
    a retract deletes active/<id> before it creates retracted/<id>)."""
    if not arrivals:
        return True
    names = []
    for place in arrivals:
        if place.recipient is None:
            names += [state_prefix(State.BROADCAST) + place.id, state_prefix(State.RETRACTED) + place.id]
        else:
            names += [inbox_prefix(place.recipient) + place.id, archive_prefix(place.recipient) + place.id]
    return not refs.resolve(store.path, names)


def _apply(
    store: Store, writer: Writer, seen: Comparison, here: Machine, remote: str, state: str | None, since: str | None
) -> list[tuple[str, str, str | None]]:
    """Change this mailbox (under the writer's lock): arrivals, later states, notes. Returns the notes pushes
    that merging made. Each message archived or retracted here because the remote says so is recorded first
    (store/remotemoves.py) and logged."""
    from gitmail.store import machines as machine
    from gitmail.store.log import problem

    arrived, oversized = _check_arrivals(store, seen.arrivals, remote)
    seen.oversized[:] = oversized
    # Each arriving commit's signature is checked once, here, and what it showed is kept: readers (a session
    # start among them) find it without checking again.
    signatures.facts(store, [p.oid for p in seen.arrivals if p.id in arrived])
    # Recorded before their refs exist: a message that arrived is never taken for one written here.
    machine.remember_arrivals(store, [i for i, m in arrived.items() if m.machine is None or m.machine.id == here.id])
    changes = [[Change(p.ref, p.oid, None)] for p in seen.arrivals if p.id in arrived]
    changes += [[Change(oversized_ref(p.ref), p.oid, None)] for p, _ in oversized]
    changes += [[Change(new.ref, new.oid, None), Change(old.ref, None, old.oid)] for old, new in seen.moves_here]
    reason = f"gitmail: sync from {remote}: {len(arrived)} new, {len(seen.moves_here)} moved"
    reason += f", {len(oversized)} set aside as too large" if oversized else ""
    for place, why in oversized:
        problem(
            store.path,
            f"sync with {remote}: set aside message {place.id} ({place.ref}) unread as {oversized_ref(place.ref)}: "
            f"{why}",
        )
    seen.said[:] = _remote_moves(store, seen.moves_here, remote, state, since)
    remotemoves.remember(store, seen.said)
    for move in seen.said:
        problem(store.path, f"sync with {remote}: {move.line()}")
    for chunk in _chunks(changes, IMPORT_CHUNK):
        writer.apply(chunk, reason)
    if len(seen.arrivals) > PACK_AFTER:
        _pack_refs(store, writer)
    pushes: list[tuple[str, str, str | None]] = []
    for step in seen.notes:
        ref = NOTES_ROOT + step.name
        if ref == RECEIPTS_NOTES and step.theirs is not None and step.action != "push":  # before they land here
            syncedreceipts.remember(store, syncedreceipts.claimed_here(store, step.mine, step.theirs, here.id))
        if step.action == "take":
            assert step.theirs is not None
            writer.apply([Change(ref, step.theirs, step.mine)], f"gitmail: sync from {remote}: {step.name}")
        elif step.action == "merge":
            assert step.mine is not None and step.theirs is not None
            merged = _union(writer, step.mine, step.theirs, step.name, remote)
            writer.apply([Change(ref, merged, step.mine)], f"gitmail: sync with {remote}: merged {step.name}")
            pushes.append((f"{REMOTE_ROOT}{NOTES}{step.name}", merged, step.theirs))
    if any(step.name == KEYS and step.action != "push" for step in seen.notes):
        keys.learn(store)  # keys published elsewhere: a machine seen for the first time has its key pinned
    return pushes


def _kind(place: Located) -> object:
    return (place.recipient, place.state in (State.BROADCAST, State.RETRACTED))


def _chunks(groups: Sequence[Sequence[Change]], size: int) -> Iterator[list[Change]]:
    """Changes in transactions of about `size`; the changes of one group (the two of a move) stay together."""
    chunk: list[Change] = []
    for group in groups:
        chunk += group
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _check_arrivals(
    store: Store, arrivals: Sequence[Located], remote: str
) -> tuple[dict[str, Message], list[tuple[Located, str]]]:
    """Every arriving message must be a commit here now, holding a gitmail document with its own id and
    addressed where the remote's state files it; else nothing arrives. Mail larger than gitmail sends (a commit
    or document over MAX_DOCUMENT_BYTES, a body or subject over its limit) is set aside: (the place, why). Sizes
    are looked at before anything is read, so what is too large is never read."""
    from gitmail.values.message import BadDocument, parse

    specs = [p.oid for p in arrivals] + [f"{p.oid}:{DOCUMENT_NAME}" for p in arrivals]
    info = object_info(store, specs)
    missing = [p for p in arrivals if info[p.oid][0] != "commit"]
    if missing:
        count = len(missing)
        raise NotGitmail(remote, f"{count} messages of its state are not commits it holds, e.g. {missing[0].id}")
    oversized = []
    for place in arrivals:
        commit, size = info[place.oid][1], info[f"{place.oid}:{DOCUMENT_NAME}"][1]
        if max(commit, size) > MAX_DOCUMENT_BYTES:
            what = f"its document is {size:,} bytes" if size > commit else f"its commit is {commit:,} bytes"
            oversized.append((place, f"{what}; gitmail takes at most {MAX_DOCUMENT_BYTES:,}"))
    too_large = {p.id for p, _ in oversized}
    readable = [p for p in arrivals if p.id not in too_large]
    documents = store.read([f"{p.oid}:{DOCUMENT_NAME}" for p in readable], limit=MAX_DOCUMENT_BYTES)
    arrived = {}
    for place, document in zip(readable, documents, strict=True):
        try:
            if document is None:
                raise BadDocument("no message document")
            message = parse(document)
        except BadDocument as error:
            raise NotGitmail(remote, f"message {place.id}: {error}") from None
        to = BROADCAST if place.recipient is None else place.recipient
        if message.id != place.id or message.to != to:
            raise NotGitmail(remote, f"message {place.id} is filed under another id or recipient")
        body = len(message.body.encode())
        if body > MAX_BODY_BYTES:
            oversized.append((place, f"its body is {body:,} bytes; gitmail sends at most {MAX_BODY_BYTES:,}"))
        elif len(message.subject) > MAX_SUBJECT_CHARS:
            why = f"its subject is {len(message.subject):,} characters; gitmail sends at most {MAX_SUBJECT_CHARS}"
            oversized.append((place, why))
        else:
            arrived[place.id] = message
    heavy = over_attachment_limit(store, [p for p in readable if p.id in arrived])
    for place, _ in heavy:
        del arrived[place.id]
    return arrived, oversized + heavy


def _remote_moves(
    store: Store, moves: Sequence[tuple[Located, Located]], remote: str, state: str | None, since: str | None
) -> list[Move]:
    """What to record of messages archived or retracted here because the remote says so: the machine whose sync
    put the move in the remote's state, whether a session here had been shown the message, its subject."""
    import time

    from gitmail.values.message import BadDocument, parse

    if not moves:
        return []
    who = _who_moved(store, state, since, [state_path(new) for _, new in moves])
    shown = _shown_here(store, [old for old, _ in moves])
    documents = store.read([f"{old.oid}:{DOCUMENT_NAME}" for old, _ in moves], limit=MAX_DOCUMENT_BYTES)
    now = time.time()
    found = []
    for (old, new), document in zip(moves, documents, strict=True):
        try:
            subject = parse(document).subject if document is not None else ""
        except BadDocument:
            subject = ""
        to = BROADCAST if old.recipient is None else str(old.recipient)
        field = who.get(state_path(new), "")
        found.append(Move(new.id, new.state.value, remote, field, now, shown.get(old.id), to, subject))
    return found


def _who_moved(store: Store, state: str | None, since: str | None, paths: Sequence[str]) -> dict[str, str]:
    """For each of these paths of the remote's state, the machine its newest state commit adding the path names
    (its `Machine:` trailer, "laptop 4kq8m2x9ab"), looking back to `since`."""
    if state is None:
        return {}
    trailer = "%(trailers:key=Machine,valueonly,separator=%x20)"
    walk = ["log", "--first-parent", "--no-renames", "--diff-filter=A", "--name-only", f"--format=%x01{trailer}"]
    walk += [state, *([f"^{since}"] if since else [])]
    walk += ["--", *paths] if len(paths) <= 500 else []
    try:
        out = store.git("--literal-pathspecs", *walk).decode(errors="replace")
    except gitcmd.GitFailed:  # `since` is gone, say: nobody is named
        return {}
    wanted, found = set(paths), {}
    for block in out.split("\x01")[1:]:
        head, _, names = block.partition("\n")
        for name in names.splitlines():
            if name in wanted and name not in found:  # newest first: the move that counts
                found[name] = head.strip()
    return found


def _shown_here(store: Store, places: Sequence[Located]) -> dict[str, bool | None]:
    """Whether a session on this machine was shown each message, as the receipts written here say; {} with receipts
    off. A receipt another machine wrote (or a remote made up) says nothing of this one."""
    from gitmail.mailbox import local_machine_id
    from gitmail.values.receipts import delivered, written_on
    from gitmail.values.receipts import parse as parse_receipts

    if not store.flag("receipts"):
        return {}
    here, made_up = local_machine_id(store), syncedreceipts.load(store)
    notes = store.notes(RECEIPTS_NOTES, [place.oid for place in places], limit=MAX_DOCUMENT_BYTES)
    found: dict[str, bool | None] = {}
    for place in places:
        records = written_on(parse_receipts(notes[place.oid]), here, made_up[place.oid])
        found[place.id] = bool(delivered(records, None if place.recipient is None else str(place.recipient)))
    return found


def _pack_refs(store: Store, writer: Writer) -> None:
    """Many messages arrived as loose refs: pack them, or every later listing reads thousands of files."""
    store.git("-c", "core.packedRefsTimeout=2000", "pack-refs", "--all", "--prune", pass_fds=(writer.lock_fd,))


def _merge_base(store: Store, one: str, other: str) -> str | None:
    try:
        return store.git("merge-base", one, other).decode().strip() or None
    except gitcmd.GitFailed:  # no common history
        return None


def _union(writer: Writer, mine: str, theirs: str, name: str, remote: str) -> str:
    """A notes commit merging both copies: every annotated object gets the union of both notes' lines."""
    from datetime import UTC, datetime

    out = writer.store.git("diff-tree", "-r", "-z", "--no-renames", "--name-only", mine, theirs)
    notes: dict[str, str] = {}
    for oid in annotated(out.decode(errors="replace").split("\0")):
        ours = set(writer.objects.note(mine, oid).splitlines())
        both = (ours | set(writer.objects.note(theirs, oid).splitlines())) - {""}
        if both != ours - {""}:
            notes[oid] = "".join(f"{line}\n" for line in sorted(both))
    text = f"gitmail: merged {name} from {remote}\n"
    return writer.objects.notes_commit(mine, notes, who=SYNC_ACTOR, when=datetime.now(UTC), text=text, merged=theirs)
