"""The page's answers over HTTP, in-process: reply, done, reopen and compose through the action layer as the
person; and every refusal (a foreign or missing Origin, a missing, forged, stale or replayed token, no cookie, a
read-only view, an oversized form, an address that does not parse) writes nothing."""

from __future__ import annotations

import html
import http.client
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

from gitmail import mailbox
from gitmail.store.repository import Store
from gitmail.values.layout import State
from gitmail.values.names import PERSON
from gitmail.web import httpd
from gitmail.web.answering import Tokens
from tests.conftest import CliRunner, at, mailbox_snapshot
from tests.hooked import Session

TOKEN = re.compile(r'name="token" value="([^"]+)"')


class Page:
    def __init__(self, server: httpd.Server) -> None:
        self.server = server
        self.cookie = f"{server.cookie}={server.secret}"
        self.origin = f"http://{server.host}"

    def request(
        self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], str]:
        connection = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=30)
        try:
            sent = {"Host": self.server.host, "Cookie": self.cookie, **(headers or {})}
            connection.request(method, path, body=body, headers={k: v for k, v in sent.items() if v is not None})
            response = connection.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read().decode()
        finally:
            connection.close()

    def token(self, path: str = "/") -> str:
        status, _, text = self.request("GET", path)
        assert status == 200
        found = TOKEN.findall(text)
        assert found, "the page offers no form"
        return str(found[0])

    def post(self, path: str, fields: dict[str, str], **headers: str | None) -> tuple[int, dict[str, str], str]:
        fields = {"token": self.token(), **fields}
        fields = {k: v for k, v in fields.items() if v is not None}
        head: dict[str, str] = {"Origin": self.origin, "Content-Type": "application/x-www-form-urlencoded"}
        head.update({k.replace("_", "-"): v for k, v in headers.items() if v is not None})
        for k in [k.replace("_", "-") for k, v in headers.items() if v is None]:
            head.pop(k, None)
        return self.request("POST", path, urlencode(fields).encode(), head)


def serve(box: Store, *, read_only: bool = False) -> Iterator[Page]:
    server = httpd.Server(box, read_only=read_only)
    runner = threading.Thread(target=server.serve_forever, daemon=True)
    runner.start()
    try:
        yield Page(server)
    finally:
        server.close()
        runner.join(timeout=10)


@pytest.fixture
def page(box: Store) -> Iterator[Page]:
    yield from serve(box)


def test_the_person_replies_to_mail_for_them_and_it_threads(page: Page, box: Store) -> None:
    asked = mailbox.send(box, sender="api", to=PERSON, subject="May I drop v1?", body="No callers left.", when=at(0))
    overview = page.request("GET", "/")[2]
    assert overview.index("For you") < overview.index("Waiting") and "May I drop v1?" in overview
    status, headers, _ = page.post("/act/reply", {"id": asked.message.id, "body": "Yes.\r\nDrop it.", "urgency": "now"})
    assert status == 303, _
    answer_id = headers["location"].split("/")[2].split("#")[0]
    answer = mailbox.show(box, answer_id)
    assert answer.message.sender == PERSON and answer.message.reply_to == asked.message.id
    assert answer.message.to == "api" and answer.message.body == "Yes.\nDrop it." and answer.message.urgency == "now"
    assert mailbox.show(box, asked.message.id).state is State.ARCHIVED
    assert "@user: PERSON</dd>" in page.request("GET", f"/message/{answer_id}")[2]


def test_done_and_reopen_act_for_the_recipient(page: Page, box: Store) -> None:
    sent = mailbox.send(box, sender="api", to="web", subject="hello", when=at(0))
    status, headers, _ = page.post("/act/done", {"id": sent.message.id, "back": f"/thread/{sent.message.id}"})
    assert (status, headers["location"]) == (303, f"/thread/{sent.message.id}")
    assert mailbox.show(box, sent.message.id).state is State.ARCHIVED
    status, headers, _ = page.post("/act/reopen", {"id": sent.message.id, "back": "//evil.example/"})
    assert status == 303 and headers["location"] == f"/thread/{sent.message.id}#m-{sent.message.id}"
    assert mailbox.show(box, sent.message.id).state is State.PENDING


@pytest.mark.parametrize("to", ["web", "*"])
def test_compose_to_a_repository_or_every_repository(page: Page, box: Store, to: str) -> None:
    status, headers, _ = page.post("/act/compose", {"to": to, "subject": "Freeze", "body": "Until Monday."})
    assert status == 303
    message = mailbox.show(box, headers["location"].split("/")[2].split("#")[0]).message
    assert message.sender == PERSON and message.subject == "Freeze"
    assert message.is_broadcast == (to == "*") and (to == "*" or message.to == "web")


def refused_and_nothing_written(box: Store, reply: tuple[int, dict[str, str], str], status: int, said: str) -> None:
    assert reply[0] == status, reply
    assert said in html.unescape(reply[2]), reply[2]


