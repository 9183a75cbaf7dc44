"""The remotes this mailbox syncs with, as typer commands: `gitmail remote` (list, add, set, remove) and `gitmail
sync`, whose work is cli/sync.py's (which runs without typer when __main__ routes a plain `gitmail sync` to it)."""

from __future__ import annotations

from typing import Annotated

import typer

from gitmail import actions
from gitmail.cli.options import group
from gitmail.edge import say
from gitmail.store.opening import open_mailbox
from gitmail.sync.remotes import DEFAULT_INTERVAL, redact

app = typer.Typer()


@app.command("sync")
def sync_command(
    name: Annotated[str | None, typer.Argument(help="One remote (default: every remote).", show_default=False)] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Say nothing unless something fails.")] = False,
    auto: Annotated[
        bool,
        typer.Option(
            "--auto", help="The remotes that sync automatically, as the background does; errors go to the log."
        ),
    ] = False,
) -> None:
    """Bring this mailbox and its remotes to the same state, both ways: mail sent or archived on any machine
    reaches every other. Nothing is ever deleted; archived mail never comes back as pending."""
    from gitmail.cli import sync as synccli

    raise typer.Exit(synccli.run(name, quiet=quiet, auto=auto))


remote_app = group()
app.add_typer(remote_app, name="remote")


@remote_app.callback(invoke_without_command=True)
def remote(ctx: typer.Context) -> None:
    """The remotes this mailbox syncs with: list them, or add, change or remove one. A remote is any git
    repository URL (ssh, https, a path); several machines share one."""
    if ctx.invoked_subcommand is not None:
        return
    from gitmail.cli import sync as synccli
    from gitmail.store import machines

    box = open_mailbox()
    listed = actions.remotes(box)
    for entry in listed:
        print(synccli.remote_line(box, entry))
    if not listed:
        say("no remotes (add one: gitmail remote add NAME URL)")
    if box.exists():
        here = machines.current(box)
        say(f"this machine: {here.name} ({here.id})")


@remote_app.command("add")
def remote_add(
    name: Annotated[str, typer.Argument(help="A short name for it, such as origin.")],
    url: Annotated[str, typer.Argument(help="Any URL git accepts: ssh, https, a path.")],
    auto: Annotated[
        bool, typer.Option("--auto", help="Sync in the background: at session start, after a send.")
    ] = False,
    interval: Annotated[
        int, typer.Option("--interval", min=1, help="Seconds between automatic syncs at session start.")
    ] = DEFAULT_INTERVAL,
) -> None:
    """Add a remote to sync with. Sync copies every message (subjects, bodies, repo and machine names) to it."""
    added = actions.add_remote(open_mailbox(), name=name, url=url, auto=auto, interval=interval)
    say(f"added remote {added.name!r} ({redact(added.url)})" + (" to sync automatically" if auto else ""))
    say(
        "note: sync sends the contents of every message to this remote: anyone who can read it can read your "
        "mail. Use a private repository. Run `gitmail sync` to sync now."
    )


@remote_app.command("set")
def remote_set(
    name: Annotated[str, typer.Argument(help="The remote's name.")],
    auto: Annotated[
        bool | None, typer.Option("--auto/--no-auto", help="Sync in the background, or only when asked.")
    ] = None,
    interval: Annotated[
        int | None, typer.Option("--interval", min=1, help="Seconds between automatic syncs at session start.")
    ] = None,
) -> None:
    """Change how a remote syncs."""
    changed = actions.change_remote(open_mailbox(), name, auto=auto, interval=interval)
    how = (
        f"automatically, every {changed.interval} s at session start and after a send" if changed.auto else "when asked"
    )
    say(f"{changed.name!r} syncs {how}")


@remote_app.command("remove")
def remote_remove(name: Annotated[str, typer.Argument(help="The remote's name.")]) -> None:
    """Stop syncing with a remote. Nothing on the remote or in this mailbox's mail is deleted."""
    actions.remove_remote(open_mailbox(), name)
    say(f"removed remote {name!r}")
