"""A message's attachments: one by name, its blob checked against what the document records, its content."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gitmail.errors import GitmailError, NotFound, UsageError
from gitmail.values import jsontext
from gitmail.values.names import has_unsafe

if TYPE_CHECKING:  # what writes is loaded only to write
    from gitmail.store.repository import Store
    from gitmail.values.attachments import Attachment
    from gitmail.values.mail import Entry


def attachment(entry: Entry, name: str | None = None) -> Attachment:
    """One of a message's attachments, by its name (or the name it was given before it was made safe); the only
    one when no name is given."""
    from gitmail.values.attachments import safe_name

    m = entry.message
    found = m.attachments
    listed = ", ".join(_quoted(a.name) for a in found)
    if not found:
        raise GitmailError(f"message {m.id} has no attachments")
    if name is None:
        if len(found) == 1:
            return found[0]
        raise UsageError(f"message {m.id} has {len(found)} attachments; name one of {listed}")
    for candidate in (name, safe_name(name)):
        for item in found:
            if item.name == candidate:
                return item
    raise NotFound(f"message {m.id} has no attachment named {_quoted(name)}; it has {listed}")


def _quoted(name: str) -> str:
    return jsontext.dumps(name, ensure_ascii=False) if not has_unsafe(name) else jsontext.dumps(name)


def attached_blob(store: Store, entry: Entry, item: Attachment) -> str:
    """The blob of an attachment as the message's commit holds it, checked against what its document records."""
    from gitmail.values.attachments import FOLDER

    spec = f"{entry.oid}:{FOLDER}/{item.name}"
    out = store.git("cat-file", "--batch-check=%(objectname) %(objecttype) %(objectsize)", stdin=f"{spec}\n".encode())
    fields = out.decode(errors="replace").split()
    if fields[-1:] == ["missing"] or len(fields) != 3:
        raise GitmailError(
            f"the content of {_quoted(item.name)} in message {entry.message.id} is not in this mailbox (its commit has "
            "no such file, or a prune took it); run `gitmail doctor`"
        )
    oid, kind, size = fields
    if oid != item.blob or kind != "blob" or size != str(item.size):
        raise GitmailError(
            f"message {entry.message.id} records {_quoted(item.name)} as blob {item.blob} of {item.size} bytes, but "
            f"its commit holds {kind} {oid} of {size} bytes; it was not written by gitmail as it says"
        )
    return oid


def write_attachment(store: Store, entry: Entry, item: Attachment, fd: int) -> None:
    """Write an attachment's content into an open file, streamed (never whole in memory)."""
    from gitmail.store import gitcmd

    gitcmd.run_into(store.path, fd, "cat-file", "blob", attached_blob(store, entry, item))


def attachment_content(store: Store, entry: Entry, item: Attachment) -> bytes:
    """An attachment's content, whole (for what is small enough to hand over in one answer)."""
    found = store.read([attached_blob(store, entry, item)])[0]
    if found is None:
        raise GitmailError(f"the content of {_quoted(item.name)} in message {entry.message.id} is not in this mailbox")
    return found
