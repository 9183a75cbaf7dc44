"""The web view: the read model (threads, repos, broadcasts, search, pages, the change token), the HTTP server as
a browser meets it (token, Host, methods, headers, pages), hostile content, the export, and `gitmail view` run as
a real process."""

from __future__ import annotations

import base64
import hashlib
import http.client
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import NamedTuple

import pytest

from gitmail import mailbox
from gitmail.errors import NotFound
from gitmail.store.claims import claim
from gitmail.store.repository import Store
from gitmail.values.layout import State
from gitmail.values.names import RepoName
from gitmail.web import httpd, pages, snapshot
from gitmail.web.snapshot import Snapshot
from tests.conftest import CliRunner, RepoFactory, at, mailbox_snapshot
from tests.processes import loaded
from tests.reading import inbox as read_inbox

HOSTILE_SUBJECT = "<img src=x onerror=alert(1)>"
HOSTILE_BODY = "Done </script><script>alert(2)</script> & more"
QUOTED_REPO = 'it\'s "quoted"'


class Mail(NamedTuple):
    """A small mailbox: a sent-and-replied conversation, a broadcast, hostile content, a repo with quotes."""

    question: str  # api -> web, answered by web (archived for web)
    answer: str  # web -> api, pending for api
    cast: str  # a broadcast from api, handed to web
    hostile: str  # api -> web, pending, subject and body are markup
    quoted: str  # from the repo with quotes in its name, to web


def fill(box: Store) -> Mail:
    question = mailbox.send(
        box, sender="api", to="web", subject="Schema v2 is live", body="Orders have a status column.", when=at(0)
    )
    answer = mailbox.reply(box, sender="web", to_id=question.message.id, body="Switched the list.", when=at(5))
    cast = mailbox.broadcast(box, sender="api", subject="Freeze until Monday", when=at(10))
    read_inbox(box, repo="web")  # hands the broadcast to web
    hostile = mailbox.send(box, sender="api", to="web", subject=HOSTILE_SUBJECT, body=HOSTILE_BODY, when=at(15))
    quoted = mailbox.send(box, sender=QUOTED_REPO, to="web", subject="Quoted name", body="hello", when=at(20))
    return Mail(question.message.id, answer.message.id, cast.message.id, hostile.message.id, quoted.message.id)


def subjects(items: object) -> list[str]:
    return [i.entry.message.subject for i in items]  # type: ignore[attr-defined]


# -- the read model ----------------------------------------------------------------------------------------------


def test_a_thread_is_a_message_and_its_replies_across_repos(box: Store) -> None:
    mail = fill(box)
    follow = mailbox.reply(box, sender="api", to_id=mail.answer, body="Thanks.", when=at(30))
    snap = snapshot.load(box)
    for member in (mail.question, mail.answer, follow.message.id):
        thread = pages.thread(snap, member)
        assert thread.root_id == mail.question
        got = [(i.entry.message.id, i.depth, i.entry.state, i.entry.message.sender) for i in thread.items]
        assert got == [
            (mail.question, 0, State.ARCHIVED, "api"),
            (mail.answer, 1, State.ARCHIVED, "web"),
            (follow.message.id, 2, State.PENDING, "api"),
        ]
        assert all(i.delivered is None for i in thread.items)  # no receipts: the slot stays empty
    with pytest.raises(NotFound):
        pages.thread(snap, "0000000000")


def test_a_message_shown_to_a_session_says_when_it_was_delivered(box: Store) -> None:
    sent = mailbox.send(box, sender="api", to="web", subject="shown", when=at(1))
    read_inbox(box, repo="web", host="claude")
    item, _ = pages.message(snapshot.load(box), sent.message.id)
    assert item.delivered is not None and item.delivered.tzinfo is not None


def test_sibling_replies_sit_under_what_they_answer_oldest_first(box: Store) -> None:
    first = mailbox.send(box, sender="api", to="web", subject="Question", when=at(0))
    late = mailbox.reply(box, sender="web", to_id=first.message.id, body="second thought", when=at(9))
    early = mailbox.reply(box, sender="api", to_id=first.message.id, body="follow-up", when=at(3))
    nested = mailbox.reply(box, sender="web", to_id=early.message.id, body="on the follow-up", when=at(12))
    thread = pages.thread(snapshot.load(box), first.message.id)
    assert [(i.entry.message.id, i.depth) for i in thread.items] == [
        (first.message.id, 0),
        (early.message.id, 1),
        (nested.message.id, 2),
        (late.message.id, 1),
    ]


