"""Moving refs: one `git update-ref` transaction per change, every ref checked against the value it is expected
to hold (git refuses the whole transaction otherwise), under the mailbox's lock; whose pending mail a change
alters; and the reflog, the record of every move.
"""

from __future__ import annotations

import os

from gitmail.errors import MailboxBusy, Transient
from gitmail.store import gitcmd, lock
from gitmail.store.log import problem
from gitmail.values.layout import SEEN_NOTES, Change, State, email, locate

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from _typeshed import StrPath

    from gitmail.store.lock import Deadline
    from gitmail.values.names import RepoName


def touched(changes: Sequence[Change], actor: RepoName | None) -> tuple[set[RepoName | None], str | None]:
    """Whose pending mail these changes alter (None: every repo's broadcasts), and the stamp to mark it with:
    a new message's id where one arrives (else None: `stamps.bump` makes a fresh one). A session that looked before
    then looks again."""
    names: set[RepoName | None] = set()
    value = ""
    for change in changes:
        place = locate(change.ref, change.new or change.old or "")
        if place is not None and place.state in (State.PENDING, State.BROADCAST):
            names.add(place.recipient)
            value = place.id if change.new and change.old is None else value
        elif place is not None and place.state is State.RETRACTED:
            names.add(None)
        elif change.ref == SEEN_NOTES and actor is not None:
            names.add(actor)  # a broadcast was handed to it: no longer pending there
    return names, value or None


def update_refs(
    mailbox: StrPath,
    changes: Sequence[Change],
    reason: str,
    actor: RepoName,
    lock_fd: int,
    deadline: Deadline,
    *,
    verify: bool,
) -> None:
    """One `git update-ref` transaction: all refs are locked before any moves. libgit2 is not used for ref writes:
    it re-reads every packed ref before each write, which costs ~40 ms per write in a mailbox of 100,000.
    A ref lock another git process holds is waited for (git's own timeouts); one left behind long ago is cleared."""
    commands = []
    for ref, new, old in changes:
        expect = (old or "") if verify else ""
        if new is None:
            commands.append(f"delete {ref}\0{expect}\0")
        elif old is None and verify:
            commands.append(f"create {ref}\0{new}\0")
        else:
            commands.append(f"update {ref}\0{new}\0{expect}\0")
    for ref in [*(c.ref for c in changes), "packed-refs"]:
        if lock.clear_if_abandoned(lock.lock_file(mailbox, ref), only_if_old=True):
            problem(mailbox, f"removed {lock.lock_file(mailbox, ref)}: left behind by a git process that is gone")
    identity = {"GIT_COMMITTER_NAME": str(actor), "GIT_COMMITTER_EMAIL": email(actor)}  # the reflog's "who"
    wait = int(min(lock.GIT_LOCK_WAIT, deadline.left()) * 1000)
    arguments = (
        "-c",
        "core.fsync=committed,reference",
        "-c",
        f"core.filesRefLockTimeout={wait}",
        "-c",
        f"core.packedRefsTimeout={wait}",
        "update-ref",
        "-z",
        "--stdin",
        "-m",
        reason,
    )
    for attempt in range(2):
        try:
            gitcmd.run(mailbox, *arguments, stdin="".join(commands).encode(), env=identity, pass_fds=(lock_fd,))
            return
        except gitcmd.GitFailed as failure:
            if "nonexistent object" in failure.stderr:  # a concurrent prune took an object just written
                raise Transient(str(failure)) from None
            held = lock.held_lock(failure.stderr, mailbox)
            if held is None:
                raise
            if attempt == 0 and lock.clear_if_abandoned(held, only_if_old=False):
                problem(mailbox, f"removed {held}: left behind by a git process that is gone")
                continue
            raise MailboxBusy(
                f"another git process holds {held} (for {lock.lock_age(held):.0f}s); try again, or remove that "
                "file if no git process is running on the mailbox"
            ) from None


def reflog(git_dir: StrPath, ref: str, *, every: bool = False) -> list[tuple[str, str]]:
    """The (old, new) commit ids of each entry in a ref's reflog, oldest first; [] when it has none. With `every`,
    each line of it is an entry (as git counts them: `ref@{0}` is the last), "" where a line names no commit."""
    try:
        with open(os.path.join(git_dir, "logs", ref), errors="replace") as file:
            text = file.read()
    except OSError:
        return []
    entries = []
    for line in text.splitlines():
        old, _, rest = line.partition(" ")
        new = rest.partition(" ")[0]
        if len(old) == len(new) in (40, 64) and new.strip("0"):
            entries.append((old, new))
        elif every:
            entries.append(("", ""))
    return entries
