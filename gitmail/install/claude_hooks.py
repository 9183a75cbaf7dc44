"""gitmail's hooks in Claude Code: where Claude Code keeps them (~/.claude/settings.json), whether it is on this
machine, and the plan that installs or removes them. Claude Code has a hook for every moment gitmail answers, the
wake of an idle session included (an async hook whose exit status 2 starts a turn)."""

from __future__ import annotations

import shutil

from gitmail.install import hook_settings
from gitmail.install.hook_commands import MOMENTS, entries
from gitmail.install.settings import Plan

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path


def settings_path(home: Path) -> Path:
    return home / ".claude" / "settings.json"


def found(home: Path) -> bool:
    return (home / ".claude").is_dir() or shutil.which("claude") is not None


def plan(*, home: Path, install: bool, moments: Sequence[str] = MOMENTS, python: str | None = None) -> Plan:
    wanted = entries("claude", moments, python=python) if install else {}
    change, _ = hook_settings.planned(settings_path(home), wanted)
    return Plan([change] if change is not None else [], [])
