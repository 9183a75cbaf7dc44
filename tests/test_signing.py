"""Signed mail: every commit gitmail writes carries an SSH signature that git and ssh-keygen accept, and mail from
another machine is VERIFIED only when the key this machine accepts for the machine it names signed it, as found.
Keys are made here, with ssh-keygen where a test needs one gitmail did not make (RSA, an outsider's, an agent's)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gitmail import actions, mailbox, render
from gitmail.store import keys, machines, pins, signatures
from gitmail.store.claims import load_claims
from gitmail.store.objects import BLOB, Entry, Objects, ident
from gitmail.store.repository import Store
from gitmail.store.writer import writing
from gitmail.sync import quick
from gitmail.values import mail, sshsig
from gitmail.values.layout import Change
from gitmail.values.machine import Machine
from gitmail.values.message import DOCUMENT_NAME, Message
from gitmail.values.names import RepoName
from gitmail.values.verdict import BAD, GOOD, NEW, PINNED, REVOKED, TRUSTED, UNSIGNED, Fact
from tests.conftest import CliRunner, at, mailbox_snapshot, run_gitmail
from tests.processes import loaded
from tests.syncing import as_machine, bare_remote, git, git_daemon, sync_now
from tests.syncing import machine as make_machine


@pytest.fixture(autouse=True)
def no_racy_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quick, "RACY_SECONDS", 0.0)
    monkeypatch.setattr(quick, "FINE_RACY_SECONDS", 0.0)


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    return bare_remote(tmp_path / "remote.git")


@pytest.fixture
def pair(tmp_path: Path, remote: Path) -> tuple[Store, Store]:
    """Two machines, "laptop" and "server", sharing a remote by path; laptop has sent once and both synced, so
    each has its key and server has pinned laptop's."""
    a, b = (make_machine(tmp_path, name, str(remote)) for name in ("laptop", "server"))
    mailbox.send(a, sender="api", to="web", subject="first", when=at(0))
    sync_now(a), sync_now(b)
    return a, b


def ssh_keygen(path: Path, kind: str = "ed25519") -> Path:
    extra = ["-b", "2048"] if kind == "rsa" else []
    subprocess.run(["ssh-keygen", "-q", "-t", kind, *extra, "-N", "", "-C", "test", "-f", str(path)], check=True)
    return path


def own_key(store: Store) -> keys.Signer:
    key = keys.signer(store, create=False)
    assert key is not None
    return key


def only(store: Store, repo: str = "web") -> mail.Entry:
    [entry] = mailbox.pending(store, repo=repo).directed
    return entry


def label(entry: mail.Entry) -> str:
    return render.vouched(entry, {})


def write_as(
    store: Store,
    message: Message,
    *,
    sign: Callable[[bytes], str] | None,
    ref: str | None = None,
    tamper: Callable[[Objects, bytes], bytes] | None = None,
) -> str:
    """A message commit written straight into a mailbox, as it would arrive from elsewhere: signed by `sign` (or
    not), changed after signing by `tamper`, filed under `ref` (its own place by default)."""
    with writing(store, actor=RepoName("test")) as writer:
        writer.objects.sign = sign
        oid: str = writer.objects.commit(message)
        if tamper is not None:
            raw = store.read([oid])[0]
            assert raw is not None
            oid = writer.objects.write("commit", tamper(writer.objects, raw))
        writer.apply([Change(ref or f"refs/gitmail/{message.to}/inbox/{message.id}", oid, None)], "test")
    return oid


def from_laptop(a: Store, subject: str = "hello", **changes: object) -> Message:
    message = Message("7kq2m9x4ab", RepoName("api"), "web", subject, "the body", at(5), machine=machines.current(a))
    return message._replace(**changes)  # type: ignore[arg-type]


# -- the signature on every commit --------------------------------------------------------------------------------


def test_every_commit_gitmail_writes_is_signed_and_git_and_ssh_keygen_accept_it(
    box: Store, tmp_path: Path, web: Path
) -> None:
    sent = mailbox.send(box, sender="api", to="web", subject="hello", body="body")
    answer = mailbox.reply(box, sender="web", to_id=sent.message.id, body="thanks")
    cast = mailbox.broadcast(box, sender="api", subject="all")
    mailbox.retract(box, sender="api", message_id=cast.message.id)
    mailbox.done(box, repo="api", ids=[answer.message.id])
    allowed = tmp_path / "allowed"
    allowed.write_text(actions.allowed_signers(box))
    here = machines.current(box)
    key = own_key(box)
    commits = git(box.path, "rev-list", "--glob=refs/gitmail", "--glob=refs/notes").split()
    assert len(commits) >= 8  # three messages; receipts, hand-overs and the key, in notes commits
    config = ["-c", f"gpg.ssh.allowedSignersFile={allowed}"]
    for oid in commits:
        checked = subprocess.run(
            ["git", "--git-dir", str(box.path), *config, "verify-commit", oid], capture_output=True, text=True
        )
        assert checked.returncode == 0, checked.stderr
        assert f'Good "git" signature for {here.name}@{here.id} with ED25519 key {key.fingerprint}' in checked.stderr
    shown = git(box.path, *config, "log", "--format=%G? %GS", "--glob=gitmail")
    assert set(shown.splitlines()) == {f"G {here.name}@{here.id}"}
    # ssh-keygen itself, on the signed bytes of a message
    payload, armored = sshsig.split_commit(git(box.path, "cat-file", "commit", sent.oid).encode())
    assert armored is not None
    (tmp_path / "sig").write_text(armored)
    done = subprocess.run(
        ["ssh-keygen", "-Y", "verify", "-f", str(allowed), "-I", f"{here.name}@{here.id}", "-n", "git"]
        + ["-s", str(tmp_path / "sig")],
        input=payload,
        capture_output=True,
    )
    assert done.returncode == 0, done.stderr
    # the retraction's signed record names what it retracts
    record = git(box.path, "log", "--format=%B", "--grep=retracted", "refs/notes/gitmail-receipts")
    assert f"Message-Id: {cast.message.id}\nCommit: {cast.oid}\nMachine: {here.field()}" in record
    notes = git(box.path, "notes", "--ref=gitmail-receipts", "show", cast.oid)
    assert '"event":"retracted","repo":"api"' in notes


