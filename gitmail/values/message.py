"""The message value type and its two written forms: the frontmatter document (the record) and the commit message
(what `git log` shows). Pure: no I/O.

The document is Markdown with YAML frontmatter. gitmail writes a strict subset of YAML, one `key: "JSON string"`
line per field (and for a message with attachments, `attachments: [...]`, one JSON array: see attachments.py), so
the hot read path parses it with the json module; anything else (a hand-written or foreign document) is parsed with
python-frontmatter.
"""

from __future__ import annotations

from gitmail.errors import GitmailError, UsageError
from gitmail.values import jsontext
from gitmail.values import urgency as levels
from gitmail.values.address import HANDLE, session_key
from gitmail.values.dates import datetime
from gitmail.values.ids import BROADCAST, ID_PATTERN
from gitmail.values.machine import Machine
from gitmail.values.names import RepoName, has_surrogates, name_problem, without_unsafe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple

    from gitmail.values.attachments import Attachment
else:
    from gitmail.values.tuples import NamedTuple

MAX_BODY_BYTES = 64 * 1024
MAX_SUBJECT_CHARS = 200
# A message's document (its frontmatter and body) and its commit are never larger than this: what reads a message
# reads no more of it, and mail over it that arrives by sync is set aside unread.
MAX_DOCUMENT_BYTES = MAX_BODY_BYTES + 4 * 1024
DOCUMENT_NAME = "message.md"

_FIELDS = (
    "id", "from", "to", "subject", "date", "reply-to", "machine", "from-session", "to-session", "to-handle", "urgency",
)  # fmt: skip
_ATTACHMENTS = "attachments"  # the one field whose value is a JSON array (attachments.py), not a string


class Message(NamedTuple):  # a NamedTuple, not a dataclass: dataclasses costs the session-start hook 7 ms
    id: str
    sender: RepoName  # the repo that sent it ("from")
    to: str  # a repo name, or BROADCAST
    subject: str  # one line, never empty
    body: str  # exactly as sent; may be empty
    date: datetime  # send time, timezone-aware
    reply_to: str | None = None  # id of the message this answers
    machine: Machine | None = None  # where it was written; None: on this machine (see machine.py)
    from_session: str | None = None  # the host session that sent it ("claude:5b0e..."): never shown to it
    to_session: str | None = None  # the one session of `to` it is for; None: every session of `to`
    to_handle: str | None = None  # how the sender named that session (`api#HANDLE`), for people
    urgency: str = levels.NORMAL  # now, normal or low (urgency.py): what delivery does with it
    attachments: tuple[Attachment, ...] = ()  # files and patches in its commit's tree (attachments.py)

    @property
    def is_broadcast(self) -> bool:
        return self.to == BROADCAST

    @property
    def address(self) -> str:
        """Whom it is for, as people write it: `web`, or `web#otter` for one session of web."""
        return (
            f"{self.to}#{self.to_handle or (self.to_session or '').partition(':')[2][:8]}"
            if self.to_session
            else self.to
        )

    def document(self) -> bytes:
        fields = {
            "id": self.id,
            "from": str(self.sender),
            "to": self.to,
            "subject": self.subject,
            "date": self.date.isoformat(),
        }
        if self.reply_to:
            fields["reply-to"] = self.reply_to
        if self.machine is not None:
            fields["machine"] = self.machine.field()
        for name, value in (
            ("from-session", self.from_session),
            ("to-session", self.to_session),
            ("to-handle", self.to_handle),
            ("urgency", self.urgency if self.urgency != levels.NORMAL else None),
        ):
            if value:
                fields[name] = value
        lines = [f"{key}: {jsontext.dumps(value, ensure_ascii=False)}" for key, value in fields.items()]
        if self.attachments:
            from gitmail.values.attachments import encode

            lines.append(f"{_ATTACHMENTS}: {encode(self.attachments)}")
        return ("---\n" + "\n".join(lines) + "\n---\n" + self.body).encode()

    def commit_message(self) -> str:
        """Reads like mail in `git log`: subject, body, then trailers."""
        trailers = [f"Message-Id: {self.id}", f"From: {self.sender}", f"To: {self.address}"]
        if self.reply_to:
            trailers.append(f"Reply-To: {self.reply_to}")
        if self.machine is not None:
            trailers.append(f"Machine: {self.machine.field()}")
        if self.urgency != levels.NORMAL:
            trailers.append(f"Urgency: {self.urgency}")
        trailers += [f"Attachment: {a.name} ({a.size} bytes, blob {a.blob})" for a in self.attachments]
        body = self.body.strip("\r\n")
        parts = [self.subject, body, "\n".join(trailers)] if body else [self.subject, "\n".join(trailers)]
        return "\n\n".join(parts) + "\n"