@pytest.mark.parametrize(
    ("change", "status", "said"),
    [
        ({"Origin": "http://evil.example"}, 403, "only from this page"),
        ({"Origin": "null"}, 403, "only from this page"),
        ({"Origin": None}, 403, "names no Origin"),
        ({"Cookie": None}, 403, "carries a token"),
        ({"token": ""}, 403, "carries no token"),
        ({"token": "forged.abc"}, 403, "not this server's"),
        ({"token": Tokens("another server").make()}, 403, "not this server's"),
        ({"to": "web#nobody"}, 400, "no session of"),
        ({"to": "bad/name"}, 400, "invalid repo name"),
        ({"to": "@bob"}, 400, "reserved"),
        ({"subject": ""}, 400, "subject is required"),
    ],
)
def test_a_refused_form_writes_nothing(
    page: Page, box: Store, change: dict[str, str | None], status: int, said: str
) -> None:
    mailbox.send(box, sender="api", to="web", subject="so the mailbox exists", when=at(0))
    before = mailbox_snapshot(box.path)
    fields: dict[str, str] = {"to": "web", "subject": "x", "body": "y"}
    headers: dict[str, str | None] = {}
    for key, value in change.items():
        if key in ("Origin", "Cookie"):
            headers[key] = value
        else:
            assert value is not None
            fields[key] = value
    token = page.token()
    if "token" not in change:
        fields["token"] = token
    head = {"Origin": page.origin, "Content-Type": "application/x-www-form-urlencoded", **headers}
    sent = page.request("POST", "/act/compose", urlencode(fields).encode(), head)  # type: ignore[arg-type]
    refused_and_nothing_written(box, sent, status, said)
    assert mailbox_snapshot(box.path) == before


def test_a_token_is_spent_once_a_double_submit_sends_once(page: Page, box: Store) -> None:
    token = page.token()
    body = urlencode({"token": token, "to": "web", "subject": "once"}).encode()
    head = {"Origin": page.origin, "Content-Type": "application/x-www-form-urlencoded"}
    first = page.request("POST", "/act/compose", body, head)
    second = page.request("POST", "/act/compose", body, head)
    assert first[0] == 303 and second[0] == 409 and "already sent" in second[2]
    assert [e.message.subject for e in mailbox.pending(box, repo="web").directed] == ["once"]


def test_a_token_refused_by_the_action_layer_may_be_sent_again(page: Page, box: Store) -> None:
    token = page.token()
    head = {"Origin": page.origin, "Content-Type": "application/x-www-form-urlencoded"}
    bad = page.request("POST", "/act/compose", urlencode({"token": token, "to": "a/b", "subject": "x"}).encode(), head)
    assert bad[0] == 400
    good = page.request("POST", "/act/compose", urlencode({"token": token, "to": "web", "subject": "x"}).encode(), head)
    assert good[0] == 303


def test_an_unknown_id_and_an_oversized_form_are_refused(page: Page, box: Store) -> None:
    mailbox.send(box, sender="api", to="web", subject="exists", when=at(0))
    before = mailbox_snapshot(box.path)
    assert page.post("/act/done", {"id": "zzzzzzzzzz"})[0] == 404
    huge = page.request(
        "POST", "/act/compose", b"", {"Origin": page.origin, "Content-Length": str(10**10), "Content-Type": "x"}
    )
    assert huge[0] == 413
    assert mailbox_snapshot(box.path) == before


def test_a_read_only_view_offers_no_form_and_takes_none(box: Store) -> None:
    sent = mailbox.send(box, sender="api", to=PERSON, subject="question", when=at(0))
    for page in serve(box, read_only=True):
        status, _, text = page.request("GET", f"/thread/{sent.message.id}")
        assert status == 200 and '<form method="post"' not in text
        before = mailbox_snapshot(box.path)
        reply = page.request("POST", "/act/done", b"id=x", {"Origin": page.origin})
        assert reply[0] == 405 and reply[1]["allow"] == "GET, HEAD"
        assert mailbox_snapshot(box.path) == before


def multipart(parts: list[tuple[str, str | None, bytes]], boundary: str = "----gitmailtest") -> bytes:
    data = b""
    for name, filename, value in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        data += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + value + b"\r\n"
    return data + f"--{boundary}--\r\n".encode()


def test_an_attachment_over_the_cap_is_refused_in_the_action_layers_words(page: Page, box: Store) -> None:
    asked = mailbox.send(box, sender="api", to=PERSON, subject="Send the log?", when=at(0))
    box.git("config", "gitmail.attachmentLimit", "1k")
    before = mailbox_snapshot(box.path)
    data = multipart([("token", None, page.token().encode()), ("id", None, asked.message.id.encode()),
                      ("attach", "big.bin", b"x" * 1500)])  # fmt: skip
    head = {"Origin": page.origin, "Content-Type": "multipart/form-data; boundary=----gitmailtest"}
    status, _, text = page.request("POST", "/act/reply", data, head)
    assert status == 400 and "may take at most 1.0 KiB together" in html.unescape(text), text
    assert mailbox_snapshot(box.path) == before


