"""Leases across machines: a lease taken on one machine travels with sync, and the other machine's hooks deny the
same edit; two machines that leased one path while apart keep the earlier lease and tell the other holder; a lease
from another machine is held two minutes past its expiry by this machine's clock; and what a remote says of leases
is checked as mail is. Two machines are two mailboxes (each in a home of its own) over a real `git daemon`."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gitmail import hooks, mailbox
from gitmail.cli.sync import describe
from gitmail.errors import GitmailError
from gitmail.mailbox import leasing
from gitmail.mailbox.writes import writer_for
from gitmail.store import lease_refs, machines
from gitmail.store.location import log_path
from gitmail.store.repository import Store
from gitmail.sync import leasestate, quick
from gitmail.sync.engine import Outcome
from gitmail.values.ids import new_id
from gitmail.values.lease import CLOCK_MARGIN, DISPLACED, EXCLUSIVE, RELEASED, Lease
from gitmail.values.names import RepoName
from tests.hooked import Session as Hooked
from tests.syncing import bare_remote, git, git_daemon, home_of, refs_and_files, sync_now
from tests.syncing import machine as make_machine

API = RepoName("api")
GIT_ID = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


@pytest.fixture(autouse=True)
def no_racy_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quick, "RACY_SECONDS", 0.0)
    monkeypatch.setattr(quick, "FINE_RACY_SECONDS", 0.0)


class Machine:
    """One machine: its mailbox (in a home of its own) and its clone of `api`."""

    def __init__(self, root: Path, name: str, url: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.box = make_machine(root, name, url)
        self.name, self.monkeypatch = name, monkeypatch
        self.api = root / f"{name}-work" / "api"
        self.api.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(self.api)], check=True)
        (self.api / "src").mkdir()
        (self.api / "src" / "orders.py").write_text("orders\n")
        (self.api / "src" / "users.py").write_text("users\n")
        for command in (["add", "."], ["commit", "-q", "-m", "start"]):
            subprocess.run(
                ["git", *command], cwd=self.api, check=True, capture_output=True, env={**os.environ, **GIT_ID}
            )

    @contextmanager
    def here(self) -> Iterator[None]:
        """This machine's environment for hooks and commands: its HOME, so its default mailbox."""
        before = os.environ["HOME"]
        self.monkeypatch.setenv("HOME", str(home_of(self.box.path)))
        try:
            yield
        finally:
            self.monkeypatch.setenv("HOME", before)

    def session(self, name: str) -> Hooked:
        with self.here():
            hooked = Hooked(self.api, name)
            hooked("session-start")
            assert hooked.gitmail("session", "--name", name).returncode == 0
        return hooked

    def run(self, hooked: Hooked, *args: str) -> subprocess.CompletedProcess[str]:
        with self.here():
            return hooked.gitmail(*args)

    def moment(self, hooked: Hooked, moment: str = "tool") -> str:
        with self.here():
            return hooked(moment)

    def edit(self, hooked: Hooked, path: str) -> dict[str, object] | None:
        """A Write of `path` (relative to the clone) as Claude Code asks its PreToolUse hook: the hook's answer."""
        payload = {
            "session_id": hooked.id,
            "cwd": str(self.api),
            "hook_event_name": "PreToolUse",
            "tool_name": "Write",
            "tool_input": {"file_path": str(self.api / path), "content": "x"},
        }
        with self.here():
            return hooks.run("edit", hooked.host, json.dumps(payload)).stdout

    def held(self, now: float | None = None) -> list[Lease]:
        return [s.lease for s in leasing.standing(self.box, API, now) if s.held]

    def index(self) -> str:
        return Path(lease_refs.index_path(self.box, API)).read_text()

    def sync(self) -> None:
        sync_now(self.box)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    root = tmp_path / "served"
    root.mkdir()
    bare_remote(root / "mail.git")
    with git_daemon(root) as base:
        yield f"{base}/mail.git"


@pytest.fixture
def pair(tmp_path: Path, served: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Machine, Machine]:
    """Two machines with a clone of `api` each, syncing over a git daemon; each has seen the other's key."""
    laptop, server = Machine(tmp_path, "laptop", served, monkeypatch), Machine(tmp_path, "server", served, monkeypatch)
    for one in (laptop, server, laptop):
        one.sync()
    return laptop, server


