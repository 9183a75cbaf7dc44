"""Patches: commits sent as `git format-patch` output and uncommitted changes sent as a binary diff, made in the
sender's repository without changing it, and applied in another clone with `gitmail apply`, which leaves a conflict
exactly as git's own tools do and records on the message whether it applied."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gitmail import actions, mailbox, render
from gitmail.errors import GitmailError, UsageError
from gitmail.store.repository import Store
from gitmail.values.names import RepoName
from gitmail.workspace import Actor
from tests.conftest import CliRunner, run_gitmail

PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452") + bytes(range(256))


def git(repo: Path, *args: str, stdin: bytes | None = None, check: bool = True) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True)
    if check:
        assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode(errors="replace")


def commit(repo: Path, message: str, **files: str | bytes) -> None:
    for name, content in files.items():
        path = repo / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    """The sender's repository, named api, with some history."""
    repo = tmp_path / "work" / "api"
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    first: dict[str, str | bytes] = {"f.txt": "one\ntwo\nthree\n", "logo.png": PNG}
    commit(repo, "Start", **first)
    return repo


def clone(origin: Path, name: str) -> Path:
    target = origin.parent / name
    git(origin.parent, "clone", "-q", str(origin), name)
    return target


def me(repo: Path) -> Actor:
    return Actor(RepoName(repo.name), str(repo), "api")


def send_patch(box: Store, repo: Path, revisions: str, to: str = "web") -> actions.Sent:
    return actions.send(box, me(repo), to=to, subject="a patch", patch=revisions)


def history(repo: Path, revisions: str) -> list[str]:
    """Each commit as git records it apart from who committed it and when: author, date, message, and its diff."""
    out = git(repo, "log", "--reverse", "--format=%x00%an <%ae> %ad%n%B", "-p", "--binary", revisions)
    return out.split("\0")[1:]


def state(repo: Path) -> dict[str, object]:
    """What git leaves in a repository: status, HEAD, the index, every file, an operation in progress."""
    git_dir = Path(git(repo, "rev-parse", "--absolute-git-dir").strip())
    return {
        "status": git(repo, "status", "--porcelain=v1", "--untracked-files=all"),
        "head": git(repo, "rev-parse", "HEAD"),
        "index": git(repo, "ls-files", "--stage"),
        "files": {str(p.relative_to(repo)): p.read_bytes() for p in repo.rglob("*") if ".git" not in p.parts},
        "in progress": sorted(n for n in ("rebase-apply", "rebase-merge", "MERGE_HEAD") if (git_dir / n).exists()),
    }


def test_commits_made_in_one_repository_apply_in_another_clone_as_format_patch_makes_them(
    box: Store, origin: Path, cli: CliRunner
) -> None:
    web = clone(origin, "web")
    commit(origin, "Count to four\n\nThe list was short.", **{"f.txt": "one\ntwo\nthree\nfour\n"})
    commit(origin, "New logo", **{"logo.png": PNG[::-1], "new.bin": b"\0\1\2"})
    sent = send_patch(box, origin, "HEAD~2")
    item = sent.entry.message.attachments[0]
    assert (item.name, item.patch, item.type) == ("commits.patch", "commits", "text/x-diff")
    assert sent.notes[0].startswith("--patch HEAD~2: attached 2 commits as `git format-patch` writes them")
    plain = subprocess.run(
        ["git", "-C", str(origin), "format-patch", "--stdout", "HEAD~2"], capture_output=True, check=True
    ).stdout
    assert mailbox.attachment_content(box, sent.entry, item) == plain

    done = cli("apply", sent.entry.message.id, cwd=web)
    assert done.code == 0, done.err
    assert "Applying: Count to four\nApplying: New logo\n" in done.err
    assert done.err.endswith(f'gitmail: applied "commits.patch" of {sent.entry.message.id} to {web}\n')
    assert history(web, "HEAD~2..HEAD") == history(origin, "HEAD~2..HEAD")
    assert git(web, "rev-parse", "HEAD^{tree}") == git(origin, "rev-parse", "HEAD^{tree}")
    assert (web / "new.bin").read_bytes() == b"\0\1\2" and git(web, "status", "--porcelain") == ""

    twin = clone(origin, "twin")
    git(twin, "reset", "-q", "--hard", "HEAD~2")
    git(twin, "am", "--3way", stdin=plain)
    assert history(twin, "HEAD~2..HEAD") == history(web, "HEAD~2..HEAD")


