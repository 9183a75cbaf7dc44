"""Reading a git config file as git does, without starting git: the hooks and the quick sync path read the
mailbox's settings at every run. The one reader of git config files in gitmail (what writes them is git itself).

It follows git's syntax: `[section]`, `[section "subsection"]` and the older `[section.subsection]`, keys without
`=` (true), values with quotes, escapes, comments and line continuations, several values per key (the last one is
what `git config --get` gives), and `[include] path = …` (relative to the including file, `~` expanded, a missing
file ignored). A file that holds anything it does not follow (`[includeIf]`, a line git would refuse) is not
guessed at: `load` returns None and the caller asks git.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

_MAX_DEPTH = 10  # includes within includes, as git limits them
_SPACE = " \t\v\f\r"  # what git counts as space inside a line (ASCII only)
_ESCAPES = {"n": "\n", "t": "\t", "b": "\b", '"': '"', "\\": "\\"}


class Unsure(Exception):
    """The file holds something this reader does not follow; git decides."""


class Config:
    """The values of a config file and its includes, in the order git reads them."""

    def __init__(self, entries: list[tuple[str, str | None]]) -> None:
        self.entries = entries  # (key, value) with section and name in lower case; None: a key without "="

    def get(self, key: str) -> str | None:
        """The last value of `key` ("section.name" or "section.subsection.name"), as `git config --get` gives it
        ("" for a key without "=")."""
        found = self._last(key)
        return None if found is None else found[1] or ""

    def get_all(self, key: str) -> list[str]:
        wanted = _canonical(key)
        return [value or "" for name, value in self.entries if name == wanted]

    def _last(self, key: str) -> tuple[str, str | None] | None:
        wanted = _canonical(key)
        found = None
        for entry in self.entries:
            if entry[0] == wanted:
                found = entry
        return found

    def flag(self, key: str, default: bool) -> bool:
        """A boolean as git reads one (true/yes/on/1, false/no/off/0/empty); `default` when unset or not one."""
        found = self._last(key)
        if found is None:
            return default
        if found[1] is None:  # a key without "=" is true
            return True
        lowered = found[1].strip().lower()
        if lowered in ("true", "yes", "on", "1"):
            return True
        if lowered in ("false", "no", "off", "0", ""):
            return False
        return default

    def subsections(self, section: str) -> dict[str, dict[str, str]]:
        """Every `[section "name"]`: name -> {key: last value}, in the order the names first appear."""
        prefix = section.lower() + "."
        found: dict[str, dict[str, str]] = {}
        for name, value in self.entries:
            if name.startswith(prefix) and "." in name[len(prefix) :]:
                sub, _, key = name[len(prefix) :].rpartition(".")
                found.setdefault(sub, {})[key] = value or ""
        return found


def load(path: str | os.PathLike[str]) -> Config | None:
    """The config at `path` with its includes; an empty Config when the file is missing; None when git must be
    asked (see the module's docstring)."""
    try:
        return Config(list(_read(os.fspath(path), 0)))
    except Unsure:
        return None


def parse_text(text: str, *, where: str = "") -> Config | None:
    """The same, for text already read (includes resolved against the folder of `where`)."""
    try:
        return Config(list(_entries(text, where, 0)))
    except Unsure:
        return None


def _read(path: str, depth: int) -> Iterator[tuple[str, str | None]]:
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        return
    except OSError as error:
        raise Unsure(str(error)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Unsure("not UTF-8") from None
    yield from _entries(text, path, depth)


def _entries(text: str, path: str, depth: int) -> Iterator[tuple[str, str | None]]:
    if depth > _MAX_DEPTH:
        raise Unsure("includes nested too deeply")
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    reader = _Reader(text)
    section: str | None = None
    while not reader.done():
        reader.skip_blank()
        c = reader.peek()
        if c == "":
            break
        if c in "#;":
            reader.skip_line()
            continue
        if c == "[":
            section = reader.section()
            if section.startswith("includeif."):
                raise Unsure("conditional includes")
            continue
        if not (c.isascii() and c.isalpha()) or section is None:
            raise Unsure(f"bad config line in {path}")
        name = reader.key()
        value = reader.value()
        key = f"{section}.{name}"
        yield key, value
        if key == "include.path" and value:
            yield from _read(_resolve(value, path), depth + 1)


def _resolve(include: str, path: str) -> str:
    if include.startswith("~/"):
        return os.path.join(os.path.expanduser("~"), include[2:])
    return include if os.path.isabs(include) else os.path.join(os.path.dirname(path) or ".", include)


def _canonical(key: str) -> str:
    section, _, rest = key.partition(".")
    if "." in rest:
        sub, _, name = rest.rpartition(".")
        return f"{section.lower()}.{sub}.{name.lower()}"
    return f"{section.lower()}.{rest.lower()}"


class _Reader:
    """A cursor over the config text, with git's rules for each part of a line."""

    def __init__(self, text: str) -> None:
        self.text, self.at = text, 0

    def done(self) -> bool:
        return self.at >= len(self.text)

    def peek(self) -> str:
        return self.text[self.at] if self.at < len(self.text) else ""

    def take(self) -> str:
        c = self.peek()
        self.at += 1
        return c

    def skip_blank(self) -> None:
        while self.peek() != "" and (self.peek() in _SPACE or self.peek() == "\n"):
            self.at += 1

    def skip_line(self) -> None:
        end = self.text.find("\n", self.at)
        self.at = len(self.text) if end < 0 else end + 1

    def section(self) -> str:
        """`[name]`, `[name "sub"]` or `[name.sub]`, as the canonical prefix of its keys."""
        self.take()  # "["
        name = ""
        while (c := self.peek()) and (c.isascii() and c.isalnum() or c in "-."):
            name += self.take()
        if not name:
            raise Unsure("bad section header")
        if self.peek() == "]":
            self.take()
            return name.lower()
        if self.peek() not in (" ", "\t") or "." in name:
            raise Unsure("bad section header")
        self.skip_spaces()
        if self.take() != '"':
            raise Unsure("bad section header")
        sub = ""
        while True:
            c = self.take()
            if c in ("", "\n"):
                raise Unsure("bad section header")
            if c == '"':
                break
            if c == "\\":
                c = self.take()
                if c in ("", "\n"):
                    raise Unsure("bad section header")
            sub += c
        if self.take() != "]":
            raise Unsure("bad section header")
        return f"{name.lower()}.{sub}"

    def skip_spaces(self) -> None:
        while self.peek() in (" ", "\t"):
            self.at += 1

    def key(self) -> str:
        name = ""
        while (c := self.peek()) and (c.isascii() and c.isalnum() or c == "-"):
            name += self.take()
        return name.lower()

    def value(self) -> str | None:
        """What follows a key: None for a key alone on its line, else the value as git reads it."""
        self.skip_spaces()
        c = self.peek()
        if c in ("", "\n"):
            self.take()
            return None
        if c in "#;":
            self.skip_line()
            return None
        if c != "=":
            raise Unsure("bad config line")
        self.take()
        value, spaces, quoted, comment = "", 0, False, False
        while True:
            c = self.take()
            if c in ("", "\n"):
                if quoted:
                    raise Unsure("unterminated quote")
                return value
            if comment:
                continue
            if c in _SPACE and not quoted:
                if value:
                    spaces += 1
                continue
            if not quoted and c in "#;":
                comment = True
                continue
            value += " " * spaces
            spaces = 0
            if c == "\\":
                c = self.take()
                if c == "\n":
                    continue  # a continuation line
                if c not in _ESCAPES:
                    raise Unsure("bad escape")
                value += _ESCAPES[c]
            elif c == '"':
                quoted = not quoted
            else:
                value += c