def test_the_key_is_made_on_first_use_owner_only_and_ssh_keygen_reads_it(box: Store) -> None:
    assert not box.exists()
    mailbox.send(box, sender="api", to="web", subject="hello")
    key = own_key(box)
    assert key.path == box.own_dir / "keys" / machines.current(box).id
    assert key.path.stat().st_mode & 0o777 == 0o600 and key.path.parent.stat().st_mode & 0o777 == 0o700
    listed = subprocess.run(["ssh-keygen", "-l", "-f", str(key.path)], capture_output=True, text=True, check=True)
    assert listed.stdout.split()[1] == key.fingerprint
    public = subprocess.run(["ssh-keygen", "-y", "-f", str(key.path)], capture_output=True, text=True, check=True)
    assert public.stdout.split()[:2] == key.openssh.split() == Path(f"{key.path}.pub").read_text().split()[:2]
    objects = subprocess.run(
        ["git", "--git-dir", str(box.path), "cat-file", "--batch-all-objects", "--batch"], capture_output=True
    ).stdout
    assert b"PRIVATE KEY" not in objects and key.path.read_bytes() not in objects  # never among its git objects


def test_in_process_signatures_are_what_ssh_keygen_makes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key_file = ssh_keygen(tmp_path / "key")
    data = b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\nhello\r\n\x00\xff"
    made = subprocess.run(
        ["ssh-keygen", "-q", "-Y", "sign", "-n", "git", "-f", str(key_file)], input=data, capture_output=True
    )
    key = keys.load(key_file)
    assert key.seed is not None  # signed in-process
    assert key.sign(data) == made.stdout.decode()  # Ed25519 is deterministic: byte for byte the same
    monkeypatch.setattr(sshsig, "_sodium", False)  # PyNaCl's public bindings: the same
    assert key.sign(data) == made.stdout.decode()
    assert signatures.check(data, made.stdout.decode(), "git") == Fact(GOOD, key.fingerprint)
    assert signatures.check(data + b"!", made.stdout.decode(), "git").kind == BAD


def test_a_signature_for_another_namespace_is_bad(tmp_path: Path) -> None:
    key = keys.load(ssh_keygen(tmp_path / "key"))
    fact = signatures.check(b"data", key.sign(b"data", "file"), "git")
    assert fact == Fact(BAD, key.fingerprint, "signed for 'file', not 'git'")
    assert signatures.check(b"data", key.sign(b"data").replace("\n", "\r\n"), "git").kind == BAD  # as git does


def test_a_key_file_others_can_read_is_refused_in_one_line_and_nothing_is_written(
    cli: CliRunner, box: Store, api: Path, tmp_path: Path
) -> None:
    assert cli("send", "--to", "web", "-s", "first", cwd=api).code == 0
    key = own_key(box)
    key.path.chmod(0o644)
    before = mailbox_snapshot(box.path)
    refused = cli("send", "--to", "web", "-s", "second", cwd=api)
    assert refused.code == 1 and refused.out == ""
    assert refused.err == (
        f"gitmail: error: the signing key {key.path} can be read by others (mode 0644); gitmail refuses it, as ssh "
        f"does (fix: chmod 600 {key.path})\n"
    )
    assert mailbox_snapshot(box.path) == before
    mine = ssh_keygen(tmp_path / "mine")
    mine.chmod(0o640)
    used = cli("keys", "use", str(mine))
    assert used.code == 1 and used.err.startswith(f"gitmail: error: the signing key {mine} can be read by others")
    assert used.err.count("\n") == 1
    assert mailbox_snapshot(box.path) == before


# -- verdicts -----------------------------------------------------------------------------------------------------


