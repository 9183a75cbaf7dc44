"""This machine's signing key, the keys of other machines, and how keys travel between them.

- **This machine's key** signs every commit gitmail writes (messages, replies, broadcasts, notes commits: receipts,
  hand-overs, retractions). It is made on first use, an Ed25519 key in OpenSSH's format at
  gitmail/keys/<machine id> inside the mailbox's own folder (owner-only, never among its git objects), or it is the
  user's own SSH key (`gitmail.signingKey` in the mailbox's config: a private key file, or the public key file of
  a key an ssh-agent holds). An unencrypted Ed25519 key signs in-process; any other through `ssh-keygen -Y sign`.
  A private key file that others may read is refused, in one line, as ssh refuses it.
- **Publication**: each machine publishes its public key in the notes ref refs/notes/gitmail-keys, which sync
  carries like every gitmail notes ref (merged as a union of lines). A publication is one line naming the machine,
  its key and a time, signed with that very key (namespace "gitmail-key"), so it proves possession of the key.
- **Pins**: this machine accepts a machine's key the first time it sees it published (pinned on first sight); a
  later, different key for a machine it already knows is recorded as new and not accepted until the user trusts it
  (`trust`); `revoke` stops accepting a machine's keys. What is known and decided lives in gitmail/keys/pins.json
  (pins.py), machine-local, changed under the mailbox lock. Every change bumps the claims stamp: trust labels may read
  differently now, so no session start is answered from a kept answer made before.
"""

from __future__ import annotations

import os
import time

from gitmail.errors import MailboxError, Unwritable, UsageError
from gitmail.store import keygen, machines, pins
from gitmail.store.files import make_dir, read_text, write_atomically
from gitmail.store.keygen import NoSigner as NoSigner
from gitmail.store.keygen import SigningKeyError as SigningKeyError
from gitmail.store.location import spelled
from gitmail.values import sshsig
from gitmail.values.dates import UTC, datetime
from gitmail.values.ids import ID_PATTERN
from gitmail.values.machine import NAME_PATTERN, Machine

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from hashlib import sha1 as _sha1
    from pathlib import Path
    from typing import NamedTuple

    from _typeshed import StrPath

    from gitmail.store.repository import Store
    from gitmail.values.verdict import Key
else:
    from gitmail.values.tuples import NamedTuple

    try:  # CPython's own SHA-1: hashlib would load OpenSSL
        from _sha1 import sha1 as _sha1
    except ImportError:
        from hashlib import sha1 as _sha1

SETTING = "signingKey"  # gitmail.signingKey: the user's own SSH key to sign with instead of gitmail's
FOLDER = pins.FOLDER
PUBLISHED = "published"  # "<fingerprint> <machine name> <machine id>" of the publication last written
KEYS_NOTES = "refs/notes/gitmail-keys"
MAX_NOTE_BYTES = 64 * 1024  # a machine's publications: a few lines; a larger note is not read
MAX_PUBLICATIONS = 1000  # publications checked at most, all machines together


class ExposedKey(SigningKeyError):
    """A private key file others may read: refused, as ssh refuses it (the fix is the user's: chmod 600)."""


class DamagedKey(SigningKeyError):
    """gitmail's own key of this machine is there but is no key it can sign with (cut short, garbled, unreadable):
    writes go on unsigned, saying so, until `gitmail doctor --repair` makes a new key and publishes it."""

    def __init__(self, path: StrPath, reason: str) -> None:
        from pathlib import Path  # a damaged key: rare

        super().__init__(
            f"this machine's signing key {path} is damaged ({reason}): mail is written unsigned until "
            "`gitmail doctor --repair` makes a new key"
        )
        self.path, self.reason = Path(path), reason
        self.aside: Path | None = None  # where `replace_damaged` set it aside


# -- this machine's key ---------------------------------------------------------------------------------------------


class Signer:
    """The key this machine signs with."""

    def __init__(self, path: StrPath, public: bytes, seed: bytes | None, *, own: bool) -> None:
        self.file, self.public, self.seed, self.own = os.fspath(path), public, seed, own
        self.fingerprint = sshsig.fingerprint(public)

    @property
    def path(self) -> Path:
        """The key file (`file`) as a Path: made when asked for, as a send never needs it."""
        from pathlib import Path

        return Path(self.file)

    @property
    def openssh(self) -> str:
        return sshsig.openssh(self.public)

    @property
    def kind(self) -> str:
        return sshsig.key_type(self.public)

    def sign(self, data: bytes, namespace: str = sshsig.COMMITS) -> str:
        """The armored SSH signature of `data`."""
        point = sshsig.ed25519_public(self.public)
        if self.seed is not None and point is not None:
            try:
                return sshsig.ed25519_signature(self.seed, point, data, namespace)
            except sshsig.Unavailable:
                pass  # no PyNaCl here: ssh-keygen signs with the same file
        return keygen.sign(self.file, data, namespace)


