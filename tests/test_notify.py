"""Notifications: which mail needs the person, what a notification says (never the body unless asked), the push a
real loopback HTTP server receives from a real `gitmail send`, the cap under 30 urgent messages, the kill switch,
a refused URL, and the desktop channel on a real session bus where the machine has one."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from gitmail import mailbox, notify
from gitmail.store.repository import Store
from gitmail.values.names import PERSON
from tests.conftest import CliRunner, run_gitmail
from tests.hooked import Session
from tests.processes import ended


class Pushed(NamedTuple):
    path: str
    headers: dict[str, str]
    body: str


class Receiver:
    """A real HTTP server on 127.0.0.1 that keeps every POST it is sent."""

    def __init__(self) -> None:
        self.got: list[Pushed] = []
        received = self.got

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                data = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                received.append(Pushed(self.path, dict(self.headers.items()), data.decode()))
                self.send_response(200)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/gitmail-topic"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait(self, count: int, within: float = 20.0) -> list[Pushed]:
        end = time.monotonic() + within
        while len(self.got) < count and time.monotonic() < end:
            time.sleep(0.05)
        return list(self.got)


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)  # no desktop notification from a test
    found = Receiver()
    git_config("gitmail.notifyUrl", found.url)
    try:
        yield found
    finally:
        found.server.shutdown()
        found.server.server_close()


def git_config(key: str, value: str) -> None:
    subprocess.run(["git", "config", "--global", key, value], check=True)


def test_only_mail_for_the_person_and_urgent_mail_may_need_them(box: Store) -> None:
    to_person = mailbox.send(box, sender="api", to=PERSON, subject="q").message
    urgent = mailbox.send(box, sender="api", to="web", subject="now", urgency="now").message
    plain = mailbox.send(box, sender="api", to="web", subject="plain").message
    from_person = mailbox.send(box, sender=PERSON, to="web", subject="hi").message
    cast = mailbox.broadcast(box, sender="api", subject="all", urgency="now").message
    assert [notify.wanted(m) for m in (to_person, urgent, plain, from_person, cast)] == [
        True, True, False, False, False,
    ]  # fmt: skip
    assert notify.needs_person(box, to_person) and notify.needs_person(box, urgent)  # no session of web at all


def test_urgent_mail_a_live_session_can_take_needs_nobody(box: Store, web: Path) -> None:
    box.create()
    Session(web, "44444444-dddd")("session-start")
    Session(web, "44444444-dddd")("prompt")  # in a turn: live
    urgent = mailbox.send(box, sender="api", to="web", subject="now", urgency="now").message
    assert not notify.needs_person(box, urgent)


def test_a_note_names_sender_and_subject_never_the_body() -> None:
    message = mailbox_message(subject="May I drop v1?", body="secret details", urgency="now")
    note = notify.note_for(message, body=False, link="http://127.0.0.1:1/thread/x")
    assert note == notify.Note("gitmail: api is waiting on you", "May I drop v1?", True, "http://127.0.0.1:1/thread/x")
    assert "secret details" in notify.note_for(message, body=True, link=None).text


def mailbox_message(**fields: Any) -> Any:
    from datetime import UTC, datetime

    from gitmail.values.message import Message
    from gitmail.values.names import RepoName

    base = {"id": "7kq2m9x4ab", "sender": RepoName("api"), "to": PERSON, "date": datetime.now(UTC)}
    return Message(**{**base, **fields})


@pytest.mark.parametrize(
    ("url", "refused"),
    [
        ("https://ntfy.sh/mine", False),
        ("http://127.0.0.1:8080/t", False),
        ("http://localhost/t", False),
        ("http://[::1]:80/t", False),
        ("http://ntfy.sh/mine", True),
        ("ftp://127.0.0.1/t", True),
        ("file:///etc/passwd", True),
        ("https://", True),
    ],
)
def test_a_push_url_must_be_https_or_loopback(url: str, refused: bool) -> None:
    problem = notify.url_problem(url)
    assert (problem is not None) == refused
    if problem:
        assert problem.count("\n") == 0 and "only https, or http to 127.0.0.1" in problem


def test_a_real_send_pushes_title_sender_and_subject_without_the_body(receiver: Receiver, api: Path) -> None:
    sent = run_gitmail("send", "--to", "@user", "-u", "now", "-s", "May I drop v1?", "-m", "secret", cwd=api)
    assert sent.returncode == 0, sent.stderr
    [pushed] = receiver.wait(1)
    assert pushed.path == "/gitmail-topic"
    assert pushed.headers["Title"] == "gitmail: api is waiting on you" and pushed.headers["Priority"] == "5"
    assert pushed.body == "May I drop v1?"
    git_config("gitmail.notifyBody", "true")
    assert run_gitmail("send", "--to", "@user", "-s", "Second", "-m", "the details", cwd=api).returncode == 0
    second = receiver.wait(2)[1]
    assert second.headers["Title"] == "gitmail: api wrote to you" and second.body == "Second\n\nthe details"


def test_the_cap_holds_under_30_urgent_messages(receiver: Receiver, cli: CliRunner, api: Path) -> None:
    for n in range(30):
        assert cli("send", "--to", "@user", "-u", "now", "-s", f"urgent {n}", cwd=api).code == 0
    assert len(receiver.wait(notify.CAP)) == notify.CAP
    time.sleep(2.0)  # every notifier has had its turn by now
    assert len(receiver.got) == notify.CAP
    log = (Store().path / "gitmail.log").read_text() if (Store().path / "gitmail.log").exists() else ""
    assert "went out in the last 5 minutes" in log or len(receiver.got) == notify.CAP


def test_the_kill_switch_and_a_refused_url_send_nothing(receiver: Receiver, api: Path, box: Store) -> None:
    git_config("gitmail.notify", "false")
    assert run_gitmail("send", "--to", "@user", "-s", "quiet", cwd=api).returncode == 0
    ended(str(box.path))  # the notifier the send started has read the kill switch before it is turned back on
    message = mailbox.pending(box, repo=PERSON).directed[0].message
    assert notify.notify(box, [message.id], channels=[]) == []
    git_config("gitmail.notify", "true")
    git_config("gitmail.notifyUrl", "http://example.invalid/topic")
    assert [n.title for n in notify.notify(box, [message.id], channels=[])] == ["gitmail: api wrote to you"]
    time.sleep(1.0)
    assert receiver.got == []
    assert "is refused: only https" in notify.notify_status()[1]


def test_the_status_for_doctor_names_each_channel(receiver: Receiver) -> None:
    lines = notify.notify_status()
    assert lines[0].startswith("no desktop notifications: no desktop session bus here")
    assert lines[1] == f"pushes to {receiver.url}"


def test_a_desktop_notification_on_a_real_session_bus(api: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A private dbus-daemon, and on it a notification service (a small one made with jeepney, standing in for the
    desktop's): a real `gitmail send` to the person makes the notifier call Notify on it, with the right title."""
    if not shutil.which("dbus-daemon") or not shutil.which("gdbus"):
        pytest.skip("no dbus-daemon or gdbus here (Debian: apt-get install dbus-daemon libglib2.0-bin)")
    try:
        from jeepney import HeaderFields, MessageType, new_error, new_method_return
        from jeepney.bus_messages import message_bus
        from jeepney.io.blocking import open_dbus_connection
    except ImportError:
        pytest.skip("jeepney is not installed (pip install -e '.[test]')")
    daemon = subprocess.Popen(
        ["dbus-daemon", "--session", "--nofork", "--nopidfile", "--print-address=1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert daemon.stdout is not None
        address = daemon.stdout.readline().strip()
        service = open_dbus_connection(bus=address)
        service.send_and_get_reply(message_bus.RequestName("org.freedesktop.Notifications"))
        monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", address)
        sent = run_gitmail("send", "--to", "@user", "-u", "now", "-s", "<b>Deploy?</b>", "-m", "secret", cwd=api)
        assert sent.returncode == 0, sent.stderr
        shown: list[tuple[Any, ...]] = []
        end = time.monotonic() + 20
        while not shown and time.monotonic() < end:
            message = service.receive(timeout=end - time.monotonic())
            if message.header.message_type != MessageType.method_call:
                continue
            if message.header.fields.get(HeaderFields.member) == "Notify":
                shown.append(message.body)
                service.send(new_method_return(message, "u", (1,)))
            else:  # Introspect and the like: gdbus then reads its arguments as they are typed
                service.send(new_error(message, "org.freedesktop.DBus.Error.UnknownMethod"))
        service.close()
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)
    [(app, replaces, icon, title, body, actions, hints, timeout)] = shown
    assert (app, title) == ("gitmail", "gitmail: api is waiting on you")
    assert body == "&lt;b&gt;Deploy?&lt;/b&gt;" and "secret" not in body
    assert hints["urgency"] == ("y", 2)


def test_a_note_links_the_message_on_a_running_view(box: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    from gitmail.web import httpd

    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
    asked = mailbox.send(box, sender="api", to=PERSON, subject="q").message
    server = httpd.Server(box)
    runner = threading.Thread(target=server.serve_forever, daemon=True)
    runner.start()
    try:
        end = time.monotonic() + 10
        while not (box.path / "gitmail" / "view").exists() and time.monotonic() < end:
            time.sleep(0.02)
        [note] = notify.notify(box, [asked.id], channels=[])
        assert note.link == f"http://{server.host}/thread/{asked.id}#m-{asked.id}"
    finally:
        server.close()
        runner.join(timeout=10)
    assert not (box.path / "gitmail" / "view").exists()  # gone with the server
    assert notify.notify(box, [asked.id], channels=[])[0].link is None


def test_mail_for_the_person_that_a_sync_brings_in_is_notified_too(receiver: Receiver, tmp_path: Path) -> None:
    from tests.syncing import as_machine, bare_remote, machine

    remote = bare_remote(tmp_path / "remote.git")
    laptop, desk = machine(tmp_path, "laptop", str(remote)), machine(tmp_path, "desk", str(remote))
    mailbox.send(laptop, sender="api", to=PERSON, subject="Asked on the laptop")
    for store in (laptop, desk):
        done = subprocess.run(
            [sys.executable, "-m", "gitmail", "sync"], env=as_machine(store), capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
    [pushed] = receiver.wait(1)
    assert pushed.headers["Title"] == "gitmail: api wrote to you" and pushed.body == "Asked on the laptop"
