"""A remote's state: the commit that says what the remote holds, read and checked, and the next one built with
this machine's news.

A remote's state is a commit whose tree lists every message as `<repo>/<folder>/<id[:2]>/<id>` -> the message's
commit (a gitlink: the tree names the commit without containing it), and whose parents reach every message commit
through "carrier" commits, so that fetching the one ref brings every message. Once messages carry attachments, a
state also has an "attachments" commit as a parent, so that a file attached again is not sent again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from gitmail.store import gitcmd
from gitmail.sync.quick import SYNCED
from gitmail.sync.remotes import FORMAT_PATH, FORMAT_TEXT, NOTES, REMOTE_ROOT, STATE, NotGitmail
from gitmail.values.layout import ROOT, Located

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gitmail.store.repository import Store
    from gitmail.values.machine import Machine

CARRIER_PARENTS = 256  # message commits per carrier commit (a state commit reaches new messages through these)
ATTACHMENTS_WITHIN_REACH = 2000  # attachment blobs a state keeps as already sent (see _attachments)
ATTACHMENTS_LOOK_BACK = 16  # states looked through for the attachments commit to build on
ATTACHMENTS_TEXT = "gitmail sync: attachments the other side has\n"
_COMMIT_LIMIT = 64 * 1024  # bytes a state, carrier or attachments commit is read to (a remote's may be anything)
_TREE_LIMIT = 4 * 1024 * 1024  # bytes an attachments folder is read to (2,000 entries take ~130 KB)
ZERO = "0" * 40  # no object: an index entry to remove, a place with no commit yet
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


class RemoteState(NamedTuple):
    """What a remote holds, read and checked."""

    state: str | None  # the state commit
    # every message place in its state, as packed-refs spells a ref here: b"<commit> <ref>" (refs.lines)
    listing: set[bytes]
    notes: dict[str, str]  # notes ref name ("gitmail-seen") -> notes commit


def read_remote(store: Store, name: str, tips: dict[str, str]) -> RemoteState:
    """The remote's state from the tracking refs, or NotGitmail when it is not a gitmail sync state. Only the
    shape of each entry is checked here; the entries that differ from this mailbox are checked as messages when
    compared (reconcile.py)."""
    state = tips.get(STATE)
    notes = {ref[len(NOTES) :]: oid for ref, oid in tips.items() if ref in SYNCED and ref.startswith(NOTES)}
    oids = [o for o in (state, *notes.values()) if o is not None]
    kinds = object_info(store, oids)
    if any(kinds[o][0] != "commit" for o in oids):
        raise NotGitmail(name, f"its {REMOTE_ROOT} refs are not commits")
    if state is None:
        return RemoteState(None, set(), notes)
    if store.read([f"{state}:{FORMAT_PATH}"], limit=len(FORMAT_TEXT))[0] != FORMAT_TEXT.encode():
        raise NotGitmail(name, f"{REMOTE_ROOT}{STATE} is not a gitmail sync state of a format this gitmail reads")
    return RemoteState(state, _listing(store, name, state), notes)


def _listing(store: Store, name: str, state: str) -> set[bytes]:
    """Every message place the state lists. What the last state read listed is kept (gitmail/sync/<remote>.state:
    that state's id, then its lines), so a new state is compared with it by `git diff-tree`, which reads only the
    folders whose ids differ: ten new messages among 100,000 read a few small trees, not every entry. Without a
    kept listing (or when its state is gone from here), the whole tree is listed."""
    kept = _kept(store, name)
    entries: set[bytes] | None = None
    if kept is not None and kept[0] == state:
        return kept[1]
    if kept is not None:
        try:
            out = store.git("diff-tree", "-r", "-z", "--no-renames", kept[0], state)
        except gitcmd.GitFailed:
            out = None
        if out is not None:
            entries = kept[1]
            fields = out.decode(errors="replace").split("\0")
            for meta, path in zip(fields[0:-1:2], fields[1::2], strict=True):
                old_mode, mode, old, oid = meta[1:].split(" ")[:4]
                ref = _ref_of(path)
                if old_mode == "160000" and ref is not None:
                    entries.discard(f"{old} {ref}".encode())
                if mode != "000000":
                    line = _entry(name, f"{mode} {_kind(mode)} {oid}", path)
                    if line is not None:
                        entries.add(line)
    if entries is None:
        entries = set()
        for entry in store.git("ls-tree", "-r", "-z", "--full-tree", state).decode(errors="replace").split("\0"):
            meta, _, path = entry.partition("\t")
            line = _entry(name, meta, path) if entry else None
            if line is not None:
                entries.add(line)
    _keep(store, name, state, entries)
    return entries


def _kind(mode: str) -> str:
    return {"160000": "commit", "040000": "tree"}.get(mode, "blob")


def _ref_of(path: str) -> str | None:
    """The ref a message's place in a state's tree (`<repo>/<folder>/<id[:2]>/<id>`) stands for."""
    parts = path.split("/")
    if len(parts) == 4 and parts[2] == parts[3][:2]:
        return f"{ROOT}{parts[0]}/{parts[1]}/{parts[3]}"
    return None


def _entry(name: str, meta: str, path: str) -> bytes | None:
    """One place of the state's tree as a line (b"<commit> <ref>"); None for the format file, NotGitmail for
    anything else but a message's."""
    ref = _ref_of(path)
    if ref is not None and meta.startswith("160000 commit "):
        return f"{meta[14:]} {ref}".encode()
    if path == FORMAT_PATH:
        return None
    raise NotGitmail(name, f"an entry of its state is not a message: {path!r}")


def _kept_path(store: Store, name: str) -> Path:
    return store.own_dir / "sync" / f"{name}.state"


def forget(store: Store, name: str) -> None:
    """The listing kept of a remote's state goes with the remote."""
    _kept_path(store, name).unlink(missing_ok=True)


KEPT_FORM = "2"  # the kept listing's first line: this, a space and the state's id (older forms are listed anew)


def _kept(store: Store, name: str) -> tuple[str, set[bytes]] | None:
    try:
        data = _kept_path(store, name).read_bytes()
    except OSError:
        return None
    head, _, rest = data.partition(b"\n")
    form, _, state = head.decode(errors="replace").partition(" ")
    if form != KEPT_FORM or len(state) != 40 or not rest.endswith(b"end\n"):
        return None  # torn, or not one: listed whole
    entries = set(rest[: -len(b"end\n")].split(b"\n"))
    entries.discard(b"")
    return state, entries


def _keep(store: Store, name: str, state: str, entries: set[bytes]) -> None:
    """Kept whole or not at all, never synced to disk: losing it costs one full listing."""
    from gitmail.errors import Unwritable
    from gitmail.store.files import write_atomically

    text = b"\n".join([f"{KEPT_FORM} {state}".encode(), *entries, b"end\n"])
    try:
        write_atomically(_kept_path(store, name), text, durable=False)
    except (OSError, Unwritable):
        return


def object_info(store: Store, specs: Sequence[str]) -> dict[str, tuple[str, int]]:
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


def state_path(place: Located) -> str:
    """Where a message sits in the state's tree: its ref below refs/gitmail/, fanned out by id."""
    folder = place.ref[len(ROOT) : -len(place.id)]
    return f"{folder}{place.id[:2]}/{place.id}"


def new_state(
    store: Store,
    there: RemoteState,
    additions: Sequence[Located],
    moves: Sequence[tuple[Located, Located]],
    here: Machine,
    name: str,
) -> str:
    """The remote's state with this machine's news: a commit on top of the remote's, reaching the new messages. Its
    listing is kept as the last state read is (`_lines`), so the next sync compares with it by difference."""
    import tempfile

    identity = _identity(here)
    form = store.git("hash-object", "-w", "--stdin", stdin=FORMAT_TEXT.encode()).decode().strip()
    lines = [f"0 {ZERO}\t{state_path(old)}\n" for old, _ in moves]
    lines += [f"160000 {p.oid}\t{state_path(p)}\n" for p in [*additions, *(new for _, new in moves)]]
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
    commit = store.git("commit-tree", tree, *flags, "-m", summary, env=identity).decode().strip()
    entries = set(there.listing)
    entries.difference_update(f"{old.oid} {old.ref}".encode() for old, _ in moves)
    entries.update(f"{p.oid} {p.ref}".encode() for p in [*additions, *(new for _, new in moves)])
    _keep(store, name, commit, entries)
    return commit


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
