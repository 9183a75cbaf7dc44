"""Install and uninstall gitmail's hooks in Claude Code and Codex, and report on them.

gitmail answers a host at every moment it offers (see MOMENTS and EVENTS): a session starting, a tool call, the next
prompt, a turn's end, an idle session's wake (Claude Code only) and a session's end. Each moment is one entry of its
own group, with no matcher, under the host's event; the moments inside a running session go through hook.sh, which
decides with shell built-ins whether anything is new before it starts Python.

Entries are marked (`# gitmail:<moment>`) so uninstall removes exactly them; a second install changes no byte; every
unrelated key, hook and formatting choice is kept; each file is backed up before its first change and written
atomically; a settings file that does not parse is refused and left untouched. Changes are planned for every host
first and written only if all of them could be planned. For Codex, gitmail's hooks are also trusted the way Codex
records trust (see gitmail.codex_trust), the trust of the user's own hooks moves with them when gitmail's entries
come or go, and the mailbox is made writable from Codex's workspace-write sandbox.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import tomlkit

from gitmail import delivery
from gitmail.delivery import Moment
from gitmail.errors import GitmailError, UsageError
from gitmail.install import codex_config, codex_trust, jsonedit
from gitmail.install.codex_trust import Position

MOMENTS = ("start", "tool", "prompt", "stop", "wake", "end")  # what `--moments` names, in this order
_NAMED = {
    Moment.START: "start", Moment.TOOL: "tool", Moment.PROMPT: "prompt", Moment.STOP: "stop", Moment.WAKE: "wake",
    Moment.END: "end",
}  # fmt: skip
# The host event that carries each moment, from delivery.py's table of hosts: a moment a host carries without a hook
# (Codex's wake: gitmail queues a turn) or lacks is not here.
EVENTS = {
    host: {_NAMED[moment]: carried.event for moment, carried in table.items() if carried.hook}
    for host, table in delivery.HOSTS.items()
}
HOSTS = ("claude", "codex")
QUIET = ("start", "tool", "prompt", "stop", "wake")  # through hook.sh: no Python when nothing changed
TIMEOUT = 10  # seconds; the hook itself waits at most a few for a busy mailbox
END_TIMEOUT = 3  # Codex runs SessionEnd hooks for at most 3 s, and hashes the entry as if it said so
BACKUP = ".gitmail-backup"  # the file as it was before gitmail first changed it
SILENT_SKIP = "Codex skips an untrusted hook without a word, in `codex exec` too"
HOW_TO_TRUST = "open /hooks in Codex and trust gitmail's hooks"
TRUST_PREVIEW = "would trust gitmail's hooks for Codex, as its /hooks review does (--no-trust leaves that to you)"
NO_WAKE = (
    "Codex has no hook for a session that waits for its user: gitmail wakes one by queueing it a turn with the Codex "
    "that runs it (`codex queue`), which needs its window open; `gitmail doctor` says which sessions can be woken"
)


def _hook_name(moment: str) -> str:
    """`gitmail hook`'s name for a moment."""
    return {"start": "session-start", "end": "session-end"}.get(moment, moment)


def marker(moment: str) -> str:
    """The shell comment that ends gitmail's command for this moment: how uninstall knows its own entries."""
    return f"# gitmail:{_hook_name(moment)}"


MARK = marker("start")  # the session-start entry's mark, the same as the first releases wrote
_MARKED = re.compile(r"# gitmail:([a-z-]+)\s*$")


def parse_moments(text: str) -> tuple[str, ...]:
    """`--moments start,tool,…` as a tuple in MOMENTS order; a usage error for anything else."""
    chosen = {word.strip() for word in text.split(",") if word.strip()}
    unknown = sorted(chosen - set(MOMENTS))
    if unknown or not chosen:
        raise UsageError(f"--moments takes a comma-separated list of {', '.join(MOMENTS)} (got {text!r})")
    if "wake" in chosen and "start" not in chosen:
        raise UsageError("--moments: wake needs start (a session is woken through the files its start watches)")
    return tuple(m for m in MOMENTS if m in chosen)


