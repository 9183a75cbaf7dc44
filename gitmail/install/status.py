"""What is installed now, as `gitmail doctor` reports it: for each host, which of gitmail's moments its settings
hold, whether their commands still find a gitmail to run, and for Codex whether Codex trusts them and its sandbox
lets sessions write the mailbox."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from typing import TYPE_CHECKING, NamedTuple

from gitmail.errors import GitmailError
from gitmail.install import codex_hooks, hook_settings
from gitmail.install.hook_commands import MOMENTS, moment_of
from gitmail.install.host_hooks import HOSTS, settings_paths
from gitmail.install.settings import load_json, read

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from pathlib import Path


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
            document = load_json(path, read(path))
        except GitmailError as error:
            found.append(HostStatus(host, path, False, None, None, None, f"{path} cannot be read: {error}"))
            continue
        ours = hook_settings.ours(document)
        if not ours:
            found.append(HostStatus(host, path, False, None, None, None, f"not installed in {path}"))
            continue
        by_moment = {moment_of(entry): entry for _, entry in reversed(ours)}
        moments = tuple(m for m in MOMENTS if m in by_moment)
        first = str((by_moment.get("start") or ours[0][1])["command"])
        runs, how = _still_runs([str(entry["command"]) for _, entry in ours])
        places = [place for place, _ in ours]
        trust = codex_hooks.trust_state(path, document, places) if host == "codex" else None
        detail = f"installed in {path} ({', '.join(moments)}); {how}" + (f"; Codex trust: {trust}" if trust else "")
        if host == "codex":
            detail += codex_hooks.sandbox_detail(path.with_name("config.toml"))
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