def denied(answer: dict[str, object] | None) -> str:
    assert answer is not None
    specific = answer["hookSpecificOutput"]
    assert isinstance(specific, dict) and specific["permissionDecision"] == "deny"
    return str(specific["permissionDecisionReason"])


def remote_leases(remote: Path) -> list[str]:
    """What the remote's lease state lists: `<machine>/<repo>/<lease id>` each."""
    listed = git(remote, "ls-tree", "-r", "--name-only", f"refs/gitmail-sync/{leasestate.LEASES}", check=False)
    return [line for line in listed.splitlines() if line != leasestate.FORMAT_PATH]


# -- travelling ----------------------------------------------------------------------------------------------------


def test_a_lease_travels_and_the_other_machine_denies_the_edit_until_it_is_released(
    pair: tuple[Machine, Machine], tmp_path: Path
) -> None:
    laptop, server = pair
    front = laptop.session("front-01")
    taken = laptop.run(front, "lease", "src/orders.py", "--note", "splitting orders")
    assert taken.returncode == 0, taken.stderr
    back = server.session("back-002")
    assert server.edit(back, "src/orders.py") is None  # not synced yet: nothing known of it here
    laptop.sync()
    server.sync()
    [there] = server.held()
    assert (there.id, there.handle, there.machine) == (
        taken.stdout.strip(),
        "api#front-01",
        machines.current(laptop.box),
    )
    laptop_id = machines.local_id(laptop.box)
    assert server.index() == f"claude:front-01@{laptop_id}\torders.py\n"  # the shell starts Python for this file only
    reason = denied(server.edit(back, "src/orders.py"))
    assert reason.startswith(
        'gitmail: "src/orders.py" is leased exclusive by "api#front-01" ("splitting orders") until '
    )
    assert reason.endswith('; ask its holder: gitmail send --to api#front-01 -s "..."')
    assert server.edit(back, "src/users.py") is None
    refused = server.run(back, "lease", "src/orders.py")
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1
    assert refused.stderr.startswith('gitmail: error: "src/orders.py" is leased exclusive by "api#front-01"')
    assert remote_leases(tmp_path / "served" / "mail.git") == [f"{laptop_id}/api/{there.id}"]

    assert laptop.run(front, "release").returncode == 0
    laptop.sync()
    server.sync()
    assert server.held() == [] and server.index() == ""
    assert server.edit(back, "src/orders.py") is None
    assert server.run(back, "lease", "src/orders.py").returncode == 0
    assert sync_now(server.box).leases_there
    assert sync_now(server.box).quiet and sync_now(laptop.box).leases_here == 1
    assert [held.handle for held in laptop.held()] == ["api#back-002"]


@pytest.mark.parametrize("first", ["earlier", "later"])
def test_of_two_leases_taken_apart_the_earlier_stands_and_the_other_holder_is_told(
    pair: tuple[Machine, Machine], tmp_path: Path, first: str
) -> None:
    laptop, server = pair
    front, back = laptop.session("front-01"), server.session("back-002")
    assert laptop.run(front, "lease", "src/orders.py").returncode == 0  # the earlier
    assert server.run(back, "lease", "src").returncode == 0  # covers it too, taken later, apart
    order = [laptop, server] if first == "earlier" else [server, laptop]
    said = [one.run(front if one is laptop else back, "sync").stderr for one in [*order, *order]]
    gave_way = "1 lease of this machine gave way to an earlier lease taken on another machine (its holder is told)"
    assert said == (
        [
            "gitmail: synced with origin: this machine's leases sent\n",
            f"gitmail: synced with origin: other machines' leases brought in for 1 repository, {gave_way}\n",
            "gitmail: origin: up to date\n",
            "gitmail: origin: up to date\n",
        ]
        if first == "earlier"
        else [
            "gitmail: synced with origin: this machine's leases sent\n",
            "gitmail: synced with origin: other machines' leases brought in for 1 repository, this machine's leases "
            "sent\n",
            f"gitmail: synced with origin: other machines' leases brought in for 1 repository, {gave_way}, this "
            "machine's leases sent\n",
            "gitmail: origin: up to date\n",  # it had ended the later lease when it brought it in
        ]
    )
    for one in (laptop, server):
        assert [held.handle for held in one.held()] == ["api#front-01"], one.name
        assert (
            one.index()
            == f"claude:front-01{'' if one is laptop else '@' + str(machines.local_id(laptop.box))}\torders.py\n"
        )
    [ended] = [r for r in server.box.refs_under("refs/gitmail/api/leased/")]
    record = lease_refs.ended_record(server.box, API, ended.rpartition("/")[2])
    assert record is not None and record.ended == DISPLACED and record.handle == "api#back-002"
    assert laptop.moment(front) == ""  # its lease stands: nothing to say
    told = server.moment(back)
    assert told == (
        'gitmail: your lease on "src/**" ended: an earlier lease on the same files, taken on another machine while '
        'the two were apart, stands; now held by "api#front-01" (`gitmail lease` takes it again where it is free).\n'
    )
    assert server.moment(back) == ""  # once
    assert denied(server.edit(back, "src/orders.py")).startswith(
        'gitmail: "src/orders.py" is leased exclusive by "api#front-01"'
    )
    assert remote_leases(tmp_path / "served" / "mail.git") == [
        f"{machines.local_id(laptop.box)}/api/{laptop.held()[0].id}"
    ]
    assert sync_now(laptop.box).quiet and sync_now(server.box).quiet