def default_path(store: Store, machine_id: str) -> str:
    return os.path.join(store.own_root, FOLDER, machine_id)


def configured(store: Store) -> str | None:
    """The key `gitmail.signingKey` names, if any (SigningKeyError for a relative path)."""
    raw = store.setting(SETTING) if store.exists() else None
    if not raw:
        return None
    path = spelled(raw)
    if not os.path.isabs(path):
        raise SigningKeyError(f"gitmail.{SETTING} must be an absolute path (it is {raw!r})")
    return path


def signer(store: Store, *, create: bool) -> Signer | None:
    """The key this machine signs with: the one `gitmail.signingKey` names, else gitmail's own (made now when
    `create`, else None when there is none yet)."""
    path = configured(store)
    if path is not None:
        return load(path, own=False)
    machine_id = machines.local_id(store, create=create)
    if machine_id is None:
        return None
    path = default_path(store, machine_id)
    if not os.path.exists(path):
        if not create:
            return None
        _make(store, path, machines.current(store))
    try:
        return load(path, own=True)
    except ExposedKey:
        raise
    except SigningKeyError as error:
        raise DamagedKey(path, _reason(str(error), path)) from None


def _reason(said: str, path: StrPath) -> str:
    """What a refusal of a key file says of it, without the path the damage line names already."""
    for prefix in (f"{path} is ", f"cannot read the signing key {path}: ", f"{path} "):
        if said.startswith(prefix):
            return said[len(prefix) :]
    return said


def replace_damaged(store: Store, damaged: DamagedKey) -> Signer:
    """Set gitmail's own damaged key aside (kept beside it as `<id>.damaged-<time>`, never deleted) and make a new
    one, which the next write publishes: other machines see it as a changed key, to accept as any other."""
    aside = damaged.path.with_name(f"{damaged.path.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}")
    try:
        os.replace(damaged.path, aside)
        damaged.path.with_name(damaged.path.name + ".pub").unlink(missing_ok=True)
    except OSError as error:
        raise SigningKeyError(f"cannot set {damaged.path} aside: {error.strerror or error}") from None
    damaged.aside = aside
    _make(store, damaged.path, machines.current(store))
    return load(damaged.path, own=True)


