"""Reconciling a mailbox with a remote's state, message by message: what arrives here, what moves here, what the
remote lacks; merging gitmail's notes refs as a union of lines; and the remote's next state commit.

A remote's state is a commit whose tree lists every message as `<repo>/<folder>/<id[:2]>/<id>` -> the message's
commit (a gitlink: the tree names the commit without containing it), and whose parents reach every message commit
through "carrier" commits, so that fetching the one ref brings every message. Once messages carry attachments, a
state also has an "attachments" commit as a parent, so that a file attached again is not sent again.
Reconciliation never goes backwards: archived beats pending, retracted beats active, and nothing is ever removed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from gitmail.store import gitcmd, keys, remotemoves, signatures, syncedreceipts
from gitmail.store.remotemoves import Move
from gitmail.store.writer import writing
from gitmail.sync.limits import over_attachment_limit
from gitmail.sync.quick import SYNCED
from gitmail.sync.remotes import (
    FORMAT_PATH,
    FORMAT_TEXT,
    NOTES,
    NOTES_ROOT,
    REMOTE_ROOT,
    STATE,
    NotGitmail,
)
from gitmail.values.ids import BROADCAST, ID_PATTERN
from gitmail.values.layout import (
    OVERSIZED,
    ROOT,
    Change,
    Located,
    State,
    archive_prefix,
    inbox_prefix,
    latest,
    locate,
    oversized_ref,
    state_prefix,
)
from gitmail.values.machine import Machine
from gitmail.values.message import DOCUMENT_NAME, MAX_BODY_BYTES, MAX_DOCUMENT_BYTES, MAX_SUBJECT_CHARS
from gitmail.values.names import RepoName
from gitmail.values.receipts import RECEIPTS_NOTES

if TYPE_CHECKING:
    from gitmail.store.repository import Store
    from gitmail.store.writer import Writer
    from gitmail.values.message import Message

CARRIER_PARENTS = 256  # message commits per carrier commit (a state commit reaches new messages through these)
ATTACHMENTS_WITHIN_REACH = 2000  # attachment blobs a state keeps as already sent (see _attachments)
ATTACHMENTS_LOOK_BACK = 16  # states looked through for the attachments commit to build on
ATTACHMENTS_TEXT = "gitmail sync: attachments the other side has\n"
_COMMIT_LIMIT = 64 * 1024  # bytes a state, carrier or attachments commit is read to (a remote's may be anything)
_TREE_LIMIT = 4 * 1024 * 1024  # bytes an attachments folder is read to (2,000 entries take ~130 KB)
IMPORT_CHUNK = 1000  # ref changes per transaction when many messages arrive at once
PACK_AFTER = 1000  # refs imported in one sync after which the refs are packed
SYNC_ACTOR = RepoName("gitmail-sync")  # the "who" in the reflog of refs sync moves
ZERO = "0" * 40
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
_SAMPLE_ID = "0" * 10
_RANK = {State.PENDING: 0, State.BROADCAST: 0, State.ARCHIVED: 1, State.RETRACTED: 1}
KEYS = keys.KEYS_NOTES[len(NOTES_ROOT) :]  # "gitmail-keys": the notes ref machines publish their keys in


class RemoteState(NamedTuple):
    """What a remote holds, read and checked."""

    state: str | None  # the state commit
    lines: list[str]  # every message place in its state, as `for-each-ref` shows a ref here: "<ref> <commit>"
    notes: dict[str, str]  # notes ref name ("gitmail-seen") -> notes commit


def read_remote(store: Store, name: str, tips: dict[str, str]) -> RemoteState:
    """The remote's state from the tracking refs, or NotGitmail when it is not a gitmail sync state. Only the
    shape of each entry is checked here; the entries that differ from this mailbox are checked as messages when
    compared (`_compare`)."""
    state = tips.get(STATE)
    notes = {ref[len(NOTES) :]: oid for ref, oid in tips.items() if ref in SYNCED and ref.startswith(NOTES)}
    oids = [o for o in (state, *notes.values()) if o is not None]
    kinds = _object_info(store, oids)
    if any(kinds[o][0] != "commit" for o in oids):
        raise NotGitmail(name, f"its {REMOTE_ROOT} refs are not commits")
    if state is None:
        return RemoteState(None, [], notes)
    if store.read([f"{state}:{FORMAT_PATH}"], limit=len(FORMAT_TEXT))[0] != FORMAT_TEXT.encode():
        raise NotGitmail(name, f"{REMOTE_ROOT}{STATE} is not a gitmail sync state of a format this gitmail reads")
    out = store.git("ls-tree", "-r", "-z", "--full-tree", state).decode(errors="replace")
    lines = []
    for entry in out.split("\0"):
        meta, _, path = entry.partition("\t")
        parts = path.split("/")
        if len(parts) == 4 and meta.startswith("160000 commit ") and parts[2] == parts[3][:2]:
            lines.append(f"{ROOT}{parts[0]}/{parts[1]}/{parts[3]} {meta[14:]}")
        elif path != FORMAT_PATH and entry:
            raise NotGitmail(name, f"an entry of its state is not a message: {path!r}")
    return RemoteState(state, lines, notes)


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
        if sample is not None and ID_PATTERN.fullmatch(message_id):
            found.append(Located(ref, oid, message_id, sample.state, sample.recipient))
    return found


def _object_info(store: Store, specs: Sequence[str]) -> dict[str, tuple[str, int]]:
    """The type and size of what each spec names (("missing", 0) where nothing), read without reading it."""
    if not specs:
        return {}
    out = store.git(
        "cat-file",
        "--batch-check=%(objecttype) %(objectsize)",
        stdin="".join(f"{s}\n" for s in specs).encode(),
    )
    found = {}
    for spec, line in zip(specs, out.decode(errors="replace").splitlines(), strict=True):
        kind, _, size = line.rpartition(" ")
        found[spec] = (kind, int(size)) if size.isdigit() and not line.endswith(" missing") else ("missing", 0)
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
    """Compare as text first: at 100,000 messages nearly every line is the same on both sides, and only the ids
    of lines that differ are looked at as messages."""
    out = store.git("for-each-ref", "--format=%(refname) %(objectname)", ROOT).decode(errors="replace")
    local_lines = out.splitlines()
    set_aside = {_id_of(line) for line in local_lines if line.startswith(OVERSIZED)}  # arrived too large, earlier
    local_set, remote_set = set(local_lines), set(there.lines)
    touched = {_id_of(line) for line in local_set.symmetric_difference(remote_set)}
    local = _by_id(local_lines, touched)
    theirs_by_id = _by_id(there.lines, touched)
    pairs = [pair for found in theirs_by_id.values() for pair in found]
    remote_places = _places(pairs)
    if len(remote_places) != len(pairs):
        bad = sorted({ref for ref, _ in pairs} - {p.ref for p in remote_places})
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


def _id_of(line: str) -> str:
    ref = line[: line.rfind(" ")]
    return ref[ref.rfind("/") + 1 :]


def _by_id(lines: Iterable[str], ids: set[str]) -> dict[str, list[tuple[str, str]]]:
    """The (ref, commit) pairs among `lines` ("<ref> <commit>") of the given message ids."""
    found: dict[str, list[tuple[str, str]]] = {}
    for line in lines:
        ref, _, oid = line.rpartition(" ")
        message_id = ref[ref.rfind("/") + 1 :]
        if message_id in ids:
            found.setdefault(message_id, []).append((ref, oid))
    return found


def _compare_notes(store: Store, remote_notes: dict[str, str]) -> list[NotesStep]:
    synced = [NOTES_ROOT + ref[len(NOTES) :] for ref in SYNCED if ref.startswith(NOTES)]
    out = store.git("for-each-ref", "--format=%(objectname) %(refname)", *synced)
    local = {}
    for line in out.decode(errors="replace").splitlines():
        oid, _, ref = line.partition(" ")
        if ref in synced:
            local[ref[len(NOTES_ROOT) :]] = oid
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
        state = _new_state(store, there, sendable, seen.moves_there, here)
        updates.append((REMOTE_ROOT + STATE, state, there.state))
    mail_notes = sum(1 for ref, _, _ in pushes if ref != f"{REMOTE_ROOT}{NOTES}{KEYS}")
    return seen, Plan(updates, len(sendable), len(seen.moves_there), mail_notes)


def _still_absent(store: Store, arrivals: Sequence[Located]) -> bool:
    """Whether no arriving message is here in either of its places yet. Only a change's own ref is checked by
    its transaction, and a reader without the lock can miss a message in mid-move (git moves refs in name order:
    a retract deletes active/<id> before it creates retracted/<id>)."""
    if not arrivals:
        return True
    refs = []
    for place in arrivals:
        if place.recipient is None:
            refs += [state_prefix(State.BROADCAST) + place.id, state_prefix(State.RETRACTED) + place.id]
        else:
            refs += [inbox_prefix(place.recipient) + place.id, archive_prefix(place.recipient) + place.id]
    out = store.git("cat-file", "--batch-check=%(objectname)", stdin="".join(f"{r}\n" for r in refs).encode())
    return all(line.endswith(" missing") for line in out.decode(errors="replace").splitlines())


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
    info = _object_info(store, specs)
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
    who = _who_moved(store, state, since, [_path(new) for _, new in moves])
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
        field = who.get(_path(new), "")
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
    from gitmail.values.layout import note_lines, note_specs
    from gitmail.values.receipts import delivered, written_on
    from gitmail.values.receipts import parse as parse_receipts

    if not store.flag("receipts"):
        return {}
    here, made_up = local_machine_id(store), syncedreceipts.load(store)
    specs = [spec for place in places for spec in note_specs(RECEIPTS_NOTES, place.oid)]
    notes = store.read(specs, limit=MAX_DOCUMENT_BYTES)
    found: dict[str, bool | None] = {}
    for number, place in enumerate(places):
        records = written_on(parse_receipts(note_lines(notes[3 * number : 3 * number + 3])), here, made_up[place.oid])
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
    annotated = {path.replace("/", "") for path in out.decode(errors="replace").split("\0") if path}
    notes = {}
    for oid in sorted(o for o in annotated if re.fullmatch(r"[0-9a-f]{40}", o)):
        ours = set(writer.objects.note(mine, oid).splitlines())
        both = (ours | set(writer.objects.note(theirs, oid).splitlines())) - {""}
        if both != ours - {""}:
            notes[oid] = "".join(f"{line}\n" for line in sorted(both))
    text = f"gitmail: merged {name} from {remote}\n"
    return writer.objects.notes_commit(mine, notes, who=SYNC_ACTOR, when=datetime.now(UTC), text=text, merged=theirs)


def _path(place: Located) -> str:
    """Where a message sits in the state's tree: its ref below refs/gitmail/, fanned out by id."""
    folder = place.ref[len(ROOT) : -len(place.id)]
    return f"{folder}{place.id[:2]}/{place.id}"


