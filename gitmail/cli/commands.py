"""What each mail command does between its parsed arguments and its output: who acts, one call to the action layer,
and what is printed. The typer app (app.py) and the quick path (quick.py) both parse into these, so a command
behaves the same whichever parsed it. Imports no command-line library.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from gitmail import actions, render
from gitmail.edge import say
from gitmail.errors import GitmailError, UsageError
from gitmail.store.opening import open_mailbox
from gitmail.values.message import MAX_BODY_BYTES
from gitmail.values.names import RepoName
from gitmail.workspace import Actor, actor_at, own_command, toplevel


def writer(named: str | None) -> Actor:
    """Who acts: the repo named with --from/--repo, else the git repository of the current directory (an error
    outside one), in the host session the environment names."""
    return actor_at(os.getcwd(), via="cli", named=named)


def reader(named: str | None) -> Actor | None:
    """As `writer`, but outside a repository a read shows nothing instead of failing."""
    if named is None and toplevel(os.getcwd()) is None:
        say("not inside a git repository; name one with --repo")
        return None
    return writer(named)


def body(message: str | None) -> bytes:
    if message is not None:
        return message.encode("utf-8", "surrogateescape")
    if sys.stdin is None or sys.stdin.isatty():
        return b""  # nothing piped in: an empty body rather than waiting on a terminal
    return sys.stdin.buffer.read(MAX_BODY_BYTES + 1)  # enough to tell an oversized body, never unbounded


def send(
    *,
    to: str | None,
    subject: str | None,
    message: str | None,
    broadcast: bool,
    reply_to: str | None,
    retract: str | None,
    sender: str | None,
) -> None:
    mode = actions.one_of({"--to": to, "--broadcast": broadcast, "--reply-to": reply_to, "--retract": retract})
    if retract is not None and (subject is not None or message is not None):
        raise UsageError("--retract takes no --subject or --message")
    if subject is None and mode in ("--to", "--broadcast"):
        raise UsageError("a subject is required (--subject TEXT)")
    me = writer(sender)
    box = open_mailbox()
    if retract is not None:
        result = actions.retract(box, me, retract)
        say(render.retracted(result.id, result.changed))
        return
    sent = actions.send(box, me, to=to, broadcast=broadcast, reply_to=reply_to, subject=subject, body=body(message))
    for note in sent.notes:
        say(f"note: {note}")
    print(sent.entry.message.id, flush=True)
    say(render.sent(sent.entry))


def inbox(*, repo: str | None, json_output: bool, peek: bool) -> None:
    me = reader(repo)
    if me is None:
        return
    shown = actions.inbox(open_mailbox(), me, peek=peek, command=own_command())
    if json_output:
        print(
            render.dumps(
                {
                    "repo": str(me.repo),
                    "directed": [render.as_json(e) for e in shown.shown.directed],
                    "broadcasts": [render.as_json(e) for e in shown.shown.broadcasts],
                    "unreadable": list(shown.mail.unreadable),
                    "claimed_by": shown.mail.claimed_by,
                    "unrecorded": shown.unrecorded,
                }
            )
        )
    elif shown.text:
        print(shown.text, end="")
    else:
        say(f"no mail for {render.quote(me.repo)}")
        if shown.unrecorded:
            say(f"note: {shown.unrecorded}")


def done(*, ids: Sequence[str], all_pending: bool, repo: str | None) -> None:
    if bool(ids) == all_pending:
        raise UsageError("name the messages to mark done, or pass --all (not both)")
    result = actions.done(open_mailbox(), writer(repo), ids=ids, everything=all_pending)
    for line in render.done(result):
        say(line)


def log(
    *,
    repo: str | None,
    everyone: bool,
    count: int,
    grep: str | None,
    thread: str | None,
    sent: bool,
    json_output: bool,
) -> None:
    if everyone and (repo is not None or sent):
        raise UsageError("--everyone takes no --repo or --sent")
    name: RepoName | None = None
    if not everyone and thread is None:
        who = reader(repo)
        if who is None:
            return
        name = who.repo
    entries = actions.log(open_mailbox(), repo=name, limit=count, grep=grep, thread=thread, sent=sent)
    if json_output:
        print(render.dumps([render.as_json(e) for e in entries]))
    else:
        for entry in entries:
            print(render.log_line(entry))
    if entries.unreadable:
        say(f"note: {render.unreadable(entries.unreadable)}")
    if entries.unrecorded:
        say(f"note: {entries.unrecorded}")


def show(*, message_id: str, json_output: bool) -> None:
    try:  # read inside a session, a message counts as shown to it
        me = writer(None) if toplevel(os.getcwd()) is not None else None
    except GitmailError:
        me = None
    shown = actions.show(open_mailbox(), me, message_id)
    if json_output:
        print(render.dumps(render.as_json(shown.entry)))
    else:
        print(render.card(shown.entry, claims=shown.claims, state=True))
