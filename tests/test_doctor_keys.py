"""`gitmail doctor` and the keys: a damaged key of this machine blocks no write (each goes through unsigned, saying
so in one line) and `doctor --repair` makes a new one, published as a key change other machines accept as any
other; two accepted machines of one name are a problem doctor names."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitmail import actions, doctor, mailbox, render
from gitmail.store import keys, pins
from gitmail.store.repository import Store
from gitmail.sync import quick
from gitmail.values import sshsig
from gitmail.values.verdict import NEW, PINNED
from tests.conftest import CliRunner, at
from tests.syncing import bare_remote, git, sync_now
from tests.syncing import machine as make_machine


@pytest.fixture(autouse=True)
def no_racy_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quick, "RACY_SECONDS", 0.0)
    monkeypatch.setattr(quick, "FINE_RACY_SECONDS", 0.0)


def own_key(store: Store) -> keys.Signer:
    key = keys.signer(store, create=False)
    assert key is not None
    return key


def damage(key: keys.Signer) -> Path:
    """Cut the key file short, as a torn write or a full disk leaves it."""
    data = key.path.read_bytes()
    key.path.write_bytes(data[: len(data) // 2])
    return key.path


def signed(store: Store, oid: str) -> bool:
    return sshsig.split_commit(store.read([oid])[0] or b"")[1] is not None


def warning(path: Path) -> str:
    return (
        f"gitmail: warning: this machine's signing key {path} is damaged (not an OpenSSH private key): mail is written unsigned "
        "until `gitmail doctor --repair` makes a new key\n"
    )


def test_a_damaged_key_blocks_no_write_each_says_so_in_one_line_and_repair_makes_a_new_one(
    cli: CliRunner, box: Store, api: Path, web: Path
) -> None:
    assert cli("send", "--to", "web", "-s", "first", cwd=api).code == 0
    old = own_key(box)
    path = damage(old)

    sent = cli("send", "--to", "web", "-s", "second", cwd=api)
    assert sent.code == 0, sent
    second = sent.out.strip()
    assert sent.err == warning(path) + f'gitmail: sent {second} to the repository "web"\n'
    assert not signed(box, mailbox.show(box, second).oid)
    read = cli("inbox", cwd=web)  # writes the receipts of what it shows
    assert read.code == 0 and read.err == warning(path), read
    done = cli("done", second, cwd=web)
    assert done.code == 0 and done.err.startswith(warning(path)) and done.err.count("warning:") == 1, done
    assert mailbox.show(box, second).state.value == "archived"

    found = cli("doctor", cwd=web)
    assert found.code == 1
    assert (
        f"problem   keys: this machine's signing key {path} is damaged (not an OpenSSH private key): mail is written unsigned until "
        "`gitmail doctor --repair` makes a new key; other machines read that mail as UNVERIFIED -- fix: gitmail "
        "doctor --repair sets it aside and makes a new key, published at once (other machines see a changed key, "
        "to accept with `gitmail keys trust` as any other)"
    ) in found.out.splitlines()

    damaged = path.read_bytes()
    repaired = cli("doctor", "--repair", cwd=web)
    assert repaired.code == 0, repaired
    new = own_key(box)
    assert new.fingerprint != old.fingerprint and new.path == path
    (aside,) = path.parent.glob(f"{path.name}.damaged-*")
    assert aside.read_bytes() == damaged  # kept, never deleted
    assert (
        f"repaired  made a new signing key for this machine ({new.fingerprint}) at {path} and published it; the "
        f"damaged one is kept as {aside}"
    ) in repaired.out.splitlines()
    assert "this machine's key is not published yet" not in repaired.out
    published = {p.fingerprint for p in keys.publications(box).found}
    assert new.fingerprint in published and old.fingerprint in published  # a key change, as any other

    after = cli("send", "--to", "web", "-s", "third", cwd=api)
    assert after.code == 0 and "warning" not in after.err
    assert signed(box, mailbox.show(box, after.out.strip()).oid)


def test_a_new_key_made_by_repair_is_a_key_change_other_machines_must_accept(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path / "remote.git")
    a, b = (make_machine(tmp_path, name, str(remote)) for name in ("laptop", "server"))
    mailbox.send(a, sender="api", to="web", subject="first", when=at(0))
    sync_now(a), sync_now(b)
    old = own_key(a)
    damage(old)
    unsigned = mailbox.send(a, sender="api", to="web", subject="unsigned", when=at(1))
    assert not signed(a, unsigned.oid)
    assert "is damaged (not an OpenSSH private key)" in doctor.describe(
        doctor.examine(a, here=None, home=tmp_path / "nohome")
    )
    doctor.repair(a, here=None)
    mailbox.send(a, sender="api", to="web", subject="signed again", when=at(2))
    sync_now(a), sync_now(b)
    entries = {e.message.subject: e for e in mailbox.pending(b, repo="web").directed}
    assert render.vouched(entries["unsigned"], {}).startswith("UNVERIFIED")
    assert "has a new key" in render.vouched(entries["signed again"], {})
    laptop = {k.fingerprint: k.state for k in pins.known(b).all}
    assert laptop == {old.fingerprint: PINNED, own_key(a).fingerprint: NEW}
    actions.trust_key(b, "laptop", own_key(a).fingerprint)
    again = {e.message.subject: e for e in mailbox.pending(b, repo="web").directed}
    assert render.vouched(again["signed again"], {}).startswith("VERIFIED")


def test_a_key_others_may_read_is_still_refused_and_repair_leaves_it_to_the_user(
    cli: CliRunner, box: Store, api: Path, web: Path
) -> None:
    assert cli("send", "--to", "web", "-s", "first", cwd=api).code == 0
    key = own_key(box)
    key.path.chmod(0o644)
    assert cli("send", "--to", "web", "-s", "second", cwd=api).code == 1
    repaired = cli("doctor", "--repair", cwd=web)
    assert repaired.code == 1
    assert f"problem   keys: no mail can be written: the signing key {key.path} can be read by others" in repaired.out
    assert not list(key.path.parent.glob("*.damaged-*"))


def test_two_accepted_machines_of_one_name_are_a_problem(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path / "remote.git")
    a, twin, b = (make_machine(tmp_path / n, "laptop", str(remote)) for n in ("one", "two", "three"))
    git(b.path, "config", "gitmail.machine", "server")
    for store in (a, twin):
        mailbox.send(store, sender="api", to="web", subject="hello", when=at(0))
        sync_now(store)
    sync_now(b)
    twin_key = next(k for k in pins.known(b).all if k.state == NEW)
    actions.trust_key(b, twin_key.machine, twin_key.fingerprint)  # the same hostname twice: trusted by the user
    assert len(keys.same_named(b)["laptop"]) == 2
    report = doctor.examine(b, here=None, home=tmp_path / "nohome")
    ids = keys.same_named(b)["laptop"]
    assert (
        f'problem   keys: 2 accepted machines go by the name "laptop" ({ids[0]}, {ids[1]}): mail of each reads as '
        'from "laptop", so a label cannot tell them apart -- fix: compare `gitmail keys` on each machine; revoke the '
        f"one you do not know: gitmail keys revoke {ids[1]} (or give one another name: git config gitmail.machine "
        "NAME in its mailbox)"
    ) in doctor.describe(report).splitlines()
    assert report.problems