def test_mail_signed_by_its_machine_is_verified_and_says_by_which_key(pair: tuple[Store, Store]) -> None:
    a, b = pair
    entry = only(b)
    key = own_key(a)
    assert entry.verdict is not None and entry.verdict.verified
    assert label(entry) == f'VERIFIED by the key {key.fingerprint} of machine "laptop"'
    assert render.as_json(entry)["signature"] == {
        "verified": True,
        "machine": "laptop",
        "key": key.fingerprint,
        "reason": None,
    }
    card = render.card(mailbox.show(b, entry.message.id), claims={}, state=True)
    assert f'from "api" on machine "laptop" (VERIFIED by the key {key.fingerprint} of machine "laptop")' in card
    # on the machine that wrote it: today's rules, no verdict
    [mine] = mailbox.pending(a, repo="web").directed
    assert mine.verdict is None and render.as_json(mine)["signature"] is None
    assert label(mine) == "UNVERIFIED"  # no repository called api here: as before


@pytest.mark.parametrize(
    "case",
    [
        "unsigned",
        "tampered body",
        "tampered tree",
        "outsider",
        "wrong machine",
        "wrong machine id",
        "replayed id",
        "replayed recipient",
    ],
)
def test_every_other_message_is_unverified_with_the_reason(
    pair: tuple[Store, Store], tmp_path: Path, remote: Path, case: str
) -> None:
    a, b = pair
    laptop = own_key(a)
    outsider = keys.load(ssh_keygen(tmp_path / "outsider"))
    third = make_machine(tmp_path, "ci", str(remote))
    mailbox.send(third, sender="ops", to="elsewhere", subject="hi")
    sync_now(third), sync_now(b)  # b pins ci's key too
    message = from_laptop(a)

    def other_tree(objects: Objects, raw: bytes) -> bytes:
        blob = objects.write("blob", message._replace(body="changed").document())
        tree = objects.tree([Entry(BLOB, DOCUMENT_NAME, blob)])
        return raw.replace(raw[5:45], tree.encode(), 1)

    written = {
        "unsigned": lambda: write_as(b, message, sign=None),
        "tampered body": lambda: write_as(
            b, message, sign=laptop.sign, tamper=lambda _, raw: raw.replace(b"the body", b"the bodY")
        ),
        "tampered tree": lambda: write_as(b, message, sign=laptop.sign, tamper=other_tree),
        "outsider": lambda: write_as(b, message, sign=outsider.sign),
        "wrong machine": lambda: write_as(b, message, sign=own_key(third).sign),
        "wrong machine id": lambda: write_as(
            b, message._replace(machine=Machine("laptop", "2zz2zz2zz2")), sign=laptop.sign
        ),
        "replayed id": lambda: write_as(b, message, sign=laptop.sign, ref="refs/gitmail/web/inbox/5tgh0a1b2c"),
        "replayed recipient": lambda: write_as(b, message, sign=laptop.sign, ref="refs/gitmail/ops/inbox/7kq2m9x4ab"),
    }
    written[case]()
    repo = "ops" if case == "replayed recipient" else "web"
    entries = [e for e in mailbox.pending(b, repo=repo).directed if e.message.subject == "hello"]
    [entry] = entries
    assert entry.verdict is not None and not entry.verdict.verified
    reasons = {
        "unsigned": "UNVERIFIED: not signed",
        "tampered body": "UNVERIFIED: a bad signature (the signature does not match)",
        "tampered tree": "UNVERIFIED: a bad signature (the signature does not match)",
        "outsider": f'UNVERIFIED: signed with {outsider.fingerprint}, which is not a key of machine "laptop"',
        "wrong machine": 'UNVERIFIED: signed by the key of machine "ci", not of machine "laptop"',
        "wrong machine id": f'UNVERIFIED: signed by the key of machine "laptop" ({machines.current(a).id}), but it '
        "names machine id 2zz2zz2zz2",
        "replayed id": 'UNVERIFIED: replayed: it was signed as message 7kq2m9x4ab to "web", and found as '
        '5tgh0a1b2c to "web"',
        "replayed recipient": 'UNVERIFIED: replayed: it was signed as message 7kq2m9x4ab to "web", and found as '
        '7kq2m9x4ab to "ops"',
    }
    assert label(entry) == reasons[case]
    text = render.framing(mailbox.pending(b, repo=repo), claims=load_claims(b))
    assert "(VERIFIED" not in text.replace(f"(VERIFIED by the key {laptop.fingerprint}", "")
    assert f"({reasons[case]})" in text
    assert render.as_json(entry)["signature"]["verified"] is False


