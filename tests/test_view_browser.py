"""`gitmail view` in a real browser: headless Chromium (Debian's) driven by Playwright loads the page the real
process serves, finds the thread of a sent-and-replied message, sees new mail arrive without a reload, and runs
none of the hostile content. Skipped, with the reason, only where Chromium or Playwright cannot be had."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from gitmail import mailbox
from gitmail.store.repository import Store
from tests.conftest import RepoFactory, at
from tests.test_view import HOSTILE_BODY, HOSTILE_SUBJECT, fill

if TYPE_CHECKING:
    from playwright.sync_api import Dialog, Page

CHROMIUM = "/usr/bin/chromium"
# Headless, and quiet on a closed network: no background requests, updates or sync.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def url(box: Store) -> Iterator[str]:
    """The URL a real `gitmail view` process printed, serving the test's mailbox until the test ends."""
    process = subprocess.Popen(
        [sys.executable, "-m", "gitmail", "view", "--no-open"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        yield process.stdout.readline().strip()
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture
def page() -> Iterator[Page]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"no Chromium at {CHROMIUM} (Debian: apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("Playwright is not installed (pip install -e '.[test]')")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            yield browser.new_page(viewport={"width": 1100, "height": 760})
        finally:
            browser.close()


def test_the_page_finds_a_replied_thread_and_shows_new_mail_without_a_reload(
    box: Store, url: str, page: Page, tmp_path: Path
) -> None:
    mail = fill(box)
    problems: list[str] = []
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))

    def dialog(opened: Dialog) -> None:  # alert(1) from a hostile subject would open one
        problems.append(f"a dialog opened: {opened.message}")
        opened.dismiss()

    page.on("dialog", dialog)

    page.goto(url)
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", page.url)  # the token went into a cookie, out of the address
    assert page.title() == "Mailbox · gitmail"
    page.locator("li.conversation", has_text="Schema v2 is live").locator("a.subject").click()
    page.wait_for_url(re.compile(f"/thread/{mail.question}"))
    cards = page.locator("article.message")
    assert cards.count() == 2
    assert cards.nth(0).get_attribute("class") == "message depth-0 state-archived focus"
    assert cards.nth(1).get_attribute("class") == "message depth-1 state-pending"
    assert "Orders have a status column." in cards.nth(0).inner_text()
    assert "Switched the list." in cards.nth(1).inner_text()

    page.evaluate("window.stillTheSamePage = true")
    later = mailbox.reply(box, sender="api", to_id=mail.answer, body="Thanks, that works.", when=at(40))
    page.locator(f"#m-{later.message.id}").wait_for(timeout=15_000)
    assert page.evaluate("window.stillTheSamePage") is True
    assert page.locator("#live").inner_text().startswith("updated")
    assert cards.count() == 3 and cards.nth(2).get_attribute("class") == "message depth-2 state-pending"
    shot = tmp_path / "thread.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    page.goto(url.split("/?")[0] + f"/thread/{mail.hostile}")
    assert page.locator("img").count() == 0
    assert page.locator(f"#m-{mail.hostile} h3.subject").inner_text() == HOSTILE_SUBJECT
    assert page.locator(f"#m-{mail.hostile} pre.body").inner_text() == HOSTILE_BODY
    page.goto(url.split("/?")[0] + "/")
    assert page.locator("text=" + HOSTILE_SUBJECT).count() >= 1
    assert problems == []


def test_an_html_attachment_is_only_ever_downloaded(box: Store, url: str, page: Page, repos: RepoFactory) -> None:
    """An attachment named x.html that holds a script: its link downloads it, and opening its address directly
    downloads it too; it is never shown as a page of the view, and its script never runs."""
    from tests.test_view import ATTACHED_HTML, attach_hostile

    message_id = attach_hostile(box, repos)
    problems: list[str] = []

    def dialog(opened: Dialog) -> None:
        problems.append(f"a dialog opened: {opened.message}")
        opened.dismiss()

    page.on("dialog", dialog)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.goto(url)
    page.goto(url.split("/?")[0] + f"/thread/{message_id}")
    link = page.locator("a.attachment", has_text="x.html")
    assert link.get_attribute("download") is not None
    with page.expect_download() as started:
        link.click()
    download = started.value
    assert download.suggested_filename == "x.html"
    assert Path(download.path()).read_bytes() == ATTACHED_HTML
    assert page.url.endswith(f"/thread/{message_id}")  # still the view's page: nothing navigated to the file

    with page.expect_download() as direct:
        try:
            page.goto(url.split("/?")[0] + f"/attachment/{message_id}/x.html")
        except Exception as error:  # Chromium reports a navigation that became a download as an error
            assert "Download is starting" in str(error)
    assert direct.value.suggested_filename == "x.html"
    assert "attached page" not in page.content()
    page.wait_for_timeout(500)
    assert problems == []
