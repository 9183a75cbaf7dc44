"""What doctor says of what stands around the mailbox: this repository's name and claim, mail waiting for names no
repository has used, the hosts' hooks, waking, leases that no longer stand, and the commit guard."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from gitmail.doctor.findings import Finding, Level, Rule, each, is_, judged, listed, them
from gitmail.render.words import count, quote
from gitmail.store.claims import load_claims, save_claims
from gitmail.values.layout import Located, State
from gitmail.values.names import RepoName, repo_problem

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gitmail.store.repository import Store
    from gitmail.workspace import Place

RENAME = "rename the folder, or choose a name with `git config gitmail.name NAME` in the repository"


class Here(NamedTuple):
    """This repository and what the mailbox records of its name."""

    place: Place
    name: RepoName
    how: str  # where the name comes from
    first: str | None  # the path recorded for the name
    pending: int  # messages pending for it

    @property
    def facts(self) -> str:
        where = f"{self.place.home}" + (f" (worktree {_quoted(self.place.worktree)})" if self.place.worktree else "")
        return f"{_quoted(self.name)} ({self.how}) at {where}, {count(self.pending, 'message')} pending"

    @property
    def recorded_here(self) -> bool:
        return self.first is not None and os.path.realpath(self.first) == os.path.realpath(self.place.home)


def _quoted(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


CLAIM: list[Rule[Here]] = [
    Rule(
        "repository",
        Level.OK,
        lambda h: h.first is None,
        lambda h: (
            f"{h.facts}; no path is recorded for the name yet: the first session start or inbox here records this one"
        ),
    ),
    Rule(
        "repository",
        Level.OK,
        lambda h: h.recorded_here,
        lambda h: f"{h.facts}; the name is recorded for this path",
    ),
    Rule(
        "repository",
        Level.PROBLEM,
        lambda h: h.first is not None and not h.recorded_here and not os.path.exists(h.first),
        lambda h: f"{h.facts}; the name is recorded for {h.first}, which no longer exists, so readers here are warned",
        "if the repository moved here, gitmail doctor --repair records this path instead",
    ),
    Rule(
        "repository",
        Level.PROBLEM,
        lambda h: h.first is not None and not h.recorded_here and os.path.exists(h.first),
        lambda h: f"{h.facts}; the name was first used by {h.first}, so the two repositories share one mailbox",
        RENAME,
    ),
]


def _pending(messages: Sequence[Located], name: RepoName) -> int:
    return len({p.id for p in messages if p.recipient == name and p.state is State.PENDING})


def repository(store: Store, here: Place | None, messages: Sequence[Located]) -> list[Finding]:
    """This repository's name (its folder's, or the one gitmail.name chooses), its claim, mail a worktree's own
    folder name still holds, and mail that waits for names no repository here has used."""
    claims = load_claims(store)
    name = RepoName(here.name) if here is not None and not repo_problem(here.name) else None
    findings = []
    if here is None:
        text = "not inside a git repository; run `gitmail doctor` in one to check its name and claim"
        findings.append(Finding("repository", Level.NOTE, text))
    else:
        how = "chosen with git config gitmail.name" if here.named_by != "folder" else "its folder's name"
        if name is None:
            text = f"this repository's name {here.name!r} ({how}) cannot be a mailbox name: {repo_problem(here.name)}"
            findings.append(Finding("repository", Level.PROBLEM, text, RENAME))
        else:
            findings += judged(CLAIM, Here(here, name, how, claims.get(name), _pending(messages, name)))
            findings += _old_name(here, name, claims, messages)
    waiting: dict[str, int] = {}
    for place in messages:
        if place.state is State.PENDING and place.recipient not in claims and place.recipient != name:
            waiting[str(place.recipient)] = waiting.get(str(place.recipient), 0) + 1
    if waiting:
        named = ", ".join(f"{_quoted(n)} ({c})" for n, c in sorted(waiting.items()))
        findings.append(
            Finding(
                "repository",
                Level.NOTE,
                f"mail waits for names no repository on this machine has used yet: {named}",
                "a repository's mailbox name is its folder's (or its gitmail.name); mail to a misspelt one never "
                "arrives (resend it)",
            )
        )
    return findings


def _old_name(here: Place, name: RepoName, claims: dict[str, str], messages: Sequence[Located]) -> list[Finding]:
    """Mail still addressed to the name this worktree went by before (its own folder's)."""
    old = here.worktree
    if not old or old == name or repo_problem(old):
        return []
    kept = _pending(messages, RepoName(old))
    if not kept or os.path.realpath(claims.get(RepoName(old), "")) != os.path.realpath(here.top):
        return []
    text = (
        f"{count(kept, 'message')} {is_(kept)} addressed to {_quoted(old)}, the name this worktree went by before; "
        f"its sessions are shown {them(kept)} too"
    )
    return [Finding("repository", Level.NOTE, text)]


def reclaim(store: Store, here: Place | None) -> list[str]:
    """Record this repository's path for its name when the recorded one no longer exists (it moved here)."""
    if here is None or repo_problem(here.name):
        return []
    claims = load_claims(store)
    first = claims.get(here.name)
    if first is None or os.path.exists(first):
        return []
    claims[here.name] = os.path.realpath(here.home)
    save_claims(store, claims)
    return [f"recorded {here.home} for the name {_quoted(here.name)} instead of {first}"]


# -- the hosts ---------------------------------------------------------------------------------------------------


def hooks(home: Path) -> list[Finding]:
    """Each host's gitmail hooks (`gitmail.install.status`): installed for which moments, still running, trusted
    by Codex; and the plugin, which installed hooks would double."""
    from gitmail import __version__
    from gitmail.install.status import status

    findings = []
    for host in status(home):
        plugin = host.host == "claude" and _plugin_enabled(home)
        fix = f"gitmail install --{host.host}"
        if not host.installed and not host.path.parent.is_dir():
            continue  # that host is not on this machine
        if not host.installed:
            if plugin:
                findings.append(Finding(host.host, Level.OK, "gitmail is enabled as a plugin"))
            else:
                text = f"gitmail's hooks are not installed in {host.path}: sessions get mail only from `gitmail inbox`"
                findings.append(Finding(host.host, Level.NOTE, text, fix))
            continue
        if plugin:
            text = f"gitmail is both installed in {host.path} and enabled as a plugin: sessions get their mail twice"
            findings.append(Finding(host.host, Level.PROBLEM, text, f"gitmail uninstall --{host.host}, or disable it"))
        if not host.runs:
            findings.append(Finding(host.host, Level.PROBLEM, f"{host.detail}: sessions get no mail", fix))
        elif host.trust not in (None, "trusted"):
            text = f"Codex does not run gitmail's hooks (trust: {host.trust}); it skips them without a word"
            findings.append(Finding(host.host, Level.PROBLEM, text, "gitmail install --codex, or /hooks in Codex"))
        elif __version__ not in host.detail:
            text = f"{host.detail}; this is gitmail {__version__}"
            findings.append(Finding(host.host, Level.NOTE, text, f"{fix}, from the one you use"))
        else:
            findings.append(Finding(host.host, Level.OK, host.detail))
    return findings


def _plugin_enabled(home: Path) -> bool:
    try:
        settings = json.loads((home / ".claude" / "settings.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    plugins = settings.get("enabledPlugins") if isinstance(settings, dict) else None
    return isinstance(plugins, dict) and any(str(k).startswith("gitmail@") and v for k, v in plugins.items())


def waking(store: Store) -> list[Finding]:
    """Which of the sessions gitmail knows on this machine mail can wake while they wait for their user, per host
    (Claude Code: its wake hook; Codex: an open window, through `codex queue`)."""
    from gitmail import actions, delivery

    if not delivery.wake_enabled(store):
        text = "waking idle sessions is switched off (gitmail.wake = false, or GITMAIL_WAKE=0)"
        return [Finding("wake", Level.NOTE, text, "git config --file MAILBOX/config gitmail.wake true")]
    live = [v for v in actions.sessions_here(store, None) if v.info.state != "ended"]
    findings = []
    for host, how in (("claude", "its wake hook"), ("codex", "an open Codex window, through codex queue")):
        mine = [v for v in live if v.info.host == host]
        if not mine:
            continue
        woken = [v.address for v in mine if v.wakeable]
        text = f"{len(woken)} of {count(len(mine), 'live ' + host + ' session')} can be woken by mail ({how})"
        findings.append(Finding("wake", Level.OK, text + (f": {listed(woken)}" if woken else ""), items=tuple(woken)))
    return findings


def notifications(store: Store) -> list[Finding]:
    """Which channels tell the person of mail that needs them (mail to @user, urgent mail no session can take).
    None working is no problem: such mail waits on the page and in `gitmail inbox`, as all mail does."""
    from gitmail import notify

    return [Finding("notify", Level.OK, "; ".join(notify.notify_status(store)))]


# -- leases and the commit guard --------------------------------------------------------------------------------


class Lapsed(NamedTuple):
    """The stored leases of one repository that no longer stand, by why."""

    repo: RepoName
    why: str  # values.lease.EXPIRED or SESSION_ENDED
    said: list[str]  # each: its paths and its holder


LAPSED_WHY = {
    "expired": lambda n: count(n, "expired lease"),
    "session-ended": lambda n: f"{count(n, 'lease')} of ended sessions",
}
LAPSED: list[Rule[Lapsed]] = [
    Rule(
        "leases",
        Level.NOTE,
        lambda lapsed: lapsed.why in LAPSED_WHY,
        lambda lapsed: (
            f"{LAPSED_WHY[lapsed.why](len(lapsed.said))} {is_(len(lapsed.said))} still stored for "
            f"{quote(lapsed.repo)}, holding nothing: {listed(lapsed.said)}"
        ),
        "the next lease taken there ends them; gitmail doctor --repair does it now",
        lambda lapsed: lapsed.said,
    ),
]


def leases(store: Store) -> list[Finding]:
    """Stored leases nothing treats as held any more: expired, or of sessions that ended."""
    from gitmail.mailbox import leasing
    from gitmail.store import lease_refs

    found = []
    for repo in lease_refs.repos(store):
        by_why: dict[str, list[str]] = {}
        for standing in leasing.standing(store, repo):
            if not standing.held:
                lease = standing.lease
                who = lease.handle or lease.holder or "the person"
                by_why.setdefault(standing.why, []).append(f"{', '.join(map(quote, lease.paths))} ({quote(who)})")
        found += [Lapsed(repo, why, said) for why, said in sorted(by_why.items())]
    return each(LAPSED, found)


def end_lapsed(store: Store) -> list[str]:
    """End the stored leases that no longer stand, in every repository; what was done."""
    from gitmail.mailbox import leasing
    from gitmail.store import lease_refs

    done = []
    for repo in lease_refs.repos(store):
        ended = [s for s in leasing.standing(store, repo) if not s.held]
        if ended:
            leasing.sweep(store, repo)
            done.append(f"ended {count(len(ended), 'lease')} of {quote(repo)} that no longer held anything")
    return done


def guard(store: Store, here: Place | None) -> list[Finding]:
    """Whether the commit guard is installed in this repository: told when it is (and when it is an older one than
    this gitmail installs), and when it is not while leases are held here (a session's commit could then take a
    leased file)."""
    if here is None:
        return []
    from gitmail.install.guard_hook import guard_status

    status = guard_status(Path(here.top))
    if status.installed and status.current:
        return [Finding("guard", Level.OK, f"the commit guard is installed in this repository ({status.hook})")]
    if status.installed:
        text = f"the commit guard in this repository ({status.hook}) runs another gitmail than this one"
        return [Finding("guard", Level.NOTE, text, "gitmail install --guard")]
    from gitmail.mailbox import leasing

    if repo_problem(here.name) or not any(s.held for s in leasing.standing(store, RepoName(here.name))):
        return []
    text = "leases are held in this repository, but the commit guard is not installed: a session's commit may take "
    if status.problem is not None:
        return [Finding("guard", Level.NOTE, f"{text}a file another session leased ({status.problem})")]
    return [Finding("guard", Level.NOTE, text + "a file another session leased", "gitmail install --guard")]