def clean_subject(raw: str, *, what: str = "subject") -> str:
    """One printable line: control characters and line breaks collapse to single spaces. `what` names it in
    errors (a session's card is held to the same rules)."""
    if has_surrogates(raw):
        raise UsageError(f"the {what} is not valid UTF-8 text")
    subject = " ".join(without_unsafe(raw, " ").split())
    if not subject:
        raise UsageError(f"the {what} is empty" + (" (give one with --subject)" if what == "subject" else ""))
    if len(subject) > MAX_SUBJECT_CHARS:
        raise UsageError(f"the {what} is {len(subject)} characters; the limit is {MAX_SUBJECT_CHARS}")
    return subject


def clean_body(raw: bytes | str) -> str:
    data = raw.encode("utf-8", "surrogateescape") if isinstance(raw, str) else raw
    if len(data) > MAX_BODY_BYTES:
        raise UsageError(f"the body is {len(data):,} bytes; the limit is {MAX_BODY_BYTES:,} (64 KiB)")
    try:
        body = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError("the body is not valid UTF-8 text") from None
    if "\x00" in body:
        raise UsageError("the body contains NUL bytes (binary data cannot be sent)")
    return body


def reply_subject(original: str) -> str:
    return original if original[:3].lower() == "re:" else f"Re: {original}"


class BadDocument(GitmailError):
    """A stored message that cannot be read as a gitmail document."""


def parse(data: bytes) -> Message:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadDocument("message document is not UTF-8") from None
    fields, body = _split_strict(text) or _split_frontmatter(text)
    try:
        sender, to = fields["from"], fields["to"]
        if name_problem(sender) or (to != BROADCAST and name_problem(to)):
            raise BadDocument("message document has an invalid sender or recipient")
        date = datetime.fromisoformat(fields["date"])
        if date.tzinfo is None:
            raise BadDocument("message date has no timezone")
        message = Message(
            id=fields["id"],
            sender=RepoName(sender),
            to=to,
            subject=fields["subject"],
            body=body,
            date=date,
            reply_to=fields.get("reply-to") or None,
            machine=Machine.parse(fields["machine"]) if "machine" in fields else None,
            from_session=session_key(fields.get("from-session", "")),
            to_session=session_key(fields.get("to-session", "")),
            to_handle=fields["to-handle"] if HANDLE.fullmatch(fields.get("to-handle", "")) else None,
            urgency=levels.stored(fields.get("urgency", levels.NORMAL)),
            attachments=_attachments(fields[_ATTACHMENTS]) if _ATTACHMENTS in fields else (),
        )
    except (KeyError, ValueError, RecursionError) as error:
        raise BadDocument(f"message document lacks a valid field: {str(error)[:200]}") from None
    if not ID_PATTERN.fullmatch(message.id) or (message.reply_to and not ID_PATTERN.fullmatch(message.reply_to)):
        raise BadDocument("message document has a malformed id")
    return message._replace(subject=" ".join(without_unsafe(message.subject, " ").split()) or "(no subject)")


def _split_strict(text: str) -> tuple[dict[str, str], str] | None:
    """The subset gitmail writes; None when the text is anything else."""
    if not text.startswith("---\n"):
        return None
    end = text.find("\n---\n", 3)
    if end < 0:
        return None
    fields: dict[str, str] = {}
    for line in text[4:end].split("\n"):
        key, sep, value = line.partition(": ")
        if key == _ATTACHMENTS and value.startswith("["):
            fields[key] = value  # decoded by attachments.py, only when the message is read
            continue
        if not sep or key not in _FIELDS or not value.startswith('"'):
            return None
        try:
            decoded = jsontext.loads(value)
        except ValueError:
            return None
        if not isinstance(decoded, str):
            return None
        fields[key] = decoded
    return fields, text[end + 5 :]


def _split_frontmatter(text: str) -> tuple[dict[str, str], str]:
    import frontmatter  # only for documents gitmail did not write itself: it costs a YAML import

    try:
        post = frontmatter.loads(text)
    except Exception as error:  # the YAML library raises many unrelated types
        raise BadDocument(f"message frontmatter does not parse: {error}") from None
    fields = {str(k): str(v) for k, v in post.metadata.items() if v is not None}
    if isinstance(post.metadata.get(_ATTACHMENTS), list):
        fields[_ATTACHMENTS] = jsontext.dumps(post.metadata[_ATTACHMENTS], default=str)
    return fields, post.content


def _attachments(value: str) -> tuple[Attachment, ...]:
    from gitmail.values.attachments import decode  # messages without attachments never load it

    return decode(value)
