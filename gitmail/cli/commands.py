"""What each mail command does between its parsed arguments and its output: who acts, one call to the action layer,
and what is printed. The typer commands (mail_commands.py) and the quick path (plain.py) both parse into these, so a
command behaves the same whichever parsed it. Imports no command-line library.
"""

from __future__ import annotations

import sys

from gitmail import actions, render
from gitmail.actions import rules
from gitmail.edge import say
from gitmail.errors import GitmailError, UsageError
from gitmail.store.opening import open_mailbox
from gitmail.values import urgency as levels
from gitmail.values.address import Address
from gitmail.values.message import MAX_BODY_BYTES
from gitmail.values.names import PERSON, RepoName
from gitmail.values.phrase import spoken
from gitmail.workspace import Actor, actor_at, current_directory, own_command, session_from_environment, toplevel

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

# The action layer's options as the command line spells them, in what its errors and notes say.
WORDS = {
    "to": "--to",
    "broadcast": "--broadcast",
    "reply_to": "--reply-to",
    "retract": "--retract",
    "subject": "--subject",
    "body": "--message",
    "urgency": "--urgency",
    "attach": "--attach",
    "patch": "--patch",
    "or_repo": "--or-repo",
    "ids": "message ids",
    "everything": "--all",
    "everyone": "--everyone",
    "all_repos": "--all",
    "repo": "--repo",
    "sent": "--sent",
    "thread": "--thread",
    "handle": "REPO#SESSION",
    "shared": "--shared",
    "paths": "PATH...",
    "duration": "--for",
}


def note(text: str) -> None:
    """A note from the action layer, in the command line's words."""
    say(f"note: {spoken(text, WORDS)}")


def writer(named: str | None) -> Actor:
    """Who acts: the repo named with --from/--repo, else the git repository of the current directory (an error
    outside one), in the host session the environment names."""
    return actor_at(current_directory(), via="cli", named=named)


def reader(named: str | None) -> Actor | None:
    """As `writer`, but outside a repository a read shows nothing instead of failing."""
    if named is None and toplevel(current_directory()) is None:
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
    or_repo: bool = False,
    urgency: str | None = None,
    attach: Sequence[str] = (),
    patch: str | None = None,
) -> None:
    # The command line's `send` also takes a broadcast back: which of the two actions it is.
    actions.one_of({"to": to, "broadcast": broadcast, "reply_to": reply_to, "retract": retract})
    if retract is not None:
        rules.without(
            "retract",
            {
                "subject": subject,
                "body": message,
                "urgency": urgency,
                "attach": attach,
                "patch": patch,
                "or_repo": or_repo,
            },
        )
        result = actions.retract(open_mailbox(), writer(sender), retract)
        say(render.retracted(result.id, result.changed))
        return
    levels.parse(urgency)  # a wrong level is refused before anything is read or written
    me = writer(sender)
    box = open_mailbox()
    text = body(message)
    sent = actions.send(
        box,
        me,
        to=to,
        broadcast=broadcast,
        reply_to=reply_to,
        subject=subject,
        body=text,
        or_repo=or_repo,
        urgency=urgency,
        attach=attach,
        patch=patch,
    )
    for said in sent.notes:
        note(said)
    print(sent.entry.message.id, flush=True)
    say(render.sent(sent.entry))


def person_or(named: str | None, act: Callable[[str | None], Actor | None]) -> Actor | None:
    """Outside any repository and any session, with no repo named, the person acts (`@user`); else `act`."""
    if named is None and session_from_environment() is None and toplevel(current_directory()) is None:
        return Actor(RepoName(PERSON), None, "cli")
    return act(named)


def inbox(*, repo: str | None, json_output: bool, peek: bool) -> None:
    me = person_or(repo, reader)
    if me is None:
        return
    at_terminal = not json_output and sys.stdout.isatty()  # what a person reads, not what a script parses
    shown = actions.inbox(open_mailbox(), me, peek=peek, command=own_command(), person=at_terminal)
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
        if me.repo.is_person:  # the framing's commands are a session's: the person answers as @user
            say(
                f"note: this is your own inbox ({PERSON}): answer with `gitmail send --from {PERSON} --reply-to ID`, "
                f"mark done with `gitmail done --repo {PERSON} ID`, or do either from `gitmail view`"
            )
    else:
        say(f"no mail for {render.quote(me.repo)}")
        if shown.unrecorded:
            say(f"note: {shown.unrecorded}")


def done(*, ids: Sequence[str], all_pending: bool, repo: str | None) -> None:
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
    address = Address.parse(repo) if repo is not None else None  # a repo, or one session's mail
    name = address.repo if address is not None else None
    if not everyone and thread is None:
        who = reader(name)
        if who is None:
            return
        name = who.repo
    handle = address.handle if address is not None else None
    entries = actions.log(
        open_mailbox(), repo=name, everyone=everyone, limit=count, grep=grep, thread=thread, sent=sent, handle=handle
    )
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
        me = writer(None) if toplevel(current_directory()) is not None else None
    except GitmailError:
        me = None
    shown = actions.show(open_mailbox(), me, message_id)
    if json_output:
        print(render.dumps(render.as_json(shown.entry)))
    else:
        print(render.card(shown.entry, claims=shown.claims, state=True))


