"""git objects: written as loose objects by gitmail itself, and read back through git.

A message is a blob (its document), a tree holding it and a commit; broadcast hand-overs and receipts are notes
commits. gitmail writes these objects in git's own loose format (zlib-compressed "<type> <size>\\0<content>", named
by its SHA-1, synced to disk before it is used) instead of through libgit2: importing pygit2 alone costs more than a
whole `gitmail send` may (the benchmark's send and session-start rows). Objects are written without refs: an object
nothing points to yet is harmless garbage, and refs move only through checked `git update-ref` transactions
(transaction.py), under the mailbox lock.
"""

from __future__ import annotations

import errno
import os
from contextlib import contextmanager

from gitmail.errors import MailboxError, Transient, UsageError
from gitmail.store import catfile, loose, refs
from gitmail.store.files import make_dir, sync_directory, unwritable
from gitmail.values import sshsig
from gitmail.values.dates import UTC, datetime
from gitmail.values.ids import ObjectId
from gitmail.values.layout import email
from gitmail.values.message import DOCUMENT_NAME, Message

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence
    from hashlib import sha1 as _sha1
    from typing import IO, NamedTuple

    from gitmail.store.repository import Store
    from gitmail.values.names import RepoName
else:
    from gitmail.values.tuples import NamedTuple

    try:  # CPython's own SHA-1: hashlib would load OpenSSL, milliseconds of every send
        from _sha1 import sha1 as _sha1
    except ImportError:  # an interpreter built without it
        from hashlib import sha1 as _sha1

BLOB, TREE = "100644", "40000"
_CHUNK = 1 << 20  # bytes of a file read, hashed and compressed at a time


class Gone(MailboxError):
    """An object a commit needs is not in the mailbox (a `git gc --prune=now` took it as it was written)."""


class Entry(NamedTuple):
    """One entry of a tree."""

    mode: str  # BLOB or TREE (as git writes modes: no leading zero)
    name: str
    oid: str


def tree_entries(data: bytes, names: str = "surrogateescape") -> Iterator[Entry]:
    """The entries of a tree object's content, in order (`names`: how a name that is not UTF-8 is decoded).
    ValueError where the content stops being a tree (after the entries before it)."""
    at = 0
    while at < len(data):
        space = data.index(b" ", at)
        nul = data.index(b"\0", space)
        mode, name = data[at:space].decode(), data[space + 1 : nul].decode("utf-8", names)
        yield Entry(mode, name, data[nul + 1 : nul + 21].hex())
        at = nul + 21


# -- writing --------------------------------------------------------------------------------------------------------


