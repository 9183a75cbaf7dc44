"""Signing keys: this machine's key, the keys of other machines, and which of them are accepted."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from gitmail.errors import GitmailError, UsageError
from gitmail.values.machine import Machine
from gitmail.values.names import RepoName

if TYPE_CHECKING:
    from gitmail.store.keys import Survey
    from gitmail.store.repository import Store
    from gitmail.values.verdict import Key


def keys(box: Store) -> Survey:
    """This machine's key and the keys of other machines, taking in any published since last time."""
    from gitmail.store import keys as signing
    from gitmail.store import machines, pins

    if not box.exists():
        raise UsageError("there is no mailbox yet (the first message sent creates it, or `gitmail keys init`)")
    if box.writable():
        with box.locked():
            signing.learn(box, listing=True)
    here = machines.current(box) if box.writable() else _machine_read_only(box)
    own = signing.signer(box, create=False)
    published = own is not None and signing.published_mark(box) == signing.mark(own, here)
    return signing.Survey(here, own, published, pins.known(box).all)


def _machine_read_only(box: Store) -> Machine:
    from gitmail.store import machines

    return Machine(machines.configured_name(box) or machines.host_name(), machines.local_id(box) or "")


def init_key(box: Store) -> Survey:
    """Make this machine's key now (it is otherwise made at the first write) and publish it."""
    _publish(box)
    return keys(box)


def use_key(box: Store, path: str) -> Survey:
    """Sign with the user's own SSH key from now on: a private key file, or the public key file of a key an
    ssh-agent holds. Checked by signing with it before anything changes; then published."""
    from gitmail.store import keys as signing
    from gitmail.store import signatures
    from gitmail.values import sshsig

    chosen = os.path.abspath(os.path.expanduser(path))
    key = signing.load(Path(chosen))
    probe = b"gitmail: can this key sign?"
    fact = signatures.check(probe, key.sign(probe, sshsig.KEYS), sshsig.KEYS)
    if fact.kind != "good" or fact.key != key.fingerprint:
        raise GitmailError(f"{chosen} did not make a good signature ({fact.reason or fact.key})")
    box.create()
    with box.locked():
        box.git("config", f"gitmail.{signing.SETTING}", chosen)
    _publish(box)
    return keys(box)


def _publish(box: Store) -> None:
    from gitmail.store.writer import writing

    with writing(box, actor=RepoName("gitmail")) as writer:
        writer.signing_key()
        writer.apply([], "gitmail: publish this machine's key")


def trust_key(box: Store, machine: str, fingerprint: str) -> Key:
    """Accept this key for that machine (its name or id): for a key compared out of band, a changed key the user
    expects, or a machine revoked before."""
    from gitmail.store import keys as signing

    return signing.trust(_existing(box), machine, fingerprint)


def revoke_key(box: Store, machine: str) -> list[Key]:
    """Stop accepting any key of that machine (its name or id): its mail reads UNVERIFIED."""
    from gitmail.store import keys as signing

    return signing.revoke(_existing(box), machine)


def allowed_signers(box: Store) -> str:
    """git's allowed_signers file: this machine's key and every key accepted for another machine."""
    from gitmail.store import keys as signing

    if box.exists() and box.writable():
        with box.locked():
            signing.learn(box, listing=True)
    return signing.allowed_signers(box) if box.exists() else ""


def _existing(box: Store) -> Store:
    if not box.exists():
        raise UsageError("there is no mailbox yet, so no key of another machine is known")
    return box
