"""Install and uninstall the session-start hook in Claude Code and Codex, and report on it.

Entries are marked so uninstall removes exactly them; a second install changes no byte; every unrelated key, hook
and formatting choice is kept; each file is backed up before its first change and written atomically; a settings
file that does not parse is refused and left untouched. Changes are planned for every host first and written only
if all of them could be planned. For Codex, the hook is also trusted the way Codex records trust (see
gitmail.codex_trust), and the trust of the user's own hooks moves with them when gitmail's entry is removed.
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
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import tomlkit
from tomlkit.items import InlineTable

from gitmail import codex_trust, jsonedit
from gitmail.codex_trust import Position
from gitmail.errors import GitmailError

MARK = "# gitmail:session-start"  # a shell comment ending the command: how uninstall knows its own entries
TIMEOUT = 10  # seconds; the hook itself waits at most a few for a busy mailbox
HOSTS = ("claude", "codex")
BACKUP = ".gitmail-backup"  # the file as it was before gitmail first changed it
TOML_MARK = "added by gitmail"
INLINE_MARK = "gitmail added codex_hooks"  # an inline table has no room for a comment per key
CODEX_HOOKS_DEFAULT_ON = (0, 130)  # older Codex releases run hooks only behind [features] codex_hooks
SILENT_SKIP = "Codex skips an untrusted hook without a word, in `codex exec` too"
HOW_TO_TRUST = "open /hooks in Codex and trust gitmail's hook"
TRUST_PREVIEW = "would trust gitmail's hook for Codex, as its /hooks review does (--no-trust leaves that to you)"


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
    """gitmail's Codex hook, to be trusted once its hooks.json is written."""

    hooks_json: Path
    config: Path


class Plan(NamedTuple):
    changes: list[Change]
    notes: list[str]
    trust: CodexTrust | None = None


def hook_command(python: str | None = None) -> str:
    """The installed command: this interpreter (so no virtualenv needs to be active), then `gitmail` on PATH;
    it ends in `true` so even a vanished installation cannot fail a session."""
    interpreter = shlex.quote(python or sys.executable)
    return f"{interpreter} -m gitmail hook session-start || gitmail hook session-start || true {MARK}"


def codex_home(home: Path) -> Path:
    """Where Codex keeps its settings: $CODEX_HOME, as Codex reads it, else ~/.codex."""
    configured = os.environ.get("CODEX_HOME")
    return Path(configured).expanduser().absolute() if configured else home / ".codex"


def settings_paths(home: Path) -> dict[str, Path]:
    """Each host's file holding gitmail's hook."""
    return {"claude": home / ".claude" / "settings.json", "codex": codex_home(home) / "hooks.json"}


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
    command: str | None = None,
    codex_version: tuple[int, ...] | None = None,
    trust: bool = True,
) -> Plan:
    command = command or hook_command()
    changes: list[Change | None] = []
    notes: list[str | None] = []
    trusted = None
    paths = settings_paths(home)
    if "claude" in hosts:
        changes.append(_hooks_file(paths["claude"], install, command)[0])
    if "codex" in hosts:
        hooks_json = paths["codex"]
        config = hooks_json.with_name("config.toml")
        hooks_change, moves = _hooks_file(hooks_json, install, command)
        config_change, note = _codex_config(config, install, codex_version, hooks_json, moves)
        changes += [hooks_change, config_change]
        notes.append(note)
        if install and trust:
            trusted = CodexTrust(hooks_json, config)
        elif install:
            notes.append(f"{SILENT_SKIP}: {HOW_TO_TRUST} (/hooks lists it under {hooks_json}).")
    return Plan([c for c in changes if c is not None], [n for n in notes if n], trusted)


def apply(changes: Sequence[Change], trust: CodexTrust | None = None) -> list[str]:
    """Write the changed files (backing each up first, once), then trust gitmail's Codex hook if asked; return
    what was done, one line per file."""
    done = []
    for change in changes:
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
    if trust is not None:
        done.append(_trust(trust))
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
    """gitmail's hook in one host, as found on this machine."""

    host: str  # "claude" or "codex"
    path: Path  # the settings file that holds (or would hold) the hook
    installed: bool
    command: str | None  # the installed command (the first, if several)
    runs: bool | None  # whether that command still finds a gitmail to run (None: not installed)
    trust: str | None  # Codex only: "trusted", "untrusted", "modified", "disabled" or "unknown"
    detail: str  # one line for people


