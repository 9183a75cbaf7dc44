"""Which files a host's tool call is about to write, read from the call as the host hands it to a PreToolUse hook.
Pure.

- Claude Code's Edit, Write and MultiEdit name `file_path`; NotebookEdit `notebook_path`.
- Codex's apply_patch carries the whole patch (in `command`, or `input`): its files are on the `*** Add File:`,
  `*** Update File:`, `*** Delete File:` and `*** Move to:` lines.
- A shell command (Claude Code's Bash, Codex's shell tools) writes what it plainly names: the target of `>` and `>>`,
  the files of `tee`, `sed -i`, `rm`, `truncate` and `touch`, the last argument of `mv` and `cp` (and the moved
  files of `mv`), the paths of `git checkout -- PATH` and `git restore`. A command that cannot be read (unbalanced
  quotes, substitutions) is `unreadable`: a hook lets it through, and the commit guard catches what it wrote.
"""

from __future__ import annotations

import shlex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, NamedTuple
else:
    from gitmail.values.tuples import NamedTuple

EDIT_TOOLS = {"Edit": "file_path", "Write": "file_path", "MultiEdit": "file_path", "NotebookEdit": "notebook_path"}
PATCH_TOOLS = ("apply_patch",)
SHELL_TOOLS = ("Bash", "shell", "shell_command", "exec_command", "local_shell", "container.exec")
_PATCH_LINES = ("*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: ")
_SEPARATORS = {";", "&&", "||", "|", "&", "\n", "(", ")"}
_REDIRECTS = {">", ">>", ">|", "&>", "&>>", "1>", "2>", "1>>", "2>>"}
_WRITERS_ALL = {"tee", "rm", "truncate", "touch", "shred", "unlink"}  # every operand is written


class Edits(NamedTuple):
    paths: tuple[str, ...]  # as the call names them (absolute, or relative to the session's directory)
    unreadable: bool = False  # a shell command that cannot be read: what it writes is unknown


def of(tool: str, arguments: Mapping[str, Any]) -> Edits:
    """The files a tool call writes (none for a tool that writes nothing gitmail can see)."""
    if tool in EDIT_TOOLS:
        value = arguments.get(EDIT_TOOLS[tool])
        return Edits((value,) if isinstance(value, str) and value else ())
    if tool in PATCH_TOOLS:
        text = arguments.get("command") or arguments.get("input") or arguments.get("patch") or ""
        if isinstance(text, list):
            text = "\n".join(str(part) for part in text)
        return Edits(patched(str(text)))
    if tool in SHELL_TOOLS:
        command = arguments.get("command") or arguments.get("cmd") or ""
        if isinstance(command, list):  # an argv: ["bash", "-lc", "..."]
            command = command[-1] if len(command) >= 3 and command[-2] in ("-c", "-lc") else shlex.join(command)
        return written(str(command))
    return Edits(())


def patched(patch: str) -> tuple[str, ...]:
    """The files an apply_patch patch adds, changes, deletes or moves to."""
    found = []
    for line in patch.splitlines():
        for head in _PATCH_LINES:
            if line.startswith(head) and line[len(head) :].strip():
                found.append(line[len(head) :].strip())
    return tuple(dict.fromkeys(found))


def written(command: str) -> Edits:
    """The files a shell command plainly writes."""
    if "$(" in command or "`" in command or "<(" in command:
        return Edits((), unreadable=True)
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split = True
        lexer.commenters = ""
        words = list(lexer)
    except ValueError:  # an unbalanced quote
        return Edits((), unreadable=True)
    found: list[str] = []
    command_words: list[str] = []
    pending_redirect = False
    for word in [*words, ";"]:
        if pending_redirect:
            if word not in _SEPARATORS:
                found.append(word)
            pending_redirect = False
            continue
        if word in _REDIRECTS or (word.endswith(">") and word.rstrip(">&12") == ""):
            pending_redirect = True
            continue
        if word in _SEPARATORS or word.startswith(("<", ">")) and word.strip("<>&|") == "":
            found += _command_writes(command_words)
            command_words = []
            continue
        command_words.append(word)
    return Edits(tuple(p for p in dict.fromkeys(found) if p and p != "/dev/null"))


def _command_writes(words: list[str]) -> list[str]:
    """What one simple command (no separators) writes through its operands."""
    while words and ("=" in words[0] and not words[0].startswith("-")):  # VAR=value before the command
        words = words[1:]
    while words and words[0] in ("sudo", "env", "command", "nohup", "time", "exec"):
        words = words[1:]
    if not words:
        return []
    name, operands = words[0].rsplit("/", 1)[-1], [w for w in words[1:] if not w.startswith("-")]
    if name in _WRITERS_ALL:
        return operands
    if name == "sed" and any(w == "-i" or w.startswith(("-i", "--in-place")) for w in words[1:]):
        script_given = any(w in ("-e", "-f", "--expression", "--file") for w in words[1:])
        return operands if script_given else operands[1:]
    if name in ("mv", "cp", "install", "ln") and len(operands) >= 2:
        return operands if name == "mv" else operands[-1:]
    if name == "git" and len(words) >= 2:
        return _git_writes(words[1:])
    return []


def _git_writes(words: list[str]) -> list[str]:
    """The paths `git checkout -- PATH...` and `git restore PATH...` overwrite in the work tree."""
    verb = words[0]
    if verb == "checkout" and "--" in words:
        return words[words.index("--") + 1 :]
    if verb == "restore":
        rest = words[1:]
        if "--" in rest:
            return rest[rest.index("--") + 1 :]
        return [w for w in rest if not w.startswith("-")]
    return []
