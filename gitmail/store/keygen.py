"""ssh-keygen, for the keys gitmail cannot handle in-process: making a key without PyNaCl, telling the public half
of an older (PEM) private key, and signing with any key type or an ssh-agent's key. Each run never waits for a
passphrase and is started only when needed (subprocess is not imported before)."""

from __future__ import annotations

import os

from gitmail.errors import MailboxError
from gitmail.values import sshsig

TYPE_CHECKING = False
if TYPE_CHECKING:
    from _typeshed import StrPath


class SigningKeyError(MailboxError):
    """The key gitmail is to sign with cannot be used: missing, readable by others, damaged, or refused."""


class NoSigner(SigningKeyError):
    """Nothing in this process can sign or make a key: no PyNaCl and no ssh-keygen (a bare interpreter, as a host
    plugin runs gitmail before it has set up its own environment)."""


def public(path: StrPath) -> str:
    import subprocess

    try:
        done = subprocess.run(
            ["ssh-keygen", "-y", "-f", os.fspath(path)],
            capture_output=True,
            timeout=30,
            start_new_session=True,
            env={**os.environ, "SSH_ASKPASS_REQUIRE": "never"},
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.decode("ascii", "replace") if done.returncode == 0 else ""


def make(folder: str, comment: str) -> bytes:
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix=".new-", dir=folder) as scratch:
        made = os.path.join(scratch, "key")
        try:
            done = subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", made],
                capture_output=True,
                stdin=subprocess.DEVNULL,
                timeout=60,
                start_new_session=True,
            )
        except FileNotFoundError:
            raise NoSigner("no key can be made here: that needs PyNaCl or ssh-keygen, and neither is here") from None
        except (OSError, subprocess.TimeoutExpired) as error:
            raise SigningKeyError(f"ssh-keygen could not make a key: {error}") from None
        if done.returncode != 0:
            raise SigningKeyError(f"ssh-keygen could not make a key: {done.stderr.decode(errors='replace').strip()}")
        with open(made, "rb") as handle:
            return handle.read()


def sign(path: str, data: bytes, namespace: str) -> str:
    """`ssh-keygen -Y sign`: any key type, an ssh-agent's key given its public key file. Never waits for a
    passphrase: no terminal (a session of its own) and no askpass, so an encrypted key fails at once."""
    import subprocess

    try:
        done = subprocess.run(
            ["ssh-keygen", "-q", "-Y", "sign", "-n", namespace, "-f", path],
            input=data,
            capture_output=True,
            timeout=60,
            start_new_session=True,
            env={**os.environ, "SSH_ASKPASS_REQUIRE": "never"},
        )
    except FileNotFoundError:
        raise NoSigner(
            f"signing with {path} needs ssh-keygen (or PyNaCl, for an Ed25519 key): neither is here"
        ) from None
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SigningKeyError(f"ssh-keygen could not sign with {path}: {error}") from None
    if done.returncode != 0 or not done.stdout.startswith(sshsig.BEGIN.encode()):
        said = done.stderr.decode(errors="replace").strip().splitlines()
        reason = said[-1] if said else f"it exited {done.returncode}"
        raise SigningKeyError(f"ssh-keygen could not sign with {path}: {reason}")
    return done.stdout.decode("ascii")
