"""The mail commands in their plain forms, parsed without the command-line library: sessions run `send`, `inbox`,
`done`, `show`, `log`, `sessions` and `session` many times a day, and importing typer costs more than the whole of
a `send` may (the benchmark's send and inbox rows, beside the fastest peer). Anything else (help, an option it does
not know, a value that looks like an option, `--`) returns None, and the typer app parses it as always.

The options below are typer's own (mail_commands.py), spelled again for speed; a test checks that every one of them
means here what it means there.
"""

from __future__ import annotations

from gitmail import edge

TYPE_CHECKING = False  # the typing module costs this path an import; only the annotations need it
if TYPE_CHECKING:
    from collections.abc import Callable


class Spec:
    """A command's plain form: options taking a value (each spelling -> parameter), flags, and what positional
    arguments it takes (a parameter, and whether it takes several). Of the options, `numbers` take a number,
    `repeated` may be given many times (a list), and `optional` may be given without a value (then they are "")."""

    __slots__ = ("options", "flags", "positional", "many", "numbers", "repeated", "optional", "run")

    def __init__(
        self,
        run: Callable[..., None],
        options: dict[str, str],
        flags: dict[str, str],
        positional: str | None = None,
        many: bool = False,
        numbers: frozenset[str] = frozenset(),
        repeated: frozenset[str] = frozenset(),
        optional: frozenset[str] = frozenset(),
    ) -> None:
        self.run, self.options, self.flags = run, options, flags
        self.positional, self.many, self.numbers = positional, many, numbers
        self.repeated, self.optional = repeated, optional


def specs() -> dict[str, Spec]:
    from gitmail.cli import commands

    return {
        "send": Spec(
            commands.send,
            {
                "--to": "to",
                "--subject": "subject",
                "-s": "subject",
                "--message": "message",
                "-m": "message",
                "--reply-to": "reply_to",
                "--retract": "retract",
                "--from": "sender",
                "--urgency": "urgency",
                "-u": "urgency",
                "--attach": "attach",
                "--patch": "patch",
            },
            {"--broadcast": "broadcast", "--or-repo": "or_repo"},
            repeated=frozenset({"attach"}),
            optional=frozenset({"patch"}),
        ),
        "inbox": Spec(commands.inbox, {"--repo": "repo"}, {"--json": "json_output", "--peek": "peek"}),
        "done": Spec(commands.done, {"--repo": "repo"}, {"--all": "all_pending"}, positional="ids", many=True),
        "show": Spec(commands.show, {}, {"--json": "json_output"}, positional="message_id"),
        "log": Spec(
            commands.log,
            {"--repo": "repo", "-n": "count", "--max-count": "count", "--grep": "grep", "--thread": "thread"},
            {"--everyone": "everyone", "--sent": "sent", "--json": "json_output"},
            numbers=frozenset({"count"}),
        ),
        "sessions": Spec(
            commands.sessions,
            {"--repo": "repo", "--peek": "peek", "-n": "turns"},
            {"--all": "everyone", "--json": "json_output"},
            numbers=frozenset({"turns"}),
        ),
        "session": Spec(commands.session, {"--name": "name", "--card": "card"}, {"--json": "json_output"}),
        "lease": Spec(
            commands.lease,
            {"--for": "duration", "--note": "note"},
            {"--shared": "shared", "--renew": "renew"},
            positional="paths",
            many=True,
        ),
        "release": Spec(commands.release, {}, {}, positional="paths", many=True),
        "leases": Spec(commands.leases, {}, {"--all": "everyone", "--json": "json_output"}),
    }


DEFAULTS: dict[str, dict[str, object]] = {
    "send": {
        "to": None,
        "subject": None,
        "message": None,
        "broadcast": False,
        "reply_to": None,
        "retract": None,
        "sender": None,
        "or_repo": False,
        "urgency": None,
        "attach": [],
        "patch": None,
    },
    "inbox": {"repo": None, "json_output": False, "peek": False},
    "done": {"ids": [], "all_pending": False, "repo": None},
    "show": {"json_output": False},
    "log": {
        "repo": None,
        "everyone": False,
        "count": 20,
        "grep": None,
        "thread": None,
        "sent": False,
        "json_output": False,
    },
    "sessions": {"repo": None, "everyone": False, "json_output": False, "peek": None, "turns": 3},
    "session": {"name": None, "card": None, "json_output": False},
    "lease": {"paths": [], "duration": None, "shared": False, "note": None, "renew": False},
    "release": {"paths": []},
    "leases": {"everyone": False, "json_output": False},
}
COMMANDS = frozenset(DEFAULTS)


def main(argv: list[str]) -> int | None:
    """The exit code of a plain command, or None when typer must parse it."""
    if not argv or argv[0] not in COMMANDS:
        return None
    spec = specs()[argv[0]]
    arguments = parse(spec, argv[0], argv[1:])
    if arguments is None:
        return None
    from gitmail.cli.commands import WORDS

    return edge.run(lambda: _call(spec, arguments), where=" ".join(["gitmail", *argv]), words=WORDS)


def _call(spec: Spec, arguments: dict[str, object]) -> int:
    spec.run(**arguments)
    return 0


def parse(spec: Spec, command: str, words: list[str]) -> dict[str, object] | None:
    """The command's parameters, or None for anything but its plain forms."""
    found: dict[str, object] = {k: list(v) if isinstance(v, list) else v for k, v in DEFAULTS[command].items()}
    positional: list[str] = []
    at = 0
    while at < len(words):
        word = words[at]
        name, equals, attached = word.partition("=") if word.startswith("--") else (word, "", "")
        if name in spec.flags and not equals:
            found[spec.flags[name]] = True
        elif name in spec.options:
            parameter = spec.options[name]
            if equals:
                value = attached
            elif at + 1 < len(words) and not words[at + 1].startswith("-"):
                at += 1
                value = words[at]
            elif parameter in spec.optional and (at + 1 == len(words) or len(words[at + 1]) > 1):
                value = ""  # given alone (at the end, or before another option), as click reads it
            else:
                return None  # a value that looks like an option, or none at all: typer's rules decide
            if parameter in spec.numbers:
                if not value.isdigit() or int(value) < 1:
                    return None
                found[parameter] = int(value)
            elif parameter in spec.repeated:
                listed = found[parameter]
                assert isinstance(listed, list)
                listed.append(value)
            else:
                found[parameter] = value
        elif not word.startswith("-") and spec.positional is not None:
            positional.append(word)
        else:
            return None
        at += 1
    if spec.positional is not None:
        if spec.many:
            found[spec.positional] = positional
        elif len(positional) != 1:
            return None
        else:
            found[spec.positional] = positional[0]
    elif positional:
        return None
    return found
