"""What follows the arrival of mail (a send, a reply, a broadcast, mail a sync brought in): a detached waker for the
idle Codex sessions it may be for (waking.py). Costs a directory listing when no Codex session is known, and a spawn
when one may be woken; it never waits for the waker, nor for Codex, and never fails what asked."""

from __future__ import annotations

import os
import sys

from gitmail.store import hookfiles
from gitmail.store.log import problem

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from gitmail.store.repository import Store
    from gitmail.values.session_info import Info

WAKER = "import sys; from gitmail.waking import main; sys.exit(main(sys.argv[1:]))"
PREPARER = "import sys; from gitmail.starts import main; sys.exit(main(sys.argv[1:]))"
NOTIFIER = "import sys; from gitmail.notify import main; sys.exit(main(sys.argv[1:]))"


def prepare_starts(store: Store, repos: Iterable[str] | None) -> None:
    """Start working out, detached, the session-start answers of these repositories (None: of every one) now that
    their mail changed (starts.py). Costs a directory listing when no session started anywhere yet, else a spawn;
    never fails what asked."""
    try:
        folder = hookfiles.folder(store.root, hookfiles.CACHE)
        if not os.path.isdir(folder) or not any(name.endswith(".key") for name in os.listdir(folder)):
            return
        _detached(store, [PREPARER, "prepare", store.root, *(sorted(set(repos)) if repos is not None else ["*"])])
    except Exception as error:  # kept answers are a cache: the next start asks Python instead
        problem(store.root, f"could not start preparing session-start answers: {error}")


def notify_person(store: Store, ids: Iterable[str]) -> None:
    """Start the notifier (notify.py), detached, for these messages that may need the person; never fails."""
    try:
        _detached(store, [NOTIFIER, store.root, *ids])
    except Exception as error:  # a notification is a courtesy: the mail is there and waits anyway
        problem(store.root, f"could not start the notifier: {error}")


def detached(store: Store, code: list[str]) -> None:
    """Run `python -c CODE ARGS...` detached: its own session, no terminal, never waited for."""
    _detached(store, code)


def _detached(store: Store, code: list[str]) -> None:
    os.posix_spawn(
        sys.executable,
        [sys.executable, "-P", "-c", *code],
        {**os.environ, "GITMAIL_DIR": store.root},
        file_actions=[(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)],
        setsid=True,  # detached: not killed with the writer's process group, never waited for
    )


def after_arrival(store: Store, repos: Iterable[str] | None) -> bool:
    """Start the waker when an idle Codex session of these repos (None: of any repo) is known: True when one was
    started."""
    try:
        idle = idle_codex(store, set(repos) if repos is not None else None)
        if not idle:
            return False
        _detached(store, [WAKER, store.root, *(info.key for info in idle)])
        return True
    except Exception as error:  # waking is a courtesy: the mail reaches the session at its next moment anyway
        problem(store.root, f"could not start waking Codex sessions: {error}")
        return False


def idle_codex(store: Store, repos: set[str] | None) -> list[Info]:
    """The Codex sessions of these repos that wait for their user, their process running."""
    folder = hookfiles.folder(store.root, hookfiles.SESSIONS)
    try:
        names = [n[: -len(".json")] for n in os.listdir(folder) if n.startswith("codex-") and n.endswith(".json")]
    except OSError:
        return []
    from gitmail.store import sessions  # here: no Codex session is known where most mail is written

    found = [sessions.info(store.root, "codex", name.removeprefix("codex-")) for name in names]
    return [i for i in found if i is not None and i.state == "idle" and (repos is None or i.repo in repos)]