def test_the_summary_names_the_leases_a_sync_moved() -> None:
    assert describe(Outcome("origin", leases_there=True)) == "synced with origin: this machine's leases sent"
    assert describe(Outcome("origin", leases_here=1)) == (
        "synced with origin: other machines' leases brought in for 1 repository"
    )
    assert describe(Outcome("origin", received=2, leases_here=2, displaced=2, leases_there=True, notes=1)) == (
        "synced with origin: 2 messages new here, other machines' leases brought in for 2 repositories, 2 leases of "
        "this machine gave way to earlier leases taken on another machine (their holders are told), this machine's "
        "leases sent, hand-overs merged"
    )
    assert not Outcome("origin", displaced=1).quiet


def test_a_renewal_travels_and_another_machine_holds_a_lease_two_minutes_past_its_expiry(
    pair: tuple[Machine, Machine],
) -> None:
    laptop, server = pair
    front = laptop.session("front-01")
    assert laptop.run(front, "lease", "src/orders.py", "--for", "10m").returncode == 0
    laptop.sync()
    server.sync()
    [lease] = server.held()
    expires = lease.expires
    assert [x.id for x in server.held(expires + 60)] == [lease.id]  # its holder's clock may run behind
    assert server.held(expires + CLOCK_MARGIN + 1) == []
    assert [x.id for x in laptop.held(expires - 1)] == [lease.id] and laptop.held(expires) == []  # exact there
    assert laptop.run(front, "lease", "--renew").returncode == 0
    laptop.sync()
    server.sync()
    [renewed] = server.held()
    assert renewed.id == lease.id and renewed.expires > expires
    assert server.held(renewed.expires + 60) != [] and server.held(renewed.expires + CLOCK_MARGIN + 1) == []


# -- what a remote says of leases is checked ------------------------------------------------------------------------


