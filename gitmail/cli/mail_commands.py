"""The mail commands as typer parses them: send, inbox, done, reopen, log, show, sessions, session, attachment and
apply. They hand their arguments to commands.py, which the quick path (plain.py) calls for the plain forms too;
reopen, which has no plain form, makes its one call here."""

from __future__ import annotations

from typing import Annotated

import typer

from gitmail import actions, render
from gitmail.cli import commands
from gitmail.cli.options import IdArgument, JsonOption, RepoOption
from gitmail.edge import say
from gitmail.store.opening import open_mailbox

app = typer.Typer()


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
    peek: Annotated[
        str | None, typer.Option("--peek", metavar="REPO#HANDLE", help="Show that session's last turns instead.")
    ] = None,
    turns: Annotated[int, typer.Option("-n", help="With --peek: how many turns (1 to 100).")] = 3,
) -> None:
    """Who is here: the sessions of this repo (--all: of every repo) the hooks have seen on this machine, each
    with its address, host, worktree and branch, whether it is live, idle or ended (and when), whether mail can
    wake it, what is pending for it, and its card. --peek REPO#HANDLE: that session's last turns (prompts,
    replies, one line per tool call) from its transcript, quoted as untrusted data."""
    commands.sessions(repo=repo, everyone=everyone, json_output=json_output, peek=peek, turns=turns)


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
