"""Repository names: validated, kept in NFC, and their ref-safe encoding. Pure.

A name is kept in Unicode NFC: macOS hands out folder names in NFD, and `données` typed on a keyboard is NFC, yet
both are one repository. In refs a name is encoded so that no two names can share a file on a case-insensitive or
normalising file system (macOS and Windows defaults): only [a-z0-9-_] stand for themselves, every other byte of the
name's UTF-8 is `%XX` (uppercase hex), so `web` stays `web` and `Web` is `%57eb`. Folded to lower case, two
different encodings stay different; and an encoding is ASCII, so no file system can normalise it.
"""

from __future__ import annotations

from gitmail.errors import UsageError
from gitmail.values.patterns import characters, lazy

# Characters that stand for themselves in a ref component; every other UTF-8 byte is %XX-encoded. Only lower case:
# an upper-case letter would share a file with its lower-case twin where case is ignored. '.' is encoded too, so
# no component can be '.', '..', contain '..' or end in '.lock'.
_REF_SAFE = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")
# The readable encoding of commit author addresses (`My App` -> `My%20App`), which never become file names. It was
# also the ref encoding of the mailbox's first format (then applied to the name as given, not normalised).
_ADDRESS_SAFE = _REF_SAFE | frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_MAX_ENCODED = 200  # a loose ref is a file: keep well under NAME_MAX (255 bytes)

# Control characters, line and paragraph separators, noncharacters and bidirectional overrides:
# none may appear in a name, and in free text (subjects) they collapse to a space.
UNSAFE_TEXT = lazy("[\x00-\x1f\x7f-\x9f\u2028\u2029\ufffe\uffff\u202a-\u202e\u2066-\u2069]")
# Format characters: invisible, yet they change what a name or a line looks like (zero-width spaces and joiners,
# marks that steer direction, a byte-order mark, invisible operators, tags). Names may hold them; wherever gitmail
# shows a name, a subject or JSON, they are shown as escapes (render.py). JOINERS: the ones emoji and some scripts
# need, which a body keeps as written.
INVISIBLE = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u2060-\u2064\u206a-\u206f"
    "\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f"
)
JOINERS = "\u200c\u200d\U000e0020-\U000e007f"
# Lone surrogates: how Python hands over command-line arguments and file names whose bytes are not UTF-8.
NOT_UTF8 = lazy("[\ud800-\udfff]")


def has_surrogates(text: str) -> bool:
    """Whether NOT_UTF8 is found in `text` (what UTF-8 cannot encode is a surrogate: no pattern compiled)."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


_UNSAFE: list[frozenset[str]] = []


def has_unsafe(text: str) -> bool:
    """Whether UNSAFE_TEXT is found in `text`, answered from the set of its characters (no pattern compiled)."""
    if text.isascii() and text.isprintable():  # most text
        return False
    if not _UNSAFE:
        _UNSAFE.append(frozenset(characters(UNSAFE_TEXT.pattern[1:-1])))
    return not _UNSAFE[0].isdisjoint(text)


def without_unsafe(text: str, replacement: str) -> str:
    """`text` with each character UNSAFE_TEXT finds replaced (the pattern compiled only where there is one)."""
    return UNSAFE_TEXT.sub(replacement, text) if has_unsafe(text) else text


# The person who runs the sessions has an address of their own. Every name starting with '@' is reserved, and no
# repository's name may be this one, so mail to the person can never land in a repository's inbox.
PERSON = "@user"


class RepoName(str):
    """A repository's mailbox name: any directory basename except the reserved and the unsafe, in NFC."""

    __slots__ = ()

    def __new__(cls, raw: str) -> RepoName:
        return super().__new__(cls, nfc(raw))

    @classmethod
    def parse(cls, raw: str) -> RepoName:
        problem = name_problem(raw)
        if problem:
            raise UsageError(f"invalid repo name {raw!r}: {problem}")
        return cls(raw)

    @classmethod
    def from_ref(cls, component: str) -> RepoName:
        """The name a ref component encodes; only the canonical encoding gitmail writes is accepted."""
        name = cls.parse(_decoded(component))
        if name.ref != component:
            raise UsageError(f"{component!r} is not a gitmail ref name")
        return name

    @classmethod
    def from_first_format_ref(cls, component: str) -> RepoName:
        """The name a ref component of the mailbox's first format encodes (exactly as that format wrote it)."""
        raw = _decoded(component)
        if first_format_ref(raw) != component:
            raise UsageError(f"{component!r} is not a gitmail ref name")
        return cls.parse(raw)

    @classmethod
    def of_repository(cls, raw: str) -> RepoName:
        """A repository's own name (its folder, `gitmail.name`, `--repo`): the person's address is refused too."""
        problem = repo_problem(raw)
        if problem:
            raise UsageError(f"invalid repo name {raw!r}: {problem}")
        return cls(raw)

    @property
    def is_person(self) -> bool:
        """Whether this is the person's address (`@user`), not a repository's name."""
        return self == PERSON

    @property
    def ref(self) -> str:
        """The reversible, ref-safe form used inside ref names and file names (`My App` -> `%4Dy%20%41pp`)."""
        return _encoded(self, _REF_SAFE)

    @property
    def address(self) -> str:
        """The readable form in commit author addresses (`My App` -> `My%20App`): the same as before names were
        normalised and refs folded, so `git log --author` finds a repo's old and new mail alike."""
        return _encoded(self, _ADDRESS_SAFE)