def test_uncommitted_changes_with_binary_files_apply_and_the_sender_says_which_it_took(
    box: Store, origin: Path, cli: CliRunner
) -> None:
    web = clone(origin, "web")
    (origin / "f.txt").write_text("one\nTWO\nthree\n")  # not staged
    (origin / "logo.png").write_bytes(PNG + b"more")  # binary, not staged
    (origin / "added.bin").write_bytes(bytes(range(255, -1, -1)))
    git(origin, "add", "added.bin")  # staged
    (origin / "stray.txt").write_text("not tracked")
    done = cli("send", "--to", "web", "-s", "wip", "--patch", cwd=origin)  # through typer: --patch alone
    assert done.code == 0, done.err
    head = git(origin, "rev-parse", "HEAD").strip()
    assert (
        f"gitmail: note: --patch: attached the uncommitted changes against HEAD ({head[:12]}), 3 files, staged or "
        "not, in uncommitted.patch"
    ) in done.err
    assert "; 1 untracked file is not included (`git add -N FILE` includes one)" in done.err
    message_id = done.out.strip()
    item = mailbox.show(box, message_id).message.attachments[0]
    assert (item.patch, item.base) == ("uncommitted", head)

    applied = cli("apply", message_id, cwd=web)
    assert applied.code == 0, applied.err
    for name in ("f.txt", "logo.png", "added.bin"):
        assert (web / name).read_bytes() == (origin / name).read_bytes(), name
    assert git(web, "status", "--porcelain") == "A  added.bin\nM  f.txt\nM  logo.png\n"
    assert sorted(git(web, "diff", "--cached", "--name-only").split()) == ["added.bin", "f.txt", "logo.png"]
    assert git(web, "rev-parse", "HEAD").strip() == head  # uncommitted changes stay uncommitted
    assert not (web / "stray.txt").exists()


def test_making_a_patch_changes_nothing_in_the_senders_repository(box: Store, origin: Path) -> None:
    commit(origin, "Second", **{"g.txt": "g\n"})
    (origin / "f.txt").write_text("changed\n")
    os.utime(origin / "logo.png")  # stat-dirty only: a git diff or status would rewrite the index for it
    before = (origin / ".git" / "index").read_bytes(), (origin / ".git" / "index").stat().st_mtime_ns
    refs = git(origin, "for-each-ref")
    send_patch(box, origin, "")
    send_patch(box, origin, "HEAD~1..HEAD")
    with pytest.raises(UsageError):
        send_patch(box, origin, "HEAD")  # no commits after HEAD: refused, and still nothing changed
    assert ((origin / ".git" / "index").read_bytes(), (origin / ".git" / "index").stat().st_mtime_ns) == before
    assert git(origin, "for-each-ref") == refs