def test_the_overview_shows_repos_what_waits_and_broadcasts_with_their_reach(box: Store, repos: RepoFactory) -> None:
    mail = fill(box)
    claim(box, repo=RepoName("docs"), path=repos("docs"))  # a repo that only ever looked
    overview = pages.overview(snapshot.load(box))
    rows = {str(r.name): (r.pending, r.oldest_pending, r.unseen_broadcasts) for r in overview.repos}
    assert rows == {
        "api": (1, at(5), 0),
        "docs": (0, None, 1),
        "web": (2, at(15), 0),
        QUOTED_REPO: (0, None, 1),
    }
    assert [r.name for r in overview.repos] == ["api", "docs", QUOTED_REPO, "web"]
    assert [i.entry.message.id for i in overview.waiting.items] == [mail.answer, mail.hostile, mail.quoted]
    assert overview.waiting.total == 3
    assert [(i.entry.message.id, i.reached) for i in overview.broadcasts] == [(mail.cast, ("web",))]
    assert [c.root.message.id for c in overview.conversations.items] == [
        mail.quoted,
        mail.hostile,
        mail.cast,
        mail.question,
    ]
    schema = overview.conversations.items[-1]
    assert (schema.size, schema.participants, schema.latest.message.id) == (2, ("api", "web"), mail.answer)
    assert schema.states == ((State.PENDING, 1), (State.ARCHIVED, 1))


def test_conversations_come_in_pages_newest_activity_first(box: Store) -> None:
    ids = [mailbox.send(box, sender="api", to="web", subject=f"n{n}", when=at(n)).message.id for n in range(30)]
    mailbox.reply(box, sender="web", to_id=ids[0], body="revived", when=at(100))  # the oldest thread is now newest
    snap = snapshot.load(box)
    first = pages.conversations(snap, page=1)
    second = pages.conversations(snap, page=2)
    assert (first.total, first.pages, first.has_previous, first.has_next) == (30, 2, False, True)
    assert [c.root.message.id for c in first.items] == [ids[0], *ids[29:5:-1]]
    assert [c.root.message.id for c in second.items] == ids[5:0:-1]
    assert (second.has_previous, second.has_next) == (True, False)
    assert pages.conversations(snap, page=3).items == []


def test_a_repos_conversations_are_those_it_sent_or_received_in(box: Store) -> None:
    mail = fill(box)
    snap = snapshot.load(box)
    assert [c.root.message.id for c in pages.conversations(snap, repo="web").items] == [
        mail.quoted,
        mail.hostile,
        mail.question,
    ]
    assert [c.root.message.id for c in pages.conversations(snap, repo=QUOTED_REPO).items] == [mail.quoted]
    assert pages.conversations(snap, repo="nobody").items == []
    assert [i.entry.message.id for i in pages.waiting(snap, repo="api").items] == [mail.answer]


def test_broadcasts_list_active_and_retracted_with_their_reach(box: Store) -> None:
    mail = fill(box)
    later = mailbox.broadcast(box, sender="web", subject="Deploy at noon", when=at(40))
    mailbox.retract(box, sender="api", message_id=mail.cast)
    listed = pages.broadcasts(snapshot.load(box))
    assert [(i.entry.message.id, i.entry.state, i.reached) for i in listed.items] == [
        (later.message.id, State.BROADCAST, ()),
        (mail.cast, State.RETRACTED, ("web",)),
    ]


def test_search_finds_subjects_and_bodies_in_any_case_and_ids(box: Store) -> None:
    mail = fill(box)
    snap = snapshot.load(box)

    def found(text: str) -> list[str]:
        return [i.entry.message.id for i in pages.search(snap, text).items]

    assert found("SCHEMA v2") == [mail.answer, mail.question]
    assert found("status COLUMN") == [mail.question]
    assert found("switched THE") == [mail.answer]
    assert found("</script>") == [mail.hostile]
    assert found("web") == []  # only the trailers (To: web) say it: not a subject or body
    assert found(mail.cast) == [mail.cast]
    assert found("   ") == []
    assert found("no such words") == []


def test_search_comes_in_pages(box: Store) -> None:
    ids = [mailbox.send(box, sender="api", to="web", subject=f"report {n}", when=at(n)).message.id for n in range(27)]
    snap = snapshot.load(box)
    first, second = pages.search(snap, "report"), pages.search(snap, "report", page=2)
    assert [i.entry.message.id for i in first.items] == ids[:1:-1]
    assert first.has_next and not second.has_next
    assert [i.entry.message.id for i in second.items] == ids[1::-1]


