"""What the last sync with each remote left, and whether a sync now would find nothing new — answered with os,
json, the store's git runner, config reader and file writer, and one `git ls-remote` per remote, before the rest of
gitmail is imported.

A sync that finds nothing new should cost little more than the fetch it stands for, and importing the rest of
gitmail's store alone costs more than half of one. So `gitmail sync` (cli/sync.py) asks here first: does the
mailbox's config name the remotes and URLs the last sync saw, does each remote hold what it held then (`git
ls-remote` reads no local ref; a fetch reads every one), and are the mailbox's ref files as they were then
(`fingerprint`)? Only a yes to all of it stops here; anything else, or anything out of the ordinary, goes the whole
way (engine.py), which records anew.
"""

from __future__ import annotations

import os
import time

from gitmail.errors import Unwritable, UsageError
from gitmail.store import gitcmd, gitconfig
from gitmail.store.files import unwritable, write_atomically
from gitmail.store.location import mailbox_path
from gitmail.values import jsontext
from gitmail.values.ids import is_oid

TYPE_CHECKING = False  # typing's own costs an import; only annotations need these
if TYPE_CHECKING:
    from collections.abc import Sequence

# A ref file changed this recently may change again within the same timestamp, unseen: on a file system whose
# timestamps are whole seconds (or two), and on one whose timestamps are finer (a clock tick is 1 to 10 ms).
RACY_SECONDS = 2.0
FINE_RACY_SECONDS = 0.1
SETTLE_SECONDS = 0.1  # the longest a sync that has just written refs waits for them to settle
REMOTE_ROOT = "refs/gitmail-sync/"  # on a remote (see remotes.py)
# The refs sync reads and writes below REMOTE_ROOT, and the only ones it lists or fetches: whatever else a remote
# holds there is never brought here. Keys: store/keys.py; leases: sync/leasestate.py.
SYNCED = ("state", "notes/gitmail-receipts", "notes/gitmail-seen", "notes/gitmail-keys", "leases")
SETTINGS = "gitmail-remote"  # [gitmail-remote "<name>"] in the mailbox's config (see remotes.py)
SYNC_DIR = os.path.join("gitmail", "sync")  # sync's own files in the mailbox
TIMEOUT = 900.0  # seconds an ls-remote may take
# The rules a sync checks before it talks to a remote (which URLs are refused, how git is run for them), by version:
# a record made under older rules is not trusted to stand for a URL the current ones would refuse.
RULES = 3


