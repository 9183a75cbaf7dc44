"""What the typer command modules share: the options and arguments several commands take, and the Typer a command
with subcommands of its own is made on."""

from __future__ import annotations

from typing import Annotated

import typer

RepoOption = Annotated[
    str | None,
    typer.Option("--repo", help="The repo to act as (default: the git repository you are in).", show_default=False),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
IdArgument = Annotated[str, typer.Argument(metavar="ID", help="A message id (any unique prefix).")]


def group() -> typer.Typer:
    """A command with subcommands of its own (`gitmail remote add`), which alone does what its callback says."""
    return typer.Typer(
        add_completion=False,
        no_args_is_help=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