def test_an_unreadable_document_is_shown_as_such(box: Store) -> None:
    fine = mailbox.send(box, sender="api", to="web", subject="fine", when=at(0))

    def git(*args: str, stdin: bytes | None = None) -> str:
        done = subprocess.run(["git", "--git-dir", str(box.path), *args], input=stdin, capture_output=True, check=True)
        return done.stdout.decode().strip()

    blob = git("hash-object", "-w", "--stdin", stdin=b"not a gitmail document")
    tree = git("mktree", stdin=f"100644 blob {blob}\tmessage.md\n".encode())
    commit = (
        subprocess.run(
            ["git", "--git-dir", str(box.path), "commit-tree", tree, "-m", "broken"],
            capture_output=True,
            check=True,
            env={
                **os.environ,
                "GIT_AUTHOR_EMAIL": "api@gitmail",
                "GIT_AUTHOR_DATE": f"@{int(at(1).timestamp())} +0000",
            },
        )
        .stdout.decode()
        .strip()
    )
    git("update-ref", "refs/gitmail/web/inbox/zzzzzzzzzz", commit)
    snap = snapshot.load(box)
    thread = pages.thread(snap, "zzzzzzzzzz")
    assert thread.unreadable == ("zzzzzzzzzz",)
    assert thread.items[0].entry.message.subject == "(this message's document cannot be read)"
    overview = pages.overview(snap)
    assert {c.root.message.id for c in overview.conversations.items} == {fine.message.id, "zzzzzzzzzz"}


def test_a_missing_mailbox_reads_as_empty_and_is_not_created(box: Store) -> None:
    snap = snapshot.load(box)
    assert not snap.exists and snap.token == snapshot.change_token(box) == "absent"
    overview = pages.overview(snap)
    assert overview.repos == () and overview.conversations.items == [] and overview.waiting.total == 0
    assert not box.path.exists()


def test_the_change_token_moves_with_every_kind_of_write_and_only_then(box: Store) -> None:
    tokens = [snapshot.change_token(box)]

    def moved() -> None:
        token = snapshot.change_token(box)
        assert token not in tokens
        tokens.append(token)

    sent = mailbox.send(box, sender="api", to="web", subject="one", when=at(0))
    moved()
    assert snapshot.change_token(box) == tokens[-1]  # nothing written: the same token
    cast = mailbox.broadcast(box, sender="api", subject="all", when=at(1))
    moved()
    read_inbox(box, repo="web")  # records the hand-over in the seen-set notes
    moved()
    mailbox.done(box, repo="web", ids=[sent.message.id])
    moved()
    mailbox.retract(box, sender="api", message_id=cast.message.id)
    moved()
    subprocess.run(["git", "--git-dir", str(box.path), "pack-refs", "--all", "--prune"], check=True)
    moved()
    packed = mailbox.send(box, sender="api", to="web", subject="two", when=at(2))
    subprocess.run(["git", "--git-dir", str(box.path), "pack-refs", "--all", "--prune"], check=True)
    moved()
    mailbox.done(box, repo="web", ids=[packed.message.id])  # deleting a packed ref rewrites packed-refs
    moved()


def whole(snap: Snapshot) -> object:
    """Everything a snapshot says, in comparable form."""
    index = snap.index
    return (
        index.nodes,
        index.by_id,
        {k: sorted(v) for k, v in index.children.items()},
        index.root,
        index.order,
        index.taking_part,
        index.per_repo,
        index.pending,
        index.broadcasts,
        index.names,
        index.listing,
    )


def test_a_snapshot_carried_forward_equals_one_read_whole(box: Store) -> None:
    snap = snapshot.load(box)
    steps: list[Callable[[], object]] = [
        lambda: fill(box),
        lambda: mailbox.reply(box, sender="api", to_id=snap.index.nodes[snap.index.order[-1][2]].id, when=at(50)),
        lambda: subprocess.run(["git", "--git-dir", str(box.path), "pack-refs", "--all", "--prune"], check=True),
        lambda: mailbox.done(box, repo="web", ids=[e.message.id for e in mailbox.pending(box, repo="web").directed]),
        lambda: mailbox.send(box, sender="docs", to="api", subject="new repo", when=at(60)),
        lambda: mailbox.retract(box, sender="api", message_id=snap.index.nodes[next(iter(snap.index.broadcasts))].id),
    ]
    for step in steps:
        step()
        carried = snapshot.load(box, snap)
        assert carried is not snap
        assert whole(carried) == whole(snapshot.load(box))
        assert snapshot.load(box, carried) is carried  # nothing changed since: the same snapshot
        snap = carried