def test_the_senders_config_and_hooks_run_nothing_and_do_not_change_the_patch(
    box: Store, origin: Path, tmp_path: Path
) -> None:
    web = clone(origin, "web")
    marker = tmp_path / "ran"
    script = tmp_path / "evil.sh"
    script.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\n')
    script.chmod(0o755)
    for key, value in [
        ("diff.noprefix", "true"),
        ("diff.mnemonicPrefix", "true"),
        ("diff.external", str(script)),
        ("core.fsmonitor", str(script)),
        ("color.ui", "always"),
        ("format.coverLetter", "true"),
        ("format.useAutoBase", "true"),
        ("core.pager", str(script)),
    ]:
        git(origin, "config", key, value)
    (origin / ".git" / "hooks" / "post-checkout").write_text(f"#!/bin/sh\n{script}\n")
    (origin / ".git" / "hooks" / "post-checkout").chmod(0o755)
    commit(origin, "Change", **{"f.txt": "one\ntwo\nthree\nfour\n"})
    (origin / "f.txt").write_text("one\ntwo\nthree\nfour\nfive\n")
    marker.unlink(missing_ok=True)
    committed = send_patch(box, origin, "HEAD~1")
    uncommitted = send_patch(box, origin, "")
    assert not marker.exists()
    for sent in (committed, uncommitted):
        assert b"\x1b[" not in mailbox.attachment_content(box, sent.entry, sent.entry.message.attachments[0])
    assert actions.apply(box, me(web), committed.entry.message.id).result.ok
    assert actions.apply(box, me(web), uncommitted.entry.message.id).result.ok
    assert (web / "f.txt").read_text() == "one\ntwo\nthree\nfour\nfive\n"


@pytest.mark.parametrize(
    ("revisions", "error", "kind"),
    [
        ("-3", "'-3' is not a revision range (e.g. HEAD~3, or main..topic)", UsageError),
        ("--output=/tmp/x", "'--output=/tmp/x' is not a revision range (e.g. HEAD~3, or main..topic)", UsageError),
        ("HEAD..HEAD", "HEAD..HEAD selects no commits in", UsageError),
        ("no-such-branch", "git format-patch no-such-branch failed in", GitmailError),
        ("", "has no uncommitted changes to tracked files against HEAD", UsageError),
    ],
)
def test_a_patch_that_cannot_be_made_is_refused_with_nothing_sent(
    box: Store, origin: Path, revisions: str, error: str, kind: type[Exception]
) -> None:
    with pytest.raises(kind) as refused:
        send_patch(box, origin, revisions)
    assert error in str(refused.value)
    assert not box.exists()


def test_patch_needs_a_repository(box: Store, tmp_path: Path) -> None:
    outside = tmp_path / "nowhere"
    outside.mkdir()
    done = run_gitmail("send", "--from", "api", "--to", "web", "-s", "x", "--patch", cwd=outside)
    assert (done.returncode, done.stderr) == (2, "gitmail: error: --patch needs a git repository: run it inside one\n")


def test_a_conflict_leaves_the_repository_as_git_am_does_and_says_how_to_go_on(
    box: Store, origin: Path, cli: CliRunner
) -> None:
    web, twin = clone(origin, "web"), clone(origin, "twin")
    commit(origin, "Theirs", **{"f.txt": "one\nTHEIRS\nthree\n"})
    for repo in (web, twin):
        commit(repo, "Ours", **{"f.txt": "one\nOURS\nthree\n"})
    sent = send_patch(box, origin, "HEAD~1")
    done = cli("apply", sent.entry.message.id, cwd=web)
    assert done.code == 1
    assert "CONFLICT (content): Merge conflict in f.txt" in done.err
    assert done.err.splitlines()[-1] == (
        f'gitmail: error: "commits.patch" of {sent.entry.message.id} stopped at a conflict: resolve it, `git add` '
        "the files and run `git am --continue` (or `git am --skip` to leave that commit out), or undo all of it with "
        "`git am --abort`"
    )
    plain = subprocess.run(["git", "-C", str(origin), "format-patch", "--stdout", "HEAD~1"], capture_output=True)
    subprocess.run(["git", "-C", str(twin), "am", "--3way"], input=plain.stdout, capture_output=True)
    ours, theirs = state(web), state(twin)
    assert ours["in progress"] == ["rebase-apply"] and "UU f.txt" in str(ours["status"])
    assert ours == theirs | {"head": ours["head"]}  # the same but for the commit each made of "Ours"
    git(web, "am", "--abort")
    assert git(web, "status", "--porcelain") == "" and (web / "f.txt").read_text() == "one\nOURS\nthree\n"
    log = run_gitmail("log", "--sent", cwd=origin).stdout
    assert f"{sent.entry.message.id}  " in log and "apply failed by" not in log and "apply failed" in log


