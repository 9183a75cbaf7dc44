"""A mailbox on a real case-insensitive file system (as macOS and Windows use by default): an exFAT image, made and
mounted through FUSE by the test, which needs root, /dev/fuse, a loop device and Debian's exfat-fuse and exfatprogs.
Where any of that is missing the tests are skipped, saying which."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitmail import mailbox
from gitmail.store import moves
from gitmail.store.repository import Store
from gitmail.values.layout import ROOT
from gitmail.values.names import RepoName
from tests.conftest import RepoFactory, at, run_gitmail
from tests.formats import as_format_1, git, refs

NFD = unicodedata.normalize("NFD", "données")
TOOLS = ("mkfs.exfat", "mount.exfat-fuse", "losetup", "umount")


def _tool(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin:/bin")


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "mounting a file system image needs root"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse on this machine"
    missing = [tool for tool in TOOLS if _tool(tool) is None]
    if missing:
        return f"missing {', '.join(missing)} (apt-get install exfat-fuse exfatprogs)"
    return None


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    tool = _tool(args[0])
    assert tool is not None
    return subprocess.run([tool, *args[1:]], capture_output=True, text=True, timeout=60)


@pytest.fixture
def case_insensitive(tmp_path: Path) -> Iterator[Path]:
    """A directory on a freshly made exFAT file system: case-insensitive and case-preserving, owned by us, 0700."""
    reason = _why_not()
    if reason:
        pytest.skip(reason)
    image, mount = tmp_path / "exfat.img", tmp_path / "exfat"
    with open(image, "wb") as handle:
        handle.truncate(64 << 20)
    mount.mkdir()
    made = _run("mkfs.exfat", str(image))
    if made.returncode:
        pytest.skip(f"mkfs.exfat failed: {made.stderr.strip() or made.stdout.strip()}")
    loop = _run("losetup", "--find", "--show", str(image))  # exfat-fuse mounts block devices only
    if loop.returncode:
        pytest.skip(f"no loop device for the image: {loop.stderr.strip()}")
    device = loop.stdout.strip()
    try:
        options = f"uid={os.getuid()},gid={os.getgid()},umask=077"
        mounted = _run("mount.exfat-fuse", "-o", options, device, str(mount))
        if mounted.returncode:
            pytest.skip(f"mounting exFAT through FUSE failed: {mounted.stderr.strip()}")
        try:
            yield mount
        finally:
            if _run("umount", str(mount)).returncode:
                _run("umount", "-l", str(mount))
    finally:
        _run("losetup", "--detach", device)


def test_the_mounted_file_system_ignores_case_and_keeps_normal_forms_apart(case_insensitive: Path) -> None:
    (case_insensitive / "Web").mkdir()
    assert (case_insensitive / "web").is_dir()
    (case_insensitive / NFD).mkdir()
    (case_insensitive / "données").mkdir()
    assert sorted(os.listdir(case_insensitive)) == sorted(["Web", NFD, "données"])


def _inbox(cwd: Path, env: dict[str, str], *repo: str) -> list[str]:
    result = run_gitmail("inbox", "--peek", "--json", *repo, cwd=cwd, env=env)
    assert result.returncode == 0, result.stderr
    return [m["subject"] for m in json.loads(result.stdout)["directed"]]


def test_names_that_differ_in_case_keep_their_own_mail(case_insensitive: Path, repos: RepoFactory) -> None:
    env = {"GITMAIL_DIR": str(case_insensitive / "mail.git")}
    api = repos("api")
    for to in ("Web", "web", "WEB", "Données", "données", NFD):
        sent = run_gitmail("send", "--to", to, "--subject", f"for {to}", cwd=api, env=env)
        assert sent.returncode == 0, sent.stderr
    assert _inbox(repos("Web"), env) == ["for Web"]
    assert _inbox(repos("web"), env) == ["for web"]
    assert _inbox(api, env, "--repo", "WEB") == ["for WEB"]
    assert _inbox(api, env, "--repo", "Données") == ["for Données"]
    for folder in ("nfc/données", f"nfd/{NFD}"):  # one repo, however its folder name is spelled
        assert _inbox(repos(folder), env) == ["for données", f"for {NFD}"]
    components = {ref[len(ROOT) :].split("/")[0] for ref in refs(Store(env["GITMAIL_DIR"]))}
    assert components == {"%57eb", "web", "%57%45%42", "%44onn%C3%A9es", "donn%C3%A9es"}


def test_a_format_1_mailbox_whose_names_shared_directories_is_sorted_out(
    case_insensitive: Path, repos: RepoFactory
) -> None:
    box = Store(case_insensitive / "mail.git")
    sent = {}
    for minute, to in enumerate(("Web", "web", "Données", "données", "données")):
        sent[minute] = mailbox.send(box, sender="api", to=to, subject=f"#{minute} for {to}", when=at(minute))
    mailbox.done(box, repo="web", ids=[sent[1].message.id])
    mailbox.send(box, sender="web", to="api", subject="thanks", when=at(9))
    before = {
        name: [e.message.id for e in mailbox.log(box, repo=name)] for name in ("Web", "web", "Données", "données")
    }
    # The first spelling written names the directory the other one's refs then land in, as format 1 did.
    as_format_1(box, spelled={sent[4].message.id: NFD}, order=["Web", "web", "données", "Données"])
    listed = refs(box)
    assert f"{ROOT}Web/archive/{sent[1].message.id}" in listed  # web's mail, listed as Web's
    assert f"{ROOT}donn%C3%A9es/inbox/{sent[2].message.id}" in listed  # Données' mail, listed as données'

    env = {"GITMAIL_DIR": str(box.path)}
    assert _inbox(repos("Web"), env) == ["#0 for Web"]
    assert _inbox(repos("web"), env) == []
    assert _inbox(repos("api"), env, "--repo", "Données") == ["#2 for Données"]
    assert _inbox(repos(f"nfd/{NFD}"), env) == ["#3 for données", "#4 for données"]
    migrated = Store(box.path)
    after = {name: [e.message.id for e in mailbox.log(migrated, repo=name)] for name in before}
    assert after == before
    assert git(box, "config", "gitmail.version").strip() == "4"
    assert sorted(refs(box)) == sorted(
        [
            f"{ROOT}%57eb/inbox/{sent[0].message.id}",
            f"{ROOT}web/archive/{sent[1].message.id}",
            f"{ROOT}%44onn%C3%A9es/inbox/{sent[2].message.id}",
            f"{ROOT}donn%C3%A9es/inbox/{sent[3].message.id}",
            f"{ROOT}donn%C3%A9es/inbox/{sent[4].message.id}",
            *(ref for ref in refs(box) if ref.startswith(f"{ROOT}api/")),
        ]
    )
    for directory in os.listdir(box.path / "refs" / "gitmail"):  # a new ref must not land in another's spelling
        assert directory.startswith("_") or RepoName.from_ref(directory).ref == directory
    # Every move of web's archived message is in the record: its writing by format 1 and its renaming. A reflog
    # brought in names its ref as the file system spells the reflog's folder (Web or web, whichever came first).
    archived = f"{ROOT}web/archive/{sent[1].message.id}".lower()
    moved = [m for m in moves.history(box) if m.ref.lower() == archived]
    assert {m.reason for m in moved if "format" in m.reason} == {
        "gitmail: renamed for mailbox format 2",
        "gitmail: written by format 1",
    }
    fsck = subprocess.run(["git", "--git-dir", str(box.path), "fsck"], capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stderr