def test_a_revoked_machine_and_a_changed_key(pair: tuple[Store, Store], tmp_path: Path, cli: CliRunner) -> None:
    a, b = pair
    old = own_key(a)
    assert [(k.name, k.state) for k in pins.known(b).all] == [("laptop", PINNED)]
    # revoked: every key of the machine, until one is trusted again
    revoked = actions.revoke_key(b, "laptop")
    assert [(k.fingerprint, k.state) for k in revoked] == [(old.fingerprint, REVOKED)]
    assert label(only(b)) == f'UNVERIFIED: signed with {old.fingerprint}, a revoked key of machine "laptop"'
    actions.trust_key(b, machines.current(a).id, old.fingerprint)
    assert label(only(b)).startswith("VERIFIED")
    # a changed key: never accepted silently
    new_file = ssh_keygen(tmp_path / "new")
    actions.use_key(a, str(new_file))
    new = own_key(a)
    mailbox.send(a, sender="api", to="web", subject="with the new key", when=at(9))
    sync_now(a), sync_now(b)
    states = {k.fingerprint: k.state for k in pins.known(b).all}
    assert states == {old.fingerprint: TRUSTED, new.fingerprint: NEW}
    by_subject = {e.message.subject: e for e in mailbox.pending(b, repo="web").directed}
    assert label(by_subject["first"]).startswith("VERIFIED")  # the old key still vouches for its mail
    assert label(by_subject["with the new key"]) == (
        f'UNVERIFIED: machine "laptop" has a new key, {new.fingerprint}, not accepted here yet'
    )
    monkey_env = {"GITMAIL_DIR": str(b.path)}
    doctor = run_gitmail("doctor", cwd=tmp_path, env=monkey_env)
    assert doctor.returncode == 1
    laptop_id = machines.current(a).id
    assert (
        f'problem   keys: machine "laptop" ({laptop_id}) published a key this machine does not accept: '
        f"{new.fingerprint}; its mail signed with it reads UNVERIFIED -- fix: if you expect it (compare with "
        f"`gitmail keys` on that machine): gitmail keys trust {laptop_id} {new.fingerprint}; if not: gitmail keys "
        f"revoke {laptop_id}"
    ) in doctor.stdout
    listed = run_gitmail("keys", cwd=tmp_path, env=monkey_env).stdout
    assert f"laptop\t{laptop_id}\t{new.fingerprint}\tNEW KEY, not accepted" in listed
    trusted = run_gitmail("keys", "trust", "laptop", new.fingerprint, cwd=tmp_path, env=monkey_env)
    assert trusted.returncode == 0, trusted.stderr
    assert trusted.stderr == f'gitmail: trusted {new.fingerprint} for machine "laptop" ({laptop_id})\n'
    assert all(label(e).startswith("VERIFIED") for e in mailbox.pending(b, repo="web").directed)
    assert run_gitmail("doctor", cwd=tmp_path, env=monkey_env).returncode == 0


def publish_forged(store: Store, line: str, under: str) -> None:
    """A key publication put straight into a mailbox's key notes, under the note of `under`, as a remote could."""
    with writing(store, actor=RepoName("test")) as writer:
        change, _ = writer.note_lines(keys.KEYS_NOTES, {under: [line]}, who=RepoName("test"), when=at(0), text="x\n")
        assert change is not None
        writer.apply([change], "test")
    with store.locked():
        keys.learn(store)


def test_no_publication_but_a_machines_own_in_its_own_note_is_taken_in(
    pair: tuple[Store, Store], tmp_path: Path, remote: Path
) -> None:
    a, b = pair
    laptop = machines.current(a)
    stranger = keys.signer(make_machine(tmp_path / "thief", "thief", str(remote)), create=True)
    assert stranger is not None
    mailbox.send(b, sender="web", to="api", subject="server publishes its own key", when=at(1))
    renaming = keys.publication(stranger, Machine(id=laptop.id, name="server"), 9_999_999_999)  # signed by its own key
    publish_forged(b, renaming, keys.anchor(laptop.id))
    assert {(k.name, k.fingerprint, k.state) for k in pins.known(b).all if k.machine == laptop.id} == {
        ("laptop", own_key(a).fingerprint, PINNED),  # no key but an accepted one renames a machine
        ("laptop", stranger.fingerprint, NEW),
    }
    misfiled = keys.publication(stranger, Machine(id="q" * 10, name="quiet"), 1)
    publish_forged(b, misfiled, keys.anchor(laptop.id))  # filed under another machine's note
    assert "q" * 10 not in {k.machine for k in pins.known(b).all}
    odd_time = keys.publication(stranger, Machine(id="r" * 10, name="odd"), "²")  # type: ignore[arg-type]
    assert keys.parse_publication(odd_time) is None  # a digit to isdigit(), not to int(): no crash
    publish_forged(b, odd_time, keys.anchor("r" * 10))
    assert run_gitmail("keys", cwd=tmp_path, env={"GITMAIL_DIR": str(b.path)}).returncode == 0


def test_a_second_machine_going_by_a_known_machines_name_is_not_pinned(
    pair: tuple[Store, Store], tmp_path: Path, remote: Path
) -> None:
    a, b = pair
    twin = make_machine(tmp_path / "twin", "laptop", str(remote))
    mailbox.send(twin, sender="api", to="web", subject="from the twin", when=at(3))
    sync_now(twin), sync_now(b)
    by_subject = {e.message.subject: e for e in mailbox.pending(b, repo="web").directed}
    assert label(by_subject["first"]).startswith("VERIFIED")
    assert label(by_subject["from the twin"]).startswith("UNVERIFIED")
    assert (machines.current(twin).id, NEW) in {(k.machine, k.state) for k in pins.known(b).all}
    doctor = run_gitmail("doctor", cwd=tmp_path, env={"GITMAIL_DIR": str(b.path)})
    assert doctor.returncode == 1 and f'machine "laptop" ({machines.current(twin).id}) published a key' in doctor.stdout


