"""Install and uninstall the session-start hook in Claude Code and Codex.

Entries are marked so uninstall removes exactly them; a second install changes no byte; every unrelated key, hook
and formatting choice is kept; each file is backed up before its first change and written atomically; a settings
file that does not parse is refused and left untouched. Changes are planned for every host first and written only
if all of them could be planned.
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

from gitmail import jsonedit
from gitmail.errors import GitmailError

MARK = "# gitmail:session-start"  # a shell comment ending the command: how uninstall knows its own entries
MATCHER = "startup|resume|clear|compact"
TIMEOUT = 10  # seconds; the hook itself waits at most a few for a busy mailbox
HOSTS = ("claude", "codex")
BACKUP = ".gitmail-backup"  # the file as it was before gitmail first changed it
TOML_MARK = "# added by gitmail"
FEATURE_BLOCK = f"\n[features] {TOML_MARK}\ncodex_hooks = true {TOML_MARK}\n"
FEATURE_LINE = f"codex_hooks = true {TOML_MARK}\n"
CODEX_HOOKS_DEFAULT_ON = (0, 130)  # older Codex releases run hooks only behind [features] codex_hooks


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


class Plan(NamedTuple):
    changes: list[Change]
    notes: list[str]


def hook_command(python: str | None = None) -> str:
    """The installed command: this interpreter (so no virtualenv needs to be active), then `gitmail` on PATH;
    it ends in `true` so even a vanished installation cannot fail a session."""
    interpreter = shlex.quote(python or sys.executable)
    return f"{interpreter} -m gitmail hook session-start || gitmail hook session-start || true {MARK}"


def detect_hosts(home: Path) -> list[str]:
    found = []
    if (home / ".claude").is_dir() or shutil.which("claude"):
        found.append("claude")
    if (home / ".codex").is_dir() or shutil.which("codex"):
        found.append("codex")
    return found


def plan(
    *,
    home: Path,
    hosts: Sequence[str],
    install: bool,
    command: str | None = None,
    codex_version: tuple[int, ...] | None = None,
) -> Plan:
    command = command or hook_command()
    changes: list[Change | None] = []
    notes: list[str | None] = []
    if "claude" in hosts:
        changes.append(_hooks_file(home / ".claude" / "settings.json", install, command))
    if "codex" in hosts:
        changes.append(_hooks_file(home / ".codex" / "hooks.json", install, command))
        feature, note = _codex_feature(home / ".codex" / "config.toml", install, codex_version)
        changes.append(feature)
        notes.append(note)
        if install:
            notes.append("Codex asks you to trust a new hook once: open /hooks in Codex and trust gitmail's.")
    return Plan([c for c in changes if c is not None], [n for n in notes if n])


def apply(changes: Sequence[Change]) -> list[str]:
    """Write the changed files (backing each up first, once); return what was done, one line per file."""
    done = []
    for change in changes:
        if not change.changed:
            done.append(f"{change.path}: unchanged")
            continue
        if change.after is None:
            change.path.unlink()
            done.append(f"{change.path}: removed (gitmail had created it)")
            continue
        backup = change.path.with_name(change.path.name + BACKUP)
        if change.before is not None and not backup.exists():
            shutil.copy2(change.path, backup)
        _write(change.path, change.after)
        done.append(f"{change.path}: updated" + (f" (backup: {backup.name})" if backup.exists() else ""))
    return done


def codex_version() -> tuple[int, ...] | None:
    """The installed Codex CLI's version, or None when there is none to ask."""
    try:
        out = subprocess.run(["codex", "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"(\d+)\.(\d+)\.(\d+)", out)
    return tuple(int(part) for part in found.groups()) if found else None


# -- the JSON hook files (same shape for both hosts) -------------------------------------------------------------


def _hooks_file(path: Path, install: bool, command: str) -> Change | None:
    before = _read(path)
    if before is None and not install:
        return None
    data = _load_json(path, before)
    wanted = _with_hook(json.loads(json.dumps(data)), install, command, path)
    if wanted == data:
        return Change(path, before, before) if before is not None else None
    if not wanted and not path.with_name(path.name + BACKUP).exists():
        return Change(path, before, None)  # gitmail made this file: uninstall removes it
    after = _edited(before, install, command) if before and before.strip() else None
    if after is None or json.loads(after) != wanted:  # the in-place edit is a courtesy; correctness comes first
        after = _dump_json(wanted, before)
    return Change(path, before, after)


def _with_hook(data: dict[str, Any], install: bool, command: str, path: Path) -> dict[str, Any]:
    """The settings as they should be: the model the in-place edit must match."""
    had = ("hooks" in data, "SessionStart" in data.get("hooks", {}))
    hooks = _child(data, "hooks", {}, path)
    groups = _child(hooks, "SessionStart", [], path)
    ours = _entry(command)
    found = removed = False
    for group in list(groups):
        entries = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(entries, list) or not any(_is_ours(e) for e in entries):
            continue
        if install and not found:  # the first of our entries stays where it is, brought up to date
            found = True
            first = next(i for i, e in enumerate(entries) if _is_ours(e))
            entries[:] = [ours if i == first else e for i, e in enumerate(entries) if i == first or not _is_ours(e)]
            continue
        entries[:] = [e for e in entries if not _is_ours(e)]
        removed = True
        if not entries:
            groups.remove(group)
    if install and not found:
        groups.append(_group(ours))
    # Containers this edit emptied, or only just made, go; an empty one the user had stays.
    if not groups and (removed or not had[1]):
        del hooks["SessionStart"]
    if not hooks and (removed or not had[0]):
        del data["hooks"]
    return data


def _edited(text: str, install: bool, command: str) -> str:
    """The same change made in the text itself, so every other byte of the user's file stays as it was."""
    ours = _entry(command)
    places = _our_places(text)
    if install and not places:
        root = jsonedit.parse(text)
        hooks = root.get("hooks")
        if hooks is None:
            return jsonedit.add_member(text, root, "hooks", {"SessionStart": [_group(ours)]})
        session = hooks.get("SessionStart")
        if session is None:
            return jsonedit.add_member(text, hooks, "SessionStart", [_group(ours)])
        return jsonedit.append_item(text, session, _group(ours))
    if install:
        group, entry = places[0]
        node = _session(text).items[group].get("hooks").items[entry]  # type: ignore[union-attr]
        if node.value(text) != ours:
            text = jsonedit.replace(text, node, ours)
        places = places[1:]
    for group, entry in reversed(places):  # last first, so earlier positions stay valid
        session = _session(text)
        entries = session.items[group].get("hooks")
        assert entries is not None
        text = (
            jsonedit.remove(text, entries, entry) if len(entries.items) > 1 else jsonedit.remove(text, session, group)
        )
        if not _session(text).items:  # prune what this removal emptied
            hooks = jsonedit.parse(text).get("hooks")
            assert hooks is not None
            text = jsonedit.remove_member(text, hooks, "SessionStart")
            root = jsonedit.parse(text)
            hooks = root.get("hooks")
            if hooks is not None and not hooks.members:
                text = jsonedit.remove_member(text, root, "hooks")
    return text


def _session(text: str) -> jsonedit.Node:
    hooks = jsonedit.parse(text).get("hooks")
    session = hooks.get("SessionStart") if hooks else None
    assert session is not None
    return session


def _our_places(text: str) -> list[tuple[int, int]]:
    """(group, entry) positions of gitmail's entries in SessionStart."""
    groups = json.loads(text).get("hooks", {}).get("SessionStart", [])
    return [
        (g, e)
        for g, group in enumerate(groups)
        for e, entry in enumerate(group.get("hooks", []) if isinstance(group, dict) else [])
        if _is_ours(entry)
    ]


def _group(entry: dict[str, Any]) -> dict[str, Any]:
    return {"matcher": MATCHER, "hooks": [entry]}


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


# -- Codex's feature flag ---------------------------------------------------------------------------------------


def _codex_feature(path: Path, install: bool, version: tuple[int, ...] | None) -> tuple[Change | None, str | None]:
    before = _read(path)
    text = before or ""
    try:
        features = tomllib.loads(text).get("features", {})
    except tomllib.TOMLDecodeError as error:
        raise GitmailError(
            f"{path} is not valid TOML ({error}); fix it or move it away — nothing was changed"
        ) from None
    ours = FEATURE_BLOCK in text or FEATURE_LINE in text
    if not install:
        after = text.replace(FEATURE_BLOCK, "", 1) if FEATURE_BLOCK in text else text.replace(FEATURE_LINE, "", 1)
        return (Change(path, before, after) if ours else None), None
    enabled = features.get("hooks", features.get("codex_hooks")) if isinstance(features, dict) else None
    if enabled is False:
        return None, f"{path} turns Codex hooks off ([features]); gitmail's hook will not run until they are on."
    if ours or enabled is True:
        return None, None
    if version is None:
        return None, "Codex was not found to ask its version; releases before 0.130 need [features] codex_hooks = true."
    if version >= CODEX_HOOKS_DEFAULT_ON:
        return None, None
    header = re.search(r"^\[features\][^\n]*\n", text, re.MULTILINE)
    if header:
        after = text[: header.end()] + FEATURE_LINE + text[header.end() :]
    else:
        after = (text if not text or text.endswith("\n") else text + "\n") + FEATURE_BLOCK
    if tomllib.loads(after).get("features", {}).get("codex_hooks") is not True:
        raise GitmailError(f"{path}: could not add [features] codex_hooks = true safely; add it by hand")
    return Change(path, before, after), None


# -- files ------------------------------------------------------------------------------------------------------


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise GitmailError(f"cannot read {path}: {error}") from None


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
