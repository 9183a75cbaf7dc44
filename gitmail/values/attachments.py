"""Attachments: files and patches a message carries as git objects. Pure: no I/O.

Each attachment is a blob in the message commit's tree, under `attachments/<name>`, so identical files are stored
once and sync carries them like any other object; `git show <commit>` lists them as files. The message's document
records each one (name, size, type, blob id, and for a patch its kind), so that reading a message (and framing it
for a session) never reads attachment content.

Names are reduced to a safe base name: no directories, no `..`, no control or invisible characters, nothing git
treats as special (`.gitmodules` and the like become `_.gitmodules`: a fetch that checks objects refuses such a
tree), no leading `-`, and no two alike (ignoring case: a second `x.txt` becomes `x (2).txt`).
"""

from __future__ import annotations

from gitmail.values import jsontext
from gitmail.values.ids import is_oid
from gitmail.values.names import NOT_UTF8, has_surrogates, nfc, without_unsafe
from gitmail.values.patterns import IGNORECASE, lazy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple
else:
    from gitmail.values.tuples import NamedTuple

FOLDER = "attachments"  # the folder of a message commit's tree that holds them
FIELD = "attachments"  # the document's field that records them
DEFAULT_LIMIT = 25 * 1024 * 1024  # bytes all of one message's attachments may take together
DEFAULT_COUNT = 20  # attachments one message may carry
LIMIT_SETTING = "attachmentLimit"  # gitmail.attachmentLimit in the mailbox's config (25m, 100k, a number of bytes)
COUNT_SETTING = "attachmentCount"  # gitmail.attachmentCount
MAX_NAME_BYTES = 200  # well under NAME_MAX (255), leaving room for " (2)" and a temporary file's prefix
FALLBACK_NAME = "attachment"

COMMITS = "commits"  # a patch made by `git format-patch`: applied with `git am --3way`
UNCOMMITTED = "uncommitted"  # a patch of uncommitted changes made by `git diff`: applied with `git apply --index`
PATCH_KINDS = (COMMITS, UNCOMMITTED)
PATCH_TYPE = "text/x-diff"
BINARY_TYPE = "application/octet-stream"

# Characters that show as nothing: zero-width spaces and joiners, direction marks, the soft hyphen, invisible
# operators, the byte-order mark. Removed from names (git on macOS ignores several of them in `.git`, too).
_INVISIBLE = lazy("[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f\u2060-\u2064\u206a-\u206f\ufeff]")
# Names git's object checks (fsck) treat as special in a tree: `.git` and its NTFS and HFS spellings,
# `.gitmodules`, `.gitattributes` and their short names (`git~1`, `gitmod~1`).
_GIT_SPECIAL = (".git", "git~", "gitmod~", "gitatt~")
_TYPE_CHARACTERS = "abcdefghijklmnopqrstuvwxyz0123456789.+-"
_PLAIN_NAME = frozenset(map(chr, range(0x20, 0x7F))) - {"/", "\\"}  # printable ASCII but the separators


class Attachment(NamedTuple):
    """One attachment as a message records it."""

    name: str  # a safe base name, unique within the message
    size: int  # bytes
    blob: str  # the git object id of its content
    type: str  # a MIME type, as the sender's gitmail guessed it (never trusted for anything but display)
    patch: str | None = None  # COMMITS or UNCOMMITTED when it was attached as a patch
    base: str | None = None  # a patch's base: the commit the uncommitted changes were made against

    def field(self) -> dict[str, object]:
        found: dict[str, object] = {"name": self.name, "size": self.size, "type": self.type, "blob": self.blob}
        if self.patch is not None:
            found["patch"] = self.patch
        if self.base is not None:
            found["base"] = self.base
        return found


def encode(attachments: tuple[Attachment, ...]) -> str:
    """The document's value: one JSON array on one line (which YAML reads as the same list)."""
    return jsontext.dumps([a.field() for a in attachments], ensure_ascii=False)


