"""The `gitmail` command line: parse, make one core call, print. The only place that turns errors into exit codes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from gitmail import actions, edge, render
from gitmail.cli import commands
from gitmail.edge import say
from gitmail.errors import ExitCode, GitmailError, Unwritable, UsageError
from gitmail.store.opening import open_mailbox
from gitmail.store.repository import Store
from gitmail.sync.remotes import DEFAULT_INTERVAL, redact
from gitmail.workspace import current_directory, place

if TYPE_CHECKING:
    from gitmail.install import hooks as install_module

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


RepoOption = Annotated[
    str | None,
    typer.Option("--repo", help="The repo to act as (default: the git repository you are in).", show_default=False),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
IdArgument = Annotated[str, typer.Argument(metavar="ID", help="A message id (any unique prefix).")]


@app.command()
def send(
    to: Annotated[
        str | None, typer.Option("--to", help="The repo to send to, or one session of it: REPO#HANDLE.")
    ] = None,
    subject: Annotated[str | None, typer.Option("--subject", "-s", help="One line saying what it is about.")] = None,
    message: Annotated[
        str | None, typer.Option("--message", "-m", help="The body (default: read from standard input).")
    ] = None,
    broadcast: Annotated[bool, typer.Option("--broadcast", help="Send to every repo (each gets it once).")] = False,
    reply_to: Annotated[
        str | None,
        typer.Option("--reply-to", help="Answer this message id: goes to its sender and archives it for you."),
    ] = None,
    retract: Annotated[
        str | None,
        typer.Option("--retract", help="Stop delivering this broadcast of yours to repos not yet handed it."),
    ] = None,
    sender: Annotated[
        str | None,
        typer.Option("--from", help="The repo sending (default: the git repository you are in).", show_default=False),
    ] = None,
    or_repo: Annotated[
        bool,
        typer.Option("--or-repo", help="With --to REPO#SESSION: if that session has ended, every session of REPO."),
    ] = False,
    urgency: Annotated[
        str | None,
        typer.Option(
            "--urgency",
            "-u",
            help="now (shown first, wakes idle sessions, may continue a turn), normal (the default), or low (never "
            "wakes or continues a turn; may be marked done without a reply).",
            show_default=False,
        ),
    ] = None,
    attach: Annotated[
        list[str] | None,
        typer.Option(
            "--attach",
            metavar="FILE",
            help="Attach a file, any bytes (repeat for more). A symbolic link: the file it points to.",
            show_default=False,
        ),
    ] = None,
    patch: Annotated[
        str | None,
        typer.Option(
            "--patch",
            metavar="[RANGE]",
            help="Attach commits of this repository as `git format-patch` writes them (a revision range: HEAD~2, "
            "main..topic); alone, the uncommitted changes to tracked files against HEAD.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Send a message to a repo (--to web), to one session of it (--to web#HANDLE: its name, its worktree's name or
    the start of its id), to every repo (--broadcast), or in reply to one (--reply-to: back to the session that
    asked), with files and patches attached if you like (--attach, --patch: see docs/attachments.md). Sent from
    inside a session, it is never shown to that session.

    Prints the new message's id alone on standard output, so `id=$(gitmail send ...)` works.
    """
    commands.send(
        to=to,
        subject=subject,
        message=message,
        broadcast=broadcast,
        reply_to=reply_to,
        retract=retract,
        sender=sender,
        or_repo=or_repo,
        urgency=urgency,
        attach=attach or [],
        patch=patch,
    )


@app.command()
def inbox(
    repo: RepoOption = None,
    json_output: JsonOption = False,
    peek: Annotated[bool, typer.Option("--peek", help="Look without handing over broadcasts.")] = False,
) -> None:
    """Show the repo's pending mail: directed messages until done or replied to, and broadcasts not yet handed
    to it (reading hands them over, unless --peek)."""
    commands.inbox(repo=repo, json_output=json_output, peek=peek)


@app.command()
def done(
    ids: Annotated[
        list[str] | None, typer.Argument(help="Message ids (any unique prefix).", show_default=False)
    ] = None,
    all_pending: Annotated[
        bool,
        typer.Option(
            "--all",
            help="Mark done the pending mail this session was shown (outside a session: that any session of this "
            "repo was shown); never mail not yet seen.",
        ),
    ] = False,
    repo: RepoOption = None,
) -> None:
    """Mark messages done (archived) without replying. `gitmail reopen ID` undoes it."""
    commands.done(ids=ids or [], all_pending=all_pending, repo=repo)


