"""History: a repository's mail, what it sent, everyone's, or one conversation, newest first."""

from __future__ import annotations

from gitmail.errors import MailboxError, Unwritable
from gitmail.mailbox.finding import (
    damaged_error,
    documents_of,
    from_rows,
    newest_first,
    oldest_first,
    parsed,
    resolve,
    with_receipts,
)
from gitmail.store.machines import Here
from gitmail.values.layout import (
    BROADCASTS,
    ROOT,
    Located,
    State,
    emails,
    latest,
    locate,
    state_prefix,
)
from gitmail.values.mail import Entry, History
from gitmail.values.names import RepoName

TYPE_CHECKING = False
if TYPE_CHECKING:  # what writes is loaded only to write
    from gitmail.store import history
    from gitmail.store.repository import Store


def log(
    store: Store,
    *,
    repo: str | None = None,
    limit: int | None = 20,
    grep: str | None = None,
    thread: str | None = None,
    sent: bool = False,
) -> History:
    """History, newest first, each message with its receipts: a repo's mail (to it, from it, and broadcasts), or
    only what it sent (`sent`), or everyone's when `repo` is None. With `thread`, the whole conversation that
    message belongs to, oldest first. Messages that cannot be read are left out and named in `unreadable` (a
    thread's are left out only)."""
    if not store.exists():
        return History()
    if thread is not None:
        return History(with_receipts(store, oldest_first(_thread(store, resolve(store, thread)))))
    me = RepoName.parse(repo) if repo is not None else None
    unrecorded = None
    if grep is None and limit is not None:
        try:
            recent = _recent(store, me, limit, sent)
        except Unwritable as error:  # the index is a cache: read every message instead, and say so
            recent, unrecorded = (
                None,
                f"the history index was not written ({error.reason}); this log was read without it",
            )
        if recent is not None:
            return History(with_receipts(store, recent[0]), recent[1])
    common = ["--no-walk=sorted"] + (["--regexp-ignore-case", "--fixed-strings", f"--grep={grep}"] if grep else [])
    common += [f"--max-count={limit}"] if limit is not None else []
    by_me = ["--fixed-strings", f"--glob={ROOT}", *(f"--author=<{e}>" for e in emails(me))] if me is not None else []
    if me is None:
        entries, unreadable = from_rows(store, store.log_refs(*common, f"--glob={ROOT}"))
    elif sent:
        entries, _ = from_rows(store, store.log_refs(*common, *by_me))  # another repo's damage is not ours to hear
        entries, unreadable = [e for e in entries if e.message.sender == me], []
    else:
        received, unreadable = from_rows(
            store, store.log_refs(*common, f"--glob={ROOT}{me.ref}", f"--glob={BROADCASTS}")
        )
        mine, _ = from_rows(store, store.log_refs(*common, *by_me))
        entries = list({e.message.id: e for e in received + [e for e in mine if e.message.sender == me]}.values())
    return History(with_receipts(store, newest_first(entries)[:limit]), unreadable, unrecorded)


def _recent(store: Store, me: RepoName | None, limit: int, sent: bool) -> tuple[list[Entry], list[str]] | None:
    """The newest messages through the history index: a few small reads, whatever the archive holds. None when
    there is no index to read."""
    from gitmail.store import history

    names = [history.EVERYONE] if me is None else [me.ref] if sent else [me.ref, history.BROADCAST]
    wanted = limit + 8
    while True:
        lines = store.recent(names, wanted)
        if lines is None:
            return None
        mine = [line for line in lines if line.sender == me.ref] if sent and me is not None else lines
        refs = [ref for line in mine for ref in _homes(line)]
        targets = store.targets(refs)
        homeless = [ref for line in mine if not set(_homes(line)) & set(targets) for ref in _homes(line)]
        targets |= store.written(homeless) if homeless else {}  # a ref whose commit is gone is read as unreadable
        places = latest([p for ref, oid in targets.items() if (p := locate(ref, oid))])
        found, unreadable = parsed(places, documents_of(store, places), Here(store))
        entries = newest_first(found)
        if sent and me is not None:
            entries = [e for e in entries if e.message.sender == me]
        if len(entries) >= limit or len(lines) < wanted:
            return entries[:limit], unreadable
        wanted *= 4


def _homes(line: history.Line) -> list[str]:
    """The refs a message of this history line can be under."""
    from gitmail.store import history

    if line.recipient == history.BROADCAST:
        return [state_prefix(State.BROADCAST) + line.id, state_prefix(State.RETRACTED) + line.id]
    return [f"{ROOT}{line.recipient}/inbox/{line.id}", f"{ROOT}{line.recipient}/archive/{line.id}"]


def _thread(store: Store, place: Located) -> list[Entry]:
    try:
        root = store.git("rev-list", "--max-parents=0", place.oid).decode().split()[0]
    except MailboxError:  # its commit, or one it answers, is gone
        raise damaged_error(place) from None
    rows = store.log_refs("--no-walk", root) + store.log_refs("--ancestry-path", f"^{root}", f"--glob={ROOT}")
    return from_rows(store, rows)[0]