def decode(text: str) -> tuple[Attachment, ...]:
    """The attachments a document records. A record gitmail would not write (a name that is not safe, a malformed
    size, id or type) is left out: the message stays readable, and nothing is ever offered under a name that could
    reach outside the folder it is written to."""
    try:
        raw = jsontext.loads(text)
    except (ValueError, RecursionError):  # nested deeper than the parser goes: no record gitmail wrote
        return ()
    if not isinstance(raw, list):
        return ()
    found: list[Attachment] = []
    for item in raw:
        if not isinstance(item, dict):
            continue
        name, size, blob = item.get("name"), item.get("size"), item.get("blob")
        kind, patch, base = item.get("type"), item.get("patch"), item.get("base")
        if not isinstance(name, str) or not _is_safe(name) or any(a.name == name for a in found):
            continue
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            continue
        if not is_oid(blob):
            continue
        if not isinstance(kind, str) or not _is_type(kind):
            kind = BINARY_TYPE
        if patch not in PATCH_KINDS:
            patch = None
        if not is_oid(base):
            base = None
        found.append(Attachment(name, size, blob, kind, patch, base))
    return tuple(found)


def safe_name(raw: str) -> str:
    """The name an attachment given as `raw` (a path, or a name from anywhere) is stored under."""
    if has_surrogates(raw):  # a file name whose bytes are not UTF-8
        raw = NOT_UTF8.sub("_", raw)
    name = raw.replace("\\", "/").rpartition("/")[2]
    name = nfc(_INVISIBLE.sub("", name))
    name = without_unsafe(name, "_").strip()
    if name in ("", ".", ".."):
        return FALLBACK_NAME
    if name.startswith("-") or name.casefold().startswith(_GIT_SPECIAL):
        name = "_" + name
    return _shortened(name, MAX_NAME_BYTES)


def _is_safe(name: str) -> bool:
    """Whether `safe_name` leaves the name as it is; for a plain ASCII name (most), without a regular expression
    (reading mail stays free of compiling them)."""
    if not (name and set(name) <= _PLAIN_NAME):
        return safe_name(name) == name
    return (
        name == name.strip()
        and name not in (".", "..")
        and not name.startswith("-")
        and not name.casefold().startswith(_GIT_SPECIAL)
        and len(name) <= MAX_NAME_BYTES
    )


def _is_type(kind: str) -> bool:
    """A plain MIME token: type/subtype of lower-case letters, digits and . + - (each starting with either)."""
    major, slash, minor = kind.partition("/")
    return bool(
        slash
        and 0 < len(major) <= 64
        and 0 < len(minor) <= 64
        and not (major + minor).strip(_TYPE_CHARACTERS)
        and major[0].isalnum()
        and minor[0].isalnum()
    )


def unique(names: list[str]) -> list[str]:
    """The names again, each one different from the others even where case is ignored (a second `x.txt` becomes
    `x (2).txt`): written out side by side, on any file system, no attachment replaces another."""
    taken: set[str] = set()
    found = []
    for name in names:
        chosen, number = name, 1
        while _folded(chosen) in taken:
            number += 1
            stem, dot, extension = name.rpartition(".")
            if not stem or not dot:
                stem, dot, extension = name, "", ""
            suffix = f" ({number})" + dot + extension
            chosen = _shortened(stem, MAX_NAME_BYTES - len(suffix.encode())) + suffix
        taken.add(_folded(chosen))
        found.append(chosen)
    return found


def is_text(head: bytes) -> bool:
    """Whether content beginning with these bytes reads as text (git's test: no NUL in its first 8,000 bytes),
    and as UTF-8."""
    if b"\0" in head[:8000]:
        return False
    try:
        head[:8000].decode("utf-8")
    except UnicodeDecodeError as error:
        return error.start >= len(head[:8000]) - 3  # a character cut at the end of the sample
    return True


def size_text(size: int) -> str:
    """12 bytes · 1.5 KiB · 25.0 MiB"""
    if size < 1024:
        return f"{size} byte{'' if size == 1 else 's'}"
    value = size / 1024
    for unit in ("KiB", "MiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


_SIZE = lazy(r"\s*([0-9]+)\s*([kmg]?)(?:i?b)?\s*", IGNORECASE)


def parse_size(text: str) -> int | None:
    """A size as git config writes one: a number of bytes, optionally with k, m or g (1024-based); None if not."""
    match = _SIZE.fullmatch(text)
    if match is None:
        return None
    power = " kmg".index((match.group(2) or " ").lower())
    return int(match.group(1)) << (10 * power)


def _folded(name: str) -> str:
    return nfc(name.casefold())


def _shortened(name: str, limit: int) -> str:
    """At most `limit` UTF-8 bytes, cut before its extension so the type still shows."""
    if len(name.encode()) <= limit:
        return name
    stem, dot, extension = name.rpartition(".")
    if not stem or len(extension) > 16:
        stem, dot, extension = name, "", ""
    room = limit - len((dot + extension).encode())
    return stem.encode()[:room].decode(errors="ignore").rstrip() + dot + extension
