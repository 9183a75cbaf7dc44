"""The mailbox repository: whether what is at the path may be used as one, its settings, reads without a lock, the
write lock, and creating it.

Reads go through `git for-each-ref` and `git cat-file --batch`: listing refs under a prefix costs git the same
whether the mailbox holds 10 or 100,000 other refs (libgit2 walks every ref), and a session-start read cannot
afford pygit2's import. Writes (writer.py) move refs with `git update-ref` transactions that check each ref against
the value they expect (transaction.py), under the mailbox's lock (lock.py). Opening a mailbox, which may bring an
older format up to date, is opening.py's. catfile.py is loaded at its first use: `inbox` reads loose objects."""

from __future__ import annotations

import errno
import os
import time

from gitmail.errors import MailboxBusy, MailboxError, UsageError
from gitmail.store import gitcmd, gitconfig, lock, loose, refs, stamps
from gitmail.store.files import make_dir, unwritable
from gitmail.store.location import MAILBOX_ENV, OWN_DIR, mailbox_path, spelled
from gitmail.store.lock import Deadline
from gitmail.store.log import problem
from gitmail.store.ownership import check_ownership, check_private
from gitmail.values.layout import ROOT, Located, locate, note_lines, note_places
from gitmail.values.names import RepoName, first_format_ref, from_address, nfd

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from contextlib import AbstractContextManager
    from pathlib import Path

    from gitmail.store import catfile, history
    from gitmail.store.kept import Kept

MARK_KEY = "gitmail.version"  # set in every mailbox gitmail made: what makes a repository one


def _lock_wait() -> float:
    """GITMAIL_LOCK_WAIT: how long to wait for another writer, in seconds (tests shorten it)."""
    try:
        given = float(os.environ.get("GITMAIL_LOCK_WAIT", ""))
    except ValueError:
        return 10.0
    return given if 0 < given < 3600 else 10.0


WRITE_WAIT = _lock_wait()  # seconds a command waits for another writer
INDEX_WAIT = 0.5  # how long a read waits for the lock to build the history index, a cache it can do without