def sessions(*, repo: str | None, everyone: bool, json_output: bool, peek: str | None = None, turns: int = 3) -> None:
    if peek is not None:
        _peek(peek, turns)
        return
    name: RepoName | None = None
    if not everyone:
        who = reader(repo)
        if who is None:
            return
        name = who.repo
    found = actions.sessions_here(open_mailbox(), name, all_repos=everyone, named=repo)
    if json_output:
        print(render.dumps([render.session_json(v) for v in found]))
        return
    for view in found:
        print(render.session_line(view))
    if not found:
        say("no sessions seen" + (f" for {render.quote(name)}" if name is not None else "") + " on this machine")


def _peek(address: str, count: int) -> None:
    """The last turns of a session, framed as untrusted data within the peek's bound (render.peek_text)."""
    print(render.peek_text(address, actions.peek_session(open_mailbox(), address, count=count).turns))


def session(*, name: str | None, card: str | None, json_output: bool) -> None:
    me = writer(None)
    box = open_mailbox()
    view = (
        actions.name_session(box, me, name=name, card=card)
        if name is not None or card is not None
        else actions.this_session(box, me)
    )
    if json_output:
        print(render.dumps(render.session_json(view)))
        return
    print(view.address)
    say(f"name {render.quote(view.info.name) if view.info.name else '(none)'}")
    say(f"card {render.quote(view.info.card) if view.info.card else '(none)'}")


def attachment(*, message_id: str, name: str | None, output: str | None, force: bool) -> None:
    saved = actions.save_attachment(open_mailbox(), message_id, name, output=output, force=force)
    item = saved.attachment
    where = "standard output" if saved.path is None else str(saved.path)
    say(f"wrote {render.quote(item.name)} ({item.size:,} bytes) of {saved.entry.message.id} to {where}")


def apply(*, message_id: str, name: str | None) -> None:
    from gitmail.values.attachments import COMMITS

    if toplevel(current_directory()) is None:  # before who acts is asked, which names options apply has not
        raise UsageError(actions.APPLY_OUTSIDE)
    done = actions.apply(open_mailbox(), writer(None), message_id, name)
    if done.result.output:
        sys.stderr.write(done.result.output if done.result.output.endswith("\n") else done.result.output + "\n")
        sys.stderr.flush()
    if done.note:
        note(done.note)
    what = f"{render.quote(done.attachment.name)} of {done.entry.message.id}"
    if done.result.ok:
        say(f"applied {what} to {done.top}")
        return
    if done.result.conflict and done.kind == COMMITS:
        raise GitmailError(
            f"{what} stopped at a conflict: resolve it, `git add` the files and run `git am --continue` "
            "(or `git am --skip` to leave that commit out), or undo all of it with `git am --abort`"
        )
    if done.result.stopped:
        raise GitmailError(
            f"git could not apply {what} (git's own messages above say why) and stopped with `git am` in progress: "
            "undo all of it with `git am --abort`, or leave that commit out and go on with `git am --skip`"
        )
    if done.result.conflict:
        raise GitmailError(
            f"{what} applied with conflicts: resolve them and `git add` the files, or undo it with `git reset --merge`"
        )
    raise GitmailError(f"git could not apply {what}, and changed nothing (git's own messages above say why)")


def lease(
    *,
    paths: Sequence[str],
    duration: str | None,
    shared: bool,
    note: str | None,
    renew: bool,
) -> None:
    me = writer(None)
    box = open_mailbox()
    if renew:
        if paths or shared or note is not None or duration is not None:
            raise UsageError("--renew takes no paths, --for, --shared or --note: it renews every lease you hold here")
        renewed = actions.renew_leases(box, me)
        for lease in renewed:
            say(f"renewed {render.leased(lease).removeprefix('leased ')}")
        if not renewed:
            say(f"you hold no lease in {render.quote(me.repo)}")
        return
    done = actions.lease(box, me, paths, duration=duration, shared=shared, note=note)
    for lease in done.renewed:
        say(f"renewed {render.leased(lease).removeprefix('leased ')}")
    if done.taken is not None:
        print(done.taken.id, flush=True)
        say(render.leased(done.taken))


def release(*, paths: Sequence[str]) -> None:
    me = writer(None)
    released = actions.release(open_mailbox(), me, paths)
    for lease in released:
        say(f"released {', '.join(render.quote(p) for p in lease.paths)}")
    if not released:
        say(f"you hold no lease in {render.quote(me.repo)}")


def leases(*, everyone: bool, json_output: bool) -> None:
    box = open_mailbox()
    who = None if everyone else reader(None)
    if not everyone and who is None:
        return
    found = actions.all_leases(box) if who is None else actions.leases_here(box, who.repo)
    if json_output:
        print(render.dumps([render.lease_json(view) for view in found]))
        return
    for view in found:
        print(render.lease_line(view))
    if not found:
        say("no leases" + ("" if who is None else f" in {render.quote(who.repo)}"))
