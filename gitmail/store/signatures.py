"""Checking the SSH signatures on commits, once per commit: what a check showed (a `Fact`: good and by which key,
unsigned, or bad) is kept beside the mailbox by commit id, so a session start reads a line per message from a small
file instead of loading PyNaCl. A commit's bytes never change, and a fact says nothing about whether the key is
trusted (that is decided at each reading, values/verdict.py), so a kept fact never goes stale.

Facts are kept in gitmail/signatures/<first two hex digits of the commit>, one `<commit> <fact>` line each, added with
a single append (concurrent writers never tear a line; a line said twice says the same thing). They are hints: a
lost or garbled file only costs checking again.

Ed25519 signatures are checked in-process (values/sshsig.py); any other key type with `ssh-keygen -Y verify`.
"""

from __future__ import annotations

import os
from pathlib import Path

from gitmail.store import pins
from gitmail.values.message import MAX_DOCUMENT_BYTES, Message
from gitmail.values.verdict import BAD, GOOD, UNCHECKED, UNSIGNED, Fact, Verdict, judge

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from gitmail.store.repository import Store
    from gitmail.values.layout import Located

FOLDER = "signatures"
MAX_COMMIT_BYTES = MAX_DOCUMENT_BYTES + 8 * 1024  # a message's commit: its text, headers and signature; no more is read


def verdicts(store: Store, found: Sequence[tuple[Located, Message]]) -> list[Verdict]:
    """The verdict on each of these messages from other machines, as found at these places: from the fact kept for
    its commit (checked now, and kept, where none is) and the keys accepted for the machine it names."""
    if not found:
        return []
    keys = pins.known(store)
    known = facts(store, [place.oid for place, _ in found])
    return [
        judge(known.get(place.oid), found_id=place.id, found_to=place.recipient, message=message, keys=keys)
        for place, message in found
    ]


def check(data: bytes, armored: str, namespace: str) -> Fact:
    """Whether `armored` is a good signature of `data` in `namespace` by the key it names."""
    from gitmail.values import sshsig  # only where a signature is checked, not where a kept fact is read

    try:
        parsed = sshsig.parse(armored)
    except sshsig.SignatureError as error:
        return Fact(BAD, "", str(error))
    key = sshsig.fingerprint(parsed.public)
    try:
        try:
            sshsig.check(data, armored, namespace)
            keygen = sshsig.needs_keygen(parsed)
        except sshsig.Unavailable:  # no PyNaCl here: ssh-keygen checks Ed25519 too
            keygen = True
        if keygen:
            _keygen_verify(data, armored, parsed.public, namespace)
    except sshsig.SignatureError as error:
        return Fact(BAD, key, str(error))
    except _Unchecked as error:
        return Fact(UNCHECKED, key, str(error))
    return Fact(GOOD, key)


class _Unchecked(Exception):
    """Nothing here can check this signature (no ssh-keygen, or it did not answer): no fact to keep."""


def check_commit(raw: bytes) -> Fact:
    """What the signature on a commit (its object's content) shows: namespace "git", as git checks it."""
    from gitmail.values import sshsig

    payload, armored = sshsig.split_commit(raw)
    if armored is None:
        return Fact(UNSIGNED)
    return check(payload, armored, sshsig.COMMITS)


def _keygen_verify(data: bytes, armored: str, public: bytes, namespace: str) -> None:
    """`ssh-keygen -Y verify` against the key the signature names (RSA, ECDSA, ...); SignatureError when bad."""
    import subprocess
    import tempfile

    from gitmail.values import sshsig

    with tempfile.TemporaryDirectory(prefix="gitmail-verify-") as scratch:
        allowed, signature = Path(scratch, "allowed_signers"), Path(scratch, "signature")
        allowed.write_text(f'signer namespaces="{namespace}" {sshsig.openssh(public)}\n')
        signature.write_text(armored)
        try:
            done = subprocess.run(
                ["ssh-keygen", "-Y", "verify", "-f", str(allowed), "-I", "signer", "-n", namespace]
                + ["-s", str(signature)],
                input=data,
                capture_output=True,
                timeout=30,
                start_new_session=True,
            )
        except FileNotFoundError:
            raise _Unchecked("it needs ssh-keygen, which is not on PATH") from None
        except (OSError, subprocess.TimeoutExpired) as error:
            raise _Unchecked(f"ssh-keygen could not check it: {error}") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).decode(errors="replace").strip().splitlines()
        raise sshsig.SignatureError(f"ssh-keygen: {said[-1] if said else 'bad signature'}")


# -- facts, kept by commit ----------------------------------------------------------------------------------------


def facts(store: Store, oids: Iterable[str]) -> dict[str, Fact]:
    """What the signature of each of these commits shows: kept ones read, the rest checked and kept. A commit the
    mailbox does not have is left out."""
    wanted = list(dict.fromkeys(oids))
    found = kept(store, wanted)
    missing = [oid for oid in wanted if oid not in found]
    if missing:
        read = store.read(missing, limit=MAX_COMMIT_BYTES)  # a larger one is no message of gitmail's: not read
        new = {oid: check_commit(raw) for oid, raw in zip(missing, read, strict=True) if raw}
        keep(store, new)
        found.update(new)
    return found


def kept(store: Store, oids: Sequence[str]) -> dict[str, Fact]:
    """The facts kept for these commits."""
    found: dict[str, Fact] = {}
    by_file: dict[str, list[str]] = {}
    for oid in oids:
        by_file.setdefault(oid[:2], []).append(oid)
    folder = store.own_dir / FOLDER
    for name, members in by_file.items():
        try:
            with open(folder / name, encoding="ascii", errors="replace") as handle:
                text = "\n" + handle.read()
        except OSError:
            continue
        for oid in members:
            at = text.find(f"\n{oid} ")
            if at < 0:
                continue
            end = text.find("\n", at + 1)
            if end < 0:
                continue  # a line still being written, or torn: checked again
            fact = Fact.parse(text[at + len(oid) + 2 : end])
            if fact is not None:
                found[oid] = fact
    return found


def keep(store: Store, new: dict[str, Fact]) -> None:
    """Keep these facts (never fails: a fact not kept is checked again)."""
    by_file: dict[str, list[str]] = {}
    for oid, fact in new.items():
        if fact.kind == UNCHECKED:
            continue  # checked again where it can be
        line = fact.line().replace("\n", " ")
        by_file.setdefault(oid[:2], []).append(f"{oid} {line}\n")
    folder = store.own_dir / FOLDER
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        for name, lines in by_file.items():
            fd = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, "".join(lines).encode("ascii", "replace"))
            finally:
                os.close(fd)
    except OSError:
        return