def test_a_machine_pinned_on_first_sight_cannot_rename_itself_into_an_accepted_machines_name(
    pair: tuple[Store, Store], tmp_path: Path, remote: Path
) -> None:
    """An outsider that joined as "evil" (pinned on first sight) and then publishes the name "laptop" keeps the
    name "evil" here: its mail, the earlier too, never reads as laptop's, the log says why, and `keys trust laptop`
    names both machines and asks for the id."""
    from gitmail.web import pages, snapshot

    a, b = pair
    evil = make_machine(tmp_path / "outsider", "evil", str(remote))
    mailbox.send(evil, sender="api", to="web", subject="hello from evil", when=at(3))
    sync_now(evil), sync_now(b)
    evil_id, laptop_id, key = machines.current(evil).id, machines.current(a).id, own_key(evil).fingerprint
    renamed = keys.publication(own_key(evil), Machine(id=evil_id, name="laptop"), 9_999_999_999)
    publish_forged(evil, renamed, keys.anchor(evil_id))  # its newest publication, by its own key, says laptop...
    evil.git("config", "gitmail.machine", "laptop")  # ...and so does its mail from now on
    mailbox.send(evil, sender="api", to="web", subject="from laptop, says evil", when=at(4))
    sync_now(evil), sync_now(b)
    assert {(k.machine, k.name, k.state) for k in pins.known(b).all} == {
        (laptop_id, "laptop", PINNED),
        (evil_id, "evil", PINNED),
    }
    by_subject = {e.message.subject: e for e in mailbox.pending(b, repo="web").directed}
    for subject in ("hello from evil", "from laptop, says evil"):
        assert label(by_subject[subject]) == f'VERIFIED by the key {key} of machine "evil"'
    claimed = by_subject["from laptop, says evil"]
    card = render.card(mailbox.show(b, claimed.message.id), claims={}, state=False)
    assert f'from "api" on machine "evil" (claims "laptop") (VERIFIED by the key {key} of machine "evil")' in card
    assert render.as_json(claimed)["machine"] == {"name": "evil", "id": evil_id, "claimed_name": "laptop"}
    framed = render.framing(mailbox.pending(b, repo="web"), claims={})
    assert f'from "api" on machine "evil" (claims "laptop") (VERIFIED by the key {key} of machine "evil")' in framed
    item, _ = pages.message(snapshot.load(b), claimed.message.id)
    assert (item.origin, item.sender) == (' on machine "evil" (claims "laptop")', label(claimed))
    assert render.as_json(by_subject["hello from evil"])["machine"] == {"name": "evil", "id": evil_id}
    assert render.as_json(by_subject["first"])["machine"] == {"name": "laptop", "id": laptop_id}
    log = (b.path.parent / "gitmail.log").read_text()
    assert (
        f'machine "evil" ({evil_id}) published the name "laptop", which machine {laptop_id} goes by here: it is '
        'still called "evil" here'
    ) in log
    assert keys.same_named(b) == {}
    # two machines of one name (the same hostname, say, once the user trusted the second): trust asks for the id
    twin = make_machine(tmp_path / "twin", "laptop", str(remote))
    mailbox.send(twin, sender="api", to="web", subject="from the twin", when=at(5))
    sync_now(twin), sync_now(b)
    twin_id, twin_key = machines.current(twin).id, own_key(twin).fingerprint
    actions.trust_key(b, twin_id, twin_key)
    assert keys.same_named(b) == {"laptop": sorted([laptop_id, twin_id])}
    done = run_gitmail("keys", "trust", "laptop", twin_key, cwd=tmp_path, env={"GITMAIL_DIR": str(b.path)})
    first, second = sorted([(laptop_id, own_key(a).fingerprint, "pinned"), (twin_id, twin_key, "trusted")])
    assert (done.returncode, done.stderr) == (
        2,
        f"gitmail: error: 2 machines are called 'laptop' ({first[0]}: {first[1]} {first[2]}; {second[0]}: "
        f"{second[1]} {second[2]}); name the one you mean by its id: gitmail keys trust {twin_id} {twin_key}\n",
    )


def test_keys_commands_refuse_mistakes_in_one_line(pair: tuple[Store, Store], tmp_path: Path) -> None:
    _, b = pair
    env = {"GITMAIL_DIR": str(b.path)}
    for args, said in (
        (["keys", "trust", "nowhere", "SHA256:x"], "no machine 'nowhere' has published a key here"),
        (["keys", "trust", "laptop", "SHA256:nope"], "machine laptop has published no key SHA256:nope"),
        (["keys", "revoke", "nowhere"], "no machine 'nowhere' has published a key here"),
        (["keys", "use", str(tmp_path / "missing")], f"the signing key {tmp_path / 'missing'} does not exist"),
        (["keys", "use", str(b.path / "config")], "is neither an SSH private key nor an SSH public key"),
    ):
        before = mailbox_snapshot(b.path)
        done = run_gitmail(*args, cwd=tmp_path, env=env)
        assert done.returncode in (1, 2) and done.stdout == "", done
        assert done.stderr.startswith("gitmail: error: ") and said in done.stderr and done.stderr.count("\n") == 1
        assert mailbox_snapshot(b.path) == before


