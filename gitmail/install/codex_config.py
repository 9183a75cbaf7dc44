"""gitmail's edits to Codex's config.toml, each marked and reversible: pure functions from text to text.

- The feature flag older Codex releases need before they run hooks (`[features] codex_hooks = true`).
- A writable root for Codex's workspace-write sandbox (`[sandbox_workspace_write] writable_roots`): commands a
  session runs may write only its workspace and these roots, so without the mailbox's folder among them a session
  is refused ("read-only file system") when it archives or answers its mail. Codex binds each root into the sandbox,
  so a root that does not exist makes every command fail: the installer creates the folder.

Every line gitmail adds ends in `# added by gitmail` (an inline table, which has no room for a comment per key, says
so once), and removal takes out exactly those lines, so install then uninstall gives back the very same bytes.
The rest of the file is never rewritten except through tomlkit, which keeps every comment and layout choice.
"""

from __future__ import annotations

import json
import os
import re
import tomllib

import tomlkit
from tomlkit.items import InlineTable

from gitmail.errors import GitmailError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

MARK = "added by gitmail"
INLINE_MARK = "gitmail added codex_hooks"  # an inline table has no room for a comment per key
HOOKS_DEFAULT_ON = (0, 130)  # older Codex releases run hooks only behind [features] codex_hooks
SANDBOX = "sandbox_workspace_write"

_FLAG_LINE = re.compile(rf"^[ \t]*(?:features\.)?codex_hooks[ \t]*=[ \t]*true[ \t]*# {MARK}[ \t]*(?:\n|$)", re.M)
_OUR_FEATURES = re.compile(rf"\n?^\[features\][ \t]*# {MARK}[ \t]*\n(?=\s*(?:\[|\Z))", re.M)
_STRING = r'"(?:[^"\\\n]|\\.)*"'
_ROOTS_LINE = re.compile(
    rf"^[ \t]*(?:{SANDBOX}\.)?writable_roots[ \t]*=[ \t]*\[{_STRING}\][ \t]*# {MARK}[ \t]*(?:\n|$)", re.M
)
_ROOT_ITEM = re.compile(rf"\n[ \t]*{_STRING},[ \t]*# {MARK}[ \t]*\n")
_OUR_SANDBOX = re.compile(rf"\n?^\[{SANDBOX}\][ \t]*# {MARK}[ \t]*\n(?=\s*(?:\[|\Z))", re.M)
_HEADER = re.compile(rf"^[ \t]*\[[ \t]*{SANDBOX}[ \t]*\][^\n]*(?:\n|$)", re.M)
_ANY_HEADER = re.compile(r"^[ \t]*\[", re.M)


def parsed(text: str, path: Path) -> tomlkit.TOMLDocument:
    """The document, or one clear error: what Codex itself would refuse, gitmail refuses too."""
    try:
        document = tomlkit.parse(text)
        tomllib.loads(text)
    except (tomlkit.exceptions.TOMLKitError, tomllib.TOMLDecodeError) as error:
        raise GitmailError(
            f"{path} is not valid TOML ({error}); fix it or move it away — nothing was changed"
        ) from None
    return document


# -- the feature flag ---------------------------------------------------------------------------------------------


def with_flag(text: str, version: tuple[int, ...] | None, path: Path) -> tuple[str, str | None]:
    """The text with `[features] codex_hooks = true` if this Codex needs it; a note when it cannot tell or hooks
    are turned off."""
    document = tomlkit.parse(text)
    features = document.get("features")
    enabled = features.get("hooks", features.get("codex_hooks")) if isinstance(features, dict) else None
    if enabled is False:
        return text, f"{path} turns Codex hooks off ([features]); gitmail's hooks will not run until they are on."
    if enabled is True or _FLAG_LINE.search(text):
        return text, None
    if version is None:
        return text, "Codex was not found to ask its version; releases before 0.130 need [features] codex_hooks = true."
    if version >= HOOKS_DEFAULT_ON:
        return text, None
    if features is None:
        after = _appended(text, f"[features] # {MARK}\ncodex_hooks = true # {MARK}\n")
    elif isinstance(features, InlineTable):
        features["codex_hooks"] = True
        features.comment(INLINE_MARK)
        after = tomlkit.dumps(document)
    else:
        flag = tomlkit.item(True)
        flag.comment(MARK)
        features["codex_hooks"] = flag
        after = tomlkit.dumps(document)
    if tomllib.loads(after).get("features", {}).get("codex_hooks") is not True:
        raise GitmailError(f"{path}: could not add [features] codex_hooks = true safely; add it by hand")
    return after, None