def load(path: StrPath, *, own: bool = False) -> Signer:
    """A key file as a Signer: a private key (refused when others may read it), or a public key whose private half
    an ssh-agent holds. SigningKeyError, in one line, for anything else."""
    text = _read_key(path)
    if _looks_private(text):
        key = _private(path, text)
        return Signer(path, key.public, key.seed, own=own)
    try:
        public = sshsig.key_blob(text.decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        raise SigningKeyError(f"{path} is neither an SSH private key nor an SSH public key") from None
    beside = _without_pub(os.fspath(path))
    if beside is not None and os.path.exists(beside):
        # ssh-keygen -f KEY.pub signs with the agent's key, else silently with the private file beside it: check
        # that file as ssh-keygen would use it, and sign with it in-process when that can be done.
        key = _private(beside, _read_key(beside))
        if key.public != public:
            raise SigningKeyError(f"{path} and {beside} beside it hold different keys")
        return Signer(path if key.seed is None else beside, public, key.seed, own=own)
    return Signer(path, public, None, own=own)


def _without_pub(path: str) -> str | None:
    """KEY for KEY.pub (as Path.with_suffix("") spells it when the suffix is .pub), else None."""
    name = os.path.basename(path)
    dot = name.rfind(".")
    return path[: -len(".pub")] if 0 < dot < len(name) - 1 and name[dot:] == ".pub" else None


def _looks_private(text: bytes) -> bool:
    return b"PRIVATE KEY-----" in text[:100]


def _read_key(path: StrPath) -> bytes:
    try:
        with open(path, "rb") as handle:
            info = os.fstat(handle.fileno())
            text = handle.read(1 << 16)
    except FileNotFoundError:
        raise SigningKeyError(f"the signing key {path} does not exist") from None
    except OSError as error:
        raise SigningKeyError(f"cannot read the signing key {path}: {error.strerror or error}") from None
    if _looks_private(text) and info.st_mode & 0o077:
        raise ExposedKey(
            f"the signing key {path} can be read by others (mode {info.st_mode & 0o777:04o}); "
            f"gitmail refuses it, as ssh does (fix: chmod 600 {path})"
        )
    return text


def _private(path: StrPath, text: bytes) -> sshsig.PrivateKey:
    """The key in a private key file: OpenSSH's format read here; an older one (PEM) through ssh-keygen, which
    signs with it too."""
    if sshsig.is_private(text):
        try:
            return sshsig.read_private(text)
        except sshsig.KeyFormatError as error:
            raise SigningKeyError(f"{path} is {error}") from None
    if not _looks_private(text):
        raise SigningKeyError(f"{path} is not an SSH private key")
    public = f"{os.fspath(path)}.pub"
    try:
        line = _read_ascii(public) if os.path.exists(public) else keygen.public(path)
        return sshsig.PrivateKey(sshsig.key_blob(line), None)
    except (OSError, ValueError, UnicodeDecodeError):
        raise SigningKeyError(f"cannot tell the public key of {path}") from None


def _read_ascii(path: str) -> str:
    with open(path, encoding="ascii") as handle:
        return handle.read()


def _make(store: Store, key: StrPath, machine: Machine) -> None:
    """gitmail's own key for this machine, made once (racing makers agree on one: the first link wins)."""
    comment = f"gitmail@{machine.name}"
    path = os.fspath(key)
    folder, name = os.path.split(path)
    temporary = os.path.join(folder, f".{name}.{os.getpid()}.{time.monotonic_ns()}")
    try:
        make_dir(folder)
        seed = os.urandom(32)
        try:
            text = sshsig.write_private(
                seed, sshsig.ed25519_keypair(seed), comment, int.from_bytes(os.urandom(4), "big")
            )
        except sshsig.Unavailable:  # no PyNaCl here: ssh-keygen makes it
            text = keygen.make(folder, comment)
        public = sshsig.read_private(text).public
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, text)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temporary, path)
        except FileExistsError:
            return  # another process made it first: theirs is the one
        except OSError:  # a file system without hard links
            if not os.path.exists(path):
                os.replace(temporary, path)
        finally:
            try:
                os.unlink(temporary)
            except FileNotFoundError:
                pass
        line = f"{sshsig.openssh(public)} {comment}\n"
        write_atomically(path + ".pub", line.encode())
    except OSError as error:
        raise SigningKeyError(f"cannot make a signing key at {path}: {error.strerror or error}") from None


class Survey(NamedTuple):
    """The key this machine signs with and the keys it knows of other machines."""

    machine: Machine  # this machine
    own: Signer | None  # None: no key yet (made at the first write)
    published: bool  # whether this machine's key is published (by its first signed write, or `keys init`)
    others: list[Key]  # every key other machines published, and what this machine makes of each


# -- publications ---------------------------------------------------------------------------------------------------


class Published(NamedTuple):
    """A machine's key as it published it, its possession proven."""

    machine: str  # id
    name: str
    public: bytes
    at: int  # seconds since the epoch

    @property
    def fingerprint(self) -> str:
        return sshsig.fingerprint(self.public)


def anchor(machine_id: str) -> str:
    """The object id a machine's publications are the note of (no such object exists: a note needs a name)."""
    return _sha1(f"gitmail key of machine {machine_id}".encode()).hexdigest()


def publication(key: Signer, machine: Machine, when: int) -> str:
    """`<id> <name> <key type> <key> <time> <signature>`: the signature (base64 of the SSHSIG) is over everything
    before it, exactly as written."""
    said = f"{machine.id} {machine.name} {key.openssh} {when}"
    armored = key.sign(said.encode(), sshsig.KEYS)
    return f"{said} {''.join(armored.strip().splitlines()[1:-1])}"  # the armor's base64, on one line


def parse_publication(line: str) -> Published | None:
    """The publication on this line, if it is one whose signature its own key made; None otherwise."""
    said, _, signature = line.strip().rpartition(" ")
    fields = said.split(" ")
    if len(fields) != 5 or not ID_PATTERN.fullmatch(fields[0]) or not NAME_PATTERN.fullmatch(fields[1]):
        return None
    if not (fields[4].isascii() and fields[4].isdigit()):  # "²" is a digit to isdigit(), not to int()
        return None
    try:
        public = sshsig.key_blob(f"{fields[2]} {fields[3]}")
        armored = sshsig.armor(sshsig.unb64(signature))
    except ValueError:
        return None
    from gitmail.store import signatures  # where publications are read, not at every write
    from gitmail.values.verdict import GOOD

    fact = signatures.check(said.encode(), armored, sshsig.KEYS)
    if fact.kind != GOOD or fact.key != sshsig.fingerprint(public):
        return None
    return Published(fields[0], fields[1], public, int(fields[4]))