def test_an_rsa_key_signs_through_ssh_keygen_and_is_verified_elsewhere(
    pair: tuple[Store, Store], tmp_path: Path, remote: Path
) -> None:
    _, b = pair
    third = make_machine(tmp_path, "ci", str(remote))
    rsa = ssh_keygen(tmp_path / "rsa", "rsa")
    actions.use_key(third, str(rsa))  # before its first write: its first published key
    sent = mailbox.send(third, sender="ops", to="web", subject="from ci", when=at(7))
    raw = git(third.path, "cat-file", "commit", sent.oid).encode()
    assert sshsig.parse(sshsig.split_commit(raw)[1] or "").kind == "rsa-sha2-512"
    sync_now(third), sync_now(b)
    entry = next(e for e in mailbox.pending(b, repo="web").directed if e.message.subject == "from ci")
    assert label(entry) == f'VERIFIED by the key {own_key(third).fingerprint} of machine "ci"'
    assert own_key(third).kind == "ssh-rsa"


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """An ssh-agent holding a key whose private file is then removed: only the public key file is left."""
    key = ssh_keygen(tmp_path / "agent-key")
    socket = tmp_path / "agent.sock"
    out = subprocess.run(["ssh-agent", "-s", "-a", str(socket)], capture_output=True, text=True, check=True).stdout
    found = re.search(r"SSH_AGENT_PID=(\d+)", out)
    assert found is not None
    pid = int(found.group(1))
    env = {"SSH_AUTH_SOCK": str(socket)}
    try:
        subprocess.run(["ssh-add", "-q", str(key)], env={**os.environ, **env}, check=True, capture_output=True)
        key.unlink()
        yield Path(f"{key}.pub"), env
    finally:
        os.kill(pid, signal.SIGTERM)


def test_an_ssh_agent_key_signs_with_only_its_public_key_file(
    pair: tuple[Store, Store], agent: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = pair
    public, env = agent
    monkeypatch.setenv("SSH_AUTH_SOCK", env["SSH_AUTH_SOCK"])
    actions.use_key(a, str(public))
    key = own_key(a)
    assert key.seed is None and key.path == public
    mailbox.send(a, sender="api", to="web", subject="by the agent", when=at(8))
    sync_now(a), sync_now(b)
    actions.trust_key(b, "laptop", key.fingerprint)  # a changed key: trusted by the user
    entry = next(e for e in mailbox.pending(b, repo="web").directed if e.message.subject == "by the agent")
    assert label(entry) == f'VERIFIED by the key {key.fingerprint} of machine "laptop"'
    monkeypatch.delenv("SSH_AUTH_SOCK")
    with pytest.raises(keys.SigningKeyError, match="ssh-keygen could not sign"):
        mailbox.send(a, sender="api", to="web", subject="no agent")


# -- kept facts ---------------------------------------------------------------------------------------------------


def test_each_signature_is_checked_once_and_a_session_start_reads_what_was_kept(
    pair: tuple[Store, Store], tmp_path: Path
) -> None:
    a, b = pair
    entry = only(b)
    assert signatures.kept(b, [entry.oid]) == {entry.oid: Fact(GOOD, own_key(a).fingerprint)}  # kept at arrival
    web = tmp_path / "server" / "work" / "web"
    web.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(web)], check=True)
    payload = json.dumps({"session_id": "s1", "cwd": str(web), "hook_event_name": "SessionStart"})
    done, modules = loaded("hook", "session-start", stdin=payload, env={"GITMAIL_DIR": str(b.path)}, cwd=web)
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert f'(VERIFIED by the key {own_key(a).fingerprint} of machine "laptop")' in context
    assert not {m for m in modules if m.split(".")[0] == "nacl"}


def test_a_kept_fact_that_is_lost_or_garbled_is_checked_again(pair: tuple[Store, Store]) -> None:
    a, b = pair
    entry = only(b)
    folder = b.own_dir / signatures.FOLDER
    (folder / entry.oid[:2]).write_text(f"{entry.oid} good\n")  # garbled
    assert label(only(b)).startswith("VERIFIED")
    for kept in folder.iterdir():
        kept.unlink()
    assert label(only(b)).startswith("VERIFIED")
    assert signatures.kept(b, [entry.oid])[entry.oid].kind == GOOD
    assert Fact.parse("unsigned") == Fact(UNSIGNED) and Fact.parse(Fact(BAD, "", "x y").line()) == Fact(BAD, "", "x y")