def test_a_commit_git_refuses_is_not_called_a_conflict(box: Store, origin: Path, cli: CliRunner) -> None:
    """git am stops in the middle when it cannot apply a commit at all (here: a file the commit adds is there
    already, untracked): the line says git could not apply it, not that there is a conflict to resolve."""
    web = clone(origin, "web")
    commit(origin, "Add notes", **{"notes.txt": "theirs\n"})
    (web / "notes.txt").write_text("mine, untracked\n")
    sent = send_patch(box, origin, "HEAD~1")
    done = cli("apply", sent.entry.message.id, cwd=web)
    assert done.code == 1 and "untracked working tree files would be overwritten by merge" in done.err, done.err
    assert done.err.splitlines()[-1] == (
        f'gitmail: error: git could not apply "commits.patch" of {sent.entry.message.id} (git\'s own messages above '
        "say why) and stopped with `git am` in progress: undo all of it with `git am --abort`, or leave that commit "
        "out and go on with `git am --skip`"
    )
    assert state(web)["in progress"] == ["rebase-apply"] and git(web, "ls-files", "--unmerged") == ""
    git(web, "am", "--abort")
    assert (web / "notes.txt").read_text() == "mine, untracked\n"
    result = actions.apply(box, me(web), sent.entry.message.id).result  # the same, as the Python API tells it
    assert (result.ok, result.conflict, result.stopped) == (False, False, True)
    git(web, "am", "--abort")


def test_uncommitted_changes_that_conflict_are_left_as_git_apply_leaves_them(
    box: Store, origin: Path, cli: CliRunner
) -> None:
    web, twin = clone(origin, "web"), clone(origin, "twin")
    for repo in (web, twin):
        commit(repo, "Ours", **{"f.txt": "one\nOURS\nthree\n"})
    (origin / "f.txt").write_text("one\nTHEIRS\nthree\n")
    sent = send_patch(box, origin, "")
    done = cli("apply", sent.entry.message.id, cwd=web)
    assert done.code == 1 and done.err.splitlines()[-1] == (
        f'gitmail: error: "uncommitted.patch" of {sent.entry.message.id} applied with conflicts: resolve them and '
        "`git add` the files, or undo it with `git reset --merge`"
    )
    patch = mailbox.attachment_content(box, sent.entry, sent.entry.message.attachments[0])
    subprocess.run(["git", "-C", str(twin), "apply", "--index", "--3way", "-"], input=patch, capture_output=True)
    assert state(web) == state(twin) | {"head": state(web)["head"]}
    git(web, "reset", "--merge")
    assert git(web, "status", "--porcelain") == ""


def test_a_file_touched_but_unchanged_is_no_change_to_apply_around(box: Store, origin: Path, cli: CliRunner) -> None:
    web = clone(origin, "web")
    (origin / "f.txt").write_text("one\nTWO\nthree\n")
    done = cli("send", "--to", "web", "-s", "wip", "--patch", cwd=origin)
    assert done.code == 0, done.err
    stamp = (web / "f.txt").stat().st_mtime_ns + 5_000_000_000
    os.utime(web / "f.txt", ns=(stamp, stamp))  # an editor's save, a build tool, a copy: the index is stale
    applied = cli("apply", done.out.strip(), cwd=web)
    assert applied.code == 0, applied.err
    assert (web / "f.txt").read_text() == "one\nTWO\nthree\n"


def test_apply_outside_a_work_tree_says_where_it_works(box: Store, tmp_path: Path, cli: CliRunner) -> None:
    done = cli("apply", "kwn1f7p1nd", cwd=tmp_path)
    assert (done.code, done.err) == (
        2,
        "gitmail: error: gitmail apply works on the git work tree you are in: run it inside one\n",
    )


