"""Sessions as people and clients are shown them: what this machine knows of a host's session (`Info`, read from
its record by store/sessions.py), and how it is addressed (`SessionView`). Pure."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple
else:
    from gitmail.values.tuples import NamedTuple


class Info(NamedTuple):
    """One session as `gitmail sessions` shows it."""

    host: str
    id: str
    repo: str  # its repository's mailbox name ("" when no hook of it has run in a repository)
    top: str  # the work tree it works in
    name: str  # the name it chose ("" when none)
    card: str  # its one-line card ("" when none)
    started: float  # when its hooks first saw it
    opened: float  # when it last started or resumed (its latest session start), else when it was first seen
    active: float  # when it was last heard from
    ended: float | None  # when it ended, if it did
    end_reason: str
    state: str  # "live" (in a turn), "idle", or "ended"
    checked: bool  # whether its process could be asked (else the state rests on what its hooks last said)
    pid: int | None  # the host process its hooks recorded, and when that started (clock ticks since boot)
    ticks: int | None
    watch: bool  # its start asked to be woken when mail arrives (Claude Code's wake hook is installed)

    @property
    def key(self) -> str:
        return f"{self.host}:{self.id}"


class SessionView(NamedTuple):
    """A session as people and clients are shown it."""

    info: Info
    handle: str  # how to address it: its name, else its worktree's name, else the start of its id
    worktree: str | None  # its worktree's name, when it works in a linked worktree
    branch: str | None
    pending: int | None = None  # messages pending for it (None when not counted)
    wakeable: bool = False  # whether mail can start a turn in it while it waits for its user (waking.py)
    leases: tuple[str, ...] = ()  # what it holds leases on, each "PATTERN (mode)" (when listed)

    @property
    def address(self) -> str:
        return f"{self.info.repo}#{self.handle}"