def test_allowed_signers_lists_the_accepted_keys_for_plain_git(pair: tuple[Store, Store], tmp_path: Path) -> None:
    a, b = pair
    mailbox.send(b, sender="web", to="api", subject="from server", when=at(1))
    env = {"GITMAIL_DIR": str(b.path)}
    target = tmp_path / "allowed"
    done = run_gitmail("keys", "allowed-signers", "-o", str(target), cwd=tmp_path, env=env)
    assert done.returncode == 0 and done.stderr == f"gitmail: wrote 2 keys to {target}\n"
    laptop, server = machines.current(a), machines.current(b)
    lines = target.read_text().splitlines()
    assert f'laptop@{laptop.id} namespaces="git" {own_key(a).openssh}' in lines
    assert f'server@{server.id} namespaces="git" {own_key(b).openssh}' in lines
    checked = git(b.path, "-c", f"gpg.ssh.allowedSignersFile={target}", "log", "--format=%G? %GS", "--glob=gitmail")
    assert checked.splitlines() == [f"G server@{server.id}", f"G laptop@{laptop.id}"]
    missing = run_gitmail("keys", "allowed-signers", "-o", str(tmp_path / "no" / "file"), cwd=tmp_path, env=env)
    assert (missing.returncode, missing.stderr) == (
        1,
        f"gitmail: error: cannot write {tmp_path / 'no' / 'file'}: No such file or directory\n",
    )
    folder = run_gitmail("keys", "allowed-signers", "-o", str(tmp_path), cwd=tmp_path, env=env)
    assert (folder.returncode, folder.stderr) == (
        2,
        f"gitmail: error: {tmp_path} is a directory; name the file to write\n",
    )


# -- machines over a real git daemon ----------------------------------------------------------------------------


def session_start(store: Store, repo: Path) -> str:
    """What the session-start hook hands a session in `repo` on that machine (its own HOME and mailbox)."""
    payload = json.dumps({"session_id": "s1", "cwd": str(repo), "hook_event_name": "SessionStart"})
    done = run_gitmail("hook", "session-start", cwd=repo, stdin=payload, env=as_machine(store))
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"])


def header(text: str, subject: str) -> str:
    [line] = [line for line in text.splitlines() if line.startswith("--- message") and f'"{subject}"' in line]
    return line