def test_apply_in_a_dirty_tree_is_refused_and_changes_nothing(box: Store, origin: Path, cli: CliRunner) -> None:
    web = clone(origin, "web")
    commit(origin, "Theirs", **{"g.txt": "new file\n"})
    sent = send_patch(box, origin, "HEAD~1")
    (web / "f.txt").write_text("my work in progress\n")
    before = state(web)
    done = cli("apply", sent.entry.message.id, cwd=web)
    assert (done.code, done.err) == (
        1,
        f"gitmail: error: {web} has uncommitted changes (1 file): commit or stash them first, so the patch's "
        "changes do not mix with them (nothing was applied)\n",
    )
    assert state(web) == before
    git(web, "stash", "-q")
    (web / ".git" / "rebase-apply").mkdir()
    busy = cli("apply", sent.entry.message.id, cwd=web)
    assert busy.code == 1 and "a `git am` or `git rebase` is in progress" in busy.err
    assert mailbox.show(box, sent.entry.message.id).records == ()


def test_the_sender_sees_the_patch_applied_in_log_and_show(box: Store, origin: Path, cli: CliRunner) -> None:
    web = clone(origin, "web")
    commit(origin, "Theirs", **{"g.txt": "new file\n"})
    sent = send_patch(box, origin, "HEAD~1")
    assert cli("apply", sent.entry.message.id, cwd=web).code == 0
    entry = mailbox.show(box, sent.entry.message.id)
    assert [(r.event, r.repo) for r in entry.records] == [("applied", "web")]
    log = cli("log", "--sent", cwd=origin).out
    assert f"pending · applied {entry.records[0].at.strftime('%m-%d %H:%M')}" in log
    shown = cli("show", sent.entry.message.id, cwd=origin).out
    assert "· applied " in shown.splitlines()[0]
    assert render.as_json(entry)["applied"] == [{"repo": "web", "at": entry.records[0].at.isoformat(), "applied": True}]
    card = cli("show", sent.entry.message.id, cwd=web).out
    assert f"Apply: gitmail apply {sent.entry.message.id}\n" in card


def test_a_message_without_a_patch_has_nothing_to_apply(box: Store, origin: Path, cli: CliRunner) -> None:
    web = clone(origin, "web")
    plain = mailbox.send(box, sender="api", to="web", subject="no patch")
    done = cli("apply", plain.message.id, cwd=web)
    assert (done.code, done.err) == (
        2,
        f"gitmail: error: message {plain.message.id} carries no patch sent with --patch; name the attachment to "
        "apply (its attachments: none)\n",
    )


def test_a_linked_worktree_sends_and_applies_its_own_changes(box: Store, origin: Path, cli: CliRunner) -> None:
    """A linked worktree is its repository for mail, but a patch is made from, and applied to, the work tree the
    command runs in."""
    feature = origin.parent / "api-feature"
    git(origin, "worktree", "add", "-q", "-b", "feature", str(feature))
    (feature / "f.txt").write_text("one\ntwo\nthree\nfrom the worktree\n")
    (origin / "f.txt").write_text("one\ntwo\nthree\nfrom the main work tree\n")
    sent = cli("send", "--to", "web", "-s", "wip", "--patch", cwd=feature)
    assert sent.code == 0, sent.err
    item = mailbox.show(box, sent.out.strip()).message.attachments[0]
    patch = mailbox.attachment_content(box, mailbox.show(box, sent.out.strip()), item)
    assert b"+from the worktree" in patch and b"main work tree" not in patch

    web = clone(origin, "web")
    side = origin.parent / "web-side"
    git(web, "worktree", "add", "-q", "-b", "side", str(side))
    done = cli("apply", sent.out.strip(), cwd=side)
    assert done.code == 0, done.err
    assert (side / "f.txt").read_text().endswith("from the worktree\n")
    assert (web / "f.txt").read_text() == "one\ntwo\nthree\n" and git(web, "status", "--porcelain") == ""
