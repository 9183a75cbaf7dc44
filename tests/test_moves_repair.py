"""The record of moves when a `git gc --prune=now` took one of its commits (written just before the ref named it):
`gitmail doctor` reports the hole, `--repair` rebuilds the newest part of the chain that is still here on a new
root with a commit saying the older record was lost, and the record goes on being read and written throughout."""

from __future__ import annotations

from pathlib import Path

from gitmail import mailbox
from gitmail.store import moves
from gitmail.store.moves import MOVES_REF
from gitmail.store.repository import Store
from tests.conftest import CliRunner
from tests.damage import fsck, git

LOST = "gitmail: the older record of moves was lost to a prune"


def chain(box: Store) -> list[tuple[str, str]]:
    """(parents, subject) of each commit of the record, newest first."""
    out = git(box, "log", "--format=%P%x00%s", MOVES_REF).stdout
    return [(p, s) for line in out.splitlines() for p, _, s in [line.partition("\0")]]


def same(box: Store, commit: str) -> str:
    """A commit as it is kept when rebuilt: all but its parent."""
    text = git(box, "cat-file", "commit", commit).stdout
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith("parent "))


def unlink(box: Store, oid: str) -> None:
    loose = box.path / "objects" / oid[:2] / oid[2:]
    assert loose.is_file(), f"{oid} is not a loose object"
    loose.unlink()


def test_a_hole_in_the_record_is_reported_read_around_and_mended(cli: CliRunner, box: Store, web: Path) -> None:
    for n in range(5):
        mailbox.send(box, sender="api", to="web", subject=f"m{n}")
    commits = git(box, "rev-list", MOVES_REF).stdout.split()
    before = chain(box)
    assert len(commits) == 5
    unlink(box, commits[2])  # the middle one: the two above it are still here
    assert fsck(box).returncode != 0

    newest = moves.history(box)  # what can be read of it: the moves above the hole
    assert [m.reason for m in newest][-1:] == [before[0][1]] and newest
    assert cli("log", cwd=web).code == 0
    found = cli("doctor", cwd=web)
    assert found.code == 1
    assert (
        f"problem   moves: the record of moves ({MOVES_REF}) lacks commit {commits[2]} (a `git gc --prune=now` "
        "ran while it was being written): 2 newer commits are whole, the older record is lost to git, and "
        "`git fsck` fails on it -- fix: gitmail doctor --repair rebuilds the newer part and notes the loss"
    ) in found.out.splitlines(), found.out

    original = [same(box, c) for c in commits[:2]]
    repaired = cli("doctor", "--repair", cwd=web)
    assert repaired.code == 0, repaired
    assert fsck(box).returncode == 0, fsck(box).stdout
    after = chain(box)
    assert [s for _, s in after] == [f"{LOST} (2 moves kept)", before[0][1], before[1][1]]
    assert after[-1][0] == ""  # the oldest kept commit has no parent now
    assert [same(box, f"{MOVES_REF}~{n}") for n in (1, 2)] == original
    assert cli("doctor", cwd=web).code == 0

    mailbox.send(box, sender="api", to="web", subject="after")  # the record goes on from the mended chain
    assert len(chain(box)) == 4 and fsck(box).returncode == 0
    assert [m.reason for m in moves.history(box)][-3:-1] == [before[1][1], before[0][1]]


def test_a_record_whose_tip_is_gone_starts_anew(cli: CliRunner, box: Store, web: Path) -> None:
    for n in range(3):
        mailbox.send(box, sender="api", to="web", subject=f"m{n}")
    tip = git(box, "rev-parse", MOVES_REF).stdout.strip()
    unlink(box, tip)
    assert moves.history(box) == []
    assert cli("log", cwd=web).code == 0
    found = cli("doctor", cwd=web)
    assert found.code == 1 and f"the record of moves ({MOVES_REF}) points at {tip}" in found.out, found.out
    assert "update-ref -d" not in found.out  # it is gitmail's own ref, not a stranger

    assert cli("doctor", "--repair", cwd=web).code == 0
    assert chain(box) == [("", f"{LOST} (0 moves kept)")]
    assert fsck(box).returncode == 0 and cli("doctor", cwd=web).code == 0
