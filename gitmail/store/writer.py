"""Writing the mailbox: what may be done while holding its lock. Objects are written first (an object nothing
points to yet is harmless garbage); refs move only through `Writer.apply`, one checked transaction per change, with
a journal a later writer replays if this one dies midway.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

from gitmail.store import history, keys, lock, machines, moves, objects, packing, setup, stamps, transaction
from gitmail.store.lock import Deadline
from gitmail.store.log import problem, tell
from gitmail.store.objects import Objects
from gitmail.store.repository import MARK_KEY, WRITE_WAIT, Store
from gitmail.values.dates import UTC, datetime
from gitmail.values.layout import Change, damaged_ref, email, locate
from gitmail.values.names import RepoName, from_address

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

    from gitmail.values.attachments import Attachment
    from gitmail.values.ids import ObjectId
    from gitmail.values.message import Message
    from gitmail.values.outgoing import Outgoing


@contextmanager
def writing(
    store: Store, *, actor: RepoName, timeout: float = WRITE_WAIT, deadline: Deadline | None = None
) -> Iterator[Writer]:
    """Hold the lock and write: every ref change through the Writer's `apply`."""
    deadline = deadline or Deadline(timeout)
    with store.locked(deadline=deadline) as fd:
        if store.settings().get(MARK_KEY) is None:  # a mailbox whose settings were lost: gitmail's back first
            setup.configure(store.root, setup.MAILBOX_CONFIG)
        made = Objects(store)
        try:
            writer = Writer(store, made, actor, fd, deadline)
            yield writer
            writer.maintain()
        finally:
            made.close()


