"""gitmail's hooks in Codex: where Codex keeps them ($CODEX_HOME/hooks.json), the edits to its config.toml that go
with them (`codex_config`: the feature flag older releases need, the mailbox's folder writable from the
workspace-write sandbox), trusting them as Codex records trust (`codex_trust`), and what `doctor` is told of that
trust and the sandbox.

Codex runs a hook only once it is trusted, and trust is kept by a hook's position, so when gitmail's entries come or
go the trust of the user's own hooks moves with them. Codex has no hook for an idle session: gitmail wakes one by
queueing it a turn instead (see gitmail.waking).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomlkit

from gitmail.errors import GitmailError
from gitmail.install import codex_config, codex_trust, hook_settings
from gitmail.install.hook_commands import MOMENTS, entries, marked_moment
from gitmail.install.settings import Change, Plan, Step, backup, gitmail_made, read, write

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gitmail.install.hook_settings import Moves, Position

SILENT_SKIP = "Codex skips an untrusted hook without a word, in `codex exec` too"
HOW_TO_TRUST = "open /hooks in Codex and trust gitmail's hooks"
TRUST_PREVIEW = "would trust gitmail's hooks for Codex, as its /hooks review does (--no-trust leaves that to you)"
NO_WAKE = (
    "Codex has no hook for a session that waits for its user: gitmail wakes one by queueing it a turn with the Codex "
    "that runs it (`codex queue`), which needs its window open; `gitmail doctor` says which sessions can be woken"
)


def codex_home(home: Path) -> Path:
    """Where Codex keeps its settings: $CODEX_HOME, as Codex reads it, else ~/.codex."""
    configured = os.environ.get("CODEX_HOME")
    return Path(configured).expanduser().absolute() if configured else home / ".codex"


def hooks_path(home: Path) -> Path:
    return codex_home(home) / "hooks.json"


def found(home: Path) -> bool:
    return codex_home(home).is_dir() or shutil.which("codex") is not None


def version() -> tuple[int, ...] | None:
    """The installed Codex CLI's version, or None when there is none to ask."""
    try:
        out = subprocess.run(["codex", "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    matched = re.search(r"(\d+)\.(\d+)\.(\d+)", out)
    return tuple(int(part) for part in matched.groups()) if matched else None


def mailbox_folder() -> Path:
    """What a Codex session must be able to write to archive and answer its mail: ~/.gitmail (the mailbox, the
    folder it is created in, the log beside it), or the mailbox $GITMAIL_DIR names."""
    from gitmail.store.location import MAILBOX_ENV, default_path

    path = default_path()
    return path if os.environ.get(MAILBOX_ENV) else path.parent


def plan(
    *,
    home: Path,
    install: bool,
    moments: Sequence[str] = MOMENTS,
    python: str | None = None,
    codex_version: tuple[int, ...] | None = None,
    trust: bool = True,
    writable: Path | None = None,
) -> Plan:
    """What install (or uninstall) would change for Codex: hooks.json, config.toml, the folder its sandbox is to let
    sessions write (`writable`, default: the mailbox's, see mailbox_folder), and the trust of gitmail's hooks."""
    hooks_json = hooks_path(home)
    config = hooks_json.with_name("config.toml")
    wanted = entries("codex", moments, python=python) if install else {}
    hooks_change, moves = hook_settings.planned(hooks_json, wanted)
    root = (writable or mailbox_folder()) if install else None
    config_change, notes = _config_change(config, install, codex_version, hooks_json, moves, root)
    steps = []
    config_now = config_change.after if config_change is not None else read(config)
    if root is not None and codex_config.has_root(config_now or "", root):
        steps.append(Step(partial(_make_folder, root)))
    if install and "wake" in moments:
        notes.append(NO_WAKE)
    if install and trust and wanted:
        mine = config_change is not None and config_change.before is None  # created by this install: no backup
        steps.append(Step(partial(trust_hooks, hooks_json, config, back_up=not mine), TRUST_PREVIEW))
    elif install and wanted:
        notes.append(f"{SILENT_SKIP}: {HOW_TO_TRUST} (/hooks lists them under {hooks_json}).")
    changes = [c for c in (hooks_change, config_change) if c is not None]
    return Plan(changes, notes, tuple(steps))


def _config_change(
    path: Path, install: bool, version: tuple[int, ...] | None, hooks_json: Path, moves: Moves, root: Path | None
) -> tuple[Change | None, list[str]]:
    """The change to config.toml (see codex_config), with the trust of moved hooks carried along."""
    before = read(path)
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
    said = [n for n in notes if n]
    if after == text:
        return None, said
    if before is not None and not after.strip() and gitmail_made(path):
        return Change(path, before, None), said  # gitmail made this file: uninstall removes it
    return Change(path, before, after), said


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


# -- trust ------------------------------------------------------------------------------------------------------


def trust_hooks(hooks_json: Path, config: Path, *, back_up: bool) -> str:
    """Trust gitmail's hooks: through Codex's app-server, else as Codex computes it. One line says what was done.
    `back_up`: config.toml is the user's (not made by this install), so it is backed up before Codex or gitmail
    write trust into it."""
    document = json.loads(read(hooks_json) or "{}")
    places = [place for place, _ in hook_settings.ours(document)]
    if not places:
        return f"{hooks_json}: gitmail's hooks are not there to trust"
    try:
        listed = [h for h in codex_trust.list_hooks(hooks_json.parent) if _listed_ours(h, hooks_json)]
        if len(listed) < len(places):
            raise codex_trust.Unavailable("Codex does not list all of gitmail's hooks")
        untrusted = {h.key: h.current_hash for h in listed if h.trust_status not in ("trusted", "managed")}
        if not untrusted:
            return f"{config}: Codex already trusts gitmail's hooks"
        if back_up:
            backup(config)
        after = codex_trust.trust(untrusted, hooks_json.parent)
        if not all(h.trust_status == "trusted" for h in after if h.key in untrusted):
            raise codex_trust.Unavailable("Codex did not take the trust")
        how = "through Codex's app-server, as its /hooks review does"
    except codex_trust.Unavailable as why:
        try:
            before = read(config) or ""
            after_text = before
            for place in places:
                after_text = codex_trust.with_trust(after_text, hooks_json, place, _hash_at(document, place))
            if after_text == before:
                return f"{config}: Codex already trusts gitmail's hooks"
            if back_up:
                backup(config)
            write(config, after_text)
        except (GitmailError, OSError, ValueError, tomlkit.exceptions.TOMLKitError) as error:
            return f"note: could not trust gitmail's hooks for Codex ({error}). {SILENT_SKIP}: {HOW_TO_TRUST}."
        how = f"with the hash Codex computes ({why})"
    return f"{config}: trusted gitmail's hooks for Codex {how}. {SILENT_SKIP}; --no-trust leaves that to you."


def trust_state(hooks_json: Path, document: dict[str, Any], places: list[Position]) -> str:
    """How Codex trusts gitmail's hooks: asked through its app-server, else as config.toml records it."""
    try:
        listed = [h for h in codex_trust.list_hooks(hooks_json.parent) if _listed_ours(h, hooks_json)]
        if listed:
            return next((h.trust_status for h in listed if h.trust_status not in ("trusted", "managed")), "trusted")
    except codex_trust.Unavailable:
        pass
    try:
        config = read(hooks_json.with_name("config.toml")) or ""
        states = []
        for place in places:
            recorded = codex_trust.trusted_hash(config, hooks_json, place)
            expected = _hash_at(document, place)
            states.append("untrusted" if recorded is None else "trusted" if recorded == expected else "modified")
    except (GitmailError, tomlkit.exceptions.TOMLKitError):
        return "unknown"
    return next((s for s in states if s != "trusted"), "trusted")


def sandbox_detail(config: Path) -> str:
    """What `doctor` adds about Codex's sandbox: whether sessions may write the mailbox's folder from it."""
    try:
        text = read(config) or ""
    except GitmailError:
        return ""
    folder = mailbox_folder()
    if not codex_config.has_root(text, folder):
        return f"; Codex's sandbox does not let sessions write {folder} (reinstall: gitmail install --codex)"
    if not folder.is_dir():
        return f"; Codex's sandbox names {folder}, which is missing: Codex cannot run commands until it exists"
    return f"; sessions may write {folder} from Codex's sandbox"


def _hash_at(document: dict[str, Any], place: Position) -> str:
    handler, matcher = hook_settings.handler_at(document, place)
    return codex_trust.entry_hash(handler, matcher, place[0])


def _listed_ours(listed: codex_trust.Listed, hooks_json: Path) -> bool:
    return marked_moment(listed.command) is not None and _same_file(listed.source_path, hooks_json)


def _same_file(recorded: str, path: Path) -> bool:
    return bool(recorded) and os.path.realpath(recorded) == os.path.realpath(path)