class Change(NamedTuple):
    path: Path
    before: str | None  # None: the file does not exist
    after: str | None  # None: the file is to be removed

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        return "".join(
            difflib.unified_diff(
                (self.before or "").splitlines(keepends=True),
                (self.after or "").splitlines(keepends=True),
                fromfile=f"{self.path} (now)" if self.before is not None else "/dev/null",
                tofile=f"{self.path} (after)" if self.after is not None else "/dev/null",
            )
        )


class CodexTrust(NamedTuple):
    """gitmail's Codex hooks, to be trusted once their hooks.json is written."""

    hooks_json: Path
    config: Path


class Plan(NamedTuple):
    changes: list[Change]
    notes: list[str]
    trust: CodexTrust | None = None
    folders: tuple[Path, ...] = ()  # to exist before the hosts next run (Codex's sandbox refuses a missing root)


# -- what gets installed --------------------------------------------------------------------------------------------


def hook_script() -> Path:
    """hook.sh as installed with this gitmail (package data beside the hook adapter, gitmail/hooks.py)."""
    return Path(__file__).resolve().parent.parent / "hook.sh"


def command(moment: str, host: str, *, python: str | None = None, watch: bool = False) -> str:
    """The installed command for one moment. It names this interpreter, so no virtualenv needs to be active.
    Session start and the moments inside a session run hook.sh, which starts Python only when something may have
    changed (a session start that would repeat the last one is answered from what that one kept); session end runs
    Python directly, falling back to `gitmail` on PATH. None fails a session: all but the wake end in `true` (a wake
    must pass on its exit status 2, which is how Claude Code is asked to start a turn)."""
    interpreter = shlex.quote(python or sys.executable)
    name = _hook_name(moment)
    if moment in QUIET:
        run = f"sh {shlex.quote(str(hook_script()))} {name} {host} {interpreter}" + (" --watch" if watch else "")
        if moment == "start":  # hook.sh itself gone (gitmail moved): the gitmail on PATH, if any
            run += f" || gitmail hook {name} --host {host}" + (" --watch" if watch else "")
        return f"{run} {marker(moment)}" if moment == "wake" else f"{run} || true {marker(moment)}"
    arguments = f"hook {name} --host {host}" + (" --watch" if watch else "")
    # -P: never import a `gitmail` from the session's directory (hooks run there; a repository could hold one).
    return f"{interpreter} -P -m gitmail {arguments} || gitmail {arguments} || true {marker(moment)}"


def hook_command(python: str | None = None, *, host: str = "claude", watch: bool = False) -> str:
    """The session-start command."""
    return command("start", host, python=python, watch=watch)


def entries(host: str, moments: Sequence[str] = MOMENTS, *, python: str | None = None) -> dict[str, dict[str, Any]]:
    """Host event -> gitmail's entry, for the chosen moments this host has."""
    chosen = [m for m in moments if m in EVENTS[host]]
    found = {}
    for moment in chosen:
        entry: dict[str, Any] = {
            "type": "command",
            "command": command(moment, host, python=python, watch=moment == "start" and "wake" in chosen),
            "timeout": END_TIMEOUT if moment == "end" else TIMEOUT,
        }
        if moment == "wake":
            entry["asyncRewake"] = True  # runs beside the session; exit 2 starts a turn with its stderr
        found[EVENTS[host][moment]] = entry
    return found


def codex_home(home: Path) -> Path:
    """Where Codex keeps its settings: $CODEX_HOME, as Codex reads it, else ~/.codex."""
    configured = os.environ.get("CODEX_HOME")
    return Path(configured).expanduser().absolute() if configured else home / ".codex"


def settings_paths(home: Path) -> dict[str, Path]:
    """Each host's file holding gitmail's hooks."""
    return {"claude": home / ".claude" / "settings.json", "codex": codex_home(home) / "hooks.json"}


def mailbox_folder() -> Path:
    """What a Codex session must be able to write to archive and answer its mail: ~/.gitmail (the mailbox, the
    folder it is created in, the log beside it), or the mailbox $GITMAIL_DIR names."""
    from gitmail.store.location import MAILBOX_ENV, default_path

    path = default_path()
    return path if os.environ.get(MAILBOX_ENV) else path.parent


def detect_hosts(home: Path) -> list[str]:
    found = []
    if (home / ".claude").is_dir() or shutil.which("claude"):
        found.append("claude")
    if codex_home(home).is_dir() or shutil.which("codex"):
        found.append("codex")
    return found