@app.command()
def reopen(message_id: IdArgument, repo: RepoOption = None) -> None:
    """Make an archived message pending again (undoes `done`, or the archiving a reply did)."""
    entry = actions.reopen(open_mailbox(), commands.writer(repo), message_id)
    say(f"reopened {render.described(entry)}")


@app.command()
def log(
    repo: RepoOption = None,
    everyone: Annotated[bool, typer.Option("--everyone", help="Every repo's mail.")] = False,
    count: Annotated[int, typer.Option("-n", "--max-count", min=1, help="Show at most this many.")] = 20,
    grep: Annotated[str | None, typer.Option("--grep", help="Only messages containing TEXT (any case).")] = None,
    thread: Annotated[str | None, typer.Option("--thread", help="The whole conversation this id belongs to.")] = None,
    sent: Annotated[bool, typer.Option("--sent", help="Only what this repo sent.")] = False,
    json_output: JsonOption = False,
) -> None:
    """Mail history, newest first, with where each message stands: pending (not yet shown to a session of its
    recipient), delivered (shown, and when), done, replied (and the reply's id), or retracted.
    By default the repo's mail: sent to it, sent by it, and broadcasts."""
    commands.log(
        repo=repo, everyone=everyone, count=count, grep=grep, thread=thread, sent=sent, json_output=json_output
    )


@app.command()
def show(message_id: IdArgument, json_output: JsonOption = False) -> None:
    """Show one message whole."""
    commands.show(message_id=message_id, json_output=json_output)


@app.command("sessions")
def sessions_command(
    repo: RepoOption = None,
    everyone: Annotated[bool, typer.Option("--all", help="Every repo's sessions.")] = False,
    json_output: JsonOption = False,
) -> None:
    """Who is here: the sessions of this repo (--all: of every repo) the hooks have seen on this machine, each
    with its address, host, worktree and branch, whether it is live, idle or ended (and when), whether mail can
    wake it, what is pending for it, and its card."""
    commands.sessions(repo=repo, everyone=everyone, json_output=json_output)


@app.command("session")
def session_command(
    name: Annotated[
        str | None, typer.Option("--name", help="Name this session (unique among its repo's live sessions).")
    ] = None,
    card: Annotated[
        str | None, typer.Option("--card", help="One line saying what this session is doing (at most 200 characters).")
    ] = None,
    json_output: JsonOption = False,
) -> None:
    """This session's address (REPO#HANDLE), name and card; --name and --card set them. Run it from inside a
    Claude Code or Codex session."""
    commands.session(name=name, card=card, json_output=json_output)


@app.command()
def attachment(
    message_id: IdArgument,
    name: Annotated[
        str | None,
        typer.Argument(help="Which attachment (needed when it has several).", show_default=False),
    ] = None,
    output: Annotated[
        str | None,
        typer.Option(
            "-o",
            "--output",
            metavar="PATH",
            help="Write it here (a file, or a directory to put it in; - for standard output) instead of into the "
            "current directory under its own name.",
            show_default=False,
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace a file that is already there.")] = False,
) -> None:
    """Write one of a message's attachments out (whole or not at all; an existing file only with --force)."""
    commands.attachment(message_id=message_id, name=name, output=output, force=force)


@app.command("apply")
def apply_command(
    message_id: IdArgument,
    name: Annotated[
        str | None,
        typer.Argument(
            help="Which attachment to apply (needed only when it carries several patches).", show_default=False
        ),
    ] = None,
) -> None:
    """Apply a message's patch to the repository you are in: commits with `git am --3way`, uncommitted changes
    with `git apply --index --3way`. Refused when the repository has uncommitted changes to tracked files. On a
    conflict the repository is left as git leaves it, and one line says how to go on or undo it. The sender sees
    whether it applied (`gitmail log --sent`, `gitmail show`)."""
    commands.apply(message_id=message_id, name=name)


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
    export: Annotated[
        Path | None,
        typer.Option("--export", metavar="FILE.html", help="Write the view to one self-contained HTML file instead."),
    ] = None,
) -> None:
    """Show the mailbox as a read-only web page on 127.0.0.1: the repos and what waits for each, conversations
    drawn as threads, broadcasts and the repos they reached, search. Prints the page's URL (it carries an access
    token) as the first line and serves until interrupted; new mail appears on the page as it arrives."""
    web = _extra("gitmail.web.server", "view", "gitmail view")

    box = open_mailbox()
    if export is not None:
        if port:
            raise UsageError("--export writes a file and serves nothing; leave out --port")
        count = web.export(box, export)
        say(f"wrote {count} conversation{'' if count == 1 else 's'} to {export}")
        return
    with web.Server(box, port=port) as server:
        print(server.url, flush=True)
        say("serving the mailbox read-only on 127.0.0.1; stop with Ctrl-C")
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
            "nothing), finish a killed writer's change, remove stale lock files, restore gitmail's git settings.",
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
        "session; needs start), end (a session ends: its record goes).",
    ),
]


