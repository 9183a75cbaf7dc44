"""The signing group: what signing costs, each row beside the same command with signing switched off in-process,
in one interleaved run with `python3 -c pass`. `gitmail send` as installed (signed) beside the same send through a
`python -c` that makes the writer find no key (the target: signing adds at most 15 %); the session-start hook on a
second machine whose 20 pending messages came from the first by sync (two homes and mailboxes, a bare remote by
path; every message shown must read VERIFIED), with the signatures' facts kept from an earlier check (what every
start after the first costs) and with those files emptied before each run (the first check of 20 commits), beside
the same hook with signature checks switched off in-process (target: at most 1.2×). Then, --sync-runs times, the
second machine's `gitmail sync` receiving 10 messages the first sent and pushed (not timed), signed (target: at
most 2 s) and, alternating with it, sent unsigned."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .fixtures import (
    PENDING,
    RECIPIENT,
    SEND_ARGS,
    SENDER,
    SYNC_BATCH,
    Sandbox,
    check_hook,
    check_sync_quiet,
    git,
    gitmail_command,
    hook_payload,
    inbox_prefix,
    pending_refs,
    refs_under,
    remove_sent,
)
from .runner import (
    WARMUPS,
    BenchError,
    Check,
    Moment,
    Row,
    Settings,
    interleaved,
    progress,
    rotated,
    run,
    summarise,
    timed,
    times,
)

FROM_AFAR = f"session start, {PENDING} pending from another machine"
ROWS = (
    "signing: python3 -c pass",
    "signing: send, signed",
    "signing: send, signing off in-process",
    f"signing: {FROM_AFAR}, verdicts kept (every later start)",
    f"signing: {FROM_AFAR}, first check (kept facts emptied)",
    f"signing: {FROM_AFAR}, checks off in-process",
    f"signing: sync receiving {SYNC_BATCH} new, signed (path)",
    f"signing: sync receiving {SYNC_BATCH} new, sent unsigned (path)",
)
# The same command with signing switched off in-process: a writer that finds no key writes its commits unsigned,
# and a reader told nothing is vouched for checks no signature (its mail reads "its signature was not checked").
UNSIGNED_MAIN = (
    "import sys, gitmail.__main__ as entry, gitmail.store.writer as writer; "
    "writer.Writer.signing_key = lambda self: None; sys.exit(entry.main())"
)
UNCHECKED_MAIN = (
    "import sys, gitmail.__main__ as entry, gitmail.mailbox.finding as mailbox; "
    "mailbox.vouched = lambda store, found: [None] * len(found); sys.exit(entry.main())"
)


@dataclass(frozen=True)
class Machines:
    """Two machines syncing through a bare remote by path; the second has received the first's 20 messages."""

    first: dict[str, str]  # each machine's environment
    second: dict[str, str]
    sender: Any  # the first machine's Store
    receiver: Any  # the second's
    facts: Path  # where the second keeps what it found of each signature