def status(home: Path, hosts: Sequence[str] = HOSTS) -> list[HostStatus]:
    """For each host: is gitmail's hook installed, does its command still run, and (Codex) is it trusted."""
    found = []
    for host, path in settings_paths(home).items():
        if host not in hosts:
            continue
        try:
            text = _read(path)
            places = _our_places(text) if text and text.strip() else []
        except (GitmailError, ValueError, AttributeError) as error:
            found.append(HostStatus(host, path, False, None, None, None, f"{path} cannot be read: {error}"))
            continue
        if not places:
            found.append(HostStatus(host, path, False, None, None, None, f"not installed in {path}"))
            continue
        assert text is not None
        group, entry = places[0]
        document = json.loads(text)
        command = str(document["hooks"]["SessionStart"][group]["hooks"][entry]["command"])
        runs, how = _still_runs(command)
        trust = _trust_state(path, (group, entry), document) if host == "codex" else None
        detail = f"installed in {path}; {how}" + (f"; Codex trust: {trust}" if trust else "")
        found.append(HostStatus(host, path, True, command, runs, trust, detail))
    return found


def _still_runs(command: str) -> tuple[bool, str]:
    """Whether the installed command finds a gitmail: its interpreter first, then `gitmail` on PATH."""
    words = shlex.split(command, comments=True)
    attempts = []
    if words[1:3] == ["-m", "gitmail"]:
        attempts.append(([words[0], "-m", "gitmail", "--version"], f"{words[0]} -m gitmail"))
    if shutil.which("gitmail"):
        attempts.append((["gitmail", "--version"], "gitmail on PATH"))
    for argv, label in attempts:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode == 0:
            return True, f"runs ({label}: {done.stdout.strip()})"
    return False, "its command no longer finds gitmail (reinstall: gitmail install)"


def _trust_state(hooks_json: Path, position: Position, document: dict[str, Any]) -> str:
    try:
        for listed in codex_trust.list_hooks(hooks_json.parent):
            if listed.command.rstrip().endswith(MARK) and _same_file(listed.source_path, hooks_json):
                return listed.trust_status
    except codex_trust.Unavailable:
        pass
    group = document["hooks"]["SessionStart"][position[0]]
    expected = codex_trust.entry_hash(group["hooks"][position[1]], group.get("matcher"))
    try:
        recorded = codex_trust.trusted_hash(_read(hooks_json.with_name("config.toml")) or "", hooks_json, position)
    except (GitmailError, tomlkit.exceptions.TOMLKitError):
        return "unknown"
    return "untrusted" if recorded is None else "trusted" if recorded == expected else "modified"


def _same_file(recorded: str, path: Path) -> bool:
    return bool(recorded) and os.path.realpath(recorded) == os.path.realpath(path)


# -- the JSON hook files (same shape for both hosts) -------------------------------------------------------------


def _hooks_file(path: Path, install: bool, command: str) -> tuple[Change | None, dict[Position, Position | None]]:
    """The change to one hooks file, and where each SessionStart handler it moves goes (None: removed)."""
    before = _read(path)
    if before is None and not install:
        return None, {}
    data = _load_json(path, before)
    wanted = _with_hook(json.loads(json.dumps(data)), install, command, path)
    moves = _moves(data, wanted)
    if wanted == data:
        return (Change(path, before, before) if before is not None else None), moves
    if not wanted and not path.with_name(path.name + BACKUP).exists():
        return Change(path, before, None), moves  # gitmail made this file: uninstall removes it
    after = _edited(before, install, command) if before and before.strip() else None
    if after is None or json.loads(after) != wanted:  # the in-place edit is a courtesy; correctness comes first
        after = _dump_json(wanted, before)
    return Change(path, before, after), moves


def _with_hook(data: dict[str, Any], install: bool, command: str, path: Path) -> dict[str, Any]:
    """The settings as they should be: the model the in-place edit must match. gitmail's entry lives in a group
    of its own with no matcher, so it runs for every way a session starts, including ones hosts add later."""
    had = ("hooks" in data, "SessionStart" in data.get("hooks", {}))
    hooks = _child(data, "hooks", {}, path)
    groups = _child(hooks, "SessionStart", [], path)
    ours = _group(_entry(command))
    kept = _kept_group(groups) if install else None
    removed = False
    for index, group in reversed(list(enumerate(groups))):
        if index == kept or not _has_ours(group):
            continue
        group["hooks"] = [e for e in group["hooks"] if not _is_ours(e)]
        removed = True
        if not group["hooks"]:
            del groups[index]
    if kept is not None:
        groups[kept] = ours
    elif install:
        groups.append(ours)
    # Containers this edit emptied, or only just made, go; an empty one the user had stays.
    if not groups and (removed or not had[1]):
        del hooks["SessionStart"]
    if not hooks and (removed or not had[0]):
        del data["hooks"]
    return data


