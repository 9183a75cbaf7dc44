"""The commands that hand over to a wing or another adapter: `gitmail view` (the web view), `doctor`, `install` and
`uninstall` (the hooks, or the MCP server, in Claude Code and Codex) and `mcp` (the MCP server). Each imports its
wing only when it runs; the view and the MCP server are extras, and `extra` says how to install one that is
missing."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from gitmail import render
from gitmail.cli.options import JsonOption
from gitmail.edge import say
from gitmail.errors import ExitCode, GitmailError, UsageError
from gitmail.store.opening import open_mailbox
from gitmail.store.repository import Store
from gitmail.workspace import current_directory, place, session_from_environment

if TYPE_CHECKING:
    from gitmail.install.settings import Plan

app = typer.Typer()


@app.command()
def view(
    port: Annotated[
        int,
        typer.Option(
            "--port",
            min=0,
            max=65535,
            metavar="PORT",
            show_default=False,
            help="Serve on this port (default: a free one).",
        ),
    ] = 0,
    no_open: Annotated[bool, typer.Option("--no-open", help="Only print the URL; do not open a browser.")] = False,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="Serve the page without its answers: nothing can be written.")
    ] = False,
    export: Annotated[
        Path | None,
        typer.Option("--export", metavar="FILE.html", help="Write the view to one self-contained HTML file instead."),
    ] = None,
) -> None:
    """Show the mailbox as a web page on 127.0.0.1: your own inbox (mail to @user) first, the repos and what waits
    for each, conversations drawn as threads, broadcasts and the repos they reached, search; reply, mark done,
    reopen and write from it (unless --read-only). Prints the page's URL (it carries an access token) as the first
    line and serves until interrupted; new mail appears on the page as it arrives."""
    web = extra("gitmail.web.httpd", "view", "gitmail view")

    if not read_only and export is None and session_from_environment() is not None:
        raise UsageError(
            "inside a session the view serves only --read-only: a session cannot act as the person (run gitmail "
            "view at your own terminal)"
        )
    box = open_mailbox()
    if export is not None:
        if port:
            raise UsageError("--export writes a file and serves nothing; leave out --port")
        count = web.export(box, export)
        say(f"wrote {count} conversation{'' if count == 1 else 's'} to {export}")
        return
    with web.Server(box, port=port, read_only=read_only) as server:
        print(server.url, flush=True)
        say(f"serving the mailbox{' read-only' if read_only else ''} on 127.0.0.1; stop with Ctrl-C")
        web.stop_on_terminate()
        try:
            if not no_open and not web.open_browser(server.url):
                say("no graphical browser found: open the URL above in one")
            server.serve_forever()
        except KeyboardInterrupt:
            say("stopped")


@app.command()
def doctor(
    repair: Annotated[
        bool,
        typer.Option(
            "--repair",
            help="Also make the safe repairs: set unreadable messages aside under refs/gitmail/_damaged/ (deleting "
            "nothing), finish a killed writer's change, remove stale lock files, restore gitmail's git settings, make "
            "and publish a new signing key when this machine's is damaged, end leases that no longer hold.",
        ),
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """Check the mailbox, this repository's name and the installed hooks: run it when mail seems not to arrive.
    Prints one line per finding, each problem with its remedy; exits 1 when there is a problem."""
    from gitmail import doctor as checks

    box = Store()  # not opened: what cannot be opened is what doctor reports
    here = place(current_directory())
    repaired = checks.repair(box, here=here) if repair else []
    report = checks.examine(box, here=here, home=Path.home(), repaired=repaired)
    if json_output:
        print(render.dumps(checks.as_json(report)))
    else:
        print(checks.describe(report), end="")
    if report.problems:
        raise typer.Exit(int(ExitCode.RUNTIME))


ClaudeOption = Annotated[bool, typer.Option("--claude", help="Claude Code (~/.claude/settings.json).")]
CodexOption = Annotated[bool, typer.Option("--codex", help="Codex ($CODEX_HOME or ~/.codex, hooks.json).")]
NoTrustOption = Annotated[
    bool, typer.Option("--no-trust", help="Leave trusting gitmail's Codex hook to you (Codex's /hooks review).")
]
DryRunOption = Annotated[bool, typer.Option("--dry-run", help="Show the change as a diff; write nothing.")]
MomentsOption = Annotated[
    str,
    typer.Option(
        "--moments",
        help="Which moments deliver mail, comma-separated: start (a session starts, resumes, forks, clears or "
        "compacts), tool (after tool calls), prompt (the next prompt), stop (a turn ends), wake (an idle Claude Code "
        "session; needs start), end (a session ends: its record goes), edit (before a tool call: a write to a file "
        "another session leased is denied).",
    ),
]


McpOption = Annotated[
    bool,
    typer.Option("--mcp", help="The MCP server instead of the hook (Claude Code: ~/.claude.json; Codex: config.toml)."),
]
GuardOption = Annotated[
    bool,
    typer.Option(
        "--guard",
        help="The commit guard instead, in this repository: a pre-commit hook that refuses a session's commit of "
        "files another session leased (the repository's own pre-commit hook still runs first).",
    ),
]


@app.command()
def install(
    claude: ClaudeOption = False,
    codex: CodexOption = False,
    dry_run: DryRunOption = False,
    no_trust: NoTrustOption = False,
    moments: MomentsOption = "start,tool,prompt,stop,wake,end,edit",
    mcp: McpOption = False,
    guard: GuardOption = False,
) -> None:
    """Install the hooks that deliver mail into sessions, for Claude Code and/or Codex (default: whichever is found
    on this machine), at every moment the host offers (--moments to choose); with --mcp, register the MCP server
    instead; with --guard, the commit guard in this repository. Running it again changes nothing."""
    from gitmail.install import codex_hooks, host_hooks
    from gitmail.install.hook_commands import parse_moments

    if guard:
        return _guard(install=True, dry_run=dry_run, alone=not (claude or codex or mcp))
    chosen = parse_moments(moments)
    home = Path.home()
    hosts = [h for h, chosen in (("claude", claude), ("codex", codex)) if chosen] or host_hooks.detect(home)
    if not hosts:
        raise GitmailError("found neither Claude Code (~/.claude) nor Codex (~/.codex); pass --claude or --codex")
    if mcp:
        from gitmail.install import mcp_registration

        return _carry_out(mcp_registration.plan(home=home, hosts=hosts, install=True), dry_run)
    version = codex_hooks.version() if "codex" in hosts else None
    plan = host_hooks.plan(
        home=home, hosts=hosts, install=True, moments=chosen, codex_version=version, trust=not no_trust
    )
    _carry_out(plan, dry_run)


@app.command()
def uninstall(
    claude: ClaudeOption = False,
    codex: CodexOption = False,
    dry_run: DryRunOption = False,
    mcp: McpOption = False,
    guard: GuardOption = False,
) -> None:
    """Remove exactly what `gitmail install` added (default: from both hosts); with --mcp, the MCP server
    registration `gitmail install --mcp` added; with --guard, the commit guard of this repository (the pre-commit
    hook that was there before is put back as it was)."""
    from gitmail.install import host_hooks

    if guard:
        return _guard(install=False, dry_run=dry_run, alone=not (claude or codex or mcp))
    hosts = [h for h, chosen in (("claude", claude), ("codex", codex)) if chosen] or list(host_hooks.HOSTS)
    if mcp:
        from gitmail.install import mcp_registration

        return _carry_out(mcp_registration.plan(home=Path.home(), hosts=hosts, install=False), dry_run)
    _carry_out(host_hooks.plan(home=Path.home(), hosts=hosts, install=False), dry_run)


def _guard(*, install: bool, dry_run: bool, alone: bool) -> None:
    from gitmail.install import guard_hook

    if not alone:
        raise UsageError("--guard is installed on its own, in a repository: leave out --claude, --codex and --mcp")
    here = place(current_directory())
    if here is None:
        raise UsageError("the commit guard goes into a git repository: run this inside one")
    lines = (guard_hook.install if install else guard_hook.uninstall)(Path(here.top), dry_run=dry_run)
    for line in lines:
        say(f"would do: {line}" if dry_run else line)
    if not lines:
        say("nothing to change")


def _carry_out(plan: Plan, dry_run: bool) -> None:
    from gitmail.install import settings

    if dry_run:
        for change in plan.changes:
            print(change.diff() or f"{change.path}: unchanged", end="" if change.changed else "\n")
        for step in plan.steps:
            if step.preview:
                say(f"note: {step.preview}")
    else:
        for line in settings.apply(plan):
            say(line)
    if not plan.changes:
        say("nothing to change")
    for note in plan.notes:
        say(f"note: {note}")


@app.command()
def mcp(
    print_config: Annotated[
        bool, typer.Option("--print-config", help="Print the JSON entry MCP clients take, and exit.")
    ] = False,
) -> None:
    """Run the MCP server on standard input and output (an MCP client starts it): gitmail's tools and the
    inbox as a resource, for any agent client that speaks the Model Context Protocol."""
    from gitmail.mcp import server as mcpserver  # nothing of the `mcp` extra: watchfiles is looked for when watching

    if print_config:
        print(mcpserver.print_config())
        return
    raise typer.Exit(mcpserver.main())


def extra(module: str, extra: str, command: str) -> Any:
    """A wing installed as an extra; a one-line error saying how to install it when it is not."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as error:
        missing = (error.name or "a package").split(".")[0]
        raise GitmailError(
            f"`{command}` needs gitmail's {extra} extra ({missing} is not installed): pip install 'gitmail[{extra}]'"
        ) from None
