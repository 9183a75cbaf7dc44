"""The page's answers: what the person may do from `gitmail view` (reply, mark done, reopen, write a new message),
each a POST that becomes one call to the action layer, exactly as the command line makes it.

Cross-site requests are refused three ways: the browser must say the request comes from this very page (`Origin`,
which a form on another site cannot forge), the session cookie (`SameSite=Strict`, so another site's form never
carries it) must be this server's, and every form carries a token that only this server can make: a fresh nonce and
its HMAC under the server's secret, which is the cookie's own value. A token is taken once: a double click or a
resubmitted form finds its nonce spent and sends nothing again. The person acts as `@user`; a done or a reopen of
mail for a repository acts for that repository, as `gitmail done --repo` would.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from gitmail import actions
from gitmail.errors import NotFound, UsageError
from gitmail.values.names import PERSON, RepoName
from gitmail.values.phrase import spoken
from gitmail.workspace import Actor

if TYPE_CHECKING:
    from gitmail.store.repository import Store

EVERY_REPO = "*"  # the compose form's `to` for a broadcast
FIELD_BYTES = 256 * 1024  # what a form's text fields may take together (a body is at most 64 KiB)
KEPT_NONCES = 10_000  # spent nonces remembered (a resubmission after that many later forms is refused as stale)
PATHS = ("/act/reply", "/act/done", "/act/reopen", "/act/compose")
# The action layer's options as the page names them, in what its notes say.
WORDS = {"to": "To", "subject": "Subject", "body": "Message", "urgency": "Urgency", "attach": "Attach",
         "reply_to": "Reply", "or_repo": "or_repo"}  # fmt: skip


class Refused(Exception):
    """A form refused before anything was written: an HTTP status and one line for the page."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status, self.text = status, text


class Upload(NamedTuple):
    name: str  # as the browser gave it (only its last path component is used)
    data: bytes


class Form(NamedTuple):
    fields: dict[str, str]
    files: list[Upload]

    def get(self, name: str) -> str:
        return self.fields.get(name, "")


class Tokens:
    """The forms' one-use tokens: made for each form a page shows, spent by the POST that carries it."""

    def __init__(self, secret: str) -> None:
        self._key = secret.encode()
        self._spent: OrderedDict[str, str] = OrderedDict()  # nonce -> where its answer went ("" while it runs)
        self._lock = threading.Lock()

    def _mac(self, nonce: str) -> str:
        digest = hmac.new(self._key, b"gitmail-form:" + nonce.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def make(self) -> str:
        """A token for one form: `nonce.mac`."""
        nonce = secrets.token_urlsafe(18)
        return f"{nonce}.{self._mac(nonce)}"

    def spend(self, token: str) -> str:
        """The nonce of a good, unspent token, now spent; refused otherwise."""
        nonce, dot, mac = token.partition(".")
        if not token:
            raise Refused(403, "This form carries no token: reload the page and send it again.")
        if not dot or not hmac.compare_digest(mac.encode(), self._mac(nonce).encode()):
            raise Refused(403, "This form's token is not this server's (a page of an earlier gitmail view?): reload.")
        with self._lock:
            if nonce in self._spent:
                went = self._spent[nonce]
                where = f" (its answer: {went})" if went else ""
                raise Refused(409, f"This form was already sent{where}; nothing was sent again.")
            self._spent[nonce] = ""
            while len(self._spent) > KEPT_NONCES:
                self._spent.popitem(last=False)
        return nonce

    def release(self, nonce: str) -> None:
        """The form was refused and wrote nothing: it may be sent again once corrected."""
        with self._lock:
            self._spent.pop(nonce, None)

    def answered(self, nonce: str, location: str) -> None:
        with self._lock:
            if nonce in self._spent:
                self._spent[nonce] = location


def parse(content_type: str, data: bytes) -> Form:
    """A POSTed form: urlencoded, or multipart (with files)."""
    if content_type.startswith("application/x-www-form-urlencoded"):
        from urllib.parse import parse_qsl

        try:
            pairs = parse_qsl(data.decode("utf-8", "strict"), keep_blank_values=True, errors="strict")
        except UnicodeDecodeError:
            raise Refused(400, "The form is not UTF-8.") from None
        return Form(dict(pairs), [])
    if not content_type.startswith("multipart/form-data"):
        raise Refused(415, "A form is sent as application/x-www-form-urlencoded or multipart/form-data.")
    import email.parser
    import email.policy

    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + data)
    fields: dict[str, str] = {}
    files: list[Upload] = []
    text = 0
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        filename = part.get_filename()
        payload = part.get_payload(decode=True)
        if not isinstance(name, str) or not isinstance(payload, bytes):
            continue
        if filename is not None:
            if filename or payload:  # an empty file input sends a part with no name and no bytes
                files.append(Upload(filename, payload))
            continue
        text += len(payload)
        if text > FIELD_BYTES:
            raise Refused(413, "The form's text is too large.")
        try:
            fields[name] = payload.decode("utf-8", "strict")
        except UnicodeDecodeError:
            raise Refused(400, f"The form's field {name!r} is not UTF-8.") from None
    return Form(fields, files)


