"""A sync remote built by someone who wants more than to share mail: the helper behind test_hostile_remote.py.

`HostileRemote` is a repository that holds a real gitmail sync state (an honest machine synced to it first) and
then whatever an attacker who can write to it adds: marker hooks and code-running config of every kind (`plant`),
a non-bare checkout, a proc-receive hook or a reflog that leads into the user's files (`kind`); a forged state that
files messages anywhere and moves them (`publish`, `move`); documents far over the limits (`message`); thousands of
junk refs (`junk_refs`). Every program it plants appends a line to a file of its own in `marks` when it runs, so a
test asserts `remote.markers() == []`. A new attack is a few lines here and one test there.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from gitmail.store.repository import Store
from gitmail.values.attachments import Attachment
from gitmail.values.layout import email
from gitmail.values.machine import Machine
from gitmail.values.message import Message
from gitmail.values.names import RepoName
from tests.conftest import at
from tests.syncing import machine, sync_now

# githooks(5) of git 2.55: every hook event git knows.
HOOKS = (
    "applypatch-msg pre-applypatch post-applypatch pre-commit pre-merge-commit prepare-commit-msg commit-msg "
    "post-commit pre-rebase post-checkout post-merge pre-push pre-receive update proc-receive post-receive "
    "post-update reference-transaction push-to-checkout pre-auto-gc post-rewrite sendemail-validate "
    "fsmonitor-watchman p4-changelist p4-prepare-changelist p4-post-changelist p4-pre-submit post-index-change"
).split()
RECEIVE_EVENTS = (
    "pre-receive update proc-receive post-receive post-update reference-transaction push-to-checkout pre-auto-gc "
    "post-index-change post-checkout"
).split()
KINDS = ("sink", "hookspath", "worktree", "procreceive")
STATE = "refs/gitmail-sync/state"
ELSEWHERE_MACHINE = Machine("elsewhere", "9zz9zz9zz9")


def plain_git(*args: str, stdin: str | bytes | None = None, env: dict[str, str] | None = None) -> str:
    """git as the attacker runs it while building (no hook of the repository runs meanwhile)."""
    data = stdin.encode() if isinstance(stdin, str) else stdin
    done = subprocess.run(
        ["git", "-c", f"core.hooksPath={os.devnull}", *args],
        input=data,
        capture_output=True,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout.decode(errors="replace")


class HostileRemote:
    """A remote at `path` (a bare repository, or for "worktree" a checkout whose .git is `git_dir`)."""

    def __init__(self, path: Path, git_dir: Path, root: Path) -> None:
        self.path, self.git_dir, self.root = path, git_dir, root
        self.marks = root / "marks"
        self.mark = root / "bin" / "mark"
        self.victim_file = root / "victim-home" / ".bashrc"

    @classmethod
    def build(cls, root: Path, kind: str = "sink", *, planted: bool = True) -> HostileRemote:
        """A remote of this kind under `root`, holding one honest message (sent and synced by machine "honest"),
        its traps set when `planted`."""
        assert kind in KINDS, kind
        root.mkdir(parents=True, exist_ok=True)
        path = root / (f"{kind}.git" if kind != "worktree" else kind)
        plain_git("init", "-q", "--template=", *(["--bare"] if kind != "worktree" else []), str(path))
        remote = cls(path, path if kind != "worktree" else path / ".git", root)
        honest = machine(root / "machines", "honest", str(path))
        remote.honest = honest
        remote.honest_id = _send(honest, "from an honest machine")
        sync_now(honest)
        remote._write_marker_program()
        if planted:
            remote.plant(kind)
        return remote

    honest: Store
    honest_id: str

    # -- what a path, a file:// URL and a symlink name ---------------------------------------------------------

    def urls(self) -> dict[str, str]:
        """The URL forms git reaches through its local transport: a path, a file:// URL, a path through a
        symlink, and a file:// URL through it."""
        link = self.root / "links" / f"{self.path.name}-link"
        link.parent.mkdir(exist_ok=True)
        if not link.is_symlink():
            link.symlink_to(self.path)
        return {
            "path": str(self.path),
            "file": f"file://{self.path}",
            "symlink": str(link),
            "file-symlink": f"file://{link}",
        }

    def markers(self) -> list[str]:
        """Which planted programs ran (a file each in `marks`), and whether the user's shell start-up file got
        code in it."""
        found = sorted(p.name for p in self.marks.iterdir()) if self.marks.is_dir() else []
        if self.victim_file.exists() and str(self.mark) in self.victim_file.read_text(errors="replace"):
            found.append("victim-file:shell-code")
        return found

    # -- code: hooks and config of every kind --------------------------------------------------------------------

    def _write_marker_program(self) -> None:
        self.marks.mkdir(exist_ok=True)
        self.mark.parent.mkdir(exist_ok=True)
        self.mark.write_text(
            "#!/bin/sh\n"
            'name=$1; shift\necho "pid=$$ cwd=$PWD args=$*" >>"' + str(self.marks) + '/$(echo "$name" | tr / _)"\n'
            'case "${1:-}" in\n  --cat) exec cat ;;\n  --drain) cat >/dev/null ;;\nesac\nexit 0\n'
        )
        self.mark.chmod(0o755)

    def hooks(self, folder: Path, label: str, skip: Iterable[str] = ()) -> None:
        """A marker for every hook event in `folder`."""
        folder.mkdir(parents=True, exist_ok=True)
        for hook in HOOKS:
            if hook in skip:
                continue
            drain = "" if hook == "proc-receive" else " --drain"  # proc-receive talks on stdin and stdout
            (folder / hook).write_text(f'#!/bin/sh\nexec {self.mark} {label}:{hook}{drain} "$@"\n')
            (folder / hook).chmod(0o755)

    def config(self, text: str, *, file: str = "config") -> None:
        with open(self.git_dir / file, "a") as handle:
            handle.write(text)

    def plant(self, kind: str) -> None:
        m = self.mark
        if kind == "sink":
            self.hooks(self.git_dir / "hooks", "hook")
            for event in RECEIVE_EVENTS:  # hooks a config defines (git 2.54 and later)
                drain = "" if event == "proc-receive" else " --drain"
                plain_git(
                    "--git-dir",
                    str(self.git_dir),
                    "config",
                    f"hook.evil-{event}.command",
                    f"{m} cfghook:{event}{drain}",
                )
                plain_git("--git-dir", str(self.git_dir), "config", f"hook.evil-{event}.event", event)
            alternate = self.root / "alternate.git"
            plain_git("init", "-q", "--bare", "--template=", str(alternate))
            (self.git_dir / "objects" / "info").mkdir(exist_ok=True)
            (self.git_dir / "objects" / "info" / "alternates").write_text(f"{alternate}/objects\n")
            (self.git_dir / "info").mkdir(exist_ok=True)
            (self.git_dir / "info" / "attributes").write_text("* filter=evil diff=evil merge=evil\n")
            self.config(
                f"[core]\n\talternateRefsCommand = {m} cfg:core.alternateRefsCommand\n", file="evil-include.config"
            )
            self.config(f"[gpg]\n\tprogram = {m} cfg:gpg.program\n", file="evil-includeif.config")
            self.config(
                "[include]\n\tpath = evil-include.config\n"
                '[includeIf "gitdir:/"]\n\tpath = evil-includeif.config\n'
                f"[core]\n\tfsmonitor = {m} cfg:core.fsmonitor\n\tsshCommand = {m} cfg:core.sshCommand\n"
                f"\tpager = {m} cfg:core.pager --cat\n\teditor = {m} cfg:core.editor\n\taskPass = {m} cfg:core.askPass\n"
                f"\tlogAllRefUpdates = always\n"
                f"[credential]\n\thelper = !{m} cfg:credential.helper\n"
                f"[uploadpack]\n\tpackObjectsHook = {m} cfg:uploadpack.packObjectsHook\n\tallowAnySHA1InWant = true\n"
                "[receive]\n\tautogc = true\n\tunpackLimit = 1\n\tupdateServerInfo = true\n\tcertNonceSeed = x\n"
                "[gc]\n\tauto = 1\n\tautoPackLimit = 1\n\tautoDetach = false\n"
                "[maintenance]\n\tauto = true\n"
                f'[filter "evil"]\n\tclean = {m} cfg:filter.clean --cat\n\tsmudge = {m} cfg:filter.smudge --cat\n'
                f'[diff "evil"]\n\ttextconv = {m} cfg:diff.textconv\n'
                f"[trace2]\n\teventTarget = {self.marks}/cfg:trace2.eventTarget\n"
                "[protocol]\n\tallow = always\n[safe]\n\tdirectory = *\n"
                f'[remote "origin"]\n\turl = {alternate}\n\tuploadpack = {m} cfg:remote.uploadpack\n'
                f"\treceivepack = {m} cfg:remote.receivepack\n"
                # the user's shell start-up file as the state ref's reflog, and shell code as the identity written
                f"[user]\n\tname = $({m} shell:user.name)\n\temail = x;{m} shell:user.email;\n"
            )
            self.victim_file.parent.mkdir(exist_ok=True)
            self.victim_file.write_text("# the user's .bashrc\n")
            log = self.git_dir / "logs" / STATE
            log.parent.mkdir(parents=True, exist_ok=True)
            log.unlink(missing_ok=True)
            log.symlink_to(self.victim_file)
            for _ in range(2):  # two packs, so that the gc --auto after a push goes ahead
                plain_git("--git-dir", str(self.git_dir), "repack", "-q", "-d")
                plain_git("--git-dir", str(self.git_dir), "hash-object", "-w", "--stdin", stdin="more\n")
        elif kind == "hookspath":
            self.hooks(self.git_dir / "hooks", "hook")
            self.hooks(self.root / "evilhooks", "hookspath")
            self.config(f"[core]\n\thooksPath = {self.root / 'evilhooks'}\n", file="evil-includeif.config")
            self.config('[includeIf "gitdir:/"]\n\tpath = evil-includeif.config\n')
        elif kind == "worktree":
            plain_git("-C", str(self.path), "symbolic-ref", "HEAD", STATE)
            plain_git("-C", str(self.path), "read-tree", "-u", "--reset", "HEAD")
            self.hooks(self.git_dir / "hooks", "hook")
            (self.git_dir / "info").mkdir(exist_ok=True)
            (self.git_dir / "info" / "attributes").write_text("* filter=evil diff=evil\n")
            self.config(
                "[receive]\n\tdenyCurrentBranch = updateInstead\n"
                f"[core]\n\tfsmonitor = {m} cfg:core.fsmonitor\n\tuntrackedCache = true\n"
                f'[filter "evil"]\n\tclean = {m} cfg:filter.clean --cat\n\tsmudge = {m} cfg:filter.smudge --cat\n'
            )
        elif kind == "procreceive":
            self.hooks(self.git_dir / "hooks", "hook")
            self.config("[receive]\n\tprocReceiveRefs = refs/gitmail-sync\n")

    # -- data: forged states, huge documents, junk refs ----------------------------------------------------------

    def git(self, *args: str, stdin: str | bytes | None = None, env: dict[str, str] | None = None) -> str:
        return plain_git("--git-dir", str(self.git_dir), *args, stdin=stdin, env=env)

    def state(self) -> str:
        return self.git("rev-parse", STATE).strip()

    def listing(self) -> dict[str, str]:
        """The state's tree: path -> object ("web/inbox/7k/7kq2m9x4ab" -> commit)."""
        out = self.git("ls-tree", "-r", "--full-tree", STATE)
        return {line.split("\t", 1)[1]: line.split()[2] for line in out.splitlines()}

    def message(
        self,
        message_id: str,
        *,
        to: str = "web",
        sender: str = "api",
        subject: str = "forged",
        body: str = "",
        raw: bytes | None = None,
        commit_text: str | None = None,
        attached: Mapping[str, bytes] | None = None,
        beside: Mapping[str, bytes] | None = None,
    ) -> str:
        """A message commit written on the remote as gitmail writes one, from machine "elsewhere" (or holding
        `raw` as its document, `commit_text` as its commit message): of any size, with any subject, carrying the
        files `attached` (recorded in its document) and, unrecorded, `beside` its document (a path: "a/b/file")."""
        message = Message(message_id, RepoName(sender), to, "x", body, at(0), machine=ELSEWHERE_MACHINE)
        files = {
            name: self.git("hash-object", "-w", "--stdin", stdin=data).strip()
            for name, data in (attached or {}).items()
        }
        records = tuple(
            Attachment(n, len(d), files[n], "application/octet-stream") for n, d in (attached or {}).items()
        )
        message = message._replace(subject=subject, attachments=records)
        blob = self.git("hash-object", "-w", "--stdin", stdin=raw if raw is not None else message.document()).strip()
        placed = {"message.md": blob, **{f"attachments/{n}": o for n, o in files.items()}}
        placed |= {
            path: self.git("hash-object", "-w", "--stdin", stdin=d).strip() for path, d in (beside or {}).items()
        }
        tree = self.tree(placed)
        author = {"GIT_AUTHOR_NAME": sender, "GIT_AUTHOR_EMAIL": email(RepoName(sender))}
        text = message.commit_message() if commit_text is None else commit_text
        return self.git("commit-tree", tree, "-F", "-", stdin=text, env={**_identity(), **author}).strip()

    def tree(self, blobs: Mapping[str, str]) -> str:
        """A tree holding these blobs by path ("a/b/c": in folders a and a/b)."""
        files = {path: oid for path, oid in blobs.items() if "/" not in path}
        folders: dict[str, dict[str, str]] = {}
        for path, oid in blobs.items():
            if "/" in path:
                top, _, rest = path.partition("/")
                folders.setdefault(top, {})[rest] = oid
        listing = [f"100644 blob {oid}\t{name}\n" for name, oid in files.items()]
        listing += [f"040000 tree {self.tree(inner)}\t{name}\n" for name, inner in folders.items()]
        return self.git("mktree", stdin="".join(listing)).strip()

    def publish(self, entries: dict[str, str | None], *, parents: Sequence[str] = ()) -> str:
        """A new state on top of the current one: each path set to a commit (None removes it), the commits in
        `parents` made reachable (a state reaches its messages through its parents)."""
        lines = [f"0 {'0' * 40}\t{path}\n" for path, oid in entries.items() if oid is None]
        lines += [f"160000 {oid}\t{path}\n" for path, oid in entries.items() if oid is not None]
        index = self.root / "scratch-index"
        env = {"GIT_INDEX_FILE": str(index)}
        self.git("read-tree", STATE, env=env)
        self.git("update-index", "--add", "--index-info", stdin="".join(lines), env=env)
        tree = self.git("write-tree", env=env).strip()
        index.unlink()
        flags = [f for p in [self.state(), *parents] for f in ("-p", p)]
        text = f"gitmail sync from elsewhere\n\nMachine: {ELSEWHERE_MACHINE.field()}\n"
        state = self.git("commit-tree", tree, *flags, "-m", text, env=_identity()).strip()
        self.git("update-ref", STATE, state)
        return state

    def deliver(self, message_id: str, commit: str, *, to: str = "web") -> str:
        """File a message commit as pending for `to` in a new state."""
        return self.publish({place(to, "inbox", message_id): commit}, parents=[commit])

    def move(self, message_id: str, to_folder: str) -> str:
        """Move a message the state holds to another folder ("archive", "retracted"): as another machine's sync
        does when that machine archived or retracted it."""
        listing = self.listing()
        [path] = [p for p in listing if p.endswith(f"/{message_id}")]
        repo = path.split("/")[0]
        return self.publish({path: None, place(repo, to_folder, message_id): listing[path]})

    def receipt(self, commit: str, line: str) -> str:
        """Add a line to the note on `commit` in the remote's receipts notes, as another machine's sync would."""
        ref, scratch = "refs/gitmail-sync/notes/gitmail-receipts", "refs/notes/forging"
        tip = self.git("for-each-ref", "--format=%(objectname)", ref).strip()
        if tip:
            self.git("update-ref", scratch, tip)
        self.git("notes", f"--ref={scratch}", "append", "-m", line, commit, env=_identity())
        forged = self.git("rev-parse", scratch).strip()
        self.git("update-ref", ref, forged)
        self.git("update-ref", "-d", scratch)
        return forged

    def junk_refs(self, count: int, prefix: str = "refs/gitmail-sync/junk/") -> None:
        """`count` refs the remote advertises beside gitmail's, each to an object of its own: one pack and lines
        of packed-refs, as a fast attacker writes them (thousands of loose files take seconds)."""
        marks = self.root / "junk-marks"
        stream = "".join(f"blob\nmark :{n + 1}\ndata {len(f'junk {n}')}\njunk {n}\n" for n in range(count))
        self.git("fast-import", "--quiet", f"--export-marks={marks}", stdin=stream)
        oids = dict(line.split() for line in marks.read_text().splitlines())
        packed = self.git_dir / "packed-refs"
        lines = [
            line for line in (packed.read_text().splitlines() if packed.exists() else []) if line[:1] not in ("#", "^")
        ]
        lines += [f"{oids[f':{n + 1}']} {prefix}{n}" for n in range(count)]
        entries = sorted(lines, key=lambda line: line.split(" ", 1)[1])
        packed.write_text("# pack-refs with: peeled fully-peeled sorted \n" + "".join(f"{e}\n" for e in entries))


def place(repo: str, folder: str, message_id: str) -> str:
    """A message's path in a state's tree."""
    return f"{repo}/{folder}/{message_id[:2]}/{message_id}"


def _send(store: Store, subject: str) -> str:
    from gitmail import mailbox

    return mailbox.send(store, sender="api", to="web", subject=subject).message.id


def _identity() -> dict[str, str]:
    return {
        "GIT_AUTHOR_NAME": "elsewhere",
        "GIT_AUTHOR_EMAIL": "9zz9zz9zz9@machine.gitmail",
        "GIT_COMMITTER_NAME": "elsewhere",
        "GIT_COMMITTER_EMAIL": "9zz9zz9zz9@machine.gitmail",
    }
