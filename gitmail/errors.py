"""The one expected-error family, and the exit codes every entry point ends with (edge.py turns one into the other)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final


class ExitCode:
    """The exit codes, as plain ints: every entry point imports this module, and an enum's class costs an import."""

    OK: Final = 0
    RUNTIME: Final = 1  # the command was well formed but could not be carried out
    USAGE: Final = 2  # the command itself was wrong
    INTERNAL: Final = 3  # gitmail itself failed unexpectedly; the details are in gitmail.log beside the mailbox
    INTERRUPTED: Final = 130  # stopped by the user (Ctrl-C), as shells report SIGINT


class GitmailError(Exception):
    """A failure the user can act on: shown as one line, never as a traceback."""

    exit_code = ExitCode.RUNTIME


class UsageError(GitmailError):
    """Bad arguments: an invalid name, an unknown option combination, a malformed value."""

    exit_code = ExitCode.USAGE


class MailboxError(GitmailError):
    """The mailbox repository is missing, damaged, locked too long or of an unsupported kind."""


class Transient(MailboxError):
    """A write failed because something changed the mailbox underneath it (a user's `git gc` removing an object
    directory or an unreferenced object mid-write): done again from the start, it succeeds."""


class Unwritable(MailboxError):
    """The file system refused a write (full, read-only, over a quota or size limit, not permitted)."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"cannot write the mailbox at {where}: {reason}")
        self.where, self.reason = where, reason


class MailboxBusy(MailboxError):
    """Another gitmail process held the write lock for longer than this one would wait."""


class NotFound(GitmailError):
    """No message matches the id (or prefix) given."""
