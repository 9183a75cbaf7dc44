"""Files and patches a message carries: gathering them before a send (each checked, named and measured before
anything is written), writing one out of a message, and applying a message's patch to a repository."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

from gitmail import mailbox, render
from gitmail.errors import GitmailError, UsageError
from gitmail.values.phrase import Phrase
from gitmail.workspace import Actor, current_directory, toplevel

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from typing import NamedTuple

    from _typeshed import StrPath

    from gitmail.project import Applied, Gathered
    from gitmail.store.repository import Store
    from gitmail.values.attachments import Attachment
    from gitmail.values.mail import Entry
    from gitmail.values.outgoing import Outgoing
else:
    from gitmail.values.tuples import NamedTuple

UNCOMMITTED = ""  # `send(patch=UNCOMMITTED)`: the uncommitted changes against HEAD, not commits
APPLY_OUTSIDE = "gitmail apply works on the git work tree you are in: run it inside one"


class Carried(NamedTuple):
    """What a send carries: the attachments as they are to be written, and what the sender should know of them."""

    outgoing: list[Outgoing]
    notes: tuple[str, ...] = ()


@contextmanager
def gathered(
    box: Store,
    actor: Actor,
    *,
    attach: Sequence[str | os.PathLike[str]] = (),
    patch: str | None = None,
    base: StrPath | None = None,
    within: StrPath | None = None,
) -> Iterator[Carried]:
    """The attachments a send carries (`gather`), their files closed once the send is over."""
    found = gather(box, actor, attach=attach, patch=patch, base=base, within=within)
    outgoing = [g.outgoing for g in found]
    try:
        yield Carried(outgoing, tuple(note for g in found for note in g.notes))
    finally:
        _close(outgoing)


def gather(
    box: Store,
    actor: Actor,
    *,
    attach: Sequence[str | os.PathLike[str]] = (),
    patch: str | None = None,
    base: StrPath | None = None,
    within: StrPath | None = None,
) -> list[Gathered]:
    """The attachments a send carries, each checked, named and measured before anything is written: the files
    opened (closed by the caller), the patch made, names made safe and unique, and the mailbox's limits on their
    number and total size kept (each refusal names the file and the limit)."""
    if not attach and patch is None:
        return []
    from gitmail import project
    from gitmail.values import attachments

    limit, most = limits(box)
    if len(attach) + (patch is not None) > most:
        raise UsageError(
            f"{len(attach) + (patch is not None)} attachments; a message may carry at most {most} "
            f"(gitmail.{attachments.COUNT_SETTING} in the mailbox's config)"
        )
    found: list[Gathered] = []
    try:
        total = 0
        for given in attach:
            found.append(project.read_file(given, base=_as_path(base), within=_as_path(within)))
            total = _within_limit(found[-1].outgoing, total, limit)
        if patch is not None:
            work_tree = actor.place.top if actor.place is not None else actor.here
            top = within or work_tree or toplevel(base or current_directory())
            if top is None:
                raise UsageError(Phrase("{patch} needs a git repository: run it inside one"))
            found.append(project.make_patch(Path(top), patch))
            total = _within_limit(found[-1].outgoing, total, limit)
        names = attachments.unique([g.outgoing.name for g in found])
        for index, (gathering, name) in enumerate(zip(found, names, strict=True)):
            if name != gathering.outgoing.name:
                first, second = project.quoted(gathering.outgoing.name), project.quoted(name)
                note = f"another attachment named {first} is attached as {second}"
                found[index] = gathering._replace(outgoing=gathering.outgoing._replace(name=name))
                found[index] = found[index]._replace(notes=(*gathering.notes, note))
    except BaseException:
        _close([g.outgoing for g in found])
        raise
    return found


def limits(box: Store) -> tuple[int, int]:
    """The total size and the number of attachments one message may carry (the mailbox's config may change them)."""
    from gitmail.values import attachments

    limit, most = attachments.DEFAULT_LIMIT, attachments.DEFAULT_COUNT
    if not box.exists():
        return limit, most
    for setting in (attachments.LIMIT_SETTING, attachments.COUNT_SETTING):
        text = box.setting(setting)
        if text is None:
            continue
        value = attachments.parse_size(text)
        if value is None or value < 1:
            example = "25m" if setting == attachments.LIMIT_SETTING else "20"
            raise GitmailError(
                f"gitmail.{setting} in the mailbox's config is {text!r}, not a number of at least 1 (e.g. {example})"
            )
        if setting == attachments.LIMIT_SETTING:
            limit = value
        else:
            most = value
    return limit, most


def _as_path(given: StrPath | None) -> Path | None:
    return Path(given) if given is not None else None


def _within_limit(item: Outgoing, total: int, limit: int) -> int:
    from gitmail.values.attachments import LIMIT_SETTING, size_text

    total += item.size
    if total > limit:
        said = (
            f"{item.label} is {size_text(item.size)}"
            if total == item.size
            else (f"{item.label} ({size_text(item.size)}) brings them to {size_text(total)}")
        )
        raise UsageError(
            f"{said}: a message's attachments may take at most {size_text(limit)} together "
            f"(gitmail.{LIMIT_SETTING} in the mailbox's config; nothing was sent)"
        )
    return total


def _close(outgoing: Sequence[Outgoing]) -> None:
    for item in outgoing:
        if item.source is not None:
            item.source.close()


class Saved(NamedTuple):
    entry: Entry
    attachment: Attachment
    path: Path | None  # where it was written; None: to standard output


def save_attachment(
    box: Store,
    message_id: str,
    name: str | None = None,
    *,
    output: str | os.PathLike[str] | None = None,
    force: bool = False,
) -> Saved:
    """Write one of a message's attachments out: into the current directory under its own (safe) name, or to
    `output` (a file, a directory to put it in, or "-" for standard output). An existing file is replaced only with
    `force`; the file appears whole or not at all."""
    from gitmail import project

    entry = mailbox.show(box, message_id)
    item = mailbox.attachment(entry, name)
    if output is not None and os.fspath(output) == "-":
        from gitmail.store.gitcmd import GitFailed

        try:
            mailbox.write_attachment(box, entry, item, 1)
        except GitFailed as error:
            if error.returncode == -13:  # SIGPIPE: the reader went away (`| head`), as a reader may
                raise BrokenPipeError from None
            raise
        return Saved(entry, item, None)
    if output is None:  # its own name here: never followed into a directory or through a link
        target = Path(current_directory()) / item.name
    else:
        target = Path(output).expanduser()
        if target.is_dir():
            target = target / item.name
        elif os.fspath(output).endswith(os.sep):
            raise UsageError(f"{os.fspath(output)} is no directory")
    project.write_out(target, lambda fd: mailbox.write_attachment(box, entry, item, fd), force=force)
    return Saved(entry, item, target)


class Patched(NamedTuple):
    entry: Entry
    attachment: Attachment
    top: Path  # the work tree it was applied to
    kind: str  # commits (applied with git am) or uncommitted (git apply)
    result: Applied
    note: str | None = None  # a receipt that could not be written


def apply(box: Store, actor: Actor, message_id: str, name: str | None = None) -> Patched:
    """Apply a message's patch to the actor's repository (`git am --3way` for commits, `git apply --index --3way`
    for uncommitted changes) and record on the message whether it applied. Refused, with nothing changed, in a
    repository with uncommitted changes to tracked files or in the middle of another git operation."""
    from gitmail import project
    from gitmail.values.attachments import COMMITS
    from gitmail.values.attachments import UNCOMMITTED as CHANGES

    here = actor.place.top if actor.place is not None else actor.here
    if here is None:
        raise UsageError(APPLY_OUTSIDE)
    top = Path(here)
    entry = mailbox.show(box, message_id)
    item = _the_patch(entry) if name is None else mailbox.attachment(entry, name)
    data = mailbox.attachment_content(box, entry, item)
    kind = item.patch or (COMMITS if data.startswith(b"From ") else CHANGES)
    result = project.apply_patch(top, data, kind)
    note = None
    try:
        mailbox.record_applied(box, repo=actor.repo, entry=entry, applied=result.ok)
    except GitmailError as error:
        note = f"the receipt for {entry.message.id} could not be written: {error}"
    return Patched(entry, item, top, kind, result, note)


def _the_patch(entry: Entry) -> Attachment:
    """The one patch a message carries; a usage error when it carries none or several."""
    patches = [a for a in entry.message.attachments if a.patch is not None]
    if len(patches) != 1:
        listed = ", ".join(render.quote(a.name) for a in entry.message.attachments) or "none"
        raise UsageError(
            Phrase(
                "message {id} carries {count} sent with {patch}; name the attachment to apply (its attachments: "
                "{listed})",
                id=entry.message.id,
                count=f"{len(patches) or 'no'} patch{'es' if len(patches) > 1 else ''}",
                listed=listed,
            )
        )
    return patches[0]