class Record:
    """What the last sync with a remote left (gitmail/sync/<remote>.json): the URL it used, the remote's refs as
    both sides agreed on them, a fingerprint of the mailbox's ref files then (None when they were too fresh to
    trust), how the last attempt went, and the version of the rules the URL passed then (`RULES`)."""

    __slots__ = ("url", "tips", "fingerprint", "last_attempt", "last_success", "error", "rules")

    def __init__(
        self,
        url: str | None = None,
        tips: dict[str, str] | None = None,
        fingerprint: str | None = None,
        last_attempt: float | None = None,
        last_success: float | None = None,
        error: str | None = None,
        rules: int | None = RULES,
    ) -> None:
        self.url, self.tips, self.fingerprint = url, tips or {}, fingerprint
        self.last_attempt, self.last_success, self.error = last_attempt, last_success, error
        self.rules = rules

    @staticmethod
    def path(mailbox: str | os.PathLike[str], name: str) -> str:
        return os.path.join(mailbox, SYNC_DIR, f"{name}.json")

    @classmethod
    def load(cls, mailbox: str | os.PathLike[str], name: str) -> Record:
        try:
            with open(cls.path(mailbox, name), encoding="utf-8") as handle:
                data = jsontext.loads(handle.read())
            return cls(
                url=_text(data.get("url")),
                tips={str(k): str(v) for k, v in dict(data.get("tips", {})).items()},
                fingerprint=_text(data.get("fingerprint")),
                last_attempt=_number(data.get("last_attempt")),
                last_success=_number(data.get("last_success")),
                error=_text(data.get("error")),
                rules=data.get("rules") if isinstance(data.get("rules"), int) else None,
            )
        except (OSError, ValueError, TypeError, AttributeError):
            return cls()

    def save(self, mailbox: str | os.PathLike[str], name: str) -> None:
        """Written whole or not at all, not synced to disk: losing it costs one full sync. Raises Unwritable when
        the file system refuses."""
        data = {key: getattr(self, key) for key in self.__slots__}
        path = self.path(mailbox, name)
        try:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        except OSError as error:
            raise unwritable(os.path.dirname(path), error) from None
        write_atomically(path, (jsontext.dumps(data) + "\n").encode(), durable=False)

    def in_step(self, url: str, tips: dict[str, str], mailbox: str | os.PathLike[str]) -> bool:
        """Whether the remote (as `tips` show it) and the mailbox are as this record left them."""
        return (
            self.rules == RULES
            and self.url == url
            and self.tips == tips
            and self.fingerprint is not None
            and self.fingerprint == fingerprint(mailbox)
        )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def fingerprint(mailbox: str | os.PathLike[str], *, settle: bool = False) -> str | None:
    """What the files that hold the mailbox's message and notes refs look like: packed-refs (git rewrites it
    whole, under a new inode) and every directory of loose refs (creating, replacing or deleting a ref file
    changes its directory's modification time). None when something changed within the racy window: a second
    change inside the same timestamp would go unseen. With `settle` (a sync that has just written refs), a short
    window is waited out once, so that the next sync that finds nothing new can say so from the fingerprint."""
    parts, newest, coarse = _look(os.fspath(mailbox))
    window = RACY_SECONDS if coarse else FINE_RACY_SECONDS
    wait = newest + window - time.time()
    if settle and 0 < wait <= SETTLE_SECONDS:
        time.sleep(wait)
        parts, newest, coarse = _look(os.fspath(mailbox))
    if time.time() - newest < window:
        return None
    return "\n".join(sorted(parts))


def unsettled(mailbox: str | os.PathLike[str]) -> tuple[str, float]:
    """The fingerprint as the ref files are now, and how many seconds until it can be trusted (0: at once)."""
    parts, newest, coarse = _look(os.fspath(mailbox))
    window = RACY_SECONDS if coarse else FINE_RACY_SECONDS
    return "\n".join(sorted(parts)), max(0.0, newest + window - time.time())


def _look(root: str) -> tuple[list[str], float, bool]:
    """The fingerprint's parts, the newest modification time among them, and whether every timestamp seen was a
    whole second (a coarse file system: FAT's are two seconds apart, HFS+'s one)."""
    newest = 0.0
    coarse = True
    parts: list[str] = []
    try:
        info = os.stat(os.path.join(root, "packed-refs"))
        parts.append(f"packed-refs {info.st_ino} {info.st_size} {info.st_mtime_ns}")
        newest, coarse = info.st_mtime, info.st_mtime_ns % 1_000_000_000 == 0
    except FileNotFoundError:
        parts.append("packed-refs -")
    pending = [os.path.join(root, "refs", "gitmail"), os.path.join(root, "refs", "notes")]
    while pending:
        folder = pending.pop()
        name = os.path.relpath(folder, root)
        try:
            info = os.stat(folder)
            with os.scandir(folder) as entries:
                pending += [e.path for e in entries if e.is_dir(follow_symlinks=False)]
        except FileNotFoundError:
            parts.append(f"{name} -")
            continue
        parts.append(f"{name} {info.st_ino} {info.st_mtime_ns}")
        newest = max(newest, info.st_mtime)
        coarse = coarse and info.st_mtime_ns % 1_000_000_000 == 0
    return parts, newest, coarse