def person() -> Actor:
    """The person, as the page's writes act: `@user`, in no session."""
    return Actor(RepoName(PERSON), None, "web")


class Done(NamedTuple):
    location: str  # where the page goes next
    message_id: str  # the message written, or acted on
    notes: tuple[str, ...] = ()  # what the action layer says the person should know (a name no repository used yet)


def act(store: Store, path: str, form: Form) -> Done:
    """Do what the form asks through the action layer. The action layer's own errors (a bad address, an unknown id,
    a body too large) pass through for the page to show."""
    if path == "/act/done" or path == "/act/reopen":
        message_id = form.get("id")
        entry = actions.show(store, None, message_id).entry
        if entry.recipient is None:
            raise UsageError(f"{entry.message.id} is a broadcast: it is never marked done")
        actor = Actor(entry.recipient, None, "web")
        if path == "/act/done":
            actions.done(store, actor, ids=[entry.message.id])
        else:
            actions.reopen(store, actor, entry.message.id)
        return Done(_back(form.get("back"), entry.message.id), entry.message.id)
    if path == "/act/reply":
        sent = _send(store, form, reply_to=form.get("id") or None)
    elif path == "/act/compose":
        to = form.get("to").strip()
        if not to:
            raise UsageError("name whom the message is for: a repository, repo#session, or every repository")
        sent = _send(store, form, to=None if to == EVERY_REPO else to, broadcast=to == EVERY_REPO)
    else:
        raise NotFound(f"nothing at {path}")
    written = sent.entry.message.id
    return Done(f"/thread/{written}#m-{written}", written, tuple(spoken(n, WORDS) for n in sent.notes))


def _send(store: Store, form: Form, **where: object) -> actions.Sent:
    subject = form.get("subject").strip() or None
    urgency = form.get("urgency") or None
    with tempfile.TemporaryDirectory(prefix="gitmail-upload-") as folder:
        base = Path(folder)
        names = []
        for upload in form.files:
            name = _file_name(upload.name)
            target = base / name
            if target.exists():
                raise UsageError(f"two files are named {name!r}: attach files of different names")
            target.write_bytes(upload.data)
            names.append(name)
        return actions.send(
            store,
            person(),
            subject=subject,
            body=form.get("body").replace("\r\n", "\n"),
            urgency=urgency,
            attach=names,
            base=base,
            within=base,
            **where,  # type: ignore[arg-type]
        )


def _file_name(given: str) -> str:
    name = given.replace("\\", "/").rsplit("/", 1)[-1]
    if name in ("", ".", "..") or "\0" in name:
        raise UsageError(f"an attached file's name {given!r} cannot be used")
    return name


def _back(given: str, message_id: str) -> str:
    """Where a done or reopen returns to: the page it was asked from (a path of this server), else the message."""
    if given.startswith("/") and not given.startswith("//") and "\\" not in given and "\n" not in given:
        return given
    return f"/thread/{message_id}#m-{message_id}"


def origin_problem(origin: str | None, host: str) -> str | None:
    """Why a POST's `Origin` is not this page's, or None."""
    if origin is None:
        return "A form is accepted only from this page (the request names no Origin)."
    if origin != f"http://{host}":
        return f"A form is accepted only from this page, not from {origin[:100]!r}."
    return None
