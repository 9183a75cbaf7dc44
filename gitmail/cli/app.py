"""The `gitmail` typer app: it gathers the commands of mail_commands.py, wings.py, sync_commands.py and
key_commands.py (in the order `gitmail --help` lists them), and runs the command line through the one error edge
(edge.py), where a mistake in the command line itself is a usage error like any other."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from gitmail import actions, edge
from gitmail.cli import commands, key_commands, lease_commands, mail_commands, sync_commands, wings
from gitmail.errors import ExitCode, UsageError

app = typer.Typer(
    name="gitmail",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(show: bool) -> None:
    if show:
        from gitmail import __version__

        print(f"gitmail {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """A private mailbox between AI coding sessions in different repositories, kept in a git repository
    (~/.gitmail/mail.git, or $GITMAIL_DIR)."""


COMMAND_GROUPS = (mail_commands, lease_commands, wings, sync_commands, key_commands)  # as `gitmail --help` lists
for module in COMMAND_GROUPS:
    app.add_typer(module.app)


@app.command(hidden=True, context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
def hook(ctx: typer.Context) -> None:
    """Entry point for host programs: `gitmail hook session-start` reads the host's JSON on stdin and prints
    the pending mail framed for the session. It never fails the session."""
    from gitmail.hooks import main as hook_main

    raise typer.Exit(hook_main(list(ctx.args)))


def optional_values(command: Any, argv: list[str]) -> list[str]:
    """`send --patch` takes its value only when one follows: alone (last, or before another option) it means the
    uncommitted changes, as `--patch=` says. typer's parser has no such option, so the words are told: a `--patch`
    standing alone becomes `--patch=`; the values of the options that take one are stepped over, whatever they are."""
    if argv[:1] != ["send"]:
        return argv
    taking = {
        spelling
        for parameter in command.commands["send"].params
        if parameter.param_type_name == "option" and not parameter.is_flag
        for spelling in parameter.opts
    }
    words, at = list(argv), 1
    while at < len(words) and words[at] != "--":
        if words[at] == "--patch" and (at + 1 == len(words) or (words[at + 1][:1] == "-" and len(words[at + 1]) > 1)):
            words[at] = f"--patch={actions.UNCOMMITTED}"
        elif words[at] in taking:
            at += 1  # its value, even one that looks like an option
        at += 1
    return words


def main(argv: list[str] | None = None) -> int:
    """The command line, through the one error edge: a mistake in the command itself is a usage error like any
    other (exit 2, one line naming the help to read)."""
    words = list(argv if argv is not None else sys.argv[1:])
    return edge.run(lambda: _run(words), where="gitmail " + " ".join(words), words=commands.WORDS)


def _run(argv: list[str]) -> int:
    command = typer.main.get_command(app)
    try:
        result = command.main(args=optional_values(command, argv), prog_name="gitmail", standalone_mode=False)
    except typer.TyperException as error:  # the command line itself was wrong
        if type(error).__name__ == "NoArgsIsHelpError":
            print(error.format_message())
            return int(ExitCode.OK)
        context = getattr(error, "ctx", None)
        hint = f" (see '{context.command_path} --help')" if context is not None else ""
        raise UsageError(f"{error.format_message()}{hint}") from None
    except typer.Abort:
        raise KeyboardInterrupt from None
    return result if isinstance(result, int) else int(ExitCode.OK)