def _edited(text: str, install: bool, command: str) -> str:
    """The same change made in the text itself, so every other byte of the user's file stays as it was."""
    ours = _group(_entry(command))
    session = _session(text)
    groups = session.value(text) if session is not None else []
    kept = _kept_group(groups) if install else None
    if kept is not None and groups[kept] != ours:
        assert session is not None
        text = jsonedit.replace(text, session.items[kept], ours)
    for group, entry in reversed(_our_places(text)):  # last first, so earlier positions stay valid
        if group == kept:
            continue
        session = _session(text)
        assert session is not None
        entries = session.items[group].get("hooks")
        assert entries is not None
        if len(entries.items) > 1:
            text = jsonedit.remove(text, entries, entry)
            continue
        text = jsonedit.remove(text, session, group)
        if not install and not _session(text).items:  # type: ignore[union-attr]  # prune what this emptied
            hooks = jsonedit.parse(text).get("hooks")
            assert hooks is not None
            text = jsonedit.remove_member(text, hooks, "SessionStart")
            root = jsonedit.parse(text)
            hooks = root.get("hooks")
            if hooks is not None and not hooks.members:
                text = jsonedit.remove_member(text, root, "hooks")
    if install and kept is None:
        root = jsonedit.parse(text)
        hooks_node = root.get("hooks")
        if hooks_node is None:
            return jsonedit.add_member(text, root, "hooks", {"SessionStart": [ours]})
        session = hooks_node.get("SessionStart")
        if session is None:
            return jsonedit.add_member(text, hooks_node, "SessionStart", [ours])
        return jsonedit.append_item(text, session, ours)
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


def _session(text: str) -> jsonedit.Node | None:
    hooks = jsonedit.parse(text).get("hooks")
    return hooks.get("SessionStart") if hooks else None


def _places(document: dict[str, Any]) -> list[tuple[Position, object]]:
    """Every SessionStart handler with its (group, handler) position."""
    hooks = document.get("hooks")
    groups = hooks.get("SessionStart") if isinstance(hooks, dict) else None
    if not isinstance(groups, list):
        return []
    return [
        ((g, e), entry)
        for g, group in enumerate(groups)
        for e, entry in enumerate(group.get("hooks", []) if isinstance(group, dict) else [])
    ]


def _our_places(text: str) -> list[Position]:
    """(group, entry) positions of gitmail's entries in SessionStart."""
    return [position for position, entry in _places(json.loads(text)) if _is_ours(entry)]


def _moves(before: dict[str, Any], after: dict[str, Any]) -> dict[Position, Position | None]:
    """Where each SessionStart handler of `before` stands in `after`. Others' handlers keep their order, so they
    pair up in turn; gitmail's keep their position only if updated where they stood."""
    old, new = _places(before), _places(after)
    theirs = zip([p for p, e in old if not _is_ours(e)], [p for p, e in new if not _is_ours(e)], strict=True)
    moves: dict[Position, Position | None] = dict(theirs)
    ours_now = {p for p, e in new if _is_ours(e)}
    for position, entry in old:
        if _is_ours(entry):
            moves[position] = position if position in ours_now else None
    return moves


def _group(entry: dict[str, Any]) -> dict[str, Any]:
    return {"hooks": [entry]}


def _entry(command: str) -> dict[str, Any]:
    return {"type": "command", "command": command, "timeout": TIMEOUT}


def _is_ours(entry: object) -> bool:
    return isinstance(entry, dict) and str(entry.get("command", "")).rstrip().endswith(MARK)


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


# -- Codex's config.toml: the old feature flag and the hooks' trust ----------------------------------------------

_FLAG_LINE = re.compile(rf"^[ \t]*(?:features\.)?codex_hooks[ \t]*=[ \t]*true[ \t]*# {TOML_MARK}[ \t]*(?:\n|$)", re.M)
_OUR_TABLE = re.compile(rf"\n?^\[features\][ \t]*# {TOML_MARK}[ \t]*\n(?=\s*(?:\[|\Z))", re.M)


def _codex_config(
    path: Path,
    install: bool,
    version: tuple[int, ...] | None,
    hooks_json: Path,
    moves: dict[Position, Position | None],
) -> tuple[Change | None, str | None]:
    before = _read(path)
    text = before or ""
    try:
        document = tomlkit.parse(text)
        tomllib.loads(text)  # what Codex itself would refuse, gitmail refuses too
    except (tomlkit.exceptions.TOMLKitError, tomllib.TOMLDecodeError) as error:
        raise GitmailError(
            f"{path} is not valid TOML ({error}); fix it or move it away — nothing was changed"
        ) from None
    after, note = (_with_flag if install else _without_flag)(text, document, version, path)
    if any(old != new for old, new in moves.items()):
        carried = codex_trust.moved(after, hooks_json, moves)
        after = _pruned(carried) if carried != after else after
    if after.strip():  # a table taken out leaves the blank line that led to it: end the file as it ended
        after = after.rstrip("\n") + "\n" * (len(text) - len(text.rstrip("\n")) or after.endswith("\n"))
    if after == text:
        return None, note
    if before is not None and not after.strip() and not path.with_name(path.name + BACKUP).exists():
        return Change(path, before, None), note  # gitmail made this file: uninstall removes it
    return Change(path, before, after), note


