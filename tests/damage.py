"""Damage as `git gc --prune=now` does it to a mailbox it races: objects gone from under a ref."""

from __future__ import annotations

import subprocess

from gitmail.store.repository import Store


def git(box: Store, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Plain git on the mailbox, as a user runs it."""
    return subprocess.run(["git", "--git-dir", str(box.path), *args], capture_output=True, text=True, check=check)


def keep_loose(box: Store) -> None:
    """Keep the detached packer off this mailbox: a test that loses objects removes them as loose files."""
    box.create()
    subprocess.run(["git", "--git-dir", str(box.path), "config", "gitmail.autoPack", "false"], check=True)


def lose(box: Store, ref: str, *, whole: bool = True) -> str:
    """Remove the commit `ref` points at (with its tree and document when `whole`), as a prune does to a commit
    written just before its ref moved; returns the commit id. gitmail writes loose objects, so each is a file."""
    oid = git(box, "rev-parse", ref).stdout.strip()
    doomed = [oid]
    if whole:
        doomed += [git(box, "rev-parse", f"{oid}^{{tree}}").stdout.strip()]
        doomed += [git(box, "rev-parse", f"{oid}:message.md").stdout.strip()]
    for gone in doomed:
        loose = box.path / "objects" / gone[:2] / gone[2:]
        assert loose.is_file(), f"{gone} is not a loose object"
        loose.unlink()
    assert git(box, "cat-file", "-e", oid, check=False).returncode != 0
    return oid


def lose_object(box: Store, spec: str) -> str:
    """Remove one object (`<commit>^{tree}`, `<ref>:<path>`, ...), as a prune takes part of what a writer wrote."""
    oid = git(box, "rev-parse", spec).stdout.strip()
    loose = box.path / "objects" / oid[:2] / oid[2:]
    assert loose.is_file(), f"{oid} is not a loose object"
    loose.unlink()
    return oid


def fsck(box: Store) -> subprocess.CompletedProcess[str]:
    return git(box, "fsck", "--no-progress", "--no-dangling", check=False)


def tear(box: Store, spec: str) -> str:
    """Cut the loose file of the object `spec` names to half its length, as a torn write or a disk error leaves
    it (the file is there; its zlib stream breaks off); returns the object's id. git dies reading it."""
    oid = git(box, "rev-parse", spec).stdout.strip()
    loose = box.path / "objects" / oid[:2] / oid[2:]
    data = loose.read_bytes()
    loose.chmod(0o644)
    loose.write_bytes(data[: len(data) // 2])
    loose.chmod(0o444)
    return oid


def tear_packed(box: Store, spec: str) -> str:
    """Pack every object (no deltas), then garble the middle of one object's compressed bytes in the pack, as a
    disk error would; returns its id. git dies reading it."""
    oid = git(box, "rev-parse", spec).stdout.strip()
    git(box, "repack", "-a", "-d", "-q", "--window=0")
    (index,) = (box.path / "objects" / "pack").glob("*.idx")
    with open(index, "rb") as handle:
        listed = subprocess.run(["git", "show-index"], stdin=handle, capture_output=True, text=True, check=True)
    offsets = sorted((int(line.split()[0]), line.split()[1]) for line in listed.stdout.splitlines())
    pack = index.with_suffix(".pack")
    ends = [start for start, _ in offsets[1:]] + [pack.stat().st_size - 20]
    start, end = next((s, e) for (s, o), e in zip(offsets, ends, strict=True) if o == oid)
    data = bytearray(pack.read_bytes())
    for at in range(start + 4, end - 2):  # past the object's header, short of its end
        data[at] ^= 0x5A
    pack.chmod(0o644)
    pack.write_bytes(bytes(data))
    return oid