def test_a_multipart_reply_carries_attachments_within_the_caps(page: Page, box: Store) -> None:
    asked = mailbox.send(box, sender="api", to=PERSON, subject="Send the log?", when=at(0))
    boundary = "----gitmailtest"
    parts = [
        ("token", None, page.token().encode()),
        ("id", None, asked.message.id.encode()),
        ("body", None, b"Here."),
        ("attach", "../../etc/build log.txt", b"line 1\n"),
    ]
    data = b""
    for name, filename, value in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        data += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + value + b"\r\n"
    data += f"--{boundary}--\r\n".encode()
    head = {"Origin": page.origin, "Content-Type": f"multipart/form-data; boundary={boundary}"}
    status, headers, text = page.request("POST", "/act/reply", data, head)
    assert status == 303, text
    answer = mailbox.show(box, headers["location"].split("/")[2].split("#")[0])
    assert [a.name for a in answer.message.attachments] == ["build log.txt"]


def test_a_reply_reaches_the_asking_session_and_compose_reaches_a_live_one(page: Page, box: Store, api: Path) -> None:
    box.create()
    asking = Session(api, "11111111-aaaa")
    asking("session-start")
    assert asking.gitmail("session", "--name", "builder").returncode == 0
    asked = asking.send("--to", "@user", "-u", "now", "-s", "Drop v1?")
    overview = page.request("GET", "/")[2]
    assert '<option value="api#builder">' in overview  # offered to write to
    status, headers, _ = page.post("/act/reply", {"id": asked, "body": "Yes."})
    assert status == 303
    answer = mailbox.show(box, headers["location"].split("/")[2].split("#")[0]).message
    assert answer.to_session == "claude:11111111-aaaa" and answer.reply_to == asked
    assert "> Yes." in asking("prompt")  # its next hook answer carries it
    status, headers, _ = page.post("/act/compose", {"to": "api#builder", "subject": "One more thing"})
    assert status == 303
    assert mailbox.show(box, headers["location"].split("/")[2].split("#")[0]).message.to_session == answer.to_session


def test_the_store_says_when_sessions_change_and_the_page_lists_them(page: Page, box: Store, api: Path) -> None:
    from gitmail.store import changes

    box.create()
    before = changes.change_token(box)
    session = Session(api, "33333333-cccc")
    session("session-start")
    assert session.gitmail("session", "--name", "front", "--card", "the login page").returncode == 0
    assert session.gitmail("lease", "src/login.py").returncode == 0
    assert changes.change_token(box) != before
    overview = page.request("GET", "/")[2]
    assert "api#front" in overview and "the login page" in overview and "leases src/login.py" in overview
    assert 'href="/?to=api%23front#compose"' in overview  # a way to write to it
    assert 'value="api#front"' in page.request("GET", "/?to=api%23front")[2]
    leased = overview.split('class="lease-list"')[1]
    assert "<li>&#34;src/login.py&#34; · exclusive · held by &#34;api#front&#34; (&#34;front&#34;)" in leased
    assert "src/login.py" in page.request("GET", "/repo/api")[2].split('class="lease-list"')[1]


def test_each_message_says_where_it_stands_for_its_recipient(page: Page, box: Store) -> None:
    from tests.reading import inbox as read_inbox

    sent = mailbox.send(box, sender="api", to="web", subject="status", when=at(0))
    assert "pending: not delivered yet" in page.request("GET", f"/thread/{sent.message.id}")[2]
    read_inbox(box, repo="web")
    answer = mailbox.reply(box, sender="web", to_id=sent.message.id, body="ok", when=at(2))
    shown = page.request("GET", f"/thread/{sent.message.id}")[2]
    assert re.search(r"<li>delivered \d\d-\d\d \d\d:\d\d to web \(", shown), shown
    assert f"by web with {answer.message.id}</li>" in shown


def test_inside_a_session_the_view_serves_only_read_only(
    cli: CliRunner, box: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", "66666666-ffff")
    refused = cli("view", "--no-open")
    assert refused.code == 2 and refused.err.startswith("gitmail: error: inside a session the view serves only")


def test_what_the_action_layer_notes_is_shown_on_the_message_written(page: Page, box: Store) -> None:
    status, headers, _ = page.post("/act/compose", {"to": "brand-new", "subject": "hello"})
    assert status == 303
    shown = html.unescape(page.request("GET", headers["location"].partition("#")[0])[2])
    assert '<p class="notice">no repo named "brand-new" has used this mailbox yet; it gets the message' in shown
