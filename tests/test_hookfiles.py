"""hook.sh's copy of the protocol it shares with Python (store/hookfiles.py, store/location.py, RepoName.ref): every
file and line it reads or writes is spelled there as Python spells it, and it spells a repo's name in file names as
Python does (or leaves the name to Python)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gitmail.install.hooks import hook_script
from gitmail.store import hookfiles, location
from gitmail.values.names import RepoName

SCRIPT = hook_script().read_text()


def test_the_files_and_lines_are_spelled_as_python_spells_them() -> None:
    own = location.OWN_DIR
    default = "/".join(location.DEFAULT)
    expected = [
        f"mailbox=${{{location.MAILBOX_ENV}:-${{HOME:-}}/{default}}}",
        f'"$mailbox/{own}/{hookfiles.STAMPS}/$ref"',
        f'"$mailbox/{own}/{hookfiles.STAMPS}/{hookfiles.BROADCAST_STAMP}"',
        f'"$mailbox/{own}/{hookfiles.STAMPS}/{hookfiles.CLAIMS_STAMP}"',
        f"turn=$mailbox/{own}/{hookfiles.SESSIONS}/$host-$session.turn",
        f'"$mailbox/{own}/{hookfiles.SESSIONS}/$host-$session.stamps"',
        f"shown=$mailbox/{own}/{hookfiles.SESSIONS}/$host-$session",
        f"kept=$mailbox/{own}/{hookfiles.CACHE}/$host-$ref",
        '"$kept.key"',
        '"$kept.record"',
        '"$kept.out"',
        '"$kept.due"',
        '"$shown.json"',
        '"$shown.stamps"',
        f"echo {hookfiles.BUSY}",
        f"echo {hookfiles.IDLE}",
        '"$ref:$mine:$everyone:$claims:${GITMAIL_WAKE:-}:$flag:${PATH:-}"',  # hookfiles.kept_key
        '"$ref:$mine:$everyone"',  # hookfiles.stamps_line
        "*[!A-Za-z0-9_-]*) session=",  # hookfiles.SESSION_CHARS
    ]
    missing = [line for line in expected if line not in SCRIPT]
    assert not missing, missing
    assert hookfiles.stamps_line("r", "m", "e") == "r:m:e"
    assert hookfiles.SESSION_CHARS == frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


@pytest.mark.parametrize("name", ["web", "my-app_2", "Web", "web.app", "A.B-c_D9", "données", "My App", "x+y"])
def test_a_name_is_spelled_as_python_spells_it_or_left_to_python(name: str, tmp_path: Path) -> None:
    """hook.sh compares the session's stamps line with one it builds from the repo's folder name: where it spells
    the name as RepoName.ref does, a session with nothing new starts no Python; where it cannot, Python decides."""
    home = tmp_path / "home"
    mailbox = home / ".gitmail" / "mail.git"
    ref = RepoName(name).ref
    mine, everyone = "7kq2m9x4ab", "5tgh0a1b2c"
    for path, line in (
        (hookfiles.stamp_file(mailbox, ref), mine),
        (hookfiles.stamp_file(mailbox, None), everyone),
        (hookfiles.session_files(mailbox, "claude-s1").stamps, hookfiles.stamps_line(ref, mine, everyone)),
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(line + "\n")
    repo = tmp_path / name
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    marker = tmp_path / "python-was-started"
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\ntouch '{marker}'\ncat >/dev/null\n")
    python.chmod(0o755)
    done = subprocess.run(
        ["sh", str(hook_script()), "tool", "claude", str(python)],
        cwd=repo,
        input=b'{"session_id": "s1"}',
        env={"HOME": str(home), "PATH": "/usr/bin:/bin", "CLAUDE_CODE_SESSION_ID": "s1"},
        capture_output=True,
    )
    assert done.returncode == 0
    spelled_by_the_shell = all(c in "abcdefghijklmnopqrstuvwxyz0123456789-_.ABCDEFGHIJKLMNOPQRSTUVWXYZ" for c in name)
    assert marker.exists() != spelled_by_the_shell, ("the shell spelled it", spelled_by_the_shell)
