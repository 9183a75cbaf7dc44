"""The lease commands as typer parses them: lease, release and leases. They hand their arguments to commands.py,
which the quick path (plain.py) calls for their plain forms too."""

from __future__ import annotations

from typing import Annotated

import typer

from gitmail.cli import commands
from gitmail.cli.options import JsonOption

app = typer.Typer()

PathsArgument = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="PATH...",
        help="Files, folders or globs of this repository (* and ? within a folder, ** across), relative to where you "
        "are; the same in every worktree.",
        show_default=False,
    ),
]


@app.command()
def lease(
    paths: PathsArgument = None,
    duration: Annotated[
        str | None,
        typer.Option("--for", help="How long: 30m (the default), 2h, 1h30m; at most 8h.", show_default=False),
    ] = None,
    shared: Annotated[bool, typer.Option("--shared", help="Others may edit these files too, and are told.")] = False,
    note: Annotated[str | None, typer.Option("--note", help="One line saying what you are doing.")] = None,
    renew: Annotated[bool, typer.Option("--renew", help="Renew every lease you hold here, instead.")] = False,
) -> None:
    """Lease files for this session (outside a session: for you, at this terminal), so that other sessions cannot
    edit them until you release them, your session ends or the lease runs out; your own tool calls renew it."""
    commands.lease(paths=paths or [], duration=duration, shared=shared, note=note, renew=renew)


@app.command()
def release(paths: PathsArgument = None) -> None:
    """Release your leases here (on these paths only, when given)."""
    commands.release(paths=paths or [])


@app.command()
def leases(
    everyone: Annotated[bool, typer.Option("--all", help="Every repository's leases.")] = False,
    json_output: JsonOption = False,
) -> None:
    """The leases in force in this repository: what, held by whom, until when."""
    commands.leases(everyone=everyone, json_output=json_output)
