"""The action layer: everything a person, a session or a client can ask of gitmail, as functions that take typed
arguments and return typed results (what was written, and notes for the user). The command line, the hooks, the
MCP server and the web view only translate their input into these calls and format what comes back. Every rule a
request is held to is checked here, once; errors and notes name options by their neutral names (values/phrase.py)
and each adapter says them in its own words. This is also gitmail's Python API:

    from gitmail import actions
    from gitmail.values.names import RepoName
    from gitmail.workspace import Actor

    box = actions.open_mailbox()                      # ~/.gitmail/mail.git, or $GITMAIL_DIR, or a path
    api, web = Actor(RepoName("api")), Actor(RepoName("web"))
    sent = actions.send(box, api, to="web", subject="Schema v2 is live", body="Orders have a status column.")
    mail = actions.inbox(box, web)                    # .text (framed as a session sees it), .shown, .mail
    actions.send(box, web, reply_to=sent.entry.message.id, body="Switched.")
    actions.done(box, api, ids=[...])
    # files read from the current directory, and a patch of the repository there (docs/attachments.md)
    actions.send(box, api, to="web", subject="The fix", attach=["fixture.json"], patch="HEAD~1")
    actions.save_attachment(box, "7kq2", "fixture.json")   # into the current directory
    actions.apply(box, Actor(RepoName("web"), "/home/me/src/web"), "7kq2")   # into that repository

Expected failures raise `gitmail.errors.GitmailError` (a usage mistake is its subclass `UsageError`).

One module per job: sending.py, reading.py, handling.py (done, reopen), addressing.py (sessions as addresses),
attaching.py (files and patches), syncing.py, signing.py (keys); rules.py (the checks every adapter shares) and
written.py (what follows every write of mail).
"""

from gitmail.lazy import exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gitmail.actions.addressing import (
        SESSION_NAME,
        Destination,
        destination,
        find_session,
        name_session,
        peek_session,
        session_of,
        sessions_here,
        this_session,
    )
    from gitmail.actions.attaching import APPLY_OUTSIDE, UNCOMMITTED, Patched, Saved, apply, gather, save_attachment
    from gitmail.actions.attaching import limits as attachment_limits
    from gitmail.actions.handling import done, reopen
    from gitmail.actions.leases import Leased, LeaseView, before_commit, before_edit, lease, release
    from gitmail.actions.leases import everywhere as all_leases
    from gitmail.actions.leases import renew as renew_leases
    from gitmail.actions.leases import standing as leases_here
    from gitmail.actions.reading import HOOK_WAIT, Shown, at_moment, inbox, known, log, record, session_ended, show
    from gitmail.actions.rules import one_of
    from gitmail.actions.sending import Retracted, Sent, retract, send
    from gitmail.actions.signing import allowed_signers, init_key, keys, revoke_key, trust_key, use_key
    from gitmail.actions.syncing import add_remote, change_remote, remotes, remove_remote, sync
    from gitmail.store.opening import open_mailbox
    from gitmail.values.session_info import SessionView

__all__ = [
    "APPLY_OUTSIDE",
    "HOOK_WAIT",
    "SESSION_NAME",
    "UNCOMMITTED",
    "Destination",
    "LeaseView",
    "Leased",
    "Patched",
    "Retracted",
    "Saved",
    "Sent",
    "SessionView",
    "Shown",
    "add_remote",
    "all_leases",
    "allowed_signers",
    "apply",
    "at_moment",
    "attachment_limits",
    "before_commit",
    "before_edit",
    "change_remote",
    "destination",
    "done",
    "find_session",
    "gather",
    "init_key",
    "inbox",
    "keys",
    "known",
    "lease",
    "leases_here",
    "log",
    "name_session",
    "one_of",
    "open_mailbox",
    "record",
    "release",
    "remotes",
    "renew_leases",
    "remove_remote",
    "reopen",
    "retract",
    "revoke_key",
    "save_attachment",
    "send",
    "session_ended",
    "peek_session",
    "session_of",
    "sessions_here",
    "show",
    "sync",
    "this_session",
    "trust_key",
    "use_key",
]

__getattr__ = exports(
    __name__,
    {
        "APPLY_OUTSIDE": "gitmail.actions.attaching",
        "HOOK_WAIT": "gitmail.actions.reading",
        "SESSION_NAME": "gitmail.actions.addressing",
        "UNCOMMITTED": "gitmail.actions.attaching",
        "Destination": "gitmail.actions.addressing",
        "LeaseView": "gitmail.actions.leases",
        "Leased": "gitmail.actions.leases",
        "Patched": "gitmail.actions.attaching",
        "Retracted": "gitmail.actions.sending",
        "Saved": "gitmail.actions.attaching",
        "Sent": "gitmail.actions.sending",
        "SessionView": "gitmail.values.session_info",
        "Shown": "gitmail.actions.reading",
        "add_remote": "gitmail.actions.syncing",
        "all_leases": "gitmail.actions.leases:everywhere",
        "allowed_signers": "gitmail.actions.signing",
        "apply": "gitmail.actions.attaching",
        "at_moment": "gitmail.actions.reading",
        "attachment_limits": "gitmail.actions.attaching:limits",
        "before_commit": "gitmail.actions.leases",
        "before_edit": "gitmail.actions.leases",
        "change_remote": "gitmail.actions.syncing",
        "destination": "gitmail.actions.addressing",
        "done": "gitmail.actions.handling",
        "find_session": "gitmail.actions.addressing",
        "gather": "gitmail.actions.attaching",
        "init_key": "gitmail.actions.signing",
        "inbox": "gitmail.actions.reading",
        "keys": "gitmail.actions.signing",
        "known": "gitmail.actions.reading",
        "lease": "gitmail.actions.leases",
        "leases_here": "gitmail.actions.leases:standing",
        "log": "gitmail.actions.reading",
        "name_session": "gitmail.actions.addressing",
        "one_of": "gitmail.actions.rules",
        "open_mailbox": "gitmail.store.opening",
        "record": "gitmail.actions.reading",
        "release": "gitmail.actions.leases",
        "remotes": "gitmail.actions.syncing",
        "renew_leases": "gitmail.actions.leases:renew",
        "remove_remote": "gitmail.actions.syncing",
        "reopen": "gitmail.actions.handling",
        "retract": "gitmail.actions.sending",
        "revoke_key": "gitmail.actions.signing",
        "save_attachment": "gitmail.actions.attaching",
        "send": "gitmail.actions.sending",
        "session_ended": "gitmail.actions.reading",
        "peek_session": "gitmail.actions.addressing",
        "session_of": "gitmail.actions.addressing",
        "sessions_here": "gitmail.actions.addressing",
        "show": "gitmail.actions.reading",
        "sync": "gitmail.actions.syncing",
        "this_session": "gitmail.actions.addressing",
        "trust_key": "gitmail.actions.signing",
        "use_key": "gitmail.actions.signing",
    },
)
