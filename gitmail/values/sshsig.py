"""SSH signatures (OpenSSH's PROTOCOL.sshsig) as git signs commits with them, and OpenSSH's key formats. Pure: bytes
in, bytes out; the key files and the ssh-keygen fallback are store/keys.py's and store/signatures.py's.

A signed commit carries its signature in a `gpgsig` header; the signed bytes are the commit without that header
(`split_commit`), so author, time, parents, tree and message are all covered, and git's own object format is the
canonical form (nothing of ours to canonicalise). The signature is an armored SSHSIG blob: magic, version, the
signer's public key, the namespace ("git" for commits, or git reports it bad), the hash algorithm (sha512) and the
signature over a blob of the same fields and the hash of the signed bytes (`signed_data`).

Ed25519 is signed and checked in-process with PyNaCl's libsodium, loaded only when a signature is made or checked;
any other key type goes through `ssh-keygen -Y`.
"""

from __future__ import annotations

import binascii
import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from hashlib import sha256, sha512
    from typing import Any, NamedTuple
else:
    from gitmail.values.tuples import NamedTuple

    try:  # CPython's own SHA-2: hashlib would load OpenSSL, milliseconds of every send
        from _sha256 import sha256
        from _sha512 import sha512
    except ImportError:  # 3.12 merged them into _sha2; other interpreters
        try:
            from _sha2 import sha256, sha512
        except ImportError:
            from hashlib import sha256, sha512

COMMITS = "git"  # the namespace of commit signatures: git reports any other as bad
KEYS = "gitmail-key"  # the namespace of a machine's key publication (never valid as a commit's signature)
HASH = "sha512"
ED25519 = "ssh-ed25519"
MAGIC = b"SSHSIG"
VERSION = 1
BEGIN = "-----BEGIN SSH SIGNATURE-----"
END = "-----END SSH SIGNATURE-----"
_LINE = 70  # ssh-keygen wraps the base64 at 70 columns
_GPGSIG = b"gpgsig "
_PRIVATE_BEGIN = b"-----BEGIN OPENSSH PRIVATE KEY-----"
_PRIVATE_END = b"-----END OPENSSH PRIVATE KEY-----"
_PRIVATE_MAGIC = b"openssh-key-v1\0"


class SignatureError(Exception):
    """A signature that is malformed, made for another namespace, or does not match what it signs."""


class KeyFormatError(Exception):
    """A key file that is not what it says it is."""


class Unavailable(Exception):
    """Ed25519 cannot be done in this process: PyNaCl is not installed (ssh-keygen may still do it)."""


# -- the SSH wire format ------------------------------------------------------------------------------------------


