"""`gitmail doctor` and leases: leases still stored that hold nothing (expired, or of sessions that ended) are
named, and `--repair` ends them; whether the commit guard is installed in this repository, where leases are held."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from gitmail.mailbox import leasing
from gitmail.store import sessions
from gitmail.store.repository import Store
from gitmail.values.names import RepoName
from tests.conftest import CliRunner, RepoFactory
from tests.hooked import Session as Hooked

API = RepoName("api")


def take(box: Store, holder: str, path: str, *, ago: float = 0, duration: float = 600, repo: str = "api") -> None:
    leasing.take(
        box, repo=RepoName(repo), holder=holder, handle=f"api#{holder.partition(':')[2]}", paths=[path], mode="exclusive",
        duration=duration, now=time.time() - ago,
    )  # fmt: skip


def test_leases_that_hold_nothing_are_named_and_repair_ends_them(
    cli: CliRunner, box: Store, repos: RepoFactory
) -> None:
    api = repos("api")
    box.create()
    Hooked(api, "front-01")("session-start")
    assert sessions.info(box.path, "claude", "front-01") is not None
    take(box, "claude:front-01", "src/orders.py")
    take(box, "claude:back-002", "src/users.py", ago=7200, duration=60, repo="web")  # (a take ends what lapsed)
    sessions.ended(box.path, "claude", "front-01", "exit")  # as a host that never ran the session's end hook

    found = cli("doctor", cwd=api)
    assert found.code == 0, found
    lines = [line for line in found.out.splitlines() if "leases:" in line]
    assert lines == [
        'note      leases: 1 lease of ended sessions is still stored for "api", holding nothing: "src/orders.py" '
        '("api#front-01") -- the next lease taken there ends them; gitmail doctor --repair does it now',
        'note      leases: 1 expired lease is still stored for "web", holding nothing: "src/users.py" '
        '("api#back-002") -- the next lease taken there ends them; gitmail doctor --repair does it now',
    ]
    assert "outside gitmail's layout" not in found.out  # lease refs are gitmail's own
    assert "guard:" not in found.out  # no lease holds anything here: the guard has nothing to keep

    repaired = cli("doctor", "--repair", cwd=api)
    assert repaired.code == 0, repaired
    assert [line for line in repaired.out.splitlines() if "repaired  ended" in line] == [
        'repaired  ended 1 lease of "api" that no longer held anything',
        'repaired  ended 1 lease of "web" that no longer held anything',
    ]
    assert "leases:" not in repaired.out
    assert leasing.standing(box, API) == leasing.standing(box, RepoName("web")) == []


def test_whether_the_commit_guard_is_installed_where_leases_are_held(
    cli: CliRunner, box: Store, repos: RepoFactory
) -> None:
    api = repos("api")
    take(box, "claude:front-01", "src/orders.py")
    found = cli("doctor", cwd=api)
    assert (
        "note      guard: leases are held in this repository, but the commit guard is not installed: a session's "
        "commit may take a file another session leased -- gitmail install --guard"
    ) in found.out.splitlines()
    hooks = Path(
        subprocess.run(
            ["git", "rev-parse", "--path-format=absolute", "--git-path", "hooks"],
            cwd=api, capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    assert cli("install", "--guard", cwd=api).code == 0
    found = cli("doctor", cwd=api)
    assert (
        f"ok        guard: the commit guard is installed in this repository ({hooks / 'pre-commit'})"
    ) in found.out.splitlines()
    (hooks / "pre-commit").write_text((hooks / "pre-commit").read_text().replace(sys.executable, "/old/python"))
    found = cli("doctor", cwd=api)
    assert (
        f"note      guard: the commit guard in this repository ({hooks / 'pre-commit'}) runs another gitmail than "
        "this one -- gitmail install --guard"
    ) in found.out.splitlines()
