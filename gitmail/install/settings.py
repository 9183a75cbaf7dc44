"""The engine everything gitmail installs goes through: other programs' settings files read (a missing file is None,
one that cannot be read or parsed is one clear error), each change planned as the file's text before and after and
shown as a diff, then written whole through the store's atomic writer, the file backed up once before gitmail first
changes it; and the steps that follow once the files are written.

A plan is made whole before anything is written, so a file that does not parse stops the install untouched. A file
gitmail created has no backup, which is how uninstall knows to remove it rather than leave it empty. JSON is written
in the file's own style; `jsonedit` edits it in place.
"""

from __future__ import annotations

import difflib
import json
import re
import shutil
from typing import TYPE_CHECKING, Any, NamedTuple

from gitmail.errors import GitmailError, Unwritable
from gitmail.store.files import refused, write_atomically

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

BACKUP = ".gitmail-backup"  # the file as it was before gitmail first changed it
NEW_FILE_MODE = 0o644  # a settings file gitmail creates; one that exists keeps its own


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


class Step(NamedTuple):
    """Something done once a plan's files are written: a folder made, hooks trusted."""

    run: Callable[[], str | None]  # does it; returns a line saying what was done, when there is one to say
    preview: str | None = None  # what a dry run says it would do


class Plan(NamedTuple):
    changes: list[Change]
    notes: list[str]
    steps: tuple[Step, ...] = ()  # run in order, after every change is written


def joined(*plans: Plan) -> Plan:
    """One plan doing all of these, in order."""
    changes = [change for plan in plans for change in plan.changes]
    notes = [note for plan in plans for note in plan.notes]
    return Plan(changes, notes, tuple(step for plan in plans for step in plan.steps))


def apply(plan: Plan) -> list[str]:
    """Write the changed files (backing each up first, once), then take the plan's steps; return what was done, one
    line per file and per step that has something to say."""
    done = []
    for change in plan.changes:
        if not change.changed:
            done.append(f"{change.path}: unchanged")
            continue
        if change.after is None:
            change.path.unlink()
            done.append(f"{change.path}: removed (gitmail had created it)")
            continue
        kept = backup(change.path)
        write(change.path, change.after)
        done.append(f"{change.path}: updated" + (f" (backup: {kept.name})" if kept.exists() else ""))
    for step in plan.steps:
        line = step.run()
        if line:
            done.append(line)
    return done


# -- files ------------------------------------------------------------------------------------------------------


def read(path: Path) -> str | None:
    """The file's text; None when there is no such file."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise GitmailError(f"cannot read {path}: {error}") from None


def backup_of(path: Path) -> Path:
    return path.with_name(path.name + BACKUP)


def gitmail_made(path: Path) -> bool:
    """Whether gitmail created this file: every file it changes that it did not create is backed up first."""
    return not backup_of(path).exists()


def backup(path: Path) -> Path:
    """The file as it was before gitmail first changed it (made now, if it exists and has none yet)."""
    kept = backup_of(path)
    if path.exists() and not kept.exists():
        shutil.copy2(path, kept)
    return kept


def write(path: Path, text: str) -> None:
    """Replace the file whole (its folder made if missing), synced to disk, with the permissions it had."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, text.encode(), mode=NEW_FILE_MODE, keep_mode=True)
    except OSError as error:
        raise GitmailError(f"cannot write {path}: {refused(error)}") from None
    except Unwritable as error:  # its own words name the mailbox; this is someone else's file
        raise GitmailError(f"cannot write {path}: {error.reason}") from None


# -- JSON -------------------------------------------------------------------------------------------------------


def load_json(path: Path, text: str | None) -> dict[str, Any]:
    """The object a JSON settings file holds ({} for a missing or empty one); refused in one line otherwise."""
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


def dump_json(data: dict[str, Any], like: str | None) -> str:
    """JSON in the file's own style: its indentation, its way with non-ASCII text, its final newline."""
    indent: str | int = 2
    if like:
        found = re.search(r"^([ \t]+)\S", like, re.MULTILINE)
        indent = found.group(1) if found else 2
    ascii_only = bool(like) and "\\u" in (like or "") and not any(ord(c) > 127 for c in like or "")
    text = json.dumps(data, indent=indent, ensure_ascii=ascii_only)
    return text + ("\n" if like is None or like.endswith("\n") else "")