def test_a_reply_arriving_before_what_it_answers_rebuilds_the_thread(box: Store) -> None:
    """After a sync a reply can come in before its parent's ref: the thread is joined up once the parent is in."""
    first = mailbox.send(box, sender="api", to="web", subject="Question", when=at(0))
    answer = mailbox.reply(box, sender="web", to_id=first.message.id, body="answer", when=at(1))
    ref = f"refs/gitmail/web/archive/{first.message.id}"
    subprocess.run(["git", "--git-dir", str(box.path), "update-ref", "-d", ref], check=True)
    orphaned = snapshot.load(box)
    assert pages.thread(orphaned, answer.message.id).root_id == answer.message.id
    subprocess.run(["git", "--git-dir", str(box.path), "update-ref", ref, first.oid], check=True)
    joined = snapshot.load(box, orphaned)
    assert pages.thread(joined, answer.message.id).root_id == first.message.id
    assert whole(joined) == whole(snapshot.load(box))


# -- the server -------------------------------------------------------------------------------------------------


class Reply(NamedTuple):
    status: int
    headers: dict[str, str]
    text: str


class Client:
    def __init__(self, server: httpd.Server) -> None:
        self.server = server
        self.cookie = f"{server.cookie}={server.secret}"

    def __call__(self, path: str, *, method: str = "GET", host: str | None = None, cookie: str | None = None) -> Reply:
        connection = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=30)
        try:
            connection.putrequest(method, path, skip_host=True)
            if host != "":
                connection.putheader("Host", host or self.server.host)
            if cookie != "":
                connection.putheader("Cookie", cookie or self.cookie)
            connection.endheaders()
            response = connection.getresponse()
            return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read().decode())
        finally:
            connection.close()


@pytest.fixture
def served(box: Store) -> Iterator[Client]:
    server = httpd.Server(box)
    runner = threading.Thread(target=server.serve_forever, daemon=True)
    runner.start()
    try:
        yield Client(server)
    finally:
        server.close()
        runner.join(timeout=10)


def test_the_token_is_required_then_kept_in_a_cookie(served: Client) -> None:
    server = served.server
    assert served("/", cookie="").status == 403
    assert served("/static/view.css", cookie="").status == 403
    assert served("/", cookie=f"{server.cookie}=wrong").status == 403
    assert served("/?token=wrong", cookie="").status == 403
    first = served(f"/?token={server.secret}&page=1", cookie="")
    assert first.status == 303 and first.headers["location"] == "/?page=1"
    cookie = first.headers["set-cookie"]
    assert cookie == f"{server.cookie}={server.secret}; Path=/; HttpOnly; SameSite=Strict"
    assert served("/", cookie=cookie.split(";")[0]).status == 200
    assert server.url == f"http://127.0.0.1:{server.port}/?token={server.secret}"
    assert len(server.secret) >= 40
    for path in ("/\\evil.example/", "//evil.example/"):  # a browser takes either for another site
        away = served(f"{path}?token={server.secret}", cookie="")
        assert away.status == 303 and away.headers["location"] == "/evil.example/"


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:{port}", "localhost:{port}", "127.0.0.1", "[::1]:{port}", ""]
)
def test_a_host_other_than_the_served_address_is_refused(served: Client, host: str) -> None:
    reply = served("/", host=host.format(port=served.server.port))
    assert reply.status == 403
    assert "only requests for 127.0.0.1:" in reply.text


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "PROPFIND"])
def test_no_method_but_get_and_head_is_accepted(served: Client, box: Store, method: str) -> None:
    fill(box)
    before = mailbox_snapshot(box.path)
    for path in ("/", "/changes", f"/thread/{snapshot.load(box).index.order[0][1]}"):
        reply = served(path, method=method)
        assert reply.status == 405 and reply.headers["allow"] == "GET, HEAD"
    assert mailbox_snapshot(box.path) == before


@pytest.mark.parametrize("sent", [b"", b"GET / HTTP/1.1\r\nHost: 127"], ids=["nothing", "half a request"])
def test_an_idle_connection_is_closed(served: Client, monkeypatch: pytest.MonkeyPatch, sent: bytes) -> None:
    import socket
    import time

    default = httpd._Handler.timeout
    assert default is not None and 0 < default <= 60, "the view keeps idle connections forever"
    monkeypatch.setattr(httpd._Handler, "timeout", 0.5)  # the same, sooner
    with socket.create_connection(("127.0.0.1", served.server.port), timeout=10) as idle:
        idle.sendall(sent)
        began = time.monotonic()
        try:
            assert idle.recv(1024) == b""  # closed by the server
        except TimeoutError:
            pytest.fail("the view kept an idle connection open")
        assert time.monotonic() - began >= 0.4
    assert served("/").status == 200  # and goes on serving


