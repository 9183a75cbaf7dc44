"""Leases: a session's claim on files of its repository, and the patterns they are taken on. Pure.

A lease covers paths relative to the repository's top (shared by all its worktrees), each a file, a folder (all
under it) or a glob: `*` and `?` within one path segment, `**` across segments. It is exclusive (no other session may
edit what it covers) or shared (others may, and are told). It runs from its holder's last renewal for its
duration, on its holder's clock; a reader on another machine gives that clock `CLOCK_MARGIN` of slack, since clocks
differ. Its document is the record of it in the mailbox (store/leases.py keeps it as a commit under a ref).
"""

from __future__ import annotations

import posixpath
import re

from gitmail.errors import UsageError
from gitmail.values import jsontext
from gitmail.values.machine import Machine
from gitmail.values.names import has_unsafe, without_unsafe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple
else:
    from gitmail.values.tuples import NamedTuple

DEFAULT_FOR = 30 * 60  # seconds a lease runs when no duration is given
LONGEST = 8 * 3600  # seconds a lease may run at most
CLOCK_MARGIN = 120  # seconds a lease from another machine is held past its expiry (that machine's clock may run behind)
MAX_PATHS = 100  # patterns one lease may cover
MAX_NOTE = 200  # characters of a lease's note
EXCLUSIVE, SHARED = "exclusive", "shared"
DOCUMENT_NAME = "lease.json"
WHOLE = "**"  # the whole repository
# Why a lease ended, as its last record says.
RELEASED, EXPIRED, SESSION_ENDED, DISPLACED = "released", "expired", "session-ended", "displaced"

_GLOB = re.compile(r"[*?]")
_UNITS = {"s": 1, "m": 60, "h": 3600}


class Lease(NamedTuple):
    id: str  # ten letters, as message ids
    repo: str  # the repository's mailbox name
    paths: tuple[str, ...]  # patterns, relative to the repository's top
    mode: str  # EXCLUSIVE or SHARED
    holder: str  # the holding session ("claude:5b0e..."), or "" for the person at a terminal
    machine: Machine | None  # where it was taken (None: on this machine, as messages say it)
    taken: float  # when it was first taken (epoch seconds, the holder's clock)
    renewed: float  # when it was last renewed (the holder's clock); taken, until it is
    duration: float  # seconds it runs from `renewed`
    note: str = ""
    ended: str = ""  # why it ended (RELEASED, ...): only on the record of its end
    handle: str = ""  # how the holder is addressed (`api#front`), as it was when the lease was taken or renewed

    @property
    def exclusive(self) -> bool:
        return self.mode == EXCLUSIVE

    @property
    def expires(self) -> float:
        return self.renewed + self.duration

    def held(self, now: float, *, here: bool) -> bool:
        """Whether it still runs at `now`: exactly on the machine that took it, with slack elsewhere."""
        return not self.ended and now < self.expires + (0 if here else CLOCK_MARGIN)

    def due(self) -> float:
        """When its holder's own tool calls renew it: past half its time."""
        return self.renewed + self.duration / 2

    def document(self) -> bytes:
        fields = {
            "id": self.id,
            "repo": self.repo,
            "paths": list(self.paths),
            "mode": self.mode,
            "holder": self.holder,
            "machine": self.machine.field() if self.machine is not None else None,
            "taken": self.taken,
            "renewed": self.renewed,
            "duration": self.duration,
            "note": self.note,
            "ended": self.ended,
            "handle": self.handle,
        }
        return (jsontext.dumps(fields, ensure_ascii=False, sort_keys=True) + "\n").encode()

    def said(self) -> str:
        """The first line of its record in `git log`."""
        what = ", ".join(self.paths)
        who = self.handle or self.holder or "the person at the terminal"
        if self.ended:
            return f"lease {self.id} on {what} ended ({self.ended})"
        return f"lease {self.id} on {what}, {self.mode}, for {who}"