class Publications(NamedTuple):
    found: list[Published]
    partial: set[str]  # the machines (by anchor) whose note was not read whole: no key of theirs is pinned


def publications(store: Store) -> Publications:
    """Every publication in the mailbox's refs/notes/gitmail-keys whose signature holds, each in its own machine's
    note (a publication filed under another machine's note is no publication). A note larger than gitmail reads, or
    cut by the number of lines it checks, may hide a key, so its machine is named as read only in part."""
    if not store.targets([KEYS_NOTES]):
        return Publications([], set())
    listed = store.git("ls-tree", "-r", "-z", KEYS_NOTES).decode(errors="replace")
    entries = [entry.partition("\t") for entry in listed.split("\0") if entry]
    notes = [(head.split()[2], path.replace("/", "")) for head, _, path in entries]  # (blob, annotated object)
    found: list[Published] = []
    partial: set[str] = set()
    budget = MAX_PUBLICATIONS  # what a remote could pile up here is not all checked
    for (_, annotated), data in zip(notes, store.read([blob for blob, _ in notes], limit=MAX_NOTE_BYTES), strict=True):
        lines = data.splitlines() if data is not None else None
        if lines is None or len(lines) > budget:
            partial.add(annotated)
        for line in (lines or [])[: max(budget, 0)]:
            published = parse_publication(line.decode(errors="replace"))
            if published is not None and anchor(published.machine) == annotated:
                found.append(published)
        budget -= len(lines or [])
    return Publications(found, partial)


def published_mark(store: Store) -> str:
    return (read_text(os.path.join(store.own_root, FOLDER, PUBLISHED)) or "").strip()


def mark(key: Signer, machine: Machine) -> str:
    return f"{key.fingerprint} {machine.name} {machine.id}"


def remember_published(store: Store, key: Signer, machine: Machine) -> None:
    try:
        write_atomically(
            os.path.join(store.own_root, FOLDER, PUBLISHED), (mark(key, machine) + "\n").encode(), durable=False
        )
    except MailboxError:
        pass  # published again at the next write: a line already there is not added twice


# -- what this machine accepts --------------------------------------------------------------------------------------


def learn(store: Store, *, listing: bool = False) -> list[Key]:
    """Take in the keys published since last time (the caller holds the mailbox lock): a machine seen for the
    first time with one key has it pinned; any other key is recorded as new, not accepted. The keys added.
    `listing`: for a command that only lists keys, which a full disk must not stop: what cannot be written down is
    left to be taken in at a later look (the same publications decide the same)."""
    from gitmail.values.verdict import ACCEPTED, NEW, PINNED, Key

    tip = store.targets([KEYS_NOTES]).get(KEYS_NOTES)
    learned, keys = pins.load(store)
    if tip is None or tip == learned:
        return []
    own = machines.local_id(store)
    now = _now()
    added: list[Key] = []
    by_machine: dict[str, list[Published]] = {}
    read = publications(store)
    for published in read.found:
        if published.machine != own:
            by_machine.setdefault(published.machine, []).append(published)
    for machine, found in sorted(by_machine.items()):
        had = {k.fingerprint for k in keys if k.machine == machine}
        fresh = {p.fingerprint: p for p in sorted(found, key=lambda p: p.at) if p.fingerprint not in had}
        # Pinned on first sight only when this is all there is to see: one key, its whole note read, and a name no
        # machine accepted here already goes by (a second "laptop" is a stranger until the user trusts it).
        named = {p.name for p in fresh.values()}
        lookalike = any(k.name in named and k.machine != machine and k.state in ACCEPTED for k in [*keys, *added])
        first = not had and len(fresh) == 1 and anchor(machine) not in read.partial and not lookalike
        for print_, published in fresh.items():
            added.append(
                Key(machine, published.name, print_, sshsig.openssh(published.public), PINNED if first else NEW, now)
            )
        # A machine's name is what its newest publication by a key accepted here says: no other key renames it,
        # and no machine takes the name another accepted machine goes by (its mail would read as that one's).
        accepted = {k.fingerprint for k in [*keys, *added] if k.machine == machine and k.state in ACCEPTED}
        vouched = [p for p in found if p.fingerprint in accepted]
        if vouched:
            name = max(vouched, key=lambda p: p.at).name
            known = [k for k in [*keys, *added] if k.machine == machine]
            taken = [
                k.machine for k in [*keys, *added] if k.name == name and k.machine != machine and k.state in ACCEPTED
            ]
            if taken and known and known[0].name != name:
                _refused_rename(store, machine, known[0].name, name, taken[0])
                continue
            keys = [k._replace(name=name) if k.machine == machine else k for k in keys]
            added = [k._replace(name=name) if k.machine == machine else k for k in added]
    try:
        pins.save(store, tip, [*keys, *added])
    except Unwritable:
        if not listing:
            raise
        return []
    return added


