"""Writing git objects with pygit2 (the only module that imports it): message commits and notes trees.

Objects are written without refs: an object nothing points to yet is harmless garbage, and refs move only
through `git update-ref` transactions (see store.py). Lookups of refs go through libgit2 here only where a writer
needs a tip it is about to build on, under the mailbox lock.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from gitmail.errors import MailboxError, Transient
from gitmail.identity import RepoName
from gitmail.layout import email
from gitmail.lock import unwritable
from gitmail.message import DOCUMENT_NAME, Message

if TYPE_CHECKING:
    import pygit2


class Gone(MailboxError):
    """An object a commit needs is not in the mailbox (a `git gc --prune=now` took it as it was written)."""


MAILBOX_CONFIG = {
    "core.logAllRefUpdates": "always",  # every ref move leaves a reflog entry
    "gc.auto": "0",  # gitmail packs under its own lock; no git command may do it behind its back
    "gc.reflogExpire": "never",  # the reflog is the record of who archived what, when
    "gc.reflogExpireUnreachable": "never",
    "notes.gitmail-seen.mergeStrategy": "cat_sort_uniq",  # seen-sets merge as a union on sync
    "gitmail.version": "2",  # 2: names in NFC, refs spelled so that case-insensitive file systems keep them apart
}


def init(path: Path) -> None:
    """A new bare mailbox repository at `path` (a fresh directory), configured."""
    _pygit2()
    import pygit2

    _isolate(pygit2)
    repo = pygit2.init_repository(str(path), bare=True)
    try:
        configure(repo)
    finally:
        repo.free()


def configure(repo: pygit2.Repository) -> None:
    for key, value in MAILBOX_CONFIG.items():
        if key not in repo.config or repo.config[key] != value:
            repo.config[key] = value


def _pygit2() -> None:
    try:
        import pygit2  # noqa: F401
    except ImportError:
        raise MailboxError(
            "writing the mailbox needs the pygit2 package, which this Python lacks (pip install gitmail)"
        ) from None


@contextmanager
def repository(path: Path) -> Iterator[pygit2.Repository]:
    _pygit2()
    import pygit2
    from pygit2.enums import Option, RepositoryOpenFlag

    _isolate(pygit2)
    pygit2.option(Option.ENABLE_FSYNC_GITDIR, True)  # a reported send survives power loss, not only crashes
    try:
        repo = pygit2.Repository(str(path), RepositoryOpenFlag.NO_SEARCH | RepositoryOpenFlag.BARE)
    except pygit2.GitError as error:
        raise MailboxError(f"cannot open the mailbox at {path}: {error}") from None
    try:
        yield repo
    finally:
        repo.free()


def _isolate(pygit2: object) -> None:
    """libgit2 reads no user or system git config: a user's ~/.gitconfig must not change (or break) a write."""
    from pygit2 import settings
    from pygit2.enums import ConfigLevel

    for level in (ConfigLevel.SYSTEM, ConfigLevel.XDG, ConfigLevel.GLOBAL, ConfigLevel.PROGRAMDATA):
        settings.search_path[level] = ""