class Store:
    """One mailbox repository. Reading never creates it; the first write does."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.root = spelled(path if path is not None else mailbox_path())  # a str: no command imports pathlib
        self.own_root = os.path.join(self.root, OWN_DIR)
        self._path: Path | None = None
        self._checked = False
        self.old_names = False  # refs may still be spelled as an older format spelled names (migrate.py)
        self._reader: catfile.BatchReader | None = None  # a cat-file kept running, for long-lived processes
        self.kept: Kept | None = None  # objects read and messages parsed, kept by id in long-lived processes
        self._settings: tuple[tuple[int, int, int] | None, gitconfig.Config] | None = None  # the config, as last read
        self.damaged: set[str] = set()  # objects found unreadable (damaged on disk): read as missing, named here

    @property
    def path(self) -> Path:
        """`root` as a Path, made when first asked for."""
        from pathlib import Path

        self._path = self._path or Path(self.root)
        return self._path

    # -- existence and health ---------------------------------------------------------------------------------

    def exists(self) -> bool:
        """True when a mailbox is at the path (an empty directory is not one yet); raises if what is there
        cannot be used as one."""
        try:
            if not os.path.lexists(self.root) or (os.path.isdir(self.root) and not os.listdir(self.root)):
                return False
        except OSError as error:
            raise MailboxError(f"cannot read the mailbox at {self.root}: {error.strerror or error}") from None
        self.check()
        return True

    def check(self) -> None:
        if self._checked:
            return
        where = self.root
        try:
            if not os.path.isdir(where):
                if os.path.islink(where) and not os.path.exists(where):
                    raise MailboxError(
                        f"mailbox path {where} is a dangling symbolic link (to {os.readlink(where)}, which does not "
                        f"exist); point {MAILBOX_ENV} at the mailbox itself, or create what the link names"
                    )
                raise MailboxError(f"mailbox path {where} exists but is not a directory")
            check_ownership(where)
            head, config, objects = (os.path.join(where, name) for name in ("HEAD", "config", "objects"))
            if not (os.path.isfile(head) and os.path.isdir(objects) and os.path.isfile(config)):
                raise MailboxError(f"mailbox path {where} is not a git repository")
            for name in (config, head):
                with open(name, "rb") as file:
                    file.read()
            os.listdir(os.path.join(where, "refs"))
        except MailboxError:
            raise
        except OSError as error:
            raise MailboxError(f"cannot read the mailbox at {where}: {error.strerror or error}") from None
        settings = self.settings()
        if (settings.get("extensions.refstorage") or "").lower() == "reftable":
            raise MailboxError(
                f"mailbox at {where} uses the reftable ref format, which gitmail cannot use; "
                "move it away and gitmail will create a new one"
            )
        if settings.get(MARK_KEY) is None:
            if not settings.flag("core.bare", default=True) or os.path.basename(where) == ".git":
                raise MailboxError(
                    f"{where} is a project's git repository, not a gitmail mailbox; point {MAILBOX_ENV} at a new path"
                )
            raise MailboxError(
                f"{where} is a git repository gitmail did not create; point {MAILBOX_ENV} at a new or empty path"
            )
        try:
            check_private(where)
        except OSError as error:
            raise MailboxError(f"cannot read the mailbox at {where}: {error.strerror or error}") from None
        self._checked = True

    @property
    def own_dir(self) -> Path:
        return self.path / OWN_DIR

    def settings(self) -> gitconfig.Config:
        """The mailbox's git config, read without starting git where gitmail's reader follows it (the hooks ask at
        every session start), else from git. Read again only when the file changed (a config that includes
        another is read every time)."""
        try:
            info = os.stat(os.path.join(self.root, "config"))
            stamp = (info.st_mtime_ns, info.st_size, info.st_ino)
        except OSError:
            stamp = None
        if stamp is not None and self._settings is not None and self._settings[0] == stamp:
            return self._settings[1]
        found = gitconfig.load(os.path.join(self.root, "config"))
        if found is not None:
            if not found.get_all("include.path"):
                self._settings = (stamp, found)
            return found
        try:
            listed = self.git("config", "--includes", "--list", "-z").decode(errors="replace")
        except gitcmd.GitFailed:
            listed = ""
        pairs = [item.partition("\n") for item in listed.split("\0") if item]
        return gitconfig.Config([(key.lower(), value if sep else None) for key, sep, value in pairs])

    def setting(self, name: str) -> str | None:
        """`git config gitmail.NAME`, or None."""
        return self.settings().get(f"gitmail.{name}")

    def flag(self, name: str, default: bool = True) -> bool:
        return self.settings().flag(f"gitmail.{name}", default)

    def writable(self) -> bool:
        """Whether this process may write the mailbox (a read-only mailbox is still read)."""
        return os.access(self.own_root if os.path.isdir(self.own_root) else self.root, os.W_OK)

    # -- lock-free reads through git --------------------------------------------------------------------------

    def readable(self, patterns: Sequence[str]) -> list[str]:
        """Ref patterns (or `--glob=` arguments) for reads: in a mailbox not yet migrated (migrate.py), each pattern
        for one repo's refs also matches the spellings the first format gave that repo's name."""
        if not self.old_names:
            return list(patterns)
        return [spelled for pattern in patterns for spelled in (pattern, *_old_spellings(pattern))]

    def git(
        self,
        *args: str,
        stdin: bytes | None = None,
        pass_fds: Sequence[int] = (),
        env: dict[str, str] | None = None,
    ) -> bytes:
        return gitcmd.run(self.root, *args, stdin=stdin, env=env, pass_fds=pass_fds)

    def refs(self, *patterns: str, count: int | None = None) -> list[Located]:
        """Message refs under the given prefixes (or glob patterns), parsed; foreign refs are ignored."""
        if not self.exists():
            return []
        if not self.old_names and all(p.endswith("/") and "*" not in p for p in patterns):
            # Folders: read from the ref files, without a git process (refs.py), in git's order; in a long-lived
            # reader, read again only once a folder or packed-refs has changed (kept.py).
            if self.kept is None:
                places = self._listed(patterns)
            else:
                places = self.kept.while_same(
                    ("refs", patterns), None, lambda: refs.kept_in(self.root, patterns), lambda: self._listed(patterns)
                )
            return list(places) if count is None else places[:count]
        limit = [f"--count={count}"] if count is not None else []
        out = self.git("for-each-ref", "--format=%(objectname) %(refname)", *limit, *self.readable(patterns))
        found = []
        for line in out.decode(errors="replace").splitlines():
            oid, _, ref = line.partition(" ")
            place = locate(ref, oid)
            if place:
                found.append(place)
        return found

    def holds_refs(self, *prefixes: str) -> bool:
        """Whether any message ref lies under these folders: the first one found answers."""
        if not self.exists():
            return False
        if self.old_names:
            return any(self.refs(prefix, count=1) for prefix in prefixes)
        return any(refs.first(self.root, prefix, lambda ref, oid: locate(ref, oid) is not None) for prefix in prefixes)

    def _listed(self, prefixes: Sequence[str]) -> list[Located]:
        listed = sorted(
            {ref: oid for prefix in prefixes for ref, oid in refs.listing(self.root, prefix).items()}.items()
        )
        return [p for ref, oid in listed if (p := locate(ref, oid))]

    def refs_under(self, prefix: str) -> dict[str, str]:
        """Every ref in a folder of refs (`refs/gitmail/web/leases/`), whatever it names, with what it holds: read
        from the ref files, without a git process."""
        return refs.listing(self.root, prefix) if self.exists() else {}

    def log_refs(self, *args: str) -> list[tuple[str, list[str]]]:
        """Commits `git log` selects with the given arguments, newest first, with their gitmail refs. A ref among
        those the `--glob` arguments name whose commit cannot be read (gone, or damaged on disk) comes last, as a
        row of its own: git log skips it, and its readers find no document there and report it. Finding those
        costs nothing while every ref is whole: git log fails on such a ref, and only then are they looked for.
        A walk (no `--no-walk`) also leaves out the refs whose history holds such a commit."""
        if not self.exists():
            return []
        try:
            return self._log(*args)
        except gitcmd.GitFailed as failure:
            from gitmail.store import catfile

            if not catfile.object_missing(failure.stderr) and catfile.unreadable_object(failure.stderr) is None:
                raise
        globs = [a.split("=", 1)[1] for a in args if a.startswith("--glob=")]
        walks = not any(a.startswith("--no-walk") for a in args)
        broken, tainted = self.unreadable_history(self.refs(*globs) if globs else [])
        left_out = [f"--exclude={p.ref}" for p in [*broken, *(tainted if walks else [])]]
        spelled = [part for a in args for part in ([*left_out, a] if a.startswith("--glob=") else [a])]
        return self._log("--ignore-missing", *spelled) + [(p.oid, [p.ref]) for p in broken]

    def unreadable_history(self, places: Sequence[Located]) -> tuple[list[Located], list[Located]]:
        """Of these message refs, those whose commit cannot be read (gone, or damaged), and those whose commit can
        be but one it answers cannot: what git log cannot get past. Each commit is read once (a message answers
        at most one other: threads are chains)."""
        commits: dict[str, bytes | None] = {}
        wanted: list[str] = list(dict.fromkeys(p.oid for p in places))
        while wanted:
            commits.update(zip(wanted, self.read(wanted), strict=True))
            wanted = list(
                dict.fromkeys(p for data in commits.values() if data for p in _parents(data) if p not in commits)
            )

        known: set[str] = set()  # commits whose whole history was read

        def whole(tip: str) -> bool:
            seen: set[str] = set()
            walk = [tip]
            while walk:
                oid = walk.pop()
                if oid in seen or oid in known:
                    continue
                seen.add(oid)
                data = commits.get(oid)
                if data is None:
                    return False
                walk += _parents(data)
            known.update(seen)
            return True

        broken = [p for p in places if commits.get(p.oid) is None]
        return broken, [p for p in places if commits.get(p.oid) is not None and not whole(p.oid)]

    def _log(self, *args: str) -> list[tuple[str, list[str]]]:
        out = self.git(
            "log",
            "--no-color",
            "--no-show-signature",
            "--format=%H%x00%D",
            "--decorate-refs=refs/gitmail/",
            *self.readable(args),
        )
        rows = []
        for line in out.decode(errors="replace").splitlines():
            oid, _, decorations = line.partition("\x00")
            rows.append((oid, [d for d in decorations.split(", ") if d]))
        return rows

    def read(self, specs: Sequence[str], *, limit: int | None = None) -> list[bytes | None]:
        """Object contents for each `git cat-file` spec (`<oid>:<path>`, `<ref>:<path>`); None where missing, where
        the object is larger than `limit` bytes (nothing of it past its size is read then), or where what it names
        cannot be read (a damaged object: its id is added to `damaged`). What is loose is read directly (loose.py);
        only the rest costs a `git cat-file`."""
        if not specs:
            return []
        if self.kept is not None:
            return self.kept.read(specs, limit, self._read, self.damaged)
        return self._read(specs, limit)

    def _read(self, specs: Sequence[str], limit: int | None = None) -> list[bytes | None]:
        found = loose.read(self.root, specs, limit=limit, damaged=self.damaged)
        rest = [spec for spec, got in zip(specs, found, strict=True) if got is loose.ELSEWHERE]
        answers = iter(self._cat_file(rest, limit) if rest else [])
        return [next(answers) if got is loose.ELSEWHERE else got if isinstance(got, bytes) else None for got in found]

    def read_with_notes(
        self, specs: Sequence[str], notes: Mapping[str, Sequence[str]], *, limit: int | None = None
    ) -> tuple[list[bytes | None], dict[str, dict[str, set[str]]]]:
        """`read(specs)` and, in the same read, the lines of the note each notes ref (a key of `notes`) holds on
        each of its commits (its value): `{notes ref: {commit: lines}}`, an empty set where there is none."""
        wanted = [(ref, oid) for ref, oids in notes.items() for oid in dict.fromkeys(oids)]
        places = [note_places(ref, oid, tops.get(ref)) for tops in [self._note_tops(notes)] for ref, oid in wanted]
        found = self.read([*specs, *(spec for asked in places for spec in asked if spec)], limit=limit)
        answers = iter(found[len(specs) :])
        lines: dict[str, dict[str, set[str]]] = {ref: {} for ref in notes}
        for (ref, oid), asked in zip(wanted, places, strict=True):
            lines[ref][oid] = note_lines([next(answers) if spec else None for spec in asked]) if asked else set()
        return found[: len(specs)], lines

    def _note_tops(self, notes: Mapping[str, Sequence[str]]) -> dict[str, set[bytes] | None]:
        """The names at the top of each notes ref's tree where it is loose (as notes are written), none where it is
        not there; None where it is not read here (every place of a note is asked then)."""
        if self.kept is not None or sum(map(len, notes.values())) < 2 * len(notes):
            return {ref: None for ref in notes}
        trees = loose.read(self.root, [f"{ref}^{{tree}}" for ref in notes], damaged=self.damaged)
        return {
            ref: loose.names(tree) if isinstance(tree, bytes) else set() if tree is None else None
            for ref, tree in zip(notes, trees, strict=True)
        }

    def notes(self, ref: str, oids: Sequence[str], *, limit: int | None = None) -> dict[str, set[str]]:
        """The lines of the note this notes ref holds on each of these commits (an empty set where there is none)."""
        return self.read_with_notes([], {ref: oids}, limit=limit)[1][ref]

    def finish_interrupted(self, deadline: Deadline) -> None:
        """Finish a change a writer died in the middle of, when there is one and this process may write: the lock
        finishes it (a live writer holding the lock finishes it itself; reading meanwhile is safe)."""
        if not os.path.exists(os.path.join(self.own_root, "journal")) or not self.writable():
            return
        try:
            with self.locked(deadline=deadline):
                pass
        except MailboxError:
            pass

    def _cat_file(self, specs: Sequence[str], limit: int | None = None) -> list[bytes | None]:
        if self._reader is not None:
            return self._reader.read(specs, limit=limit, damaged=self.damaged)
        from gitmail.store import catfile

        return catfile.cat_file(self.root, specs, self.damaged, limit=limit)

    def keep_reading(self) -> None:
        """For a process that reads this mailbox many times (the MCP server): keep one `git cat-file` running for
        `read` instead of starting one per read, and keep what it read and parsed by object id (kept.py), so a
        call reads only refs and what changed. `close` stops it."""
        if self._reader is None:
            from gitmail.store import catfile

            self._reader = catfile.BatchReader(self.root)
        if self.kept is None:
            from gitmail.store.kept import Kept  # long-lived processes only: a command reads each object once

            self.kept = Kept(self.path)

    def close(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.close()

    def targets(self, names: Sequence[str]) -> dict[str, str]:
        """What each of these refs points at, for those that exist and point at an object the mailbox has: found
        from the ref files and the objects' headers (loose, or in a pack); git is asked only where neither says."""
        held = refs.resolve(self.root, names)
        oids = list(held.values())
        found = dict(zip(oids, loose.read(self.root, oids, limit=0, damaged=self.damaged), strict=True))
        if ask := [ref for ref in held if found[held[ref]] is loose.ELSEWHERE]:
            from gitmail.store import catfile

            lines = catfile.cat_file(self.root, ask, self.damaged, check="%(objectname)")
            found.update((held[ref], None if line is None else b"") for ref, line in zip(ask, lines, strict=True))
        return {ref: held[ref] for ref in names if ref in held and found[held[ref]] is not None}

    def written(self, names: Sequence[str]) -> dict[str, str]:
        """Of these refs, the ones that exist, with what they hold, whether or not the mailbox has that object:
        found as git stores them (a loose file, or a line of packed-refs). For the few refs `targets` did not
        find, to tell a ref whose commit is gone from one that is not there."""
        return refs.resolve(self.root, names)

    def whole(self, oid: str) -> bool:
        """Whether this commit and everything it reaches (its tree, its documents, the commits it answers) are
        here: what git fsck and git gc need of every ref."""
        try:
            out = self.git("rev-list", "--objects", "--missing=print", oid)
        except gitcmd.GitFailed:  # the commit, or one it reaches, is gone
            return False
        return not any(line.startswith("?") for line in out.decode(errors="replace").splitlines())

    def missing(self, oids: Sequence[str]) -> set[str]:
        """Which of these objects the mailbox does not have."""
        if not oids:
            return set()
        from gitmail.store import catfile

        lines = catfile.cat_file(self.root, oids, self.damaged, check="%(objectname)")
        return {oid for oid, line in zip(oids, lines, strict=True) if line is None}

    # -- writes -------------------------------------------------------------------------------------------------

    def create(self) -> None:
        """Create the mailbox if absent: built aside and renamed into place, so racing creators never clash."""
        if self.exists():
            return
        import tempfile

        from gitmail.store import setup

        parent = os.path.dirname(self.root)
        try:
            os.makedirs(parent, mode=0o700, exist_ok=True)
            building = tempfile.mkdtemp(prefix=f".{os.path.basename(self.root)}.new-", dir=parent)
        except OSError as error:
            raise unwritable(parent, error) from None
        try:
            setup.init(building)
            os.mkdir(os.path.join(building, OWN_DIR), mode=0o700)
            os.chmod(building, 0o700)
            try:
                os.rename(building, self.root)
            except OSError as error:
                if error.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise unwritable(parent, error) from None
        except OSError as error:
            raise unwritable(parent, error) from None
        finally:
            if os.path.exists(building):
                import shutil

                shutil.rmtree(building, ignore_errors=True)
        self._checked = False
        self.check()

    def locked(self, *, timeout: float = WRITE_WAIT, deadline: Deadline | None = None) -> AbstractContextManager[int]:
        """Hold the mailbox's write lock; finish any change a dead writer left half-applied."""
        from contextlib import contextmanager  # writers only: a read (`inbox --peek`, `log`) never loads it

        return contextmanager(self._locked)(timeout=timeout, deadline=deadline)

    def _locked(self, *, timeout: float, deadline: Deadline | None) -> Iterator[int]:
        self.create()
        try:
            make_dir(self.own_root)
        except OSError as error:
            raise unwritable(self.root, error) from None
        fd = lock.open_lock(self.own_root)
        try:
            lock.acquire(fd, deadline or Deadline(timeout), self.root)
            self._finish_dead_writers_change(fd)
            yield fd
        finally:
            os.close(fd)  # releases the flock

    def recent(self, names: Sequence[str], wanted: int) -> list[history.Line] | None:
        """The newest lines of these history files; None when the index cannot be had (a mailbox this process
        may not write, whose index was never built; a mailbox whose migration is not finished). Unwritable when
        it was to be built and the file system refused."""
        from gitmail.store import history  # `log` needs it; the hooks do not

        if not self.exists():
            return []
        if self.old_names:
            return None  # refs are still being renamed: the index is built once they all have their names
        if not history.complete(self.root):
            if not self.writable():
                return None
            try:
                with self.locked(timeout=INDEX_WAIT):
                    if not history.complete(self.root):
                        try:
                            history.rebuild(self.root, self._every_message())
                        except OSError as error:  # a full disk: the index is a cache; the caller reads without it
                            raise unwritable(history.directory(self.root), error) from None
            except MailboxBusy:  # a writer holds the mailbox: read without the index rather than wait for it
                return None
        return history.newest(self.root, names, wanted)

    def _every_message(self) -> list[history.Line]:
        from gitmail.store import history

        fields = "%(objectname) %(refname) %(authordate:unix) %(authoremail)"
        try:
            rows = self.git("for-each-ref", f"--format={fields}", "refs/gitmail/").decode(errors="replace")
        except gitcmd.GitFailed:  # a ref whose commit is gone or damaged: read what is there, the rest is named
            listed = self.git("for-each-ref", "--format=%(objectname) %(refname)", "refs/gitmail/").decode()
            pairs = [row.split(" ", 1) for row in listed.splitlines() if " " in row]
            commits = self.read([oid for oid, _ in pairs])
            now = f"{int(time.time())} <>"  # a message whose commit cannot be read has no date: it is news now
            rows = "\n".join(
                f"{oid} {ref} {_author(commit) or now}" for (oid, ref), commit in zip(pairs, commits, strict=True)
            )
        lines = []
        for row in rows.splitlines():
            oid, ref, when, email = (row.split(" ", 3) + ["", "", ""])[:4]
            place = locate(ref, oid)
            if place is None or not when.isdigit():
                continue
            recipient = place.recipient.ref if place.recipient is not None else history.BROADCAST
            sender = from_address(email)
            lines.append(history.Line(int(when), place.id, recipient, sender.ref if sender else history.UNKNOWN))
        return lines

    def _finish_dead_writers_change(self, fd: int) -> None:
        """Replay a journal a killed writer left. One whose objects are gone (a `git gc --prune=now` ran since) is
        set aside whole and logged: the command that wrote it never reported success, and the rest of the mailbox
        must go on working."""
        journal = lock.Journal(self.own_root)
        if not journal.exists():
            return
        from gitmail.store import history, transaction  # a dead writer's change: rare

        try:
            changes = journal.load()
        except (OSError, ValueError) as error:
            kept = os.path.basename(journal.set_aside())
            problem(self.root, f"set aside an unreadable journal ({error}) as {kept}")
            return
        lock.remove_left_by_dead_writer(self.root, [c.ref for c in changes])
        gone = self.missing([c.new for c in changes if c.new is not None])
        if gone:
            kept = os.path.basename(journal.set_aside())
            problem(
                self.root,
                f"set aside an unfinished change whose objects are gone ({', '.join(sorted(gone))}) as {kept}: "
                + "; ".join(f"{c.ref} {c.old or '-'} -> {c.new or '-'}" for c in changes),
            )
            return
        finish = "gitmail: finish a change its writer did not"
        transaction.update_refs(
            self.root, changes, finish, RepoName("gitmail"), fd, Deadline(lock.GIT_LOCK_WAIT), verify=False
        )
        journal.clear()
        history.forget(self.root)  # what the dead writer brought in is found when the index is rebuilt
        stamps.bump(self.root, *transaction.touched(changes, None))