def plan(
    *,
    home: Path,
    hosts: Sequence[str],
    install: bool,
    moments: Sequence[str] = MOMENTS,
    python: str | None = None,
    codex_version: tuple[int, ...] | None = None,
    trust: bool = True,
    writable: Path | None = None,
) -> Plan:
    """What install (or uninstall) would change, for each host. `writable`: the folder Codex's sandbox is to let
    sessions write (default: the mailbox's, see mailbox_folder)."""
    changes: list[Change | None] = []
    notes: list[str | None] = []
    trusted = None
    folders: list[Path] = []
    paths = settings_paths(home)
    if "claude" in hosts:
        wanted = entries("claude", moments, python=python) if install else {}
        changes.append(_hooks_file(paths["claude"], wanted)[0])
    if "codex" in hosts:
        hooks_json = paths["codex"]
        config = hooks_json.with_name("config.toml")
        wanted = entries("codex", moments, python=python) if install else {}
        hooks_change, moves = _hooks_file(hooks_json, wanted)
        root = (writable or mailbox_folder()) if install else None
        config_change, config_notes = _codex_config(config, install, codex_version, hooks_json, moves, root)
        changes += [hooks_change, config_change]
        notes += config_notes
        config_now = config_change.after if config_change is not None else _read(config)
        if root is not None and codex_config.has_root(config_now or "", root):
            folders.append(root)
        if install and "wake" in moments:
            notes.append(NO_WAKE)
        if install and trust and wanted:
            trusted = CodexTrust(hooks_json, config)
        elif install and wanted:
            notes.append(f"{SILENT_SKIP}: {HOW_TO_TRUST} (/hooks lists them under {hooks_json}).")
    return Plan([c for c in changes if c is not None], [n for n in notes if n], trusted, tuple(folders))


def apply(plan: Plan) -> list[str]:
    """Write the changed files (backing each up first, once), make the folders the plan needs, then trust
    gitmail's Codex hooks if asked; return what was done, one line per file."""
    done = []
    created = {change.path for change in plan.changes if change.before is None}
    for change in plan.changes:
        if not change.changed:
            done.append(f"{change.path}: unchanged")
            continue
        if change.after is None:
            change.path.unlink()
            done.append(f"{change.path}: removed (gitmail had created it)")
            continue
        backup = _backup(change.path)
        _write(change.path, change.after)
        done.append(f"{change.path}: updated" + (f" (backup: {backup.name})" if backup.exists() else ""))
    for folder in plan.folders:
        _make_folder(folder)
    if plan.trust is not None:
        done.append(_trust(plan.trust, backup=plan.trust.config not in created))
    return done