def _new_state(
    store: Store,
    there: RemoteState,
    additions: Sequence[Located],
    moves: Sequence[tuple[Located, Located]],
    here: Machine,
) -> str:
    """The remote's state with this machine's news: a commit on top of the remote's, reaching the new messages."""
    import tempfile

    identity = _identity(here)
    form = store.git("hash-object", "-w", "--stdin", stdin=FORMAT_TEXT.encode()).decode().strip()
    lines = [f"0 {ZERO}\t{_path(old)}\n" for old, _ in moves]
    lines += [f"160000 {p.oid}\t{_path(p)}\n" for p in [*additions, *(new for _, new in moves)]]
    lines.append(f"100644 {form}\t{FORMAT_PATH}\n")
    handle, index = tempfile.mkstemp(prefix="index-", dir=store.own_dir / "sync")
    os.close(handle)
    os.unlink(index)  # git makes its own index file there
    try:
        scratch = {"GIT_INDEX_FILE": index}
        if there.state is not None:
            store.git("read-tree", there.state, env=scratch)
        store.git("update-index", "--add", "--index-info", stdin="".join(lines).encode(), env=scratch)
        tree = store.git("write-tree", env=scratch).decode().strip()
    finally:
        Path(index).unlink(missing_ok=True)
    parents = [there.state] if there.state else []
    carrier = _carriers(store, additions, identity)
    if carrier is not None:
        parents.append(carrier)
    within_reach = _attachments(store, there.state, additions, identity)
    if within_reach is not None:
        parents.append(within_reach)
    summary = f"gitmail sync from {here.name}: {len(additions)} new, {len(moves)} moved\n\nMachine: {here.field()}\n"
    flags = [f for p in parents for f in ("-p", p)]
    return store.git("commit-tree", tree, *flags, "-m", summary, env=identity).decode().strip()