def machine(box: Sandbox, name: str, remote: Path) -> dict[str, str]:
    """A machine of its own, `name` (a home and a mailbox under signing/NAME), syncing with `remote`; the
    environment that is that machine."""
    home = box.root / "signing" / name / "home"
    home.mkdir(parents=True)
    mailbox = home.parent / "mail.git"
    env = {**box.env(), "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "GITMAIL_DIR": str(mailbox)}
    timed([*gitmail_command(), "remote", "add", "origin", str(remote)], cwd=box.root, env=env)
    git(mailbox, "config", "gitmail.machine", name)
    return env


def two_machines(box: Sandbox) -> Machines:
    from gitmail import mailbox as api
    from gitmail.store import signatures
    from gitmail.store.repository import Store

    progress("signing: setting up two machines syncing through a remote by path")
    remote = box.root / "signing" / "remote.git"
    run(["git", "init", "-q", "--bare", str(remote)])
    first, second = machine(box, "first", remote), machine(box, "second", remote)
    sender, receiver = Store(Path(first["GITMAIL_DIR"])), Store(Path(second["GITMAIL_DIR"]))
    for number in range(PENDING):
        api.send(sender, sender=SENDER, to=RECIPIENT, subject=f"Pending message {number}", body="Please read this.\n")
    sync_on(box, first)
    sync_on(box, second)
    if len(refs_under(receiver.path, inbox_prefix())) != PENDING:
        raise BenchError(f"the second machine did not receive the {PENDING} messages the first sent")
    facts = receiver.own_dir / signatures.FOLDER
    if not facts.is_dir():
        raise BenchError(f"the second machine's sync kept no signatures' facts in {facts}")
    return Machines(first, second, sender, receiver, facts)


def sync_on(box: Sandbox, env: Mapping[str, str]) -> float:
    elapsed, output = timed([*gitmail_command(), "sync"], cwd=box.root, env=env)
    check_sync_quiet(output)
    return elapsed


def check_labels(label: bytes, shown: set[int]) -> Check:
    """The session-start hook's check, and that every message it shows (as many of the 20 as fit: their number is
    added to `shown`) reads with this label."""

    def check(output: bytes) -> None:
        check_hook(output)
        headers = len(re.findall(rb"--- message \d+ of \d+", output))
        if not headers or output.count(label) != headers:
            raise BenchError(f"the session start did not label every message {label.decode()!r}: {output[:300]!r}")
        shown.add(headers)

    return check


def check_sent(box: Sandbox, signed: bool) -> Check:
    """That the send wrote its commit signed, or unsigned."""

    def check(output: bytes) -> None:
        ref = inbox_prefix() + output.decode().strip()
        headers = git(box.mailbox(0), "cat-file", "-p", ref).split(b"\n\n", 1)[0]
        if (b"\ngpgsig " in headers) != signed:
            raise BenchError(f"the send meant to be {'signed' if signed else 'unsigned'} wrote {headers!r}")

    return check


def forget_facts(facts: Path) -> Callable[[], None]:
    """Empty the kept signatures' facts before a run (emptied, not removed: in a mailbox in use, checking appends
    to files that exist)."""

    def forget() -> None:
        kept = list(facts.iterdir())
        if not any(file.stat().st_size for file in kept):
            raise BenchError(f"the session start kept no signatures' facts in {facts}: every start checks again")
        for file in kept:
            file.write_bytes(b"")

    return forget


def measure_signing(box: Sandbox, settings: Settings) -> list[Row]:
    at = two_machines(box)
    web, gitmail, python, env, second = box.repo(RECIPIENT), gitmail_command(), sys.executable, box.env(0), at.second
    start = ["hook", "session-start", "--host", "claude"]
    shown: dict[str, set[int]] = {name: set() for name in ROWS[3:6]}
    verified = check_labels(b"(VERIFIED by the key", shown[ROWS[3]])
    first_check = check_labels(b"(VERIFIED by the key", shown[ROWS[4]])
    unchecked = check_labels(b"(UNVERIFIED: its signature was not checked)", shown[ROWS[5]])
    timed([*gitmail, *start], cwd=web, env=second, stdin=hook_payload(web))  # the first showing: receipts written
    before = pending_refs(box, 0)
    api = box.repo(SENDER)
    moments = [
        Moment(ROWS[0], [python, "-c", "pass"], box.root, env),
        Moment(ROWS[1], [*gitmail, *SEND_ARGS], api, env, check=check_sent(box, True)),
        Moment(ROWS[2], [python, "-c", UNSIGNED_MAIN, *SEND_ARGS], api, env, check=check_sent(box, False)),
        Moment(ROWS[3], [*gitmail, *start], web, second, hook_payload(web), check=verified),
        Moment(
            ROWS[4],
            [*gitmail, *start],
            web,
            second,
            hook_payload(web),
            before=forget_facts(at.facts),
            check=first_check,
        ),
        Moment(ROWS[5], [python, "-c", UNCHECKED_MAIN, *start], web, second, hook_payload(web), check=unchecked),
    ]
    rows = interleaved(moments, settings.runs)
    remove_sent(box, 0, before, 2 * (WARMUPS + settings.runs), "signing: sends")
    synced: dict[bool, list[float]] = {True: [], False: []}
    for number in range(settings.sync_runs):
        for signed in rotated([True, False], number):
            synced[signed].append(receive(box, at, signed, number))
    rows += [summarise(ROWS[6], None, synced[True]), summarise(ROWS[7], None, synced[False])]
    write_notes(rows, shown)
    return rows


def receive(box: Sandbox, at: Machines, signed: bool, number: int) -> float:
    """SYNC_BATCH messages sent and pushed on the first machine (not timed), received by the second's sync, which
    must have checked each: a good signature, or none."""
    from gitmail import mailbox as api
    from gitmail.store import signatures
    from gitmail.values.verdict import GOOD, UNSIGNED

    with signing(signed):
        subject = f"sync {number}"
        sent = {api.send(at.sender, sender=SENDER, to=RECIPIENT, subject=subject).message.id for _ in range(SYNC_BATCH)}
    sync_on(box, at.first)
    elapsed = sync_on(box, at.second)
    listed = git(at.receiver.path, "for-each-ref", "--format=%(objectname) %(refname)", inbox_prefix()).decode()
    arrived = {ref.rsplit("/", 1)[1]: oid for oid, ref in (line.split() for line in listed.splitlines())}
    if not sent <= set(arrived):
        raise BenchError(f"{len(sent - set(arrived))} of {SYNC_BATCH} synced messages did not arrive pending")
    kinds = {fact.kind for fact in signatures.kept(at.receiver, [arrived[message_id] for message_id in sent]).values()}
    if kinds != {GOOD if signed else UNSIGNED}:
        raise BenchError(f"the receiving sync did not find every message {'signed' if signed else 'unsigned'}")
    return elapsed


@contextmanager
def signing(on: bool) -> Iterator[None]:
    """This process's writes as they are, or, where not `on`, unsigned: as a writer that finds no key writes them."""
    from unittest import mock

    from gitmail.store.writer import Writer

    if on:
        yield
        return
    with mock.patch.object(Writer, "signing_key", lambda self: None):
        yield


def write_notes(rows: list[Row], shown: Mapping[str, set[int]]) -> None:
    """Each row against its counterpart with signing off, the interleaved ones against `python3 -c pass` too, and
    how many of the 20 messages each session start showed."""
    by_name = {row.name: row for row in rows}
    floor = rows[0]
    for row_at, against in ((1, 2), (3, 5), (4, 5), (6, 7)):
        mine, theirs = by_name[ROWS[row_at]], by_name[ROWS[against]]
        mine.note = times(mine, theirs, ROWS[against].removeprefix("signing: "))
    for row in rows[1:6]:
        row.note = "; ".join(filter(None, [row.note, times(row, floor, "python3 -c pass", mins=False)]))
    for name, counts in shown.items():  # what fits the session's context: a longer label can leave one out
        by_name[name].note += f"; shows {'/'.join(map(str, sorted(counts)))} of {PENDING}"