McpOption = Annotated[
    bool,
    typer.Option("--mcp", help="The MCP server instead of the hook (Claude Code: ~/.claude.json; Codex: config.toml)."),
]


@app.command()
def install(
    claude: ClaudeOption = False,
    codex: CodexOption = False,
    dry_run: DryRunOption = False,
    no_trust: NoTrustOption = False,
    moments: MomentsOption = "start,tool,prompt,stop,wake,end",
    mcp: McpOption = False,
) -> None:
    """Install the hooks that deliver mail into sessions, for Claude Code and/or Codex (default: whichever is found
    on this machine), at every moment the host offers (--moments to choose); with --mcp, register the MCP server
    instead. Running it again changes nothing."""
    from gitmail.install import hooks as installer

    chosen = installer.parse_moments(moments)
    home = Path.home()
    hosts = [h for h, chosen in (("claude", claude), ("codex", codex)) if chosen] or installer.detect_hosts(home)
    if not hosts:
        raise GitmailError("found neither Claude Code (~/.claude) nor Codex (~/.codex); pass --claude or --codex")
    if mcp:
        _extra("gitmail.mcp.server", "mcp", "gitmail install --mcp")  # a server that cannot start helps nobody
        from gitmail.install import mcp as mcpconfig

        return _carry_out(mcpconfig.plan(home=home, hosts=hosts, install=True), dry_run)
    version = installer.codex_version() if "codex" in hosts else None
    plan = installer.plan(
        home=home, hosts=hosts, install=True, moments=chosen, codex_version=version, trust=not no_trust
    )
    _carry_out(plan, dry_run)


@app.command()
def uninstall(
    claude: ClaudeOption = False, codex: CodexOption = False, dry_run: DryRunOption = False, mcp: McpOption = False
) -> None:
    """Remove exactly what `gitmail install` added (default: from both hosts); with --mcp, the MCP server
    registration `gitmail install --mcp` added."""
    from gitmail.install import hooks as installer

    hosts = [h for h, chosen in (("claude", claude), ("codex", codex)) if chosen] or list(installer.HOSTS)
    if mcp:
        from gitmail.install import mcp as mcpconfig

        return _carry_out(mcpconfig.plan(home=Path.home(), hosts=hosts, install=False), dry_run)
    _carry_out(installer.plan(home=Path.home(), hosts=hosts, install=False), dry_run)


def _carry_out(plan: install_module.Plan, dry_run: bool) -> None:
    from gitmail.install import hooks as installer

    if dry_run:
        for change in plan.changes:
            print(change.diff() or f"{change.path}: unchanged", end="" if change.changed else "\n")
        if plan.trust:
            say(f"note: {installer.TRUST_PREVIEW}")
    else:
        for line in installer.apply(plan):
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
    mcpserver = _extra("gitmail.mcp.server", "mcp", "gitmail mcp")

    if print_config:
        print(mcpserver.print_config())
        return
    raise typer.Exit(mcpserver.main())


def _group() -> typer.Typer:
    """A command with subcommands of its own (`gitmail remote add`), which alone does what its callback says."""
    return typer.Typer(
        add_completion=False,
        no_args_is_help=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )


remote_app = _group()
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


keys_app = _group()
app.add_typer(keys_app, name="keys")


@keys_app.callback(invoke_without_command=True)
def keys(ctx: typer.Context) -> None:
    """The keys that sign mail: this machine's, and every other machine's with what this machine makes of it
    (pinned on first sight, trusted, revoked, or new and not accepted). Mail from another machine is VERIFIED only
    when the key accepted for the machine it names signed it."""
    if ctx.invoked_subcommand is not None:
        return
    for line in render.key_lines(actions.keys(open_mailbox())):
        print(line)


