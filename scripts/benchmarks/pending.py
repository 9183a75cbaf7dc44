"""The pending group: what 500 pending messages cost against 1, for a session start answered by Python (the hook
with a host's JSON payload) and for `gitmail inbox --peek`, interleaved with `python3 -c pass` in one run. Each
reads its own mailbox: one message sent by gitmail, the rest imported with `git fast-import` (packed, as mail is
once it has been packed) and moved into `web`'s inbox; the warm-up runs make the pending index as the first
reader does. A session start shows what fits its budget, the inbox every message whole."""

from __future__ import annotations

import sys
from pathlib import Path

from .fixtures import (
    RECIPIENT,
    SENDER,
    Sandbox,
    archive_prefix,
    check_hook,
    check_inbox,
    git,
    hook_payload,
    import_archived,
    inbox_prefix,
    refs_under,
)
from .runner import BenchError, Moment, Row, Settings, interleaved, progress, times

SIZES = (1, 500)
ROWS = (
    "pending: python3 -c pass",
    *(f"pending: hook session-start, {n} pending" for n in SIZES),
    *(f"pending: inbox --peek, {n} pending" for n in SIZES),
)


def pending_mailbox(box: Sandbox, count: int) -> dict[str, str]:
    """A mailbox with `count` messages pending for `web` (no archive), and the environment that reads it."""
    from gitmail import mailbox as api
    from gitmail.store.repository import Store

    path = box.root / f"pending-{count}.git"
    progress(f"writing {count} pending message{'s' if count != 1 else ''}")
    api.send(Store(path), sender=SENDER, to=RECIPIENT, subject="Pending message", body="Please read this.\n")
    if count > 1:
        import_archived(path, count - 1, 0)
        moves = [
            f"create {inbox_prefix()}{ref.rsplit('/', 1)[1]} {oid}\ndelete {ref} {oid}\n"
            for ref, oid in (line.split() for line in refs_of(path, archive_prefix()))
        ]
        git(path, "update-ref", "--stdin", stdin="".join(moves).encode())
    if len(refs_under(path, inbox_prefix())) != count:
        raise BenchError(f"the mailbox for {count} pending holds {len(refs_under(path, inbox_prefix()))}")
    return {**box.env(0), "GITMAIL_DIR": str(path)}


def refs_of(path: Path, prefix: str) -> list[str]:
    return git(path, "for-each-ref", "--format=%(refname) %(objectname)", prefix).decode().splitlines()


def measure_pending(box: Sandbox, settings: Settings) -> list[Row]:
    web, gitmail = box.repo(RECIPIENT), [sys.executable, "-m", "gitmail"]
    envs = {count: pending_mailbox(box, count) for count in SIZES}
    start = [*gitmail, "hook", "session-start", "--host", "claude"]
    moments = [
        Moment(ROWS[0], [sys.executable, "-c", "pass"], box.root, envs[1]),
        *(
            Moment(
                f"pending: hook session-start, {n} pending", start, web, envs[n], hook_payload(web), check=check_hook
            )
            for n in SIZES
        ),
        *(
            Moment(
                f"pending: inbox --peek, {n} pending", [*gitmail, "inbox", "--peek"], web, envs[n], check=check_inbox
            )
            for n in SIZES
        ),
    ]
    rows = interleaved(moments, settings.runs)
    by_name = {row.name: row for row in rows}
    for what in ("hook session-start", "inbox --peek"):
        one, many = by_name[f"pending: {what}, 1 pending"], by_name[f"pending: {what}, 500 pending"]
        many.note = f"{times(many, one, '1 pending')}; {times(many, rows[0], 'python3 -c pass', mins=False)}"
        one.note = times(one, rows[0], "python3 -c pass", mins=False)
    return rows
