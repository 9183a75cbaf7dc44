"""store/packs.py reads what git packed, object for object as `git cat-file` reads it: whole objects and deltas on
a base by offset or by id, and nothing it cannot read whole."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pytest

from gitmail import mailbox
from gitmail.store import gitcmd, loose, packs
from gitmail.store.repository import Store


def _git(repo: Path, *args: str, data: bytes | None = None) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], input=data, capture_output=True, check=True).stdout


def _objects(repo: Path) -> dict[str, tuple[bytes, bytes]]:
    """Every object of the repository, as git cat-file reads it: {id: (type, content)}."""
    ids = _git(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)").decode().split()
    out = _git(repo, "cat-file", "--batch", data="".join(f"{oid}\n" for oid in ids).encode())
    found, at = {}, 0
    for _ in ids:
        header_end = out.index(b"\n", at)
        name, kind, size = out[at:header_end].split()
        content = out[header_end + 1 : header_end + 1 + int(size)]
        found[name.decode()] = (kind, content)
        at = header_end + 2 + int(size)
    assert set(found) == set(ids)
    return found


@pytest.fixture
def history(tmp_path: Path) -> Path:
    """A repository whose files change a little at each of many commits: packed, most objects are deltas."""
    repo = tmp_path / "repo"
    _git(tmp_path, "init", "-q", str(repo))
    rng = random.Random(11)
    lines = [f"line {n} {rng.random()}\n" for n in range(400)]
    for number in range(40):
        lines[rng.randrange(len(lines))] = f"changed at {number}\n"
        (repo / "big.txt").write_text("".join(lines))
        (repo / "small.txt").write_text(f"small {number}\n")
        (repo / "empty").write_text("")
        (repo / "binary.bin").write_bytes(bytes(rng.randrange(256) for _ in range(3000)))
        _git(repo, "add", "-A")
        _git(repo, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "-m", f"commit {number}\n\nbody")
    return repo


def _read_all(repo: Path, ids: list[str]) -> dict[str, object]:
    reader = packs.Packs(str(repo / ".git" / "objects"))
    return {oid: reader.object(oid) for oid in ids}


@pytest.mark.parametrize("deltas", ["offset", "id"])
def test_every_packed_object_reads_as_git_reads_it(history: Path, deltas: str) -> None:
    settings = ["-c", "repack.useDeltaBaseOffset=false"] if deltas == "id" else []
    _git(history, *settings, "repack", "-adq", "--depth=50", "--window=50")
    _git(history, "prune-packed")
    expected = _objects(history)
    chains = _git(history, "verify-pack", "-v", *map(str, (history / ".git/objects/pack").glob("*.idx")))
    assert b"chain length = 2:" in chains  # deltas, and deltas on deltas
    assert _read_all(history, sorted(expected)) == expected
    reader = packs.Packs(str(history / ".git/objects"))
    assert reader.object("0" * 40) is None  # no pack holds it
    big = next(oid for oid, (kind, data) in expected.items() if kind == b"blob" and len(data) > 5000)
    assert reader.object(big, limit=100) is packs.TOO_LARGE
    assert reader.object(big, limit=len(expected[big][1])) == expected[big]
    for oid, (kind, data) in expected.items():  # over `head_over`: a commit's first line at most, nothing else
        allowed = [(kind, data)] if len(data) <= 10 else [(b"commit", data[:45]), None] if kind == b"commit" else [None]
        assert reader.object(oid, head_over=10) in allowed


def test_a_damaged_pack_is_not_answered_here(history: Path) -> None:
    _git(history, "repack", "-adq")
    expected = _objects(history)
    pack = next((history / ".git/objects/pack").glob("*.pack"))
    data = bytearray(pack.read_bytes())
    for at in range(200, len(data) - 40, 97):  # a byte changed all through it
        data[at] ^= 0x55
    pack.chmod(0o644)
    pack.write_bytes(bytes(data))
    read = _read_all(history, sorted(expected))
    assert all(found is None or found == expected[oid] for oid, found in read.items())
    assert any(found is None for found in read.values())


def test_a_packed_mailbox_is_read_without_starting_git(box: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once packed, a mailbox's documents and notes (receipts, the broadcast seen-set) are read from the pack."""
    sent = [mailbox.send(box, sender="api", to="web", subject=f"hello {n}", body="x" * 200) for n in range(5)]
    subprocess.run(["git", "-C", str(box.path), "repack", "-adq"], check=True)
    subprocess.run(["git", "-C", str(box.path), "prune-packed"], check=True)
    specs = [f"{entry.oid}:message.md" for entry in sent]
    expected = box.read(specs)
    assert all(expected)
    names = [f"refs/gitmail/web/inbox/{entry.message.id}" for entry in sent] + ["refs/gitmail/web/inbox/none"]
    targets = {name: str(entry.oid) for name, entry in zip(names, sent, strict=False)}

    def no_git(*args: object, **kwargs: object) -> object:
        raise AssertionError("git was started")

    monkeypatch.setattr(gitcmd, "spawn", no_git)
    assert Store(box.path).read(specs) == expected
    assert loose.read(box.path, specs) == expected
    assert Store(box.path).targets(names) == targets


def test_a_large_read_of_a_packed_mailbox_is_left_to_git(box: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past PACKED_READS requests, git's one process reads packed objects faster than this one inflates them."""
    sent = [mailbox.send(box, sender="api", to="web", subject=f"hello {n}") for n in range(3)]
    subprocess.run(["git", "-C", str(box.path), "repack", "-adq"], check=True)
    subprocess.run(["git", "-C", str(box.path), "prune-packed"], check=True)
    specs = [f"{entry.oid}:message.md" for entry in sent]
    monkeypatch.setattr(loose, "PACKED_READS", 2)
    assert all(found is loose.ELSEWHERE for found in loose.read(box.path, specs))
    assert loose.read(box.path, specs[:2]) == Store(box.path).read(specs[:2]) and all(Store(box.path).read(specs))