def _refused_rename(store: Store, machine: str, name: str, wanted: str, owner: str) -> None:
    from gitmail.store.log import problem

    problem(
        store.path,
        f'machine "{name}" ({machine}) published the name "{wanted}", which machine {owner} goes by here: it is '
        f'still called "{name}" here (`gitmail keys` lists both)',
    )


def same_named(store: Store) -> dict[str, list[str]]:
    """The names that more than one machine accepted here goes by, each with those machines' ids."""
    from gitmail.values.verdict import ACCEPTED

    ids: dict[str, set[str]] = {}
    for key in pins.known(store).all:
        if key.state in ACCEPTED:
            ids.setdefault(key.name, set()).add(key.machine)
    return {name: sorted(found) for name, found in sorted(ids.items()) if len(found) > 1}


def trust(store: Store, machine: str, fingerprint: str) -> Key:
    """Accept this key for this machine (its id or name), whatever was decided before: the user compared it."""
    from gitmail.values.verdict import TRUSTED

    wanted = fingerprint if fingerprint.startswith("SHA256:") else f"SHA256:{fingerprint}"
    with store.locked():
        learn(store)
        learned, keys = pins.load(store)
        machine_id = _machine(keys, machine, f"gitmail keys trust ID {wanted}", wanted)
        matching = [k for k in keys if k.machine == machine_id and k.fingerprint == wanted]
        if not matching:
            theirs = ", ".join(k.fingerprint for k in keys if k.machine == machine_id)
            raise UsageError(f"machine {machine} has published no key {wanted} (its keys: {theirs})")
        chosen = matching[0]._replace(state=TRUSTED, at=_now())
        pins.save(store, learned, [chosen if k == matching[0] else k for k in keys])
    return chosen


def revoke(store: Store, machine: str) -> list[Key]:
    """Stop accepting every key of this machine (its id or name); its mail reads UNVERIFIED until a key of it is
    trusted again. The keys revoked."""
    from gitmail.values.verdict import REVOKED

    with store.locked():
        learn(store)
        learned, keys = pins.load(store)
        machine_id = _machine(keys, machine, "gitmail keys revoke ID")
        now = _now()
        changed = [k._replace(state=REVOKED, at=now) for k in keys if k.machine == machine_id and k.state != REVOKED]
        kept = [k for k in keys if k.machine != machine_id or k.state == REVOKED]
        pins.save(store, learned, [*kept, *changed])
    return changed


def _machine(keys: Sequence[Key], given: str, command: str, fingerprint: str = "") -> str:
    """The id of the machine `given` names: an id, or a name only one machine has. When several have the name,
    the refusal lists them and shows `command` naming one by its ID (the one that published `fingerprint`, when
    only one did)."""
    if any(k.machine == given for k in keys):
        return given
    ids = sorted({k.machine for k in keys if k.name == given})
    if len(ids) == 1:
        return ids[0]
    if ids:
        each = "; ".join(f"{i}: {', '.join(f'{k.fingerprint} {k.state}' for k in keys if k.machine == i)}" for i in ids)
        owners = sorted({k.machine for k in keys if k.machine in ids and k.fingerprint == fingerprint})
        example = command.replace("ID", owners[0], 1) if len(owners) == 1 else command
        raise UsageError(
            f"{len(ids)} machines are called {given!r} ({each}); name the one you mean by its id: {example}"
        )
    raise UsageError(f"no machine {given!r} has published a key here (run `gitmail sync`, then `gitmail keys`)")


def _now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()


# -- what plain git is told, and what readers are told ------------------------------------------------------------


def allowed_signers(store: Store) -> str:
    """git's allowed_signers format: this machine's key and every key accepted for another machine, each for the
    principal `<machine name>@<machine id>`, namespace "git"."""
    from gitmail.values.verdict import ACCEPTED

    lines = ["# gitmail's signing keys: git -c gpg.ssh.allowedSignersFile=FILE log --show-signature --glob=gitmail"]
    own = signer(store, create=False)
    if own is not None:
        here = machines.current(store)
        lines.append(f'{here.name}@{here.id} namespaces="git" {own.openssh}')
    for key in pins.known(store).all:
        if key.state in ACCEPTED:
            lines.append(f'{key.name}@{key.machine} namespaces="git" {key.public}')
        else:
            lines.append(f"# {key.state}, not accepted: {key.name}@{key.machine} {key.public}")
    return "\n".join(lines) + "\n"
