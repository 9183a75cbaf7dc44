"""Whose a mailbox is: gitmail uses only a mailbox the user owns, that nobody else can change or enter, since its
config, refs, objects and gitmail's own files decide what gitmail runs and delivers."""

from __future__ import annotations

import os
import stat

from gitmail.errors import MailboxError
from gitmail.store.location import MAILBOX_ENV

TYPE_CHECKING = False
if TYPE_CHECKING:
    from _typeshed import StrPath


def check_ownership(where: StrPath) -> None:
    """Refuse a mailbox another user owns or others can write (as ssh refuses a key file others can write): its
    config, refs, objects and gitmail's own files decide what gitmail runs and delivers."""
    _check_owned(where, os.stat(where), os.getuid(), where)


def check_private(where: StrPath) -> None:
    """Refuse a mailbox others can enter. gitmail insists on a private mailbox, as it makes them: a directory of
    yours that grants nothing to group or others (0700) keeps everything inside out of anyone else's reach,
    whatever the modes there, and one stat proves it. In a mailbox others can enter, what a neighbour could
    rewrite (a world-writable packed-refs, ref folder, object or cache) would take a walk of the whole mailbox to
    rule out, at every hook."""
    mode = stat.S_IMODE(os.stat(where).st_mode)
    if mode & 0o077:
        raise MailboxError(
            f"{where} is open to other users (mode {mode:o}); gitmail uses only a private mailbox, as it makes "
            f"them (fix: chmod -R go-rwx {where})"
        )


def _check_owned(path: StrPath, info: os.stat_result, uid: int, where: StrPath) -> None:
    if info.st_uid != uid:
        raise MailboxError(
            f"{path} belongs to another user (uid {info.st_uid}); gitmail uses only a mailbox you own and leaves "
            f"theirs alone (fix: move it aside, `mv {where} {where}.uid-{info.st_uid}`, and gitmail makes one of "
            f"your own; or set {MAILBOX_ENV} to a mailbox of your own)"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not stat.S_ISLNK(info.st_mode):
        raise MailboxError(
            f"{path} can be changed by other users (mode {stat.S_IMODE(info.st_mode):o}); "
            f"gitmail refuses such a mailbox (fix: chmod -R go-rwx {where})"
        )