def codex_version() -> tuple[int, ...] | None:
    """The installed Codex CLI's version, or None when there is none to ask."""
    try:
        out = subprocess.run(["codex", "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"(\d+)\.(\d+)\.(\d+)", out)
    return tuple(int(part) for part in found.groups()) if found else None


# -- what a doctor reports --------------------------------------------------------------------------------------


class HostStatus(NamedTuple):
    """gitmail's hooks in one host, as found on this machine."""

    host: str  # "claude" or "codex"
    path: Path  # the settings file that holds (or would hold) the hooks
    installed: bool  # any gitmail hook at all
    command: str | None  # the session-start command (or the first installed, without one)
    runs: bool | None  # whether the installed commands still find a gitmail to run (None: not installed)
    trust: str | None  # Codex only: "trusted" when Codex trusts every gitmail hook, else the first other status
    detail: str  # one line for people
    moments: tuple[str, ...] = ()  # the active moments, as `--moments` names them


def status(home: Path, hosts: Sequence[str] = HOSTS) -> list[HostStatus]:
    """For each host: which of gitmail's moments are installed, whether their commands still run, and (Codex)
    whether Codex trusts them."""
    found = []
    for host, path in settings_paths(home).items():
        if host not in hosts:
            continue
        try:
            text = _read(path)
            document = _load_json(path, text)
        except GitmailError as error:
            found.append(HostStatus(host, path, False, None, None, None, f"{path} cannot be read: {error}"))
            continue
        ours = [(place, entry) for place, entry in _places(document) if isinstance(entry, dict) and _is_ours(entry)]
        if not ours:
            found.append(HostStatus(host, path, False, None, None, None, f"not installed in {path}"))
            continue
        by_moment = {_moment_of(entry): entry for _, entry in reversed(ours)}
        moments = tuple(m for m in MOMENTS if m in by_moment)
        first = str((by_moment.get("start") or ours[0][1])["command"])
        runs, how = _still_runs([str(entry["command"]) for _, entry in ours])
        trust = _trust_state(path, document, [place for place, _ in ours]) if host == "codex" else None
        detail = f"installed in {path} ({', '.join(moments)}); {how}" + (f"; Codex trust: {trust}" if trust else "")
        if host == "codex":
            detail += _sandbox_detail(path.with_name("config.toml"))
        found.append(HostStatus(host, path, True, first, runs, trust, detail, moments))
    return found


def _still_runs(commands: Iterable[str]) -> tuple[bool, str]:
    """Whether the installed commands find a gitmail: each one's interpreter (and hook.sh), else `gitmail` on PATH
    for the commands that fall back to it."""
    falls_back: dict[str, bool] = {}  # interpreter -> whether every command naming it falls back to PATH
    for text in commands:
        words = shlex.split(text, comments=True)
        if words[:1] == ["sh"] and len(words) >= 5:
            if not os.path.exists(words[1]):
                return False, f"{words[1]} is gone (reinstall: gitmail install)"
            falls_back[words[4]] = False
        elif words[1:3] == ["-m", "gitmail"]:
            falls_back[words[0]] = falls_back.get(words[0], True)
    how = "gitmail on PATH"
    for python, fallback in falls_back.items():
        version = _version([python, "-m", "gitmail", "--version"])
        if version:
            how = f"{python} -m gitmail: {version}"
        elif not (fallback and shutil.which("gitmail") and _version(["gitmail", "--version"])):
            return False, f"{python} no longer runs gitmail (reinstall: gitmail install)"
    return True, f"runs ({how})"


def _version(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _trust_state(hooks_json: Path, document: dict[str, Any], places: list[Position]) -> str:
    """How Codex trusts gitmail's hooks: asked through its app-server, else as config.toml records it."""
    try:
        listed = [h for h in codex_trust.list_hooks(hooks_json.parent) if _listed_ours(h, hooks_json)]
        if listed:
            return next((h.trust_status for h in listed if h.trust_status not in ("trusted", "managed")), "trusted")
    except codex_trust.Unavailable:
        pass
    try:
        config = _read(hooks_json.with_name("config.toml")) or ""
        states = []
        for place in places:
            recorded = codex_trust.trusted_hash(config, hooks_json, place)
            expected = _hash_at(document, place)
            states.append("untrusted" if recorded is None else "trusted" if recorded == expected else "modified")
    except (GitmailError, tomlkit.exceptions.TOMLKitError):
        return "unknown"
    return next((s for s in states if s != "trusted"), "trusted")


def _sandbox_detail(config: Path) -> str:
    try:
        text = _read(config) or ""
    except GitmailError:
        return ""
    folder = mailbox_folder()
    if not codex_config.has_root(text, folder):
        return f"; Codex's sandbox does not let sessions write {folder} (reinstall: gitmail install --codex)"
    if not folder.is_dir():
        return f"; Codex's sandbox names {folder}, which is missing: Codex cannot run commands until it exists"
    return f"; sessions may write {folder} from Codex's sandbox"


def _listed_ours(listed: codex_trust.Listed, hooks_json: Path) -> bool:
    return bool(_MARKED.search(listed.command)) and _same_file(listed.source_path, hooks_json)


def _same_file(recorded: str, path: Path) -> bool:
    return bool(recorded) and os.path.realpath(recorded) == os.path.realpath(path)


# -- the JSON hook files (same shape for both hosts) -------------------------------------------------------------


def _hooks_file(path: Path, wanted: dict[str, dict[str, Any]]) -> tuple[Change | None, dict[Position, Position | None]]:
    """The change to one hooks file (gitmail's entries made exactly `wanted`: host event -> entry), and where each
    handler it moves goes (None: removed)."""
    before = _read(path)
    if before is None and not wanted:
        return None, {}
    data = _load_json(path, before)
    after_data = _with_hooks(json.loads(json.dumps(data)), wanted, path)
    moves = _moves(data, after_data)
    if after_data == data:
        return (Change(path, before, before) if before is not None else None), moves
    if not after_data and not path.with_name(path.name + BACKUP).exists():
        return Change(path, before, None), moves  # gitmail made this file: uninstall removes it
    after = _edited(before, wanted) if before and before.strip() else None
    if after is None or json.loads(after) != after_data:  # the in-place edit is a courtesy; correctness comes first
        after = _dump_json(after_data, before)
    return Change(path, before, after), moves


def _events(hooks: object, wanted: dict[str, Any]) -> list[str]:
    """The events to look at: those that hold a gitmail entry now, then those that are to."""
    present = {e: groups for e, groups in hooks.items() if isinstance(groups, list)} if isinstance(hooks, dict) else {}
    ours = [e for e, groups in present.items() if e in wanted or any(_has_ours(g) for g in groups)]
    return ours + [e for e in wanted if e not in present]


def _with_hooks(data: dict[str, Any], wanted: dict[str, dict[str, Any]], path: Path) -> dict[str, Any]:
    """The settings as they should be: the model the in-place edit must match. Each of gitmail's entries lives in a
    group of its own with no matcher, so it runs for every source and every tool, including ones hosts add later."""
    had_hooks = "hooks" in data
    hooks = _child(data, "hooks", {}, path)
    removed_any = False
    for event in _events(hooks, wanted):
        had = event in hooks
        groups = _child(hooks, event, [], path)
        kept = _kept_group(groups) if event in wanted else None
        removed = False
        for index, group in reversed(list(enumerate(groups))):
            if index == kept or not _has_ours(group):
                continue
            group["hooks"] = [e for e in group["hooks"] if not _is_ours(e)]
            removed = True
            if not group["hooks"]:
                del groups[index]
        if kept is not None:
            groups[kept] = _group(wanted[event])
        elif event in wanted:
            groups.append(_group(wanted[event]))
        # Containers this edit emptied, or only just made, go; an empty one the user had stays.
        if not groups and (removed or not had):
            del hooks[event]
        removed_any = removed_any or removed
    if not hooks and (removed_any or not had_hooks):
        del data["hooks"]
    return data


def _edited(text: str, wanted: dict[str, dict[str, Any]]) -> str:
    """The same change made in the text itself, so every other byte of the user's file stays as it was."""
    for event in _events(json.loads(text).get("hooks"), wanted):
        text = _edited_event(text, event, wanted.get(event))
    return text


def _edited_event(text: str, event: str, entry: dict[str, Any] | None) -> str:
    groups_node = _event_node(text, event)
    groups = groups_node.value(text) if groups_node is not None else []
    kept = _kept_group(groups) if entry is not None else None
    if kept is not None and entry is not None and groups[kept] != _group(entry):
        assert groups_node is not None
        text = jsonedit.replace(text, groups_node.items[kept], _group(entry))
    for group, handler in reversed(_our_places_in(text, event)):  # last first, so earlier positions stay valid
        if group == kept:
            continue
        groups_node = _event_node(text, event)
        assert groups_node is not None
        handlers = groups_node.items[group].get("hooks")
        assert handlers is not None
        if len(handlers.items) > 1:
            text = jsonedit.remove(text, handlers, handler)
            continue
        text = jsonedit.remove(text, groups_node, group)
        if entry is None and not _event_node(text, event).items:  # type: ignore[union-attr]  # prune what it emptied
            hooks = jsonedit.parse(text).get("hooks")
            assert hooks is not None
            text = jsonedit.remove_member(text, hooks, event)
            root = jsonedit.parse(text)
            hooks = root.get("hooks")
            if hooks is not None and not hooks.members:
                text = jsonedit.remove_member(text, root, "hooks")
    if entry is not None and kept is None:
        root = jsonedit.parse(text)
        hooks_node = root.get("hooks")
        if hooks_node is None:
            return jsonedit.add_member(text, root, "hooks", {event: [_group(entry)]})
        groups_node = hooks_node.get(event)
        if groups_node is None:
            return jsonedit.add_member(text, hooks_node, event, [_group(entry)])
        return jsonedit.append_item(text, groups_node, _group(entry))
    return text


def _kept_group(groups: list[Any]) -> int | None:
    """The first group holding only gitmail's entries: gitmail's own, updated where it stands. An entry of ours
    in a group shared with other hooks is taken out of it instead, since that group's matcher is not ours."""
    return next(
        (i for i, g in enumerate(groups) if _has_ours(g) and all(_is_ours(e) for e in g["hooks"])),
        None,
    )


def _has_ours(group: object) -> bool:
    entries = group.get("hooks") if isinstance(group, dict) else None
    return isinstance(entries, list) and any(_is_ours(e) for e in entries)


def _event_node(text: str, event: str) -> jsonedit.Node | None:
    hooks = jsonedit.parse(text).get("hooks")
    return hooks.get(event) if hooks else None


def _places(document: dict[str, Any]) -> list[tuple[Position, object]]:
    """Every handler with its (event, group, handler) position."""
    hooks = document.get("hooks")
    if not isinstance(hooks, dict):
        return []
    return [
        ((event, g, e), entry)
        for event, groups in hooks.items()
        if isinstance(groups, list)
        for g, group in enumerate(groups)
        for e, entry in enumerate(group.get("hooks", []) if isinstance(group, dict) else [])
    ]


def _our_places_in(text: str, event: str) -> list[tuple[int, int]]:
    """(group, handler) positions of gitmail's entries under this event."""
    return [(g, h) for (e, g, h), entry in _places(json.loads(text)) if e == event and _is_ours(entry)]


def _moves(before: dict[str, Any], after: dict[str, Any]) -> dict[Position, Position | None]:
    """Where each handler of `before` stands in `after`. Under each event, others' handlers keep their order, so
    they pair up in turn; gitmail's keep their position only if updated where they stood."""
    old, new = _places(before), _places(after)
    moves: dict[Position, Position | None] = {}
    for event in dict.fromkeys(p[0] for p, _ in old):
        theirs_before = [p for p, e in old if p[0] == event and not _is_ours(e)]
        theirs_after = [p for p, e in new if p[0] == event and not _is_ours(e)]
        moves.update(zip(theirs_before, theirs_after, strict=True))
    ours_now = {p for p, e in new if _is_ours(e)}
    for position, entry in old:
        if _is_ours(entry):
            moves[position] = position if position in ours_now else None
    return moves


def _hash_at(document: dict[str, Any], place: Position) -> str:
    event, group, handler = place
    found = document["hooks"][event][group]
    return codex_trust.entry_hash(found["hooks"][handler], found.get("matcher"), event)


def _group(entry: dict[str, Any]) -> dict[str, Any]:
    return {"hooks": [entry]}


def _is_ours(entry: object) -> bool:
    return isinstance(entry, dict) and bool(_MARKED.search(str(entry.get("command", ""))))


def _moment_of(entry: object) -> str:
    found = _MARKED.search(str(entry.get("command", ""))) if isinstance(entry, dict) else None
    name = found.group(1) if found else ""
    return {"session-start": "start", "session-end": "end"}.get(name, name)


def _child(parent: dict[str, Any], key: str, default: Any, path: Path) -> Any:
    value = parent.setdefault(key, default)
    if type(value) is not type(default):
        raise GitmailError(f"{path}: '{key}' is not a {type(default).__name__}; fix it or move the file away")
    return value


def _load_json(path: Path, text: str | None) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as error:
        raise GitmailError(
            f"{path} is not valid JSON ({error}); fix it or move it away — nothing was changed"
        ) from None
    if not isinstance(data, dict):
        raise GitmailError(f"{path} does not hold a JSON object; fix it or move it away — nothing was changed")
    return data


def _dump_json(data: dict[str, Any], like: str | None) -> str:
    """JSON in the file's own style: its indentation, its way with non-ASCII text, its final newline."""
    indent: str | int = 2
    if like:
        found = re.search(r"^([ \t]+)\S", like, re.MULTILINE)
        indent = found.group(1) if found else 2
    ascii_only = bool(like) and "\\u" in (like or "") and not any(ord(c) > 127 for c in like or "")
    text = json.dumps(data, indent=indent, ensure_ascii=ascii_only)
    return text + ("\n" if like is None or like.endswith("\n") else "")


# -- Codex's config.toml: the feature flag, the sandbox's writable root, the hooks' trust ------------------------


def _codex_config(
    path: Path,
    install: bool,
    version: tuple[int, ...] | None,
    hooks_json: Path,
    moves: dict[Position, Position | None],
    root: Path | None,
) -> tuple[Change | None, list[str]]:
    """The change to config.toml (see gitmail.codex_config), with the trust of moved hooks carried along."""
    before = _read(path)
    text = before or ""
    codex_config.parsed(text, path)
    notes: list[str | None] = []
    if install:
        after, note = codex_config.with_flag(text, version, path)
        notes.append(note)
    else:
        after = codex_config.without_flag(text)
    if root is not None:
        after, note = codex_config.with_root(after, root, path)
        notes.append(note)
    else:
        after = codex_config.without_root(after)
    if any(old != new for old, new in moves.items()):
        carried = codex_trust.moved(after, hooks_json, moves)
        after = codex_config.pruned(carried) if carried != after else after
    if after.strip():  # a table taken out leaves the blank line that led to it: end the file as it ended
        after = after.rstrip("\n") + "\n" * (len(text) - len(text.rstrip("\n")) or after.endswith("\n"))
    found = [n for n in notes if n]
    if after == text:
        return None, found
    if before is not None and not after.strip() and not path.with_name(path.name + BACKUP).exists():
        return Change(path, before, None), found  # gitmail made this file: uninstall removes it
    return Change(path, before, after), found


def _trust(trust: CodexTrust, *, backup: bool) -> str:
    """Trust gitmail's Codex hooks: through Codex's app-server, else as Codex computes it. One line says what was
    done. `backup`: config.toml is the user's (not made by this install), so it is backed up before Codex or
    gitmail write trust into it."""
    text = _read(trust.hooks_json) or "{}"
    document = json.loads(text)
    places = [place for place, entry in _places(document) if _is_ours(entry)]
    if not places:
        return f"{trust.hooks_json}: gitmail's hooks are not there to trust"
    try:
        listed = [h for h in codex_trust.list_hooks(trust.hooks_json.parent) if _listed_ours(h, trust.hooks_json)]
        if len(listed) < len(places):
            raise codex_trust.Unavailable("Codex does not list all of gitmail's hooks")
        untrusted = {h.key: h.current_hash for h in listed if h.trust_status not in ("trusted", "managed")}
        if not untrusted:
            return f"{trust.config}: Codex already trusts gitmail's hooks"
        if backup:
            _backup(trust.config)
        after = codex_trust.trust(untrusted, trust.hooks_json.parent)
        if not all(h.trust_status == "trusted" for h in after if h.key in untrusted):
            raise codex_trust.Unavailable("Codex did not take the trust")
        how = "through Codex's app-server, as its /hooks review does"
    except codex_trust.Unavailable as why:
        try:
            before = _read(trust.config) or ""
            after_text = before
            for place in places:
                after_text = codex_trust.with_trust(after_text, trust.hooks_json, place, _hash_at(document, place))
            if after_text == before:
                return f"{trust.config}: Codex already trusts gitmail's hooks"
            if backup:
                _backup(trust.config)
            _write(trust.config, after_text)
        except (GitmailError, OSError, ValueError, tomlkit.exceptions.TOMLKitError) as error:
            return f"note: could not trust gitmail's hooks for Codex ({error}). {SILENT_SKIP}: {HOW_TO_TRUST}."
        how = f"with the hash Codex computes ({why})"
    return f"{trust.config}: trusted gitmail's hooks for Codex {how}. {SILENT_SKIP}; --no-trust leaves that to you."


# -- files ------------------------------------------------------------------------------------------------------


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise GitmailError(f"cannot read {path}: {error}") from None


def _backup(path: Path) -> Path:
    """The file as it was before gitmail first changed it (made now, if it exists and has none yet)."""
    backup = path.with_name(path.name + BACKUP)
    if path.exists() and not backup.exists():
        shutil.copy2(path, backup)
    return backup


def _make_folder(folder: Path) -> None:
    """A folder Codex's sandbox names: it must exist, or every command the sandbox runs fails. The mailbox that
    $GITMAIL_DIR names is created whole, since an empty folder there is no mailbox."""
    from gitmail.store.location import default_path
    from gitmail.store.repository import Store

    try:
        if folder == default_path():
            Store(folder).create()
        else:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as error:
        raise GitmailError(f"cannot create {folder}: {error.strerror or error}") from None


def _write(path: Path, text: str) -> None:
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