def without_flag(text: str) -> str:
    document = tomlkit.parse(text)
    features = document.get("features")
    if isinstance(features, InlineTable) and INLINE_MARK in features.trivia.comment:
        del features["codex_hooks"]
        features.trivia.comment, features.trivia.comment_ws = "", ""
        return tomlkit.dumps(document)
    return _OUR_FEATURES.sub("", _FLAG_LINE.sub("", text, count=1), count=1)


# -- the sandbox's writable roots ---------------------------------------------------------------------------------


def with_root(text: str, root: Path, path: Path) -> tuple[str, str | None]:
    """The text letting commands in Codex's workspace-write sandbox write `root`, and a note saying what was done
    (or what the user should do, where gitmail cannot tell how to add it safely)."""
    if has_root(text, root):
        return text, None
    data = tomllib.loads(text)
    if "default_permissions" in data:  # permission profiles replace the sandbox settings wholesale
        return text, f"Codex uses permission profiles here (default_permissions): let yours write {root}."
    manual = f"add {json.dumps(str(root))} to [{SANDBOX}] writable_roots in {path} so sessions can archive their mail"
    item = json.dumps(str(root), ensure_ascii=False)
    table = data.get(SANDBOX)
    if table is None:
        after = _appended(text, f"[{SANDBOX}] # {MARK}\nwritable_roots = [{item}] # {MARK}\n")
    elif not isinstance(table, dict):
        return text, manual
    elif "writable_roots" in table:  # a line of its own, first in the list, so it comes out whole
        start = _roots_start(text)
        if start is None:
            return text, manual
        after = text[:start] + f"\n    {item}, # {MARK}\n" + text[start:]
    else:
        place = _new_key_place(text)
        if place is None:
            return text, manual
        at, dotted = place
        key = f"{SANDBOX}.writable_roots" if dotted else "writable_roots"
        after = text[:at] + f"{key} = [{item}] # {MARK}\n" + text[at:]
    if not has_root(after, root):
        return text, manual
    return after, f"sessions may now write {root} from Codex's workspace-write sandbox ([{SANDBOX}] writable_roots)."


def without_root(text: str) -> str:
    after = _ROOTS_LINE.sub("", text, count=1)
    after = _ROOT_ITEM.sub("", after, count=1)
    return _OUR_SANDBOX.sub("", after, count=1)


def has_root(text: str, root: Path) -> bool:
    return any(_same(found, root) for found in roots(text))


def roots(text: str) -> list[str]:
    """The sandbox's writable roots as Codex reads them."""
    try:
        table = tomllib.loads(text).get(SANDBOX)
    except tomllib.TOMLDecodeError:
        return []
    found = table.get("writable_roots") if isinstance(table, dict) else None
    return [r for r in found if isinstance(r, str)] if isinstance(found, list) else []


def _same(recorded: str, root: Path) -> bool:
    return os.path.realpath(os.path.expanduser(recorded)) == os.path.realpath(root)


def _roots_start(text: str) -> int | None:
    """Just after the '[' that opens writable_roots, when it is written under the table's header or as a dotted
    key at the top (an inline table is left to the user)."""
    header = _HEADER.search(text)
    if header is not None:
        following = _ANY_HEADER.search(text, header.end())
        key, region = "writable_roots", (header.end(), following.start() if following else len(text))
    else:
        first = _ANY_HEADER.search(text)
        key, region = rf"{SANDBOX}\.writable_roots", (0, first.start() if first else len(text))
    found = re.compile(rf"^[ \t]*{key}[ \t]*=[ \t]*\[", re.M).search(text, *region)
    return found.end() if found else None


def _new_key_place(text: str) -> tuple[int, bool] | None:
    """Where a new key of the sandbox's table can go, and whether as a dotted key: right after its header, or
    after its last dotted key."""
    header = _HEADER.search(text)
    if header is not None:
        return (header.end(), False) if text[header.end() - 1 : header.end()] == "\n" else None
    dotted = list(re.finditer(rf"^[ \t]*{SANDBOX}\.[^\n]*\n", text, re.M))
    return (dotted[-1].end(), True) if dotted else None


# -- shared -------------------------------------------------------------------------------------------------------


def pruned(text: str) -> str:
    """Drop a [hooks.state] (and [hooks]) that moving trust left empty."""
    document = tomlkit.parse(text)
    hooks = document.get("hooks")
    if isinstance(hooks, dict) and isinstance(hooks.get("state"), dict) and not hooks["state"]:
        del hooks["state"]
        if not hooks:
            del document["hooks"]
        return tomlkit.dumps(document)
    return text


def _appended(text: str, block: str) -> str:
    """A table added at the end, after a blank line."""
    return text + ("\n" if text and not text.endswith("\n") else "") + ("\n" if text.strip() else "") + block