def string(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def b64(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def unb64(text: str | bytes) -> bytes:
    return binascii.a2b_base64(text, strict_mode=True)  # binascii.Error is a ValueError


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, count: int) -> bytes:
        if count < 0 or self.at + count > len(self.data):
            raise ValueError("truncated")
        self.at += count
        return self.data[self.at - count : self.at]

    def u32(self) -> int:
        return int.from_bytes(self.take(4), "big")

    def string(self) -> bytes:
        return self.take(self.u32())

    def done(self) -> bool:
        return self.at == len(self.data)


# -- public keys --------------------------------------------------------------------------------------------------


def key_blob(text: str) -> bytes:
    """The wire blob of an OpenSSH public key line ("ssh-ed25519 AAAA... [comment]"); ValueError if it is not one."""
    fields = text.split()
    if len(fields) < 2:
        raise ValueError("not an OpenSSH public key")
    blob = unb64(fields[1])
    if _Reader(blob).string().decode("ascii", "replace") != fields[0]:
        raise ValueError("the key's type does not match its data")
    return blob


def key_type(blob: bytes) -> str:
    try:
        return _Reader(blob).string().decode("ascii", "replace")
    except ValueError:
        return "unknown"


def openssh(blob: bytes) -> str:
    """ "ssh-ed25519 AAAA...": the key as an authorized_keys or allowed_signers line has it (no comment)."""
    return f"{key_type(blob)} {b64(blob)}"


def fingerprint(blob: bytes) -> str:
    """ "SHA256:..." exactly as `ssh-keygen -l` prints it."""
    return "SHA256:" + b64(sha256(blob).digest()).rstrip("=")


def ed25519_blob(public: bytes) -> bytes:
    return string(ED25519.encode()) + string(public)


def ed25519_public(blob: bytes) -> bytes | None:
    """The 32 raw bytes of an Ed25519 key blob; None for another type."""
    try:
        reader = _Reader(blob)
        if reader.string() != ED25519.encode():
            return None
        public = reader.string()
    except ValueError:
        return None
    return public if len(public) == 32 and reader.done() else None


# -- private keys (OpenSSH's format) --------------------------------------------------------------------------------


class PrivateKey(NamedTuple):
    """What a private key file says: its public key always; the Ed25519 seed when it is an unencrypted Ed25519 key
    (signed in-process), else None (ssh-keygen signs with it)."""

    public: bytes  # the public key's wire blob
    seed: bytes | None


def is_private(text: bytes) -> bool:
    return text.lstrip().startswith(_PRIVATE_BEGIN)


def read_private(text: bytes) -> PrivateKey:
    """The key in an OpenSSH private key file (`-----BEGIN OPENSSH PRIVATE KEY-----`); KeyFormatError if damaged."""
    text = text.strip()
    if not text.startswith(_PRIVATE_BEGIN) or not text.endswith(_PRIVATE_END):
        raise KeyFormatError("not an OpenSSH private key")
    try:
        raw = unb64(b"".join(text[len(_PRIVATE_BEGIN) : -len(_PRIVATE_END)].split()))
        reader = _Reader(raw)
        if reader.take(len(_PRIVATE_MAGIC)) != _PRIVATE_MAGIC:
            raise ValueError("bad magic")
        cipher, kdf, _options, count = reader.string(), reader.string(), reader.string(), reader.u32()
        if count != 1:
            raise ValueError("a file of several keys")
        public = reader.string()
        if cipher != b"none" or kdf != b"none" or ed25519_public(public) is None:
            return PrivateKey(public, None)  # encrypted (a passphrase to ask for) or not Ed25519: ssh-keygen's
        inner = _Reader(reader.string())
        if inner.u32() != inner.u32():
            raise ValueError("its check numbers differ")
        if inner.string() != ED25519.encode():
            raise ValueError("its inner key is of another type")
        point, secret = inner.string(), inner.string()
    except ValueError as error:  # binascii.Error included
        raise KeyFormatError(f"a damaged OpenSSH private key ({error})") from None
    if len(secret) != 64 or secret[32:] != point or ed25519_blob(point) != public:
        raise KeyFormatError("an inconsistent Ed25519 private key")
    return PrivateKey(public, secret[:32])


def write_private(seed: bytes, public: bytes, comment: str, check: int) -> bytes:
    """An unencrypted Ed25519 key in OpenSSH's private key format, as `ssh-keygen -t ed25519 -N ''` writes it."""
    blob = ed25519_blob(public)
    inner = check.to_bytes(4, "big") * 2 + blob + string(seed + public) + string(comment.encode())
    inner += bytes(range(1, 1 + (-len(inner)) % 8))  # padded to the cipher's block size (8 for "none")
    raw = _PRIVATE_MAGIC + string(b"none") + string(b"none") + string(b"") + (1).to_bytes(4, "big")
    raw += string(blob) + string(inner)
    encoded = b64(raw)
    lines = [encoded[i : i + _LINE] for i in range(0, len(encoded), _LINE)]
    return b"\n".join([_PRIVATE_BEGIN, *(line.encode() for line in lines), _PRIVATE_END]) + b"\n"


# -- Ed25519, in-process ------------------------------------------------------------------------------------------

# PyNaCl's handle on its own libsodium (its cffi module, `nacl._sodium`), loaded at the first signature: it imports
# in ~2 ms, where `nacl.bindings`, which wraps the same three calls, first imports every binding it has (~10 ms,
# paid by every send). Where that module is not as expected (another PyNaCl), the public bindings do the same.
_sodium: Any = None  # the module, once loaded; False: use nacl.bindings


def _libsodium() -> Any:
    global _sodium
    if _sodium is None:
        try:
            module = importlib.import_module("nacl._sodium")
            lib = module.lib
            if not all(hasattr(lib, f) for f in ("crypto_sign", "crypto_sign_open", "crypto_sign_seed_keypair")):
                raise ImportError("nacl._sodium lacks a function")
            if lib.sodium_init() < 0:
                raise ImportError("libsodium did not start")
            _sodium = module
        except (ImportError, AttributeError):
            _sodium = False
    return _sodium


def _bindings() -> Any:
    """PyNaCl's public bindings; Unavailable when PyNaCl is not installed (a bare interpreter)."""
    try:
        return importlib.import_module("nacl.bindings")
    except ImportError:
        raise Unavailable("PyNaCl is not installed") from None


def available() -> bool:
    """Whether Ed25519 can be signed and checked in this process."""
    try:
        return bool(_libsodium()) or bool(_bindings())
    except Unavailable:
        return False


def ed25519_keypair(seed: bytes) -> bytes:
    """The public key of an Ed25519 seed."""
    sodium = _libsodium()
    if not sodium:
        return bytes(_bindings().crypto_sign_seed_keypair(seed)[0])
    public = sodium.ffi.new("unsigned char[]", 32)
    secret = sodium.ffi.new("unsigned char[]", 64)
    if len(seed) != 32 or sodium.lib.crypto_sign_seed_keypair(public, secret, seed) != 0:
        raise ValueError("not an Ed25519 seed")
    return bytes(sodium.ffi.buffer(public, 32))


def ed25519_sign(seed: bytes, public: bytes, message: bytes) -> bytes:
    sodium = _libsodium()
    if not sodium:
        return bytes(_bindings().crypto_sign(message, seed + public)[:64])  # the signature, then the message
    signed = sodium.ffi.new("unsigned char[]", len(message) + 64)
    length = sodium.ffi.new("unsigned long long *")
    if len(seed + public) != 64 or sodium.lib.crypto_sign(signed, length, message, len(message), seed + public) != 0:
        raise ValueError("not an Ed25519 key")
    return bytes(sodium.ffi.buffer(signed, 64))


def ed25519_verify(public: bytes, message: bytes, signature: bytes) -> bool:
    if len(signature) != 64 or len(public) != 32:
        return False
    sodium = _libsodium()
    if not sodium:
        bindings = _bindings()
        from nacl.exceptions import BadSignatureError

        try:
            bindings.crypto_sign_open(signature + message, public)
        except (BadSignatureError, ValueError):
            return False
        return True
    opened = sodium.ffi.new("unsigned char[]", len(message) + 64)
    length = sodium.ffi.new("unsigned long long *")
    return bool(sodium.lib.crypto_sign_open(opened, length, signature + message, len(message) + 64, public) == 0)


# -- SSHSIG -------------------------------------------------------------------------------------------------------


def signed_data(message: bytes, namespace: str) -> bytes:
    """What the signature itself is made over: the fields of the SSHSIG and the hash of the message."""
    return MAGIC + string(namespace.encode()) + string(b"") + string(HASH.encode()) + string(sha512(message).digest())


def armor(blob: bytes) -> str:
    encoded = b64(blob)
    return "\n".join([BEGIN, *(encoded[i : i + _LINE] for i in range(0, len(encoded), _LINE)), END]) + "\n"


def ed25519_signature(seed: bytes, public: bytes, message: bytes, namespace: str) -> str:
    """The armored SSHSIG of `message`, made in-process, byte for byte what `ssh-keygen -Y sign` writes."""
    raw = ed25519_sign(seed, public, signed_data(message, namespace))
    blob = MAGIC + VERSION.to_bytes(4, "big") + string(ed25519_blob(public)) + string(namespace.encode())
    blob += string(b"") + string(HASH.encode()) + string(string(ED25519.encode()) + string(raw))
    return armor(blob)


class Parsed(NamedTuple):
    """The fields of an SSHSIG, not yet checked."""

    public: bytes  # the signer's public key blob
    namespace: str
    hash: str
    kind: str  # the signature's algorithm: ssh-ed25519, rsa-sha2-512, ...
    raw: bytes  # the signature proper


def parse(armored: str) -> Parsed:
    """An armored SSHSIG's fields; SignatureError when it does not even parse."""
    if "\r" in armored:  # ssh-keygen (hence git) refuses CRLF armor: never good here where git says bad
        raise SignatureError("a carriage return in the armored signature")
    lines = armored.strip("\n").split("\n")
    if len(lines) < 3 or lines[0] != BEGIN or lines[-1] != END:
        raise SignatureError("not an armored SSH signature")
    try:
        reader = _Reader(unb64("".join(lines[1:-1])))
        if reader.take(6) != MAGIC or reader.u32() != VERSION:
            raise SignatureError("not an SSH signature of version 1")
        public, namespace, _reserved, algorithm, signature = (reader.string() for _ in range(5))
        if not reader.done():
            raise SignatureError("bytes after the signature")
        inner = _Reader(signature)
        kind, raw = inner.string().decode("ascii"), inner.string()
        return Parsed(public, namespace.decode("ascii"), algorithm.decode("ascii"), kind, raw)
    except (ValueError, UnicodeDecodeError):  # binascii.Error included
        raise SignatureError("a damaged SSH signature") from None


def check(message: bytes, armored: str, namespace: str) -> Parsed:
    """The parsed signature when it is a good one of `message` in `namespace` by the key it names, checked
    in-process (Ed25519); SignatureError when it is not. Any other key type is left to ssh-keygen (`needs_keygen`),
    and so is Ed25519 where PyNaCl is missing (Unavailable)."""
    signature = parse(armored)
    if signature.namespace != namespace:
        raise SignatureError(f"signed for {signature.namespace!r}, not {namespace!r}")
    public = ed25519_public(signature.public)
    if public is None:
        if signature.hash not in ("sha512", "sha256"):
            raise SignatureError(f"an unknown hash algorithm {signature.hash!r}")
        return signature  # the caller has ssh-keygen check it
    if signature.kind != ED25519 or signature.hash != HASH:
        raise SignatureError("an Ed25519 key with another algorithm")
    if not ed25519_verify(public, signed_data(message, namespace), signature.raw):
        raise SignatureError("the signature does not match")
    return signature


def needs_keygen(signature: Parsed) -> bool:
    return ed25519_public(signature.public) is None


# -- git commit objects -------------------------------------------------------------------------------------------


def split_commit(raw: bytes) -> tuple[bytes, str | None]:
    """(the signed bytes, the armored signature or None) of a commit object's content: the commit without its
    gpgsig headers, as git's parse_buffer_signed_by_header takes them out (only the header is searched)."""
    kept: list[bytes] = []
    signature: list[bytes] = []
    at, inside, other = 0, False, False
    while at < len(raw):
        end = raw.find(b"\n", at)
        end = len(raw) if end < 0 else end + 1
        line = raw[at:end]
        if line == b"\n":  # the header ends: the message follows, whole
            kept.append(raw[at:])
            break
        if (inside or other) and line.startswith(b" "):
            if inside:
                signature.append(line[1:])
        elif line.startswith(_GPGSIG):
            inside, other = True, False
            signature.append(line[len(_GPGSIG) :])
        elif line.startswith(b"gpgsig"):  # gpgsig-sha256: git leaves it out of what is signed as well
            inside, other = False, True
        else:
            inside = other = False
            kept.append(line)
        at = end
    return b"".join(kept), (b"".join(signature).decode("ascii", "replace") if signature else None)


def add_signature(raw: bytes, armored: str) -> bytes:
    """The commit with a gpgsig header holding the signature, where and as git writes it: at the end of the header,
    every line after the first indented by one space."""
    header = b"gpgsig" + b"".join(b" " + line + b"\n" for line in armored.encode("ascii").splitlines())
    end = raw.find(b"\n\n")
    at = len(raw) if end < 0 else end + 1
    return raw[:at] + header + raw[at:]