def parse(data: bytes) -> Lease:
    """A lease from its document; UsageError for anything gitmail did not write so (a remote may send anything)."""
    try:
        raw = jsontext.loads(data.decode("utf-8"))
        paths = tuple(normal(str(p)) for p in raw["paths"])
        machine = Machine.parse(raw["machine"]) if raw.get("machine") else None
        found = Lease(
            id=str(raw["id"]),
            repo=str(raw["repo"]),
            paths=paths,
            mode=raw["mode"] if raw["mode"] in (EXCLUSIVE, SHARED) else "",
            holder=str(raw["holder"]),
            machine=machine,
            taken=float(raw["taken"]),
            renewed=float(raw["renewed"]),
            duration=float(raw["duration"]),
            note=clean_note(str(raw.get("note") or "")),
            ended=str(raw.get("ended") or ""),
            handle=str(raw.get("handle") or ""),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise UsageError(f"not a lease gitmail wrote: {error}") from None
    if not found.mode or not paths or len(paths) > MAX_PATHS or not 0 < found.duration <= LONGEST + CLOCK_MARGIN:
        raise UsageError("not a lease gitmail wrote")
    if has_unsafe(found.holder + found.handle + found.id + found.repo):
        raise UsageError("not a lease gitmail wrote: control characters")
    return found


def clean_note(text: str) -> str:
    """A note as one line of at most MAX_NOTE characters (control characters become spaces)."""
    return " ".join(without_unsafe(text, " ").split())[:MAX_NOTE]


def duration(text: str) -> int:
    """Seconds from "30m", "2h", "90s", "1h30m" or a number of minutes; a usage error for anything else, zero,
    negative or over LONGEST."""
    spelled = text.strip().lower()
    if spelled.isdigit():
        seconds = int(spelled) * 60
    else:
        parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", spelled)
        if not spelled or parts is None:
            raise UsageError(f"{text!r} is not a duration (say 30m, 2h, 1h30m or 90s)")
        hours, minutes, secs = (int(p or 0) for p in parts.groups())
        seconds = hours * 3600 + minutes * 60 + secs
    if seconds <= 0:
        raise UsageError(f"a lease must run for some time, not {text!r}")
    if seconds > LONGEST:
        raise UsageError(f"a lease runs at most {LONGEST // 3600} hours, not {text!r}")
    return seconds


def normal(pattern: str) -> str:
    """A pattern as leases keep it: '/'-separated, relative, without '.' segments or a trailing '/' (a folder
    covers everything under it: `src/` is `src/**`). A usage error for what cannot name files of the repository:
    an absolute path, `..`, control characters, an empty pattern."""
    if not pattern or not pattern.strip():
        raise UsageError("an empty path names no file")
    if has_unsafe(pattern) or "\\" in pattern:
        raise UsageError(f"{pattern!r} holds control characters or a backslash: name files by their paths")
    if pattern.startswith("/"):
        raise UsageError(f"{pattern!r} is absolute: name files relative to the repository's top")
    folder = pattern.endswith("/")
    parts = [p for p in pattern.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UsageError(f"{pattern!r} leads outside the repository ('..')")
    if not parts:
        raise UsageError(f"{pattern!r} names no file")
    joined = "/".join(parts)
    return f"{joined}/**" if folder and not joined.endswith("**") else joined


def is_glob(pattern: str) -> bool:
    return _GLOB.search(pattern) is not None


def matches(pattern: str, path: str, *, folded: bool = False) -> bool:
    """Whether `path` (relative, '/'-separated) is one a pattern covers: the file itself, anything under a folder
    it names, or what its glob matches. `folded`: the file system ignores case."""
    if folded:
        pattern, path = pattern.casefold(), path.casefold()
    if not is_glob(pattern):
        return path == pattern or path.startswith(pattern + "/")
    if pattern == WHOLE:
        return True
    return _compiled(pattern).fullmatch(path) is not None or _compiled(pattern + "/**").fullmatch(path) is not None


def overlap(one: str, other: str, *, folded: bool = False) -> bool:
    """Whether two patterns may cover a file in common. Exact for plain paths; for globs it errs towards overlap
    (their fixed beginnings and ends are compared), so a lease never slips past another for want of an answer."""
    if folded:
        one, other = one.casefold(), other.casefold()
    if matches(one, other) or matches(other, one):
        return True
    if not (is_glob(one) or is_glob(other)):
        return False
    head_one, head_other = _fixed_head(one), _fixed_head(other)
    if not (head_one.startswith(head_other) or head_other.startswith(head_one)):
        return False
    tail_one, tail_other = _fixed_tail(one), _fixed_tail(other)
    return tail_one.endswith(tail_other) or tail_other.endswith(tail_one)


def literals(pattern: str) -> list[str]:
    """The fixed pieces of a pattern, each of which any path it covers contains (what hook.sh looks for in a
    tool call's payload before it starts Python)."""
    return [piece for piece in re.split(r"[*?]+", pattern) if piece]


def key(pattern: str) -> str:
    """The name a pattern's lease ref has: the same for every taker of the same pattern, so that a create-only
    ref update picks one of them. A hash, since a path holds what a ref name cannot."""
    import hashlib

    return hashlib.sha1(pattern.casefold().encode("utf-8")).hexdigest()[:20]


def _fixed_head(pattern: str) -> str:
    found = _GLOB.search(pattern)
    return pattern[: found.start()] if found else pattern


def _fixed_tail(pattern: str) -> str:
    last = max((m.end() for m in _GLOB.finditer(pattern)), default=0)
    return pattern[last:]


_PATTERNS: dict[str, re.Pattern[str]] = {}


def _compiled(pattern: str) -> re.Pattern[str]:
    if pattern not in _PATTERNS:
        out, i = [], 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                out.append("(?:.*/)?")
                i += 3
            elif pattern.startswith("**", i):
                out.append(".*")
                i += 2
            elif pattern[i] == "*":
                out.append("[^/]*")
                i += 1
            elif pattern[i] == "?":
                out.append("[^/]")
                i += 1
            else:
                out.append(re.escape(pattern[i]))
                i += 1
        _PATTERNS[pattern] = re.compile("".join(out), re.DOTALL)
    return _PATTERNS[pattern]


def under(top: str, path: str) -> str | None:
    """`path` (absolute, already resolved) relative to the repository's top `top`; None when it is outside."""
    relative = posixpath.relpath(path, top)
    return None if relative == ".." or relative.startswith("../") else ("" if relative == "." else relative)


class Standing(NamedTuple):
    """A stored lease as readers see it: whether it is in force, and if not, why (EXPIRED, SESSION_ENDED,
    DISPLACED), and by which lease when it was displaced."""

    lease: Lease
    held: bool
    why: str = ""
    by: Lease | None = None


def standings(found: list[Lease], now: float, *, here: str | None, ended: set[str]) -> list[Standing]:
    """Which of a repository's stored leases are in force at `now`: not expired (exactly on `here`, this machine's
    id; with CLOCK_MARGIN elsewhere), not held by a session of this machine known to have ended (`ended`, their
    keys), and not displaced: of two holders' leases that cover a file in common, taken apart on two machines
    (sync brings both), the one taken first stands."""
    result: list[Standing] = []
    standing: list[Lease] = []
    for lease in sorted(found, key=lambda item: (item.taken, item.id)):
        local = lease.machine is None or lease.machine.id == here
        if not lease.held(now, here=local):
            result.append(Standing(lease, False, EXPIRED))
            continue
        if local and lease.holder and lease.holder in ended:
            result.append(Standing(lease, False, SESSION_ENDED))
            continue
        first = next((other for other in standing if clashes(other, lease)), None)
        if first is not None:
            result.append(Standing(lease, False, DISPLACED, first))
            continue
        standing.append(lease)
        result.append(Standing(lease, True))
    return result


def clashes(one: Lease, other: Lease, *, folded: bool = False) -> bool:
    """Whether two leases of different holders cannot both stand: they cover a file in common and either is
    exclusive (an exclusive lease would shut a shared one's holder out)."""
    if one.holder == other.holder and (one.machine or None) == (other.machine or None):
        return False
    if not (one.exclusive or other.exclusive):
        return False
    return any(overlap(a, b, folded=folded) for a in one.paths for b in other.paths)