def plant(box: Store, remote: Path, entries: dict[str, str], *, parents: list[str], blob_at_top: bool = False) -> None:
    """Put a lease state of our making on the remote: `entries` maps `<machine>/<repo>/<id>` to a record commit
    (of `box`'s mailbox, whose objects are pushed from it)."""
    index = box.path / "scratch-index"
    env = {**os.environ, "GIT_INDEX_FILE": str(index), **GIT_ID}
    form = subprocess.run(
        ["git", "--git-dir", str(box.path), "hash-object", "-w", "--stdin"],
        input=leasestate.FORMAT_TEXT, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    lines = [f"100644 {form}\t{leasestate.FORMAT_PATH}"] + [f"160000 {oid}\t{path}" for path, oid in entries.items()]
    if blob_at_top:
        lines.append(f"100644 {form}\tjunk")
    subprocess.run(
        ["git", "--git-dir", str(box.path), "update-index", "--add", "--index-info"],
        input="\n".join(lines) + "\n", env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip
    tree = subprocess.run(
        ["git", "--git-dir", str(box.path), "write-tree"], env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    index.unlink()
    flags = [f for p in parents for f in ("-p", p)]
    commit = subprocess.run(
        ["git", "--git-dir", str(box.path), "commit-tree", tree, *flags, "-m", "planted"],
        env=env, check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    subprocess.run(
        ["git", "--git-dir", str(box.path), "push", "-q", "--force", str(remote), f"{commit}:refs/gitmail-sync/leases"],
        check=True, capture_output=True,
    )  # fmt: skip


def signed_record(box: Store, lease: Lease) -> str:
    """A lease record written and signed by `box`'s machine, whatever it says (no ref points at it)."""
    with writer_for(box, actor=API) as writer:
        return str(leasing._record(writer, lease, []))


def unsigned_record(box: Store, lease: Lease) -> str:
    blob = plumbing(box, "hash-object", "-w", "--stdin", given=lease.document().decode())
    tree = plumbing(box, "mktree", given=f"100644 blob {blob}\tlease.json\n")
    return plumbing(box, "commit-tree", tree, "-m", lease.said())


def plumbing(box: Store, *args: str, given: str = "") -> str:
    done = subprocess.run(
        ["git", "--git-dir", str(box.path), *args],
        input=given,
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ID},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
def by_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Machine, Machine, Path]:
    """Two machines syncing through a bare repository by path (the hostile remote is written to directly)."""
    remote = bare_remote(tmp_path / "remote.git")
    laptop, server = (Machine(tmp_path, n, str(remote), monkeypatch) for n in ("laptop", "server"))
    for one in (laptop, server, laptop):
        one.sync()
    return laptop, server, remote


def test_lease_records_a_remote_makes_up_are_left_out_and_logged(by_path: tuple[Machine, Machine, Path]) -> None:
    laptop, server, remote = by_path
    here, there = machines.current(laptop.box), machines.current(server.box)
    now = time.time()

    def made(**changes: object) -> Lease:
        fields: dict[str, object] = {
            "id": new_id(), "repo": "api", "paths": ("src/orders.py",), "mode": EXCLUSIVE,
            "holder": "claude:front-01", "machine": here, "taken": now, "renewed": now, "duration": 600.0,
            "handle": "api#front-01",
        }  # fmt: skip
        fields.update(changes)
        return Lease(**fields)  # type: ignore[arg-type]

    cases = {
        "unsigned": (made(), unsigned_record),
        "another repository's folder": (made(), signed_record),
        "another id": (made(), signed_record),
        "claims the reader's machine": (made(machine=there), signed_record),
        "a path outside the repository": (made(paths=("../secrets",)), signed_record),
        "an absolute path": (made(paths=("/etc/passwd",)), signed_record),
        "runs for days": (made(renewed=now + 86400), signed_record),
        "ended": (made(ended=RELEASED), signed_record),
    }
    entries, parents = {}, []
    for why, (lease, write) in cases.items():
        oid = write(laptop.box, lease)
        repo = "web" if why == "another repository's folder" else "api"
        lease_id = new_id() if why == "another id" else lease.id
        folder = there.id if why == "claims the reader's machine" else here.id
        entries[f"{folder}/{repo}/{lease_id}"] = oid
        parents.append(oid)
    mailbox.send(laptop.box, sender="api", to="web", subject="hello")  # its key is published with what it writes
    laptop.sync()
    plant(laptop.box, remote, entries, parents=parents)
    outcome = sync_now(server.box)
    assert outcome.leases_here == 0 and server.held() == []
    assert lease_refs.repos(server.box) == []
    logged = Path(log_path(server.box.path)).read_text()
    assert logged.count("a lease of its state was left out") == len(cases) - 1  # the reader's own folder is its own
    good = made()
    record = signed_record(laptop.box, good)
    plant(laptop.box, remote, {f"{here.id}/api/{good.id}": record}, parents=[record])
    sync_now(server.box)
    assert [held.id for held in server.held()] == [good.id]  # the same checks let a true one through


def test_a_lease_state_of_another_shape_changes_nothing_here(by_path: tuple[Machine, Machine, Path]) -> None:
    laptop, server, remote = by_path
    before = refs_and_files(server.box)
    plant(laptop.box, remote, {}, parents=[], blob_at_top=True)
    with pytest.raises(
        GitmailError, match="^origin: the remote holds something other than gitmail mail .an entry of its"
    ):
        sync_now(server.box)
    assert refs_and_files(server.box) == before