def test_a_request_that_trickles_in_is_closed_when_the_idle_time_is_up(
    served: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The idle time bounds the whole request, not each read: a byte every so often never keeps a connection."""
    import socket
    import time

    monkeypatch.setattr(httpd._Handler, "timeout", 1.0)
    with socket.create_connection(("127.0.0.1", served.server.port), timeout=10) as slow:
        began = time.monotonic()
        closed = False
        for byte in b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"x" * 100:
            try:
                slow.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            time.sleep(0.25)  # well within the idle time between bytes
            if time.monotonic() - began > 5:
                break
        if not closed:
            slow.settimeout(5)
            try:
                closed = slow.recv(1024) == b""
            except ConnectionResetError:
                closed = True
            except TimeoutError:
                closed = False
        assert closed, "the view kept a connection that sends a byte now and then"
        assert time.monotonic() - began < 4  # closed once the idle time was up, not at the end of the trickle
    assert served("/").status == 200  # and goes on serving


def test_head_answers_like_get_without_a_body(served: Client, box: Store) -> None:
    fill(box)
    got, head = served("/"), served("/", method="HEAD")
    assert head.status == 200 and head.text == ""
    assert head.headers["content-length"] == got.headers["content-length"]


def test_every_answer_carries_a_strict_policy(served: Client) -> None:
    for path in ("/", "/static/view.js", "/nothing-here"):
        headers = served(path).headers
        policy = headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src 'self'" in policy and "style-src 'self'" in policy
        assert "require-trusted-types-for 'script'" in policy and "frame-ancestors 'none'" in policy
        assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "same-origin"  # a form names its Origin; no other site hears of a page
        assert headers["cache-control"] == "no-store"


class Markup(HTMLParser):
    """The elements and attributes a page really has, as a browser's parser sees them."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def named(self, tag: str) -> list[dict[str, str | None]]:
        return [attrs for name, attrs in self.tags if name == tag]

    @property
    def words(self) -> str:
        return " ".join(" ".join(self.text).split())


def test_pages_show_threads_states_repos_and_search(served: Client, box: Store) -> None:
    mail = fill(box)
    overview = Markup(served("/").text)
    assert "web 2 pending oldest waits" in overview.words
    assert "Freeze until Monday from api handed to 1: web" in overview.words
    assert "Schema v2 is live api · web 2 messages 1 pending 1 archived" in overview.words

    thread = served(f"/thread/{mail.answer}")
    assert thread.status == 200
    cards = [a for a in Markup(thread.text).named("article")]
    assert [(c["id"], c["class"]) for c in cards] == [
        (f"m-{mail.question}", "message depth-0 state-archived"),
        (f"m-{mail.answer}", "message depth-1 state-pending focus"),
    ]
    words = Markup(thread.text).words
    assert "api → web" in words and "Orders have a status column." in words and f"in reply to {mail.question}" in words

    one = Markup(served(f"/message/{mail.question}").text).words
    assert "Orders have a status column." in one and f"Replies {mail.answer} from web" in one

    repo = Markup(served("/repo/api").text).words
    assert "Waiting for api 1" in repo and "Re: Schema v2 is live" in repo

    found = Markup(served("/search?q=status+COLUMN").text)
    assert [a["href"] for a in found.named("a") if a.get("class") == "subject"] == [
        f"/thread/{mail.question}#m-{mail.question}"
    ]
    assert "No subject or body contains it." in Markup(served("/search?q=zebra").text).words
    assert "Freeze until Monday" in Markup(served("/broadcasts").text).words
    missing = [("/thread/0000000000", 404), ("/repo/nobody", 404), ("/repo/%ff", 404), ("/x/y/z", 404)]
    for path, status in [*missing, ("/?page=0", 400), ("/search?q=x&page=-1", 400)]:
        assert served(path).status == status, path


def test_hostile_content_is_text_in_every_page(served: Client, box: Store) -> None:
    mail = fill(box)
    pages = ["/", f"/thread/{mail.hostile}", f"/message/{mail.hostile}", "/search?q=script", "/repo/web"]
    pages.append("/repo/" + "it%27s%20%22quoted%22")
    for path in pages:
        reply = served(path)
        assert reply.status == 200, path
        page = Markup(reply.text)
        assert page.named("img") == [], path
        assert page.named("script") == [{"src": "/static/view.js", "defer": None}], path
        assert not any(key.startswith("on") for _, attrs in page.tags for key in attrs), path
        assert "<img src=x" not in reply.text and "</script><script>" not in reply.text
        if path != "/repo/web":
            assert HOSTILE_SUBJECT in page.words or QUOTED_REPO in page.words, path
    thread = Markup(served(f"/thread/{mail.hostile}").text).words
    assert HOSTILE_SUBJECT in thread and HOSTILE_BODY in thread
    overview = Markup(served("/").text)
    assert "/repo/it%27s%20%22quoted%22" in [a["href"] for a in overview.named("a")]
    assert QUOTED_REPO in overview.words


def test_control_characters_are_shown_not_obeyed(served: Client, box: Store) -> None:
    sent = mailbox.send(box, sender="api", to="web", subject="bidi", body="a\u202eb\x1b[31mc\nnext\tline")
    words = served(f"/thread/{sent.message.id}").text
    assert "a\\u202eb\\x1b[31mc\nnext\tline" in words  # as the framing and the command line show them


def test_an_invisible_character_in_a_name_is_shown_and_a_search_with_nul_is_refused(served: Client, box: Store) -> None:
    mailbox.send(box, sender="web\u200b", to="api", subject="urgent\u200e from web")
    overview = served("/").text
    assert "web\\u200b" in overview and "urgent\\u200e from web" in overview
    assert "web\u200b" not in overview
    assert served("/search?q=%00").status == 400


def test_new_mail_moves_the_change_token_the_page_polls(served: Client, box: Store) -> None:
    empty = served("/changes")
    assert empty.status == 200 and empty.headers["content-type"] == "application/json"
    assert "no mailbox at" in Markup(served("/").text).words.lower()
    sent = mailbox.send(box, sender="api", to="web", subject="Arrives later", when=at(0))
    after = served("/changes")
    assert after.text != empty.text and f'"{snapshot.change_token(box)}"' in after.text
    page = served("/")
    assert "Arrives later" in page.text
    assert f'data-token="{snapshot.change_token(box)}"' in page.text
    mailbox.done(box, repo="web", ids=[sent.message.id])
    assert "Nothing is waiting" in served("/").text


def test_pages_stay_right_while_another_process_writes(served: Client, box: Store, tmp_path: Path) -> None:
    """Requests from several threads while a writer process sends and archives: every answer is whole, and the
    index the server carried forward ends equal to one read whole."""
    fill(box)
    ready = tmp_path / "ready"
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import pathlib, sys\n"
            "from gitmail import mailbox\n"
            "from gitmail.store.opening import open_mailbox\n"
            "box = open_mailbox()\n"
            "pathlib.Path(sys.argv[1]).touch()\n"
            "for n in range(40):\n"
            "    sent = mailbox.send(box, sender='api', to='web', subject=f'burst {n}')\n"
            "    if n % 2:\n"
            "        mailbox.reply(box, sender='web', to_id=sent.message.id, body='ok')\n",
            str(ready),
        ]
    )
    failures: list[str] = []

    def browse() -> None:
        while writer.poll() is None:
            for path in ("/changes", "/", "/repo/web"):
                reply = served(path)
                if reply.status != 200 or (path != "/changes" and not reply.text.rstrip().endswith("</html>")):
                    failures.append(f"{path}: {reply.status}")

    while not ready.exists() and writer.poll() is None:
        threading.Event().wait(0.005)
    readers = [threading.Thread(target=browse) for _ in range(3)]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join(timeout=120)
    assert writer.wait(timeout=120) == 0
    assert failures == []
    served("/")
    assert whole(served.server.snapshot) == whole(snapshot.load(box))
    assert f'<span class="n">{4 + 40}</span>' in served("/").text