# What `up_to_date` heard from each remote it asked and found not in step, by (mailbox, URL): the whole way that
# follows in the same process takes it instead of asking again (one `ls-remote` per remote and sync).
_HEARD: dict[tuple[str, str], gitcmd.NetworkResult] = {}


def advertised(
    mailbox: str | os.PathLike[str], url: str, pass_fds: Sequence[int] = (), *, again: bool = False
) -> gitcmd.NetworkResult:
    """`git ls-remote` of gitmail's refs on a remote (the caller reads the result with `tips`). Unless `again`,
    what this process's quick check heard from it a moment ago, if it asked."""
    heard = _HEARD.pop((os.path.realpath(mailbox), url), None)
    if heard is not None and not again:
        return heard
    refs = [REMOTE_ROOT + name for name in SYNCED]
    return gitcmd.run_network(mailbox, "ls-remote", url=url, refs=refs, pass_fds=pass_fds, timeout=TIMEOUT)


def tips(listing: bytes) -> dict[str, str]:
    """gitmail's refs among those an ls-remote listed, named as the tracking refs name them: {"state": oid, ...}.
    (ls-remote matches its patterns against the ends of names: anything else it lists is left out here.)"""
    found = {}
    for line in listing.decode(errors="replace").splitlines():
        oid, _, ref = line.partition("\t")
        name = ref[len(REMOTE_ROOT) :]
        if ref.startswith(REMOTE_ROOT) and name in SYNCED and is_oid(oid):
            found[name] = oid
    return found


def up_to_date(name: str | None = None) -> list[str] | None:
    """The remotes (`name`, or every one) when a sync would find nothing new with any of them, having recorded
    that it did; None when a sync has something to do, or this cannot tell."""
    mailbox = _mailbox()
    configured = _remotes(mailbox) if mailbox is not None else None
    if mailbox is None or not configured or (name is not None and name not in configured):
        return None
    chosen = [name] if name is not None else list(configured)
    records = {n: Record.load(mailbox, n) for n in chosen}
    for remote in chosen:
        record = records[remote]
        if record.rules != RULES or record.url != configured[remote] or record.fingerprint is None:
            return None
        listing = _ls_remote(mailbox, configured[remote])
        if listing is None or not records[remote].in_step(configured[remote], tips(listing.stdout), mailbox):
            if listing is not None:
                _HEARD[(os.path.realpath(mailbox), configured[remote])] = listing
            return None
    now = time.time()
    try:
        with open(os.path.join(mailbox, SYNC_DIR, "last-attempt"), "a"):
            os.utime(os.path.join(mailbox, SYNC_DIR, "last-attempt"))
        for remote, record in records.items():
            record.last_attempt = record.last_success = now
            record.error = None
            record.save(mailbox, remote)
    except (OSError, Unwritable):
        return None
    return chosen


def _ls_remote(mailbox: str, url: str) -> gitcmd.NetworkResult | None:
    """`advertised`'s listing; None on any failure (the whole way runs it again and reports why)."""
    try:
        listing = advertised(mailbox, url, again=True)
    except OSError:
        return None
    return listing if listing.returncode == 0 else None


def _mailbox() -> str | None:
    """The mailbox location.py names, if it is plainly this user's own (the whole way checks it fully)."""
    try:
        path = mailbox_path()
    except UsageError:
        return None
    try:
        for inside in ("", "config", SYNC_DIR):
            info = os.stat(os.path.join(path, inside))
            if info.st_uid != os.getuid() or info.st_mode & (0o077 if inside == "" else 0o022):  # a private mailbox
                return None
    except OSError:
        return None
    return path


def _remotes(mailbox: str) -> dict[str, str] | None:
    """Each remote's URL from the mailbox's config; None when the config cannot be read without git."""
    settings = gitconfig.load(os.path.join(mailbox, "config"))
    if settings is None:
        return None
    return {name: values.get("url", "") for name, values in settings.subsections(SETTINGS).items()}