def _author(commit: bytes | None) -> str | None:
    """A commit's author time and address, as `%at %ae` gives them ("1764408600 api@gitmail"); None when it has
    no author line git would read."""
    head = (commit or b"").split(b"\n\n", 1)[0].decode(errors="replace")
    for line in head.split("\n"):
        if line.startswith("author "):
            before, _, after = line.rpartition(">")
            seconds = (after.split() or [""])[0]
            return f"{seconds} {before.rpartition('<')[2]}" if seconds.isdigit() else None
    return None


def _parents(commit: bytes) -> list[str]:
    """The parent ids a commit's header names."""
    head = commit.split(b"\n\n", 1)[0]
    return [line[7:].decode(errors="replace") for line in head.split(b"\n") if line.startswith(b"parent ")]


def _old_spellings(pattern: str) -> list[str]:
    option = "--glob=" if pattern.startswith("--glob=") else ""
    ref = pattern[len(option) :]
    if not ref.startswith(ROOT):
        return []
    component, slash, rest = ref[len(ROOT) :].partition("/")
    try:
        name = RepoName.from_ref(component)
    except UsageError:
        return []
    old = {first_format_ref(name), first_format_ref(nfd(name))} - {component}
    return [f"{option}{ROOT}{spelling}{slash}{rest}" for spelling in sorted(old)]
