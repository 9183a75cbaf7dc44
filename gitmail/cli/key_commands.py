"""`gitmail keys` and its subcommands: the keys that sign mail, this machine's and every other machine's."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gitmail import actions, render
from gitmail.cli.options import group
from gitmail.edge import say
from gitmail.errors import GitmailError, Unwritable, UsageError
from gitmail.store.opening import open_mailbox

app = typer.Typer()
keys_app = group()
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