def test_the_script_builds_no_markup_from_strings() -> None:
    script = httpd.static("view.js")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "Function("):
        assert sink not in script.replace("innerHTML with", "")  # the comment names none of them either
    assert "textContent" in script and 'responseType = "document"' in script


# -- the export ---------------------------------------------------------------------------------------------------


def test_the_export_is_one_file_with_nothing_external(box: Store, tmp_path: Path) -> None:
    mail = fill(box)
    target = tmp_path / "mail.html"
    assert httpd.export(box, target) == 4
    text = target.read_text()
    page = Markup(text)
    assert page.named("script") == [] and page.named("link") == [] and page.named("img") == []
    assert not any("src" in attrs for _, attrs in page.tags)
    assert not re.search(r"<[^>]*\bsrc\s*=", text, re.IGNORECASE)  # in no tag (the escaped subject says src= as text)
    hrefs = [attrs["href"] for _, attrs in page.tags if "href" in attrs]
    assert hrefs and all(h is not None and h.startswith("#m-") for h in hrefs)
    anchors = {attrs["id"] for _, attrs in page.tags if attrs.get("id")}
    assert {h[1:] for h in hrefs if h} <= anchors  # every link lands in the file
    assert "url(" not in text and "@import" not in text
    [style] = re.findall(r"<style>(.*?)</style>", text, re.DOTALL)
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    [policy] = [
        attrs["content"] for attrs in page.named("meta") if attrs.get("http-equiv") == "Content-Security-Policy"
    ]
    assert policy == f"default-src 'none'; style-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    words = page.words
    assert HOSTILE_SUBJECT in words and HOSTILE_BODY in words and QUOTED_REPO in words
    assert "Switched the list." in words and f"m-{mail.answer}" in anchors
    assert "<img src=x" not in text and "</script>" not in text.replace("&lt;/script&gt;", "")


