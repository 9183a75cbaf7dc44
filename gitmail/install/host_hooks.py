"""gitmail's hooks in every host at once: the hosts it installs in, which of them this machine has, the settings
file each keeps them in, and one plan for all of them, made whole before anything is written (a file that does not
parse in one host stops the install in all)."""

from __future__ import annotations

from gitmail.install import claude_hooks, codex_hooks
from gitmail.install.hook_commands import MOMENTS
from gitmail.install.settings import Plan, joined

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

HOSTS = ("claude", "codex")


def settings_paths(home: Path) -> dict[str, Path]:
    """Each host's file holding gitmail's hooks."""
    return {"claude": claude_hooks.settings_path(home), "codex": codex_hooks.hooks_path(home)}


def detect(home: Path) -> list[str]:
    """The hosts on this machine."""
    return [host for host, here in (("claude", claude_hooks.found), ("codex", codex_hooks.found)) if here(home)]


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
    sessions write (default: the mailbox's, see codex_hooks.mailbox_folder)."""
    plans = []
    if "claude" in hosts:
        plans.append(claude_hooks.plan(home=home, install=install, moments=moments, python=python))
    if "codex" in hosts:
        plans.append(
            codex_hooks.plan(
                home=home,
                install=install,
                moments=moments,
                python=python,
                codex_version=codex_version,
                trust=trust,
                writable=writable,
            )
        )
    return joined(*plans)