@keys_app.command("init")
def keys_init() -> None:
    """Make this machine's signing key now (otherwise made at the first write) and publish it, so that other
    machines pin it at their next sync."""
    listed = actions.init_key(open_mailbox())
    say(render.own_key(listed))


@keys_app.command("use")
def keys_use(
    path: Annotated[
        str,
        typer.Argument(
            metavar="PATH",
            help="A private key file (ed25519, rsa, ...), or the public key file of a key an ssh-agent holds.",
        ),
    ],
) -> None:
    """Sign with your own SSH key instead of gitmail's (sets gitmail.signingKey in the mailbox's config, after
    signing with it once to check). Other machines see a new key for this machine: they accept it only when their
    user trusts it."""
    listed = actions.use_key(open_mailbox(), path)
    say(render.own_key(listed))
    say("note: other machines take this as a changed key: on each, run `gitmail keys trust` with the fingerprint above")


@keys_app.command("trust")
def keys_trust(
    machine: Annotated[str, typer.Argument(metavar="MACHINE", help="The machine's name or id.")],
    fingerprint: Annotated[str, typer.Argument(metavar="FINGERPRINT", help="The key's SHA256:... fingerprint.")],
) -> None:
    """Accept a key for a machine: one whose fingerprint you compared out of band (`gitmail keys` on that
    machine), a changed key you expect, or a machine revoked before."""
    key = actions.trust_key(open_mailbox(), machine, fingerprint)
    say(f"trusted {key.fingerprint} for machine {render.quote(key.name)} ({key.machine})")


@keys_app.command("revoke")
def keys_revoke(machine: Annotated[str, typer.Argument(metavar="MACHINE", help="The machine's name or id.")]) -> None:
    """Stop accepting every key of a machine: its mail reads UNVERIFIED until you trust a key of it again."""
    revoked = actions.revoke_key(open_mailbox(), machine)
    for key in revoked:
        say(f"revoked {key.fingerprint} of machine {render.quote(key.name)} ({key.machine})")
    if not revoked:
        say(f"every key of machine {render.quote(machine)} was revoked already")


@keys_app.command("allowed-signers")
def keys_allowed_signers(
    output: Annotated[
        Path | None, typer.Option("--output", "-o", metavar="FILE", help="Write it to FILE instead of printing it.")
    ] = None,
) -> None:
    """Print git's allowed_signers file of the accepted keys, so that plain git can check gitmail's signatures:
    git -c gpg.ssh.allowedSignersFile=FILE log --show-signature --glob=gitmail (in the mailbox)."""
    text = actions.allowed_signers(open_mailbox())
    if output is None:
        print(text, end="")
        return
    from gitmail.store.files import write_atomically

    if output.is_dir():
        raise UsageError(f"{output} is a directory; name the file to write")
    try:
        write_atomically(output, text.encode(), durable=False)
    except Unwritable as error:  # the file named, not the mailbox
        raise GitmailError(f"cannot write {output}: {error.reason}") from None
    count = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    say(f"wrote {count} key{'' if count == 1 else 's'} to {output}")


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


@app.command(hidden=True, context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
def hook(ctx: typer.Context) -> None:
    """Entry point for host programs: `gitmail hook session-start` reads the host's JSON on stdin and prints
    the pending mail framed for the session. It never fails the session."""
    from gitmail.hooks import main as hook_main

    raise typer.Exit(hook_main(list(ctx.args)))


def _extra(module: str, extra: str, command: str) -> Any:
    """A wing installed as an extra; a one-line error saying how to install it when it is not."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as error:
        missing = (error.name or "a package").split(".")[0]
        raise GitmailError(
            f"`{command}` needs gitmail's {extra} extra ({missing} is not installed): pip install 'gitmail[{extra}]'"
        ) from None


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
            words[at] = f"--patch={commands.UNCOMMITTED}"
        elif words[at] in taking:
            at += 1  # its value, even one that looks like an option
        at += 1
    return words


def main(argv: list[str] | None = None) -> int:
    """The command line, through the one error edge: a mistake in the command itself is a usage error like any
    other (exit 2, one line naming the help to read)."""
    words = list(argv if argv is not None else sys.argv[1:])
    return edge.run(lambda: _run(words), where="gitmail " + " ".join(words))


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