def _carriers(store: Store, additions: Sequence[Located], identity: dict[str, str]) -> str | None:
    """A chain of commits whose parents are the new messages, oldest first, each dated like its newest message.
    git walks history newest first through one date-sorted list: a single commit dated now with thousands of
    older parents would put them all in that list at once, and each insertion costs its length (100,000 messages
    took a minute of CPU to list). Chained this way, the walk holds one carrier's messages at a time."""
    if not additions:
        return None
    out = store.git(
        "log",
        "--no-walk=unsorted",
        "--format=%H %ct",
        "--stdin",
        stdin="".join(f"{p.oid}\n" for p in additions).encode(),
    )
    dated = sorted((int(line.split()[1]), line.split()[0]) for line in out.decode().splitlines())
    store.git("hash-object", "-t", "tree", "-w", "--stdin", stdin=b"")  # the carriers' empty tree
    carrier: str | None = None
    for start in range(0, len(dated), CARRIER_PARENTS):
        chunk = dated[start : start + CARRIER_PARENTS]
        parents = ([carrier] if carrier else []) + [oid for _, oid in chunk]
        when = f"{chunk[-1][0]} +0000"
        env = {**identity, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
        message = f"gitmail sync: carries {len(chunk)} messages\n"
        flags = [f for p in parents for f in ("-p", p)]
        carrier = store.git("commit-tree", EMPTY_TREE, *flags, "-m", message, env=env).decode().strip()
    return carrier


def _attachments(store: Store, state: str | None, additions: Sequence[Located], identity: dict[str, str]) -> str | None:
    """The commit a new state keeps as a parent so that an attachment crosses the network once, however often it
    is attached: its tree holds the newest attachment blobs of the remote's messages, each in attachments/ under
    its own id. git leaves out of what it sends an object that a parent of what it sends already holds (the
    other side has that parent), but looks in such a parent's folders only where what it sends has a folder of the
    same name, so the blobs sit in attachments/ as they do in a message. Only messages with attachments make one;
    the one before (found among the last states' parents: a gitmail without it leaves it out) is kept and built
    on. None when no message has ever had attachments."""
    from gitmail.values.attachments import FOLDER

    found = store.read([f"{p.oid}:{FOLDER}" for p in additions], limit=_TREE_LIMIT) if additions else []
    new = [oid for tree in found if tree is not None for oid in _blob_ids(tree)]
    previous = _attachments_before(store, state, look_back=bool(new))
    if previous is None and not new:
        return None
    held = _blob_ids(store.read([f"{previous}:{FOLDER}"], limit=_TREE_LIMIT)[0] or b"") if previous else []
    if previous is not None and set(new) <= set(held):
        return previous
    kept = list(dict.fromkeys([*reversed(new), *held]))[:ATTACHMENTS_WITHIN_REACH]  # the newest first
    listing = "".join(f"100644 blob {oid}\t{oid}\n" for oid in sorted(kept))
    inner = store.git("mktree", stdin=listing.encode()).decode().strip()
    tree = store.git("mktree", stdin=f"040000 tree {inner}\t{FOLDER}\n".encode()).decode().strip()
    flags = ["-p", previous] if previous is not None else []
    return store.git("commit-tree", tree, *flags, "-m", ATTACHMENTS_TEXT, env=identity).decode().strip()


def _attachments_before(store: Store, state: str | None, *, look_back: bool) -> str | None:
    """The attachments commit (see `_attachments`) the state has as a parent, or with `look_back` one of the last
    states has (a state made by a gitmail without them has none)."""
    if state is None:
        return None
    commit = store.read([state], limit=_COMMIT_LIMIT)[0] or b""
    header = commit.split(b"\n\n", 1)[0].split(b"\n")
    candidates = [line[7:].decode() for line in header if line.startswith(b"parent ")][1:]
    if look_back and not any(_is_attachments(parent) for parent in store.read(candidates, limit=_COMMIT_LIMIT)):
        out = store.git("log", "--first-parent", f"--max-count={ATTACHMENTS_LOOK_BACK}", "--format=%P", state)
        candidates = [parent for line in out.decode().splitlines() for parent in line.split()[1:]]
    for parent, data in zip(candidates, store.read(candidates, limit=_COMMIT_LIMIT), strict=True):
        if _is_attachments(data):
            return parent
    return None


def _is_attachments(commit: bytes | None) -> bool:
    return commit is not None and commit.split(b"\n\n", 1)[-1] == ATTACHMENTS_TEXT.encode()


def _blob_ids(tree: bytes) -> list[str]:
    """The ids of the files a tree holds (what git stores of a folder: "<mode> <name>\\0<20-byte id>" each)."""
    found, at = [], 0
    while at < len(tree):
        nul = tree.index(b"\0", at)
        if tree[at : at + 6] == b"100644" or tree[at : at + 6] == b"100755":
            found.append(tree[nul + 1 : nul + 21].hex())
        at = nul + 21
    return found


def _identity(here: Machine) -> dict[str, str]:
    email = f"{here.id}@machine.gitmail"
    return {
        "GIT_AUTHOR_NAME": here.name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": here.name,
        "GIT_COMMITTER_EMAIL": email,
    }