def from_address(address: str) -> RepoName | None:
    """The repo a commit author address names (`My%20App@gitmail`), or None for one gitmail did not write."""
    local = address.strip().strip("<>").rsplit("@", 1)[0]
    try:
        return RepoName.parse(_decoded(local))
    except UsageError:
        return None


def first_format_ref(raw: str) -> str:
    """How the mailbox's first format spelled a name in refs: upper case kept, the name's characters as given."""
    return _encoded(raw, _ADDRESS_SAFE)


def nfc(text: str) -> str:
    """`text` in Unicode NFC (ASCII, by far the common case, is returned as it is without importing anything)."""
    if text.isascii():
        return text
    import unicodedata

    return unicodedata.normalize("NFC", text)


def nfc_keys(named: dict[str, str]) -> dict[str, str]:
    """A mapping keyed by names, its keys in NFC; where two spellings of one name are keys, the NFC one wins."""
    ordered = sorted(named.items(), key=lambda item: nfc(item[0]) == item[0])
    return {nfc(key): value for key, value in ordered}


def nfd(text: str) -> str:
    """`text` in Unicode NFD: how macOS spells the folder names it hands out."""
    if text.isascii():
        return text
    import unicodedata

    return unicodedata.normalize("NFD", text)


def _encoded(text: str, safe: frozenset[str]) -> str:
    return "".join(c if c in safe else "".join(f"%{b:02X}" for b in c.encode()) for c in text)


def _decoded(component: str) -> str:
    if "%" not in component:
        return component  # most names: no urllib import (~2 ms of every hook run that parses refs)
    from urllib.parse import unquote

    try:
        return unquote(component, errors="strict")
    except UnicodeDecodeError:
        raise UsageError(f"{component!r} is not a gitmail ref name") from None


def name_problem(raw: str) -> str | None:
    if has_surrogates(raw):
        return "it is not valid UTF-8"
    raw = nfc(raw)
    if not raw or not raw.strip():
        return "it is empty"
    if "/" in raw:
        return "it contains '/'"
    if "#" in raw:  # `repo#HANDLE` addresses one session of a repo: a name holding one could stand for a session
        return "it contains '#', which separates a repository from one of its sessions"
    if has_unsafe(raw):
        return "it contains control characters"
    if raw.startswith("_"):
        return "names starting with '_' are reserved"
    if raw.startswith("@") and raw != PERSON:
        return f"names starting with '@' are reserved ({PERSON} is the person's address)"
    if raw in (".", ".."):
        return "it is not a directory name"
    if len(_encoded(raw, _REF_SAFE)) > _MAX_ENCODED:
        return "it is too long"
    return None


def repo_problem(raw: str) -> str | None:
    """What keeps `raw` from being a repository's name: `name_problem`, or it is the person's address."""
    if nfc(raw).startswith("@"):
        return f"names starting with '@' are reserved ({PERSON} is the person's address, never a repository's)"
    return name_problem(raw)