def _with_flag(
    text: str, document: tomlkit.TOMLDocument, version: tuple[int, ...] | None, path: Path
) -> tuple[str, str | None]:
    features = document.get("features")
    enabled = features.get("hooks", features.get("codex_hooks")) if isinstance(features, dict) else None
    if enabled is False:
        return text, f"{path} turns Codex hooks off ([features]); gitmail's hook will not run until they are on."
    if enabled is True or _FLAG_LINE.search(text):
        return text, None
    if version is None:
        return text, "Codex was not found to ask its version; releases before 0.130 need [features] codex_hooks = true."
    if version >= CODEX_HOOKS_DEFAULT_ON:
        return text, None
    if features is None:
        block = f"[features] # {TOML_MARK}\ncodex_hooks = true # {TOML_MARK}\n"
        after = text + ("\n" if text and not text.endswith("\n") else "") + ("\n" if text.strip() else "") + block
    elif isinstance(features, InlineTable):
        features["codex_hooks"] = True
        features.comment(INLINE_MARK)
        after = tomlkit.dumps(document)
    else:
        flag = tomlkit.item(True)
        flag.comment(TOML_MARK)
        features["codex_hooks"] = flag
        after = tomlkit.dumps(document)
    if tomllib.loads(after).get("features", {}).get("codex_hooks") is not True:
        raise GitmailError(f"{path}: could not add [features] codex_hooks = true safely; add it by hand")
    return after, None


def _without_flag(
    text: str, document: tomlkit.TOMLDocument, version: tuple[int, ...] | None, path: Path
) -> tuple[str, str | None]:
    features = document.get("features")
    if isinstance(features, InlineTable) and INLINE_MARK in features.trivia.comment:
        del features["codex_hooks"]
        features.trivia.comment, features.trivia.comment_ws = "", ""
        return tomlkit.dumps(document), None
    after = _FLAG_LINE.sub("", text, count=1)
    after = _OUR_TABLE.sub("", after, count=1)
    return after, None


def _pruned(text: str) -> str:
    """Drop a [hooks.state] (and [hooks]) that moving trust left empty."""
    document = tomlkit.parse(text)
    hooks = document.get("hooks")
    if isinstance(hooks, dict) and isinstance(hooks.get("state"), dict) and not hooks["state"]:
        del hooks["state"]
        if not hooks:
            del document["hooks"]
        return tomlkit.dumps(document)
    return text


def _trust(trust: CodexTrust) -> str:
    """Trust gitmail's Codex hook: through Codex's app-server, else as Codex computes it. One line says what was
    done."""
    text = _read(trust.hooks_json) or "{}"
    places = _our_places(text)
    if not places:
        return f"{trust.hooks_json}: gitmail's hook is not there to trust"
    position = places[0]
    try:
        listed = [
            h
            for h in codex_trust.list_hooks(trust.hooks_json.parent)
            if h.command.rstrip().endswith(MARK) and _same_file(h.source_path, trust.hooks_json)
        ]
        if not listed:
            raise codex_trust.Unavailable("Codex does not list gitmail's hook")
        if listed[0].trust_status in ("trusted", "managed"):
            return f"{trust.config}: Codex already trusts gitmail's hook"
        _backup(trust.config)
        after = codex_trust.trust({listed[0].key: listed[0].current_hash}, trust.hooks_json.parent)
        if not any(h.key == listed[0].key and h.trust_status == "trusted" for h in after):
            raise codex_trust.Unavailable("Codex did not take the trust")
        how = "through Codex's app-server, as its /hooks review does"
    except codex_trust.Unavailable as why:
        group = json.loads(text)["hooks"]["SessionStart"][position[0]]
        digest = codex_trust.entry_hash(group["hooks"][position[1]], group.get("matcher"))
        try:
            before = _read(trust.config) or ""
            after_text = codex_trust.with_trust(before, trust.hooks_json, position, digest)
            if after_text == before:
                return f"{trust.config}: Codex already trusts gitmail's hook"
            _backup(trust.config)
            _write(trust.config, after_text)
        except (GitmailError, OSError, ValueError, tomlkit.exceptions.TOMLKitError) as error:
            return f"note: could not trust gitmail's hook for Codex ({error}). {SILENT_SKIP}: {HOW_TO_TRUST}."
        how = f"with the hash Codex computes ({why})"
    return f"{trust.config}: trusted gitmail's hook for Codex {how}. {SILENT_SKIP}; --no-trust leaves that to you."


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