class Objects:
    """Objects written into one mailbox, and read back through git."""

    def __init__(self, store: Store) -> None:
        self.store, self.path = store, store.root
        self._folders: set[str] = set()  # object folders written to: each synced once, when the write is done
        self._reader: catfile.BatchReader | None = None  # one git cat-file for every read of this write
        self.sign: Callable[[bytes], str | None] | None = None  # signs every commit written (the writer's key)

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def read(self, specs: Sequence[str]) -> list[bytes | None]:
        """As `Store.read`: what is loose directly, the rest through one git cat-file kept for the write; a damaged
        object reads as missing."""
        found = loose.read(self.path, specs, damaged=self.store.damaged)
        rest = [spec for spec, got in zip(specs, found, strict=True) if got is loose.ELSEWHERE]
        if rest and self._reader is None:
            self._reader = catfile.BatchReader(self.path)
        answers = iter(self._reader.read(rest, damaged=self.store.damaged) if rest and self._reader else [])
        return [next(answers) if got is loose.ELSEWHERE else got if isinstance(got, bytes) else None for got in found]

    def write(self, kind: str, content: bytes) -> str:
        """One loose object; its id. Already there (loose) costs nothing; packed, it is written loose once more,
        which the next packing folds in; there but damaged (a torn file), it is written whole over the damage."""
        data = f"{kind} {len(content)}\0".encode() + content
        oid = _sha1(data).hexdigest()
        heal = os.path.exists(os.path.join(self.path, "objects", oid[:2], oid[2:]))
        if heal and not loose.damaged(self.path, [oid]):
            return oid
        import zlib  # here: readers never need it

        temporary = os.path.join(self.path, "objects", oid[:2], f"tmp_obj_{os.getpid()}_{oid[2:10]}")
        with self._writing(temporary):
            make_dir(os.path.dirname(temporary), 0o777)
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o444)
            try:
                _write_all(fd, zlib.compress(data, 1))
                os.fsync(fd)  # a reported send survives power loss, not only crashes
            finally:
                os.close(fd)
            self._link(temporary, oid, heal=heal)
        return oid

    def write_file(self, source: IO[bytes], size: int, label: str) -> str:
        """A blob of a file's content, read from where `source` stands to its end, which must be `size` bytes
        away: hashed, compressed and written a chunk at a time, so a large attachment is never held in memory. A
        file that changed size meanwhile is refused (a usage error naming `label`), leaving nothing behind; one
        already here is not written again (nor synced to disk), nor read to learn whether its file is damaged
        (`gitmail doctor` finds that)."""
        import zlib

        header = f"blob {size}\0".encode()
        digest, packer = _sha1(header), zlib.compressobj(1)
        temporary = os.path.join(self.path, "objects", f"tmp_obj_{os.getpid()}_{os.urandom(4).hex()}")
        with self._writing(temporary):
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o444)
            try:
                _write_all(fd, packer.compress(header))
                left = size
                while left > 0:
                    chunk = _read(source, min(left, _CHUNK), label)
                    if not chunk:
                        break
                    digest.update(chunk)
                    _write_all(fd, packer.compress(chunk))
                    left -= len(chunk)
                if left or _read(source, 1, label):
                    raise UsageError(
                        f"{label} changed while it was being attached (it is not the size the file system gives): "
                        "attach it once it has stopped changing, or attach a copy of it"
                    )
                _write_all(fd, packer.flush())
                oid = digest.hexdigest()
                here = os.path.exists(os.path.join(self.path, "objects", oid[:2], oid[2:]))
                if not here:
                    os.fsync(fd)
            finally:
                os.close(fd)
            if not here:
                self._link(temporary, oid)
        return oid

    def _link(self, temporary: str, oid: str, *, heal: bool = False) -> None:
        """Give a written (and synced) temporary object file its name; with `heal`, in place of a damaged file of
        the same object."""
        folder = os.path.join(self.path, "objects", oid[:2])
        target = os.path.join(folder, oid[2:])
        make_dir(folder, 0o777)
        if heal:
            os.replace(temporary, target)  # this object's bytes, whole, where a damaged copy was
            self._folders.add(oid[:2])
            return
        try:
            os.link(temporary, target)
        except FileExistsError:
            pass  # a concurrent writer of the same content: the same object
        except OSError as error:
            if error.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                raise
            os.replace(temporary, target)  # a file system without hard links (exFAT, FAT)
        self._folders.add(oid[:2])

    @contextmanager
    def _writing(self, temporary: str) -> Iterator[None]:
        """Remove the temporary file however the write ends; say in one line why the file system refused it."""
        try:
            yield
        except OSError as error:
            if error.errno == errno.ENOENT:  # a concurrent prune removed the object folder
                raise Transient(f"the mailbox at {self.path} changed during the write: {error}") from None
            raise unwritable(self.path, error) from None
        finally:
            try:
                os.unlink(temporary)
            except OSError:
                pass

    def settle(self) -> None:
        """Make the names of every object written so far survive power loss (before any ref names them)."""
        try:
            for folder in sorted(self._folders):
                try:
                    sync_directory(os.path.join(self.path, "objects", folder))
                except FileNotFoundError:  # packing.py packed its objects and removed the folder: they are in a pack
                    pass
        except OSError as error:
            raise unwritable(self.path, error) from None
        self._folders.clear()

    def tree(self, entries: Sequence[Entry]) -> str:
        def order(entry: Entry) -> bytes:  # git sorts a folder as if its name ended in "/"
            return entry.name.encode() + (b"/" if entry.mode == TREE else b"")

        content = b"".join(f"{e.mode} {e.name}\0".encode() + bytes.fromhex(e.oid) for e in sorted(entries, key=order))
        return self.write("tree", content)

    def commit_of(
        self, tree: str, parents: Sequence[str], text: str, *, who: RepoName, when: datetime | None = None
    ) -> str:
        """A commit of `tree`, authored and committed by `who` at `when` (now when not given)."""
        stamp = ident(who, when or datetime.now(UTC))
        lines = [f"tree {tree}", *(f"parent {p}" for p in parents), f"author {stamp}", f"committer {stamp}"]
        content = ("\n".join(lines) + "\n\n" + text).encode()
        signature = self.sign(content) if self.sign is not None else None
        if signature is not None:  # a gpgsig header, as `git commit -S` with an SSH key writes it
            content = sshsig.add_signature(content, signature)
        return self.write("commit", content)

    def commit(self, message: Message, parents: Sequence[str] = ()) -> ObjectId:
        """The message's blob, tree and commit; its attachments' blobs (written already) in a folder of the tree."""
        blob = self.write("blob", message.document())
        entries = [Entry(BLOB, DOCUMENT_NAME, blob)]
        if message.attachments:
            from gitmail.values.attachments import FOLDER

            attached = self.tree([Entry(BLOB, a.name, a.blob) for a in message.attachments])
            entries.append(Entry(TREE, FOLDER, attached))
        tree = self.tree(entries)
        return ObjectId(self.commit_of(tree, parents, message.commit_message(), who=message.sender, when=message.date))

    def record(self, text: str, *, who: RepoName) -> str:
        """A commit that only says something (its tree is empty): what stands in for a lost message."""
        return self.commit_of(self.tree([]), [], text, who=who)

    def commit_tree(self, tree: str, parents: Sequence[str], text: str, *, who: RepoName) -> str:
        """A commit of an existing tree."""
        return self.commit_of(tree, parents, text, who=who)

    def notes_commit(
        self,
        parent: str | None,
        notes: Mapping[str, str],
        *,
        who: RepoName,
        when: datetime,
        text: str,
        fan_out: bool = False,
        merged: str | None = None,
    ) -> str:
        """A notes commit on top of `parent` in which each annotated object id in `notes` gets the given note
        (replacing any old one). A note is rewritten where git's fan-out put it; a new one goes to the top of the
        tree, or (`fan_out`, for notes that will number as many as the messages) under its first two digits.
        With `merged`, the commit is a merge of that notes commit too (sync's union of two copies)."""
        top = {e.name: e for e in self.entries(f"{parent}^{{tree}}")} if parent else {}
        fanned: dict[str, dict[str, Entry]] = {}
        for oid, note in notes.items():
            blob = self.write("blob", note.encode())
            fanned_before = oid[:2] in top and top[oid[:2]].mode == TREE
            if oid in top or not (fanned_before or fan_out):
                top[oid] = Entry(BLOB, oid, blob)
                continue
            folder = oid[:2]
            if folder not in fanned:
                fanned[folder] = {e.name: e for e in self.entries(top[folder].oid)} if fanned_before else {}
            fanned[folder][oid[2:]] = Entry(BLOB, oid[2:], blob)
        for folder, inside in fanned.items():
            top[folder] = Entry(TREE, folder, self.tree(list(inside.values())))
        parents = [p for p in (parent, merged) if p]
        return self.commit_of(self.tree(list(top.values())), parents, text, who=who, when=when)

    # -- reading, through git -----------------------------------------------------------------------------------

    def entries(self, tree: str) -> list[Entry]:
        """A tree's entries (`tree` is an id or any spec git resolves to one); Gone when it is not here."""
        data = self.read([tree])[0]
        if data is None:
            raise Gone(f"tree {tree} is gone")
        return list(tree_entries(data))

    def note(self, tip: str | None, oid: str) -> str:
        """The note on `oid` in the notes tree at `tip` ('' when there is none), found where git's fan-out may
        have put it; Gone when a prune took the commit, a tree on the way or the note itself."""
        if tip is None:
            return ""
        entries = self.entries(f"{tip}^{{tree}}")
        for depth in range(3):  # oid, xx/rest, xx/yy/rest
            here = {e.name: e for e in entries}
            name = oid[2 * depth :]
            if name in here and here[name].mode == BLOB:
                data = self.read([here[name].oid])[0]
                if data is None:
                    raise Gone(f"a note of {tip} is gone")
                return data.decode(errors="replace")
            folder = here.get(oid[2 * depth : 2 * depth + 2])
            if folder is None or folder.mode != TREE:
                return ""
            entries = self.entries(folder.oid)
        return ""

    def author(self, oid: str) -> tuple[str, int]:
        """A commit's author email and time (Transient when a concurrent prune took it before its ref moved)."""
        data = self.read([oid])[0]
        if data is None:
            raise Transient(f"the mailbox at {self.path} changed during the write: commit {oid} is gone")
        for line in data.split(b"\n\n", 1)[0].split(b"\n"):
            if line.startswith(b"author "):
                address = line[line.rfind(b"<") + 1 : line.rfind(b">")].decode(errors="replace")
                return address, int(line[line.rfind(b">") + 2 :].split()[0])
        return "", 0

    def readable_notes(self, commit: str) -> bool:
        """Whether notes can be read from and built on this notes commit: it, its tree and the trees in that are
        all here (a note whose blob is gone shows when it is read)."""
        try:
            return all(self.has(e.oid) for e in self.entries(f"{commit}^{{tree}}") if e.mode == TREE)
        except Gone:
            return False

    def tree_of(self, commit: str) -> str:
        data = self.read([commit])[0]
        if data is None or not data.startswith(b"tree "):
            raise Gone(f"commit {commit} is gone")
        return data[5:45].decode()

    def mended(self, tree: str) -> tuple[str, int]:
        """The tree again without the entries whose objects are gone (at any depth), and how many were left out."""
        kept: list[Entry] = []
        dropped = 0
        for entry in self.entries(tree):
            if not self.has(entry.oid):
                dropped += 1
            elif entry.mode == TREE:
                inner, lost = self.mended(entry.oid)
                kept.append(entry._replace(oid=inner))
                dropped += lost
            else:
                kept.append(entry)
        return self.tree(kept), dropped

    def has(self, oid: str) -> bool:
        return self.read([oid])[0] is not None

    def target(self, ref: str) -> str | None:
        return refs.resolve(self.path, [ref]).get(ref)


def _read(source: IO[bytes], size: int, label: str) -> bytes:
    """Read from a file being attached: its failure is that file's, not the mailbox's."""
    try:
        return source.read(size)
    except OSError as error:
        raise UsageError(f"cannot attach {label}: it cannot be read ({error.strerror or error})") from None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def ident(who: RepoName, when: datetime) -> str:
    """`name <email> seconds ±hhmm`, as git writes an author or committer."""
    offset = when.utcoffset()
    minutes = int(offset.total_seconds() // 60) if offset else 0
    sign = "-" if minutes < 0 else "+"
    # git forbids angle brackets in names; the frontmatter keeps the exact name.
    name = str(who).replace("<", "%3C").replace(">", "%3E")
    return f"{name} <{email(who)}> {int(when.timestamp())} {sign}{abs(minutes) // 60:02d}{abs(minutes) % 60:02d}"