def test_the_export_leaves_out_where_things_are_on_this_machine(
    cli: CliRunner, box: Store, repos: RepoFactory, tmp_path: Path, served: Client
) -> None:
    api, web = repos("api"), repos("web")
    sent = cli("send", "--to", "web", "-s", "hello", cwd=api)
    assert sent.code == 0 and cli("inbox", cwd=web).code == 0  # both names have a recorded path now
    target = tmp_path / "shared.html"
    assert cli("view", "--export", str(target)).code == 0
    text = target.read_text()
    assert "hello" in text and "api" in text and "web" in text
    for where in (box.path, api, web, box.path.parent.parent, tmp_path):
        assert str(where) not in text, where
    page = served("/").text  # the view served on this machine still shows them
    assert str(box.path) in page and str(web) in page


def test_the_export_replaces_a_file_whole_and_refuses_a_directory(cli: CliRunner, box: Store, tmp_path: Path) -> None:
    fill(box)
    target = tmp_path / "out.html"
    target.write_text("old")
    result = cli("view", "--export", str(target))
    assert (result.code, result.out, result.err) == (0, "", f"gitmail: wrote 4 conversations to {target}\n")
    assert target.read_text().startswith("<!doctype html>")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.html")] == []
    directory = cli("view", "--export", str(tmp_path))
    assert directory.code == 2 and directory.err.startswith("gitmail: error: ") and "is a directory" in directory.err
    missing = cli("view", "--export", str(tmp_path / "nowhere" / "x.html"))
    assert missing.code == 1 and missing.err.startswith("gitmail: error: cannot write ")
    both = cli("view", "--export", str(target), "--port", "8000")
    assert both.code == 2 and "leave out --port" in both.err


def test_an_empty_mailbox_exports_and_creates_nothing(cli: CliRunner, box: Store, tmp_path: Path) -> None:
    result = cli("view", "--export", str(tmp_path / "empty.html"))
    assert result.code == 0 and "wrote 0 conversations" in result.err
    assert "No messages yet." in (tmp_path / "empty.html").read_text()
    assert not box.path.exists()


# -- `gitmail view` as users run it --------------------------------------------------------------------------------


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_gitmail_view_prints_its_url_first_serves_and_stops_cleanly(box: Store, stop: signal.Signals) -> None:
    if stop is signal.SIGINT and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        pytest.skip("this test runs with Ctrl-C ignored (started in the background), and so would gitmail view")
    fill(box)
    process = subprocess.Popen(
        [sys.executable, "-m", "gitmail", "view", "--no-open"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        match = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]{40,})", url)
        assert match, url
        connection = http.client.HTTPConnection("127.0.0.1", int(match[1]), timeout=30)
        connection.request("GET", f"/?token={match[2]}")
        cookie = connection.getresponse().getheader("Set-Cookie") or ""
        connection.close()
        connection = http.client.HTTPConnection("127.0.0.1", int(match[1]), timeout=30)
        connection.request("GET", "/", headers={"Cookie": cookie.split(";")[0]})
        response = connection.getresponse()
        assert response.status == 200 and "Schema v2 is live" in response.read().decode()
        connection.close()
    finally:
        process.send_signal(stop)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 0
    assert err == "gitmail: serving the mailbox on 127.0.0.1; stop with Ctrl-C\ngitmail: stopped\n"


