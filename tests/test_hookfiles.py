"""hook.sh's copy of the protocol it shares with Python (store/hookfiles.py, store/location.py, RepoName.ref): every
file and line it reads or writes is spelled there as Python spells it, and it spells a repo's name in file names as
Python does (or leaves the name to Python)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from gitmail.install.hook_commands import hook_script
from gitmail.store import hookfiles, lease_refs, location
from gitmail.store.repository import Store
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
        f"shown=$mailbox/{own}/{hookfiles.SESSIONS}/$host-$session",
        f"kept=$mailbox/{own}/{hookfiles.CACHE}/$host-$name",
        '"$shown.stamps"',
        '"$shown.top"',
        '"$shown.json"',
        '"$shown.live"',
        '"$kept.key"',
        '"$kept.record"',
        '"$kept.out"',
        '"$kept.due"',
        f'[ "$moment" != {hookfiles.UNNOTED} ]',  # every other moment is noted as it is
        'echo "$moment" >"$turn"',
        "read -r key && read -r config && read -r quiet",  # startcache.keep's lines
        "seen=${line%% *}",  # hookfiles.quiet_line: the stamps, then the quiet moments
        'case $quiet in *" $moment "*) due || exit 0 ;; esac',
        '"$shown.renew"',  # lease_refs.renewal_path
        "index=$mailbox/gitmail/stamps/$ref.leases",  # lease_refs.index_path
        "'*') return 0 ;;",  # lease_refs.ALWAYS
        "'|') [ $all = yes ] && return 0 || all=yes ;;",  # hook_line's pattern separator
        '"$ref:$mine:$everyone:$claims:${GITMAIL_WAKE:-}:$flag:${PATH:-}"',  # hookfiles.kept_key
        '"$ref:$mine:$everyone"',  # hookfiles.stamps_line
        "ref=${seen%%:*}",  # the ref is the stamps line's first field
        "ref=${key%%:*}",  # and the kept key's
        "*[!A-Za-z0-9_-]*) session=",  # hookfiles.SESSION_CHARS
        "/*[!A-Za-z0-9._/-]*",  # hookfiles.tree_name: its characters
        "*/*) name=$name%2F${rest%%/*}",  # and '/' as %2F
    ]
    missing = [line for line in expected if line not in SCRIPT]
    assert not missing, missing
    assert hookfiles.stamps_line("r", "m", "e") == "r:m:e"
    assert hookfiles.quiet_line("r:m:e", ["tool", "stop"]) == "r:m:e tool stop"
    assert hookfiles.seen_stamps("r:m:e tool stop") == "r:m:e"
    assert (lease_refs.ALWAYS, lease_refs.INDEX_SUFFIX) == ("*", ".leases")
    assert lease_refs.renewal_path(Store(Path("/m")), "claude:s1") == f"/m/{location.OWN_DIR}/sessions/claude-s1.renew"
    assert hookfiles.SESSION_CHARS == frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert hookfiles.tree_name("/src/my-app_2/x.y") == "%2Fsrc%2Fmy-app_2%2Fx.y"
    assert hookfiles.tree_name("/src/My App") is None and hookfiles.tree_name("/src/données") is None


def quiet(tmp_path: Path, name: str, *, top: str | None = None, moments: Sequence[str] = ("tool",)) -> bool:
    """Whether hook.sh answers a tool call with nothing new without Python, for a repo of this name whose session
    files Python wrote (the stamps line naming its ref, `.top` its work tree)."""
    home = tmp_path / "home"
    mailbox = home / ".gitmail" / "mail.git"
    repo = tmp_path / "work" / name
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    ref = RepoName(name).ref
    mine, everyone = "7kq2m9x4ab", "5tgh0a1b2c"
    files = hookfiles.session_files(mailbox, "claude-s1")
    for path, line in (
        (hookfiles.stamp_file(mailbox, ref), mine),
        (hookfiles.stamp_file(mailbox, None), everyone),
        (files.stamps, hookfiles.quiet_line(hookfiles.stamps_line(ref, mine, everyone), moments)),
        (files.top, top if top is not None else str(repo)),
    ):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(line + "\n")
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
    return not marker.exists()


@pytest.mark.parametrize("name", ["web", "my-app_2", "Web", "web.app", "données", "My App", "x+y"])
def test_any_repo_name_takes_the_quiet_path_for_the_shell_reads_the_ref_python_wrote(name: str, tmp_path: Path) -> None:
    assert quiet(tmp_path, name)


def test_a_session_in_another_work_tree_than_its_files_say_goes_to_python(tmp_path: Path) -> None:
    assert not quiet(tmp_path, "web", top="/somewhere/else")


def test_a_moment_python_did_not_call_quiet_goes_to_python(tmp_path: Path) -> None:
    assert not quiet(tmp_path, "web", moments=["stop", "prompt"])
