"""The page's answers in the real Chromium: the person replies to a session's question and the session's next hook
carries the answer, marks done and reopens, writes to a repository, a live session and every repository; a double
click sends once, a replayed token, a missing one and a form posted from another origin are refused; hostile names,
subjects, cards and attachment names stay text in every form and list. Skipped, with the reason, where Chromium or
Playwright cannot be had (the fixtures of test_view_browser.py)."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from gitmail import mailbox
from gitmail.store.repository import Store
from gitmail.values.layout import State
from gitmail.values.names import PERSON
from tests.conftest import RepoFactory, run_gitmail
from tests.hooked import Session
from tests.test_view import HOSTILE_BODY, HOSTILE_SUBJECT, fill
from tests.test_view_browser import page, url  # noqa: F401  (the fixtures)

if TYPE_CHECKING:
    from playwright.sync_api import Dialog, Page

HOSTILE_CARD = "<img src=y onerror=alert(3)>"


def watched(tab: Page) -> list[str]:
    """What went wrong on the page: script errors, console errors, and any dialog a hostile value opened."""
    problems: list[str] = []

    def dialog(opened: Dialog) -> None:
        problems.append(f"a dialog opened: {opened.message}")
        opened.dismiss()

    tab.on("dialog", dialog)
    tab.on("pageerror", lambda error: problems.append(str(error)))
    tab.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    return problems


def sent_id(tab: Page) -> str:
    tab.wait_for_url(re.compile(r"/thread/[a-z0-9]{10}"))
    found = re.search(r"/thread/([a-z0-9]{10})", tab.url)
    assert found, tab.url
    return found[1]


def test_the_person_answers_a_session_from_the_page(box: Store, url: str, page: Page, api: Path) -> None:  # noqa: F811
    problems = watched(page)
    box.create()
    asking = Session(api, "11111111-aaaa")
    asking("session-start")
    assert asking.gitmail("session", "--name", "builder", "--card", HOSTILE_CARD).returncode == 0
    asked = asking.send("--to", "@user", "-u", "now", "-s", "May I drop v1?", "-m", "No callers left.")
    other = mailbox.send(box, sender="web", to="api", subject="A note for api")

    page.goto(url)
    first = page.locator("main section").first
    assert "For you" in first.inner_text() and "May I drop v1?" in first.inner_text()
    card = page.locator(f"#m-{asked}")
    card.locator("textarea[name=body]").fill("Yes, drop it.")
    card.locator("button", has_text="Send reply").click()
    answer = sent_id(page)
    message = mailbox.show(box, answer).message
    assert (message.sender, message.reply_to, message.to_session) == (PERSON, asked, "claude:11111111-aaaa")
    assert "> Yes, drop it." in asking("prompt")  # the asking session's next hook answer carries it
    assert mailbox.show(box, asked).state is State.ARCHIVED
    sent = run_gitmail("log", "--sent", cwd=api).stdout
    assert f"replied {answer}" in sent

    page.goto(url.split("/?")[0] + f"/thread/{other.message.id}")
    page.locator(f"#m-{other.message.id} button", has_text="Mark done").click()
    page.wait_for_load_state()
    assert mailbox.show(box, other.message.id).state is State.ARCHIVED
    page.locator(f"#m-{other.message.id} button", has_text="Reopen").click()
    page.wait_for_load_state()
    page.locator(f"#m-{other.message.id} button", has_text="Mark done").wait_for()
    assert mailbox.show(box, other.message.id).state is State.PENDING

    for to, subject in (("web", "to a repository"), ("api#builder", "to a session"), ("*", "to every repository")):
        page.goto(url.split("/?")[0] + "/")
        form = page.locator("form.compose")
        form.locator("input[name=to]").fill(to)
        form.locator("input[name=subject]").fill(subject)
        form.locator("textarea[name=body]").fill("From the page.")
        form.locator("select[name=urgency]").select_option("low")
        form.locator("button", has_text="Send").click()
        written = mailbox.show(box, sent_id(page)).message
        assert (written.subject, written.sender, written.urgency) == (subject, PERSON, "low")
    assert mailbox.show(box, sent_id(page)).message.is_broadcast
    assert problems == []


def test_a_double_click_sends_once_and_a_spent_or_missing_token_is_refused(
    box: Store,
    url: str,  # noqa: F811
    page: Page,  # noqa: F811
) -> None:
    problems = watched(page)
    mailbox.send(box, sender="api", to="web", subject="so there is a repository")
    page.goto(url)
    form = page.locator("form.compose")
    form.locator("input[name=to]").fill("web")
    form.locator("input[name=subject]").fill("once only")
    form.locator("button", has_text="Send").dblclick()
    sent_id(page)
    page.wait_for_timeout(300)
    assert [e.message.subject for e in mailbox.pending(box, repo="web").directed].count("once only") == 1

    page.goto(url.split("/?")[0] + "/")
    statuses = page.evaluate(
        """async () => {
            const data = new FormData(document.querySelector("form.compose"));
            data.set("to", "web"); data.set("subject", "replayed");
            const first = await fetch("/act/compose", {method: "POST", body: data});
            const again = await fetch("/act/compose", {method: "POST", body: data});
            return [first.status, again.status, await again.text()];
        }"""
    )
    assert statuses[0] == 200 and statuses[1] == 409 and "already sent" in statuses[2]  # 303 followed, then refused
    assert [e.message.subject for e in mailbox.pending(box, repo="web").directed].count("replayed") == 1

    page.goto(url.split("/?")[0] + "/")
    page.evaluate('document.querySelector("form.compose input[name=token]").remove()')
    form = page.locator("form.compose")
    form.locator("input[name=to]").fill("web")
    form.locator("input[name=subject]").fill("no token")
    form.locator("button", has_text="Send").click()
    page.wait_for_load_state()
    assert "carries no token" in page.content()
    assert not [e for e in mailbox.pending(box, repo="web").directed if e.message.subject == "no token"]
    # the refusals' own statuses (and the error page's favicon) are the only complaints
    assert [p for p in problems if not p.startswith("Failed to load resource")] == []


class _Attacker(BaseHTTPRequestHandler):
    page = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(self.page)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def attacker() -> Iterator[tuple[ThreadingHTTPServer, type[_Attacker]]]:
    handler = type("Handler", (_Attacker,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server, handler
    finally:
        server.shutdown()
        server.server_close()


def test_a_form_posted_from_another_origin_is_refused(
    box: Store,
    url: str,  # noqa: F811
    page: Page,  # noqa: F811
    attacker: tuple[ThreadingHTTPServer, type[_Attacker]],
) -> None:
    """Another port of 127.0.0.1 is the same site, so the browser even sends the cookie: the Origin check refuses
    it, with a token the attacker somehow had."""
    mailbox.send(box, sender="api", to="web", subject="exists")
    page.goto(url)
    token = page.locator("form.compose input[name=token]").get_attribute("value")
    base = url.split("/?")[0]
    server, handler = attacker
    handler.page = (
        f'<form id="f" method="post" action="{base}/act/compose"><input name="token" value="{token}">'
        '<input name="to" value="web"><input name="subject" value="forged"></form>'
        '<script>document.getElementById("f").submit()</script>'
    ).encode()
    page.goto(f"http://127.0.0.1:{server.server_address[1]}/")
    page.wait_for_url(re.compile(re.escape(base) + "/act/compose"))
    assert "only from this page" in page.content()
    assert not [e for e in mailbox.pending(box, repo="web").directed if e.message.subject == "forged"]


def test_hostile_values_stay_text_in_every_form_and_list(
    box: Store,
    url: str,  # noqa: F811
    page: Page,  # noqa: F811
    api: Path,
    repos: RepoFactory,
) -> None:
    from tests.test_view import attach_hostile

    problems = watched(page)
    mail = fill(box)
    attached = attach_hostile(box, repos)
    box.create()
    session = Session(api, "22222222-bbbb")
    session("session-start")
    assert session.gitmail("session", "--card", HOSTILE_CARD).returncode == 0
    asked = session.send("--to", "@user", "-s", HOSTILE_SUBJECT, "-m", HOSTILE_BODY)
    page.goto(url)
    assert page.locator(f"#m-{asked} h3.subject").inner_text() == HOSTILE_SUBJECT
    assert page.locator(f"#m-{asked} pre.body").inner_text() == HOSTILE_BODY
    assert page.locator("img").count() == 0
    for path in (f"/thread/{mail.hostile}", f"/thread/{attached}", "/repo/api", f"/thread/{mail.quoted}"):
        page.goto(url.split("/?")[0] + path)
        assert page.locator("img").count() == 0
        assert page.locator("form[method=post]" if "/thread/" in path else "a.write").count() >= 1
    served = page.goto(url.split("/?")[0] + "/repo/api")
    assert served is not None and HOSTILE_CARD not in served.text()  # escaped in the markup
    assert page.locator("span.card").inner_text() == HOSTILE_CARD
    page.wait_for_timeout(300)
    assert problems == []