class Writer:
    """What may be done while holding the lock. Every ref change goes through `apply`."""

    def __init__(self, store: Store, objects: Objects, actor: RepoName, lock_fd: int, deadline: Deadline) -> None:
        self.store, self.objects, self.actor, self.lock_fd = store, objects, actor, lock_fd
        self.deadline = deadline
        self._wrote = False
        self._readable: dict[str, bool] = {}  # notes commits looked at: whether they can be built on
        self._told: set[tuple[str, str | None]] = set()  # notes refs whose damage was logged, with what replaced it
        self._authors: dict[str, tuple[str, int]] = {}  # commits written here: their author address and time
        self._key: keys.Signer | None = None  # the key every commit is signed with, loaded (or made) at the first
        self._looked = False  # whether the key was looked for
        self._published = False  # whether this machine's key is known to be published (see `_publication`)
        objects.sign = self._sign

    def signing_key(self) -> keys.Signer | None:
        """The key this write signs with, loaded (or made, on first use) before anything is written: a key that
        cannot be used stops the write before any object of it exists. None only where nothing can sign at all
        (no PyNaCl and no ssh-keygen: a bare interpreter, as a host plugin runs gitmail before it has set up its
        environment): then commits are written unsigned, and the log says so. Nor when this machine's own key is
        damaged: no write may fail for it, so commits are written unsigned, and the one who runs gitmail is told
        how to make a new key."""
        if not self._looked:
            self._looked = True
            try:
                self._key = keys.signer(self.store, create=True)
            except keys.DamagedKey as error:
                tell(self.store.root, str(error))
            except keys.NoSigner as error:
                self._unsigned(error)
        return self._key

    def _sign(self, content: bytes) -> str | None:
        key = self.signing_key()
        if key is None:
            return None
        try:
            return key.sign(content)
        except keys.NoSigner as error:
            self._unsigned(error)
            return None

    def _unsigned(self, error: keys.NoSigner) -> None:
        if ("unsigned", None) not in self._told:
            self._told.add(("unsigned", None))
            problem(self.store.root, f"wrote commits unsigned: {error}")

    def target(self, ref: str) -> str | None:
        return self.objects.target(ref)

    def commit(self, message: Message, parents: Sequence[str] = ()) -> ObjectId:
        """Write the message's blob, tree and commit (no ref yet: unreferenced objects are harmless garbage).
        The commit records the machine it was written on."""
        self._wrote = True
        self.signing_key()
        oid = self.objects.commit(message._replace(machine=machines.current(self.store)), parents)
        self._authors[oid] = (email(message.sender), int(message.date.timestamp()))
        return oid

    def attach(self, outgoing: Sequence[Outgoing]) -> tuple[Attachment, ...]:
        """Write each attachment's blob (a file's content streamed from it); what the message records of them."""
        self._wrote = bool(outgoing) or self._wrote
        stored = []
        for item in outgoing:
            if item.source is not None:
                item.source.seek(0)  # a try after a Transient reads the file again from its start
                blob = self.objects.write_file(item.source, item.size, item.label or item.name)
            else:
                blob = self.objects.write("blob", item.data or b"")
            stored.append(item.stored(blob))
        return tuple(stored)

    def apply(self, changes: Sequence[Change], reason: str) -> None:
        """Make every change or none. Each is checked against the value it expects (git update-ref refuses the
        transaction otherwise). The journal is written first: a change of several refs is replayed if this process
        dies, and the next writer knows which ref locks it may have left."""
        arrivals = self._arrivals(changes)  # before the journal: a failure here leaves nothing to finish
        publication = self._publication()
        changes = [*changes, *publication]
        if not changes:
            return
        moved = moves.record(self.objects, changes, reason, self.actor)  # the record of moves, in the same transaction
        self.objects.settle()  # every object the refs will name is on disk before they name it
        journal = lock.Journal(self.store.own_root)
        journal.record([*changes, *moved], durable=len(changes) > 1)
        changes = [*changes, *moved]
        try:
            transaction.update_refs(
                self.store.root, changes, reason, self.actor, self.lock_fd, self.deadline, verify=True
            )
        finally:
            journal.clear()  # done, or refused whole before anything moved
        if publication and self._key is not None:
            keys.remember_published(self.store, self._key, machines.current(self.store))
        self._wrote = True
        stamps.bump(self.store.root, *transaction.touched(changes, self.actor))
        if arrivals and history.complete(self.store.root):
            try:
                history.append(self.store.root, arrivals)
            except OSError:
                history.forget(self.store.root)  # rebuilt from the refs when next needed

    def _arrivals(self, changes: Sequence[Change]) -> list[history.Line]:
        """History lines for the messages these changes bring into the mailbox (a move within it is no arrival)."""
        moved = {p.id for c in changes if c.new is None and c.old and (p := locate(c.ref, c.old))}
        lines = []
        for change in changes:
            place = locate(change.ref, change.new) if change.old is None and change.new else None
            if place is None or place.id in moved:
                continue
            address, when = self._authors.get(place.oid) or self.objects.author(place.oid)
            recipient = place.recipient.ref if place.recipient is not None else history.BROADCAST
            sender = from_address(address)
            lines.append(history.Line(when, place.id, recipient, sender.ref if sender else history.UNKNOWN))
        return lines

    def note_lines(
        self,
        notes_ref: str,
        additions: Mapping[str, Sequence[str]],
        *,
        who: RepoName,
        when: datetime,
        fan_out: bool = False,
        text: str | None = None,
    ) -> tuple[Change | None, list[str]]:
        """A notes commit adding these lines to the notes on these objects (kept sorted and unique, so copies
        merge as a union), and the ref change that would publish it; None and [] when every line is there. `text`:
        the commit's message, when it should say more than which objects it annotates."""
        current = self.target(notes_ref)
        notes: dict[str, str] = {}
        for oid, lines in additions.items():
            old = set(self.note(notes_ref, oid).splitlines())
            if not set(lines) <= old:
                notes[oid] = "".join(f"{line}\n" for line in sorted(old | set(lines)))
        parent = self.notes_tip(notes_ref)  # the commit every note above was read from
        if not notes:  # a tip lost to a prune is put back even when there is nothing to add
            return (Change(notes_ref, parent, current) if parent is not None and parent != current else None), []
        text = text or f"gitmail: notes for {' '.join(notes)} by {who}\n"
        self.signing_key()
        commit = self.objects.notes_commit(parent, notes, who=who, when=when, text=text, fan_out=fan_out)
        return Change(notes_ref, commit, current), list(notes)

    def _publication(self) -> list[Change]:
        """Once this write has signed something: the change that publishes this machine's key, when the key (or
        the machine's name) is not published yet. Decided from a small file, not from git, at every write."""
        if self._key is None or self._published:
            return []
        self._published = True
        here = machines.current(self.store)
        if keys.published_mark(self.store) == keys.mark(self._key, here):
            return []
        anchor = keys.anchor(here.id)
        for line in self.note(keys.KEYS_NOTES, anchor).splitlines():
            found = keys.parse_publication(line)
            said = (found.machine, found.name, found.public) if found is not None else None
            if said == (here.id, here.name, self._key.public):
                keys.remember_published(self.store, self._key, here)
                return []
        line = keys.publication(self._key, here, int(time.time()))
        change, _ = self.note_lines(
            keys.KEYS_NOTES,
            {anchor: [line]},
            who=self.actor,
            when=datetime.now(UTC),
            text=f"gitmail: the key of machine {here.name}\n\nMachine: {here.field()}\nKey: {self._key.fingerprint}\n",
        )
        return [change] if change is not None else []

    def note(self, notes_ref: str, oid: str) -> str:
        """The note on `oid` in the commit of `notes_ref` that `notes_tip` chooses ('' when there is none)."""
        while True:
            tip = self.notes_tip(notes_ref)
            try:
                return self.objects.note(tip, oid)
            except objects.Gone:  # this commit lost a note to a prune: building on it would keep the hole in history
                self._readable[tip or ""] = False

    def notes_tip(self, notes_ref: str) -> str | None:
        """The commit the next notes commit on `notes_ref` builds on: its tip, or, when a `git gc --prune=now`
        took the tip or part of it while it was being written, the newest commit the ref was given (moves.given)
        that the mailbox still has whole enough to read. Only what those writes added is lost, and notes go on being
        written (`gitmail doctor --repair` mends the ref's history)."""
        tip = self.target(notes_ref)
        if tip is None or self._readable_notes(tip):
            return tip
        older = (new for new in reversed(moves.given(self.store, notes_ref)) if new != tip)
        kept = next((new for new in older if self._readable_notes(new)), None)
        if (notes_ref, kept) not in self._told:
            self._told.add((notes_ref, kept))
            problem(
                self.store.root,
                f"{notes_ref} pointed at {tip}, which the mailbox no longer has whole; went on from {kept}",
            )
        return kept

    def _readable_notes(self, commit: str) -> bool:
        if commit not in self._readable:
            self._readable[commit] = self.objects.readable_notes(commit)
        return self._readable[commit]

    def set_aside(self, ref: str, oid: str, what: str) -> list[Change]:
        """The changes that move a damaged message ref out of every listing, into refs/gitmail/_damaged/, never
        deleting what is known of it. A ref whose commit is gone, or lacks part of what it reaches, cannot point
        there (git refuses a ref to a missing object; git fsck and git gc fail on a commit with parts missing): a
        small commit recording the ref and the lost commit id stands in for it."""
        kept = oid
        if not self.store.whole(oid):
            text = f"gitmail: {what} set aside: {ref} pointed at {oid}, which the mailbox no longer has whole\n"
            kept = self.objects.record(text, who=self.actor)
        return [Change(damaged_ref(ref), kept, None), Change(ref, None, oid)]

    def maintain(self) -> None:
        """Count a write that wrote, still under the lock; enough of them start a packer (packing.py)."""
        if self._wrote:
            packing.counted(self.store)