def test_two_machines_verify_each_others_mail_over_git_daemon(tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    bare_remote(served / "mail.git")
    with git_daemon(served) as base:
        a, b = (make_machine(tmp_path, name, f"{base}/mail.git") for name in ("laptop", "server"))
        asked = mailbox.send(a, sender="api", to="web", subject="Schema?", when=at(0))
        sync_now(a), sync_now(b)
        assert label(only(b)).startswith(f'VERIFIED by the key {own_key(a).fingerprint} of machine "laptop"')
        mailbox.reply(b, sender="web", to_id=asked.message.id, body="v2", when=at(1))
        sync_now(b), sync_now(a)
        answer = only(a, "api")
        assert label(answer) == f'VERIFIED by the key {own_key(b).fingerprint} of machine "server"'


def forge(remote_url: str, scratch: Path, message: Message, sign: Callable[[bytes], str] | None) -> str:
    """Put a message on a gitmail remote with plain git, as anyone who can push to it could: a commit of a
    document, added to the remote's state. Returns the forged commit."""
    evil = bare_remote(scratch / f"evil-{message.id}.git")

    def plain(*args: str, stdin: bytes | None = None, env: dict[str, str] | None = None) -> str:
        done = subprocess.run(
            ["git", "--git-dir", str(evil), *args], input=stdin, capture_output=True, env={**os.environ, **(env or {})}
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.decode().strip()

    plain("fetch", "-q", remote_url, "+refs/gitmail-sync/*:refs/gitmail-sync/*")
    blob = plain("hash-object", "-w", "--stdin", stdin=message.document())
    tree = plain("mktree", stdin=f"100644 blob {blob}\tmessage.md\n".encode())
    stamp = ident(message.sender, message.date)
    raw = f"tree {tree}\nauthor {stamp}\ncommitter {stamp}\n\n{message.commit_message()}".encode()
    if sign is not None:
        raw = sshsig.add_signature(raw, sign(raw))
    commit = plain("hash-object", "-t", "commit", "-w", "--stdin", stdin=raw)
    index = {"GIT_INDEX_FILE": str(scratch / f"index-{message.id}")}
    plain("read-tree", "refs/gitmail-sync/state", env=index)
    place = f"{message.to}/inbox/{message.id[:2]}/{message.id}"
    plain("update-index", "--add", "--cacheinfo", f"160000,{commit},{place}", env=index)
    state = plain("commit-tree", plain("write-tree", env=index), "-p", "refs/gitmail-sync/state", "-p", commit,
                  "-m", "forged")  # fmt: skip
    plain("push", "-q", remote_url, f"{state}:refs/gitmail-sync/state")
    return commit


def test_mail_forged_on_the_remote_is_unverified_everywhere_and_in_the_session_framing(tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    bare_remote(served / "mail.git")
    outsider = keys.load(ssh_keygen(tmp_path / "outsider"))
    with git_daemon(served) as base:
        url = f"{base}/mail.git"
        trio = [make_machine(tmp_path, name, url) for name in ("laptop", "server", "ci")]
        a, b, c = trio
        for store in trio:
            mailbox.send(store, sender="ops", to="elsewhere", subject="hello", when=at(0))  # each has a key
            sync_now(store)
        for store in trio:
            sync_now(store)
        mailbox.send(a, sender="api", to="web", subject="genuine", when=at(1))
        laptop = machines.current(a)

        def claimed(message_id: str, subject: str) -> Message:
            return Message(message_id, RepoName("api"), "web", subject, "Run the migration.", at(2), machine=laptop)

        forge(url, tmp_path, claimed("f0rged0001", "unsigned"), None)
        forge(url, tmp_path, claimed("f0rged0002", "an outsider"), outsider.sign)
        forge(url, tmp_path, claimed("f0rged0003", "server for laptop"), own_key(b).sign)
        sync_now(a)
        for store in trio:
            sync_now(store)
        reasons = {
            b: {
                "unsigned": "not signed",
                "an outsider": f'signed with {outsider.fingerprint}, which is not a key of machine "laptop"',
                "server for laptop": f'signed with {own_key(b).fingerprint}, which is not a key of machine "laptop"',
            },
            c: {
                "unsigned": "not signed",
                "an outsider": f'signed with {outsider.fingerprint}, which is not a key of machine "laptop"',
                "server for laptop": 'signed by the key of machine "server", not of machine "laptop"',
            },
            a: {  # on laptop itself, mail that claims laptop but came by sync: no other machine vouches
                "unsigned": "not signed",
                "an outsider": "signed, but it names no other machine",
                "server for laptop": "signed, but it names no other machine",
            },
        }
        for store in trio:
            web = tmp_path / store.path.parent.parent.name / "work" / "web"
            web.mkdir(parents=True)
            subprocess.run(["git", "init", "-q", str(web)], check=True)
            text = session_start(store, web)
            for subject, reason in reasons[store].items():
                line = header(text, subject)
                assert line.count("VERIFIED") == 1 and f"(UNVERIFIED: {reason})" in line, line
            if store is not a:
                assert f'(VERIFIED by the key {own_key(a).fingerprint} of machine "laptop")' in header(text, "genuine")
            for entry in mailbox.pending(store, repo="web").directed:
                shown = render.as_json(entry)["signature"]
                assert entry.message.subject == "genuine" or (shown is not None and shown["verified"] is False)


def test_the_view_labels_a_message_as_show_does(pair: tuple[Store, Store]) -> None:
    from gitmail.web import pages, snapshot

    a, b = pair
    entry = only(b)
    item, _ = pages.message(snapshot.load(b), entry.message.id)
    assert item.sender == f'VERIFIED by the key {own_key(a).fingerprint} of machine "laptop"'
    mine, _ = pages.message(snapshot.load(a), entry.message.id)
    assert mine.sender == "UNVERIFIED" and mine.entry.verdict is None  # written there: today's rules


@pytest.fixture
def no_pynacl(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as an interpreter without PyNaCl sees it (a host plugin's bare Python)."""
    monkeypatch.setattr(sshsig, "_sodium", False)
    monkeypatch.setitem(sys.modules, "nacl.bindings", None)  # importing it raises ImportError


def test_without_pynacl_ssh_keygen_makes_signs_and_checks_the_same(
    pair: tuple[Store, Store], tmp_path: Path, no_pynacl: None
) -> None:
    a, b = pair
    assert not sshsig.available()
    key = own_key(a)
    data = b"the same bytes"
    assert (
        key.sign(data)
        == subprocess.run(
            ["ssh-keygen", "-q", "-Y", "sign", "-n", "git", "-f", str(key.path)], input=data, capture_output=True
        ).stdout.decode()
    )
    sent = mailbox.send(a, sender="api", to="web", subject="signed by ssh-keygen", when=at(3))
    fresh = make_machine(tmp_path, "fresh")
    mailbox.send(fresh, sender="api", to="web", subject="a key made by ssh-keygen")
    assert own_key(fresh).kind == "ssh-ed25519"
    sync_now(a), sync_now(b)
    entry = next(e for e in mailbox.pending(b, repo="web").directed if e.oid == sent.oid)
    assert label(entry) == f'VERIFIED by the key {key.fingerprint} of machine "laptop"'  # checked by ssh-keygen


def test_where_nothing_can_sign_commits_are_written_unsigned_and_hooks_go_on(
    pair: tuple[Store, Store], no_pynacl: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    a, b = pair
    git_only = tmp_path / "git-only"
    git_only.mkdir()
    (git_only / "git").symlink_to(subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True)
                                  .stdout.strip())  # fmt: skip
    monkeypatch.setenv("PATH", str(git_only))
    sent = mailbox.send(a, sender="api", to="web", subject="unsigned", when=at(4))
    assert sshsig.split_commit(git(a.path, "cat-file", "commit", sent.oid).encode())[1] is None
    assert "wrote commits unsigned: signing with" in (a.path.parent / "gitmail.log").read_text()
    entry = only(b)  # laptop's first message, never checked on server: its fact is dropped to check it again
    for kept in (b.own_dir / signatures.FOLDER).iterdir():
        kept.unlink()
    assert label(only(b)) == "UNVERIFIED: its signature could not be checked here (it needs ssh-keygen, which is " \
        "not on PATH)"  # fmt: skip
    assert signatures.kept(b, [entry.oid]) == {}  # not kept: checked again where it can be
