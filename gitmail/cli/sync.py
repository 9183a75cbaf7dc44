"""`gitmail sync`, run without the command-line library: users, cron and the background start run it, and a sync
that finds nothing new should cost little more than the fetch it makes. `python -m gitmail sync [NAME] [--quiet]
[--auto]` comes here straight from __main__ (as the hook does); the typer command of the same name, for --help,
calls `run` too, and `gitmail remote` prints `remote_line`. Errors end as everywhere else (edge.py).
"""

from __future__ import annotations

from gitmail import edge
from gitmail.edge import say
from gitmail.errors import ExitCode, GitmailError

TYPE_CHECKING = False  # typing's own costs an import; only annotations need these
if TYPE_CHECKING:
    from gitmail.store.repository import Store
    from gitmail.sync.engine import Outcome
    from gitmail.sync.remotes import Remote

LOCK_WAIT = 120.0  # seconds a sync run by hand waits for one already running (a background one, say)


def main(argv: list[str]) -> int | None:
    """The exit code, or None when the arguments are not this command's plain forms (then typer handles them)."""
    names = [a for a in argv if not a.startswith("-")]
    flags = {a for a in argv if a.startswith("-")}
    if len(names) > 1 or not flags <= {"--quiet", "-q", "--auto"}:
        return None
    name, quiet, auto = (names[0] if names else None), bool(flags & {"--quiet", "-q"}), "--auto" in flags
    return edge.run(lambda: run(name, quiet=quiet, auto=auto), where=" ".join(["gitmail sync", *argv]))


def run(name: str | None, *, quiet: bool = False, auto: bool = False) -> int:
    """One `gitmail sync`: the quick answer when nothing is new, else the whole way (engine.py)."""
    if not auto:
        from gitmail.sync.quick import up_to_date

        try:
            found = up_to_date(name)
        except GitmailError:  # git is missing, say: the whole way says so properly
            found = None
        if found is not None:
            for remote in found if not quiet else ():
                say(f"{remote}: up to date")
            return int(ExitCode.OK)
    from gitmail import actions
    from gitmail.sync import engine
    from gitmail.sync.remotes import SyncError

    store = actions.open_mailbox()
    if auto:
        return engine.run_background(store)
    engine.SETTLE_LATER = True  # the answer first; the wait for fresh ref files to settle after it
    failed = False
    for result in actions.sync(store, name, wait=LOCK_WAIT):
        if isinstance(result, SyncError):
            say(f"error: {result}")
            failed = True
        elif not quiet:
            say(describe(result))
            for line in told(result):
                say(line)
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    engine.settle_later(store)
    return int(ExitCode.RUNTIME) if failed else int(ExitCode.OK)


def describe(outcome: Outcome) -> str:
    """One line on what a sync did."""
    if outcome.quiet and not outcome.conflicts:
        return f"{outcome.remote}: up to date"
    counts = [
        (outcome.received, "new here"),
        (outcome.moved_here, "archived or retracted here"),
        (outcome.sent, "new there"),
        (outcome.moved_there, "archived or retracted there"),
    ]
    parts = [f"{n} {_messages(n)} {what}" for n, what in counts if n]
    if outcome.leases_here:
        places = "repository" if outcome.leases_here == 1 else "repositories"
        parts.append(f"other machines' leases brought in for {outcome.leases_here} {places}")
    if outcome.displaced:
        parts.append(
            "1 lease of this machine gave way to an earlier lease taken on another machine (its holder is told)"
            if outcome.displaced == 1
            else f"{outcome.displaced} leases of this machine gave way to earlier leases taken on another machine "
            "(their holders are told)"
        )
    if outcome.leases_there:
        parts.append("this machine's leases sent")
    if outcome.set_aside:
        parts.append(
            f"{outcome.set_aside} {_messages(outcome.set_aside)} larger than gitmail sends set aside unread (see "
            "gitmail doctor)"
        )
    if outcome.notes:
        parts.append("hand-overs merged")
    if outcome.conflicts:
        differ = "differs" if outcome.conflicts == 1 else "differ"
        parts.append(
            f"{outcome.conflicts} {_messages(outcome.conflicts)} {differ} here and there: sync changed neither copy "
            "(see the log)"
        )
    return f"synced with {outcome.remote}: {', '.join(parts) or 'up to date'}"


TOLD = 10  # messages a remote archived or retracted named one by one; the rest are counted


def told(outcome: Outcome) -> list[str]:
    """A line per message archived or retracted here because the remote said so, and which machine it names."""
    lines = [f"{outcome.remote}: {move.line()}" for move in outcome.said[:TOLD]]
    more = len(outcome.said) - TOLD
    if more > 0:
        lines.append(f"{outcome.remote}: and {more} more archived or retracted as it says (gitmail log marks them)")
    return lines


def _messages(n: int) -> str:
    return "message" if n == 1 else "messages"


def remote_line(store: Store, remote: Remote) -> str:
    """`gitmail remote`'s line for one remote: name, URL, how it syncs, how the last sync went."""
    import time

    from gitmail.sync import remotes
    from gitmail.sync.quick import Record

    record = Record.load(store.path, remote.name)
    how = f"auto, every {remote.interval} s" if remote.auto else "when asked"
    if record.error and (record.last_success or 0) < (record.last_attempt or 0):
        last = f"last sync failed: {record.error}"
    elif record.last_success:
        last = "last synced " + time.strftime("%Y-%m-%d %H:%M %z", time.localtime(record.last_success))
    else:
        last = "never synced"
    return f"{remote.name}\t{remotes.redact(remote.url)}\t{how}\t{last}"