class Objects:
    """Object writes into one open repository."""

    def __init__(self, repo: pygit2.Repository, path: Path) -> None:
        self.repo, self.path = repo, path

    def commit(self, message: Message, parents: Sequence[str] = ()) -> str:
        """The message's blob, tree and commit."""
        import pygit2
        from pygit2.enums import FileMode

        with self._failing_as_mailbox_errors():
            blob = self.repo.create_blob(message.document())
            builder = self.repo.TreeBuilder()
            builder.insert(DOCUMENT_NAME, blob, FileMode.BLOB)
            author = signature(message.sender, message.date)
            oid = self.repo.create_commit(
                None,
                author,
                author,
                message.commit_message(),
                builder.write(),
                [pygit2.Oid(hex=p) for p in parents],
            )
        return str(oid)

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
        import pygit2
        from pygit2.enums import FileMode

        with self._failing_as_mailbox_errors():
            root = self.repo[parent].peel(pygit2.Tree) if parent else None
            top = self.repo.TreeBuilder(root) if root is not None else self.repo.TreeBuilder()
            fanned: dict[str, pygit2.TreeBuilder] = {}
            for oid, note in notes.items():
                blob = self.repo.create_blob(note.encode())
                fanned_before = root is not None and oid[:2] in root
                at_top = root is not None and oid in root
                if at_top or not (fanned_before or fan_out):
                    top.insert(oid, blob, FileMode.BLOB)
                    continue
                directory = oid[:2]
                if directory not in fanned:
                    existing = root[directory].peel(pygit2.Tree) if root is not None and fanned_before else None
                    fanned[directory] = (
                        self.repo.TreeBuilder(existing) if existing is not None else self.repo.TreeBuilder()
                    )
                fanned[directory].insert(oid[2:], blob, FileMode.BLOB)
            for directory, builder in fanned.items():
                top.insert(directory, builder.write(), FileMode.TREE)
            author = signature(who, when)
            parents = [p for p in (parent, merged) if p]
            commit = self.repo.create_commit(None, author, author, text, top.write(), parents)
        return str(commit)

    def record(self, text: str, *, who: RepoName) -> str:
        """A commit that only says something (its tree is empty): what stands in for a lost message."""
        from datetime import UTC, datetime

        with self._failing_as_mailbox_errors():
            author = signature(who, datetime.now(UTC))
            tree = self.repo.TreeBuilder().write()
            return str(self.repo.create_commit(None, author, author, text, tree, []))

    def note(self, tip: str | None, oid: str) -> str:
        """The note on `oid` in the notes tree at `tip` ('' when there is none); Gone when a prune took it."""
        import pygit2

        if tip is None:
            return ""
        try:
            root = self.repo[tip].peel(pygit2.Tree)
            for path in (oid, f"{oid[:2]}/{oid[2:]}", f"{oid[:2]}/{oid[2:4]}/{oid[4:]}"):
                try:
                    found = root[path]
                except KeyError:
                    continue
                if isinstance(found, pygit2.Blob):
                    return found.data.decode(errors="replace")
        except (KeyError, pygit2.GitError) as error:
            raise Gone(f"a note of {tip} is gone: {error}") from None
        return ""

    def author(self, oid: str) -> tuple[str, int]:
        """A commit's author email and time (Transient when a concurrent prune took it before its ref moved)."""
        with self._failing_as_mailbox_errors():
            commit = self.repo[oid]
            return commit.author.email, commit.author.time

    def readable_notes(self, commit: str) -> bool:
        """Whether notes can be read from and built on this notes commit: it, its tree and the trees in that
        are all here (a note whose blob is gone shows when it is read)."""
        import pygit2

        try:
            root = self.repo[commit].peel(pygit2.Tree)
            return all(entry.id in self.repo for entry in root if entry.type_str == "tree")
        except (KeyError, ValueError, pygit2.GitError):
            return False

    def tree_of(self, commit: str) -> str:
        import pygit2

        return str(self.repo[commit].peel(pygit2.Commit).tree_id)

    def mended(self, tree: str) -> tuple[str, int]:
        """The tree again without the entries whose objects are gone (at any depth), and how many were left out."""
        import pygit2

        builder = self.repo.TreeBuilder()
        dropped = 0
        for entry in self.repo[tree].peel(pygit2.Tree):
            if entry.id not in self.repo:
                dropped += 1
            elif entry.type_str == "tree":
                kept, lost = self.mended(str(entry.id))
                builder.insert(str(entry.name), pygit2.Oid(hex=kept), entry.filemode)
                dropped += lost
            else:
                builder.insert(str(entry.name), entry.id, entry.filemode)
        return str(builder.write()), dropped

    def commit_tree(self, tree: str, parents: Sequence[str], text: str, *, who: RepoName) -> str:
        """A commit of an existing tree."""
        from datetime import UTC, datetime

        import pygit2

        with self._failing_as_mailbox_errors():
            author = signature(who, datetime.now(UTC))
            return str(
                self.repo.create_commit(
                    None, author, author, text, pygit2.Oid(hex=tree), [pygit2.Oid(hex=p) for p in parents]
                )
            )

    def has(self, oid: str) -> bool:
        return oid in self.repo

    def target(self, ref: str) -> str | None:
        found = self.repo.references.get(ref)
        return str(found.target) if found is not None else None

    @contextmanager
    def _failing_as_mailbox_errors(self) -> Iterator[None]:
        """libgit2 reports a full disk or a read-only file system as OSError or as GitError ("no error")."""
        import pygit2

        try:
            yield
        except OSError as error:
            if error.errno == errno.ENOENT:  # a concurrent prune removed an object directory
                raise Transient(f"the mailbox at {self.path} changed during the write: {error}") from None
            raise unwritable(self.path, error) from None
        except (KeyError, pygit2.GitError) as error:
            text = str(error)
            if isinstance(error, KeyError) or "rename lockfile" in text or "No such file" in text:
                raise Transient(f"the mailbox at {self.path} changed during the write: {text}") from None
            raise MailboxError(f"cannot write the mailbox at {self.path}: {error_text(error, self.path)}") from None


def error_text(error: Exception, path: Path) -> str:
    """What libgit2 means when it says "no error": the last file-system failure, which we can find out."""
    text = str(error).strip()
    if text and text != "no error":
        return text
    import os
    import tempfile

    try:
        fd, probe = tempfile.mkstemp(dir=path / "objects")
        try:
            os.write(fd, b"x" * 4096)
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as failure:
        return str(unwritable(path, failure)).rsplit(": ", 1)[-1]
    return "the write failed (libgit2 gave no reason)"


def signature(repo: RepoName, when: datetime) -> pygit2.Signature:
    import pygit2

    offset = when.utcoffset()
    minutes = int(offset.total_seconds() // 60) if offset else 0
    # git forbids angle brackets in names; the frontmatter keeps the exact name.
    name = str(repo).replace("<", "%3C").replace(">", "%3E")
    return pygit2.Signature(name, email(repo), int(when.timestamp()), minutes)