@pytest.mark.parametrize("browser", [True, False])
def test_gitmail_view_opens_the_page_in_a_browser_when_there_is_one(box: Store, tmp_path: Path, browser: bool) -> None:
    opened = tmp_path / "opened"
    record = tmp_path / "browser"
    record.write_text(f'#!/bin/sh\nprintf %s "$1" > {opened}.part && mv {opened}.part {opened}\n')
    record.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER")}
    if browser:
        env["BROWSER"] = str(record)
    process = subprocess.Popen(
        [sys.executable, "-m", "gitmail", "view"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        url = process.stdout.readline().strip()
        assert process.stderr.readline().startswith("gitmail: serving the mailbox")
        if browser:
            while not opened.exists() and process.poll() is None:  # the browser writes its ready file
                threading.Event().wait(0.01)
            assert opened.read_text() == url
        else:
            assert process.stderr.readline() == "gitmail: no graphical browser found: open the URL above in one\n"
    finally:
        process.terminate()
        _, rest = process.communicate(timeout=30)
    assert rest == "gitmail: stopped\n"
    assert opened.exists() is browser


def test_a_busy_port_is_one_clear_error(cli: CliRunner, box: Store) -> None:
    with httpd.Server(box) as taken:
        result = cli("view", "--no-open", "--port", str(taken.port))
    assert result.code == 1 and result.out == ""
    assert result.err == f"gitmail: error: cannot serve on 127.0.0.1 port {taken.port}: Address already in use\n"


def test_no_other_command_imports_the_view(tmp_path: Path) -> None:
    done, modules = loaded("--help", cwd=tmp_path)  # every command's options, built for the help
    assert done.returncode == 0 and "gitmail.cli.app" in modules, done.stderr
    assert not {m for m in modules if m == "jinja2" or m.startswith("gitmail.web.")}


# -- attachments ----------------------------------------------------------------------------------------------------

ATTACHED_HTML = b"<!doctype html><title>x</title><script>alert(document.cookie)</script><p>attached page</p>"
ATTACHED_SVG = b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(3)"><script>alert(4)</script></svg>'


def attach_hostile(box: Store, repos: RepoFactory) -> str:
    """A message carrying an HTML page and an SVG that would run script if shown, and a binary file."""
    from gitmail import actions
    from gitmail.workspace import Actor

    api = repos("api")
    (api / "x.html").write_bytes(ATTACHED_HTML)
    (api / "logo.svg").write_bytes(ATTACHED_SVG)
    (api / "données.bin").write_bytes(b"\0\1\2\3")
    sent = actions.send(
        box,
        Actor(RepoName("api"), str(api)),
        to="web",
        subject="Attached",
        body="see the files",
        attach=["x.html", "logo.svg", "données.bin"],
        base=api,
    )
    return sent.entry.message.id


def download(served: Client, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", served.server.port, timeout=30)
    try:
        connection.request(method, path, headers={"Host": served.server.host, "Cookie": served.cookie})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def test_attachments_are_listed_and_served_only_as_downloads(served: Client, box: Store, repos: RepoFactory) -> None:
    message_id = attach_hostile(box, repos)
    page = Markup(served(f"/thread/{message_id}").text)
    links = [attrs for attrs in page.named("a") if attrs.get("class") == "attachment"]
    assert [(a["href"], "download" in a) for a in links] == [
        (f"/attachment/{message_id}/x.html", True),
        (f"/attachment/{message_id}/logo.svg", True),
        (f"/attachment/{message_id}/donn%C3%A9es.bin", True),
    ]
    assert "x.html 90 bytes text/html" in page.words and "alert(document.cookie)" not in page.words
    for name, content, fallback in [
        ("x.html", ATTACHED_HTML, "x.html"),
        ("logo.svg", ATTACHED_SVG, "logo.svg"),
        ("donn%C3%A9es.bin", b"\0\1\2\3", "donn_es.bin"),
    ]:
        status, headers, body = download(served, f"/attachment/{message_id}/{name}")
        assert (status, body) == (200, content)
        assert headers["content-type"] == "application/octet-stream"
        assert headers["content-disposition"] == f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{name}"
        assert headers["content-security-policy"] == "sandbox; default-src 'none'"
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["cache-control"] == "no-store"
    status, headers, body = download(served, f"/attachment/{message_id}/x.html", method="HEAD")
    assert (status, body, headers["content-length"]) == (200, b"", str(len(ATTACHED_HTML)))
    assert download(served, f"/attachment/{message_id}/nothing.txt")[0] == 404
    assert download(served, "/attachment/0000000000/x.html")[0] == 404
    assert download(served, f"/attachment/{message_id}/..%2Fmessage.md")[0] == 404
    assert served(f"/attachment/{message_id}/x.html", cookie="").status == 403


def test_the_export_lists_attachments_without_their_content(box: Store, repos: RepoFactory, tmp_path: Path) -> None:
    attach_hostile(box, repos)
    target = tmp_path / "mail.html"
    httpd.export(box, target)
    text = target.read_text()
    page = Markup(text)
    assert "x.html 90 bytes text/html" in page.words and "données.bin 4 bytes" in page.words
    assert "/attachment/" not in text and "attached page" not in text and "alert(4)" not in text
