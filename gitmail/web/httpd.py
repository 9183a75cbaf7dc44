"""`gitmail view`: the mailbox as a read-only web page on 127.0.0.1, and the same view exported to one HTML file.

The server is the standard library's ThreadingHTTPServer: a handful of GET routes over one in-memory index needs no
framework. Safety does not rest on care in each template: Jinja2 escapes every value it prints, the pages run under
a Content-Security-Policy that allows only the app's own script and stylesheet and enforces Trusted Types (so no
script can assign HTML strings at all), the server binds 127.0.0.1 only, answers only requests whose Host is the
address it serves (DNS rebinding), only with the random token it printed (then a cookie), and only GET and HEAD,
but for the person's answers (answering.py): POSTs from the page itself, each with a one-use token, unless the view
is read-only.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import http.cookies
import io
import os
import re
import secrets
import threading
import time
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

import jinja2

from gitmail import actions
from gitmail.errors import GitmailError, NotFound, Unwritable, UsageError
from gitmail.render.lease_lines import lease_line as line
from gitmail.render.words import visible as escaped
from gitmail.store.files import write_atomically
from gitmail.values.attachments import size_text
from gitmail.values.names import PERSON, RepoName, name_problem
from gitmail.web import answering, pages, snapshot

if TYPE_CHECKING:
    import socket
    from collections.abc import Mapping
    from pathlib import Path

    from gitmail.store.repository import Store
    from gitmail.web.snapshot import Snapshot

POLL_SECONDS = 1  # how often an open page asks whether the mailbox changed (a stat of the ref files: cheap)
IDLE_SECONDS = 30.0  # how long a connection may wait to send its request (or the rest of it) before it is closed
_ALL = 1_000_000  # "no limit" for lists shown whole (a repo's waiting mail, the export's)
_STATIC = {
    "/static/view.css": ("view.css", "text/css; charset=utf-8"),
    "/static/view.js": ("view.js", "text/javascript; charset=utf-8"),
    "/static/favicon.svg": ("favicon.svg", "image/svg+xml"),
}
# An attachment is only ever downloaded: never rendered as a page of this origin, never sniffed into HTML, and
# sandboxed should anything still open it.
_DOWNLOAD_POLICY = "sandbox; default-src 'none'"
_SERVED_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'; "
    "require-trusted-types-for 'script'; trusted-types 'none'"
)


# -- the pages -----------------------------------------------------------------------------------------------------


class Links:
    """Where a page's links go when it is served: one route per view."""

    live = True

    def thread(self, message_id: str) -> str:
        return f"/thread/{message_id}#m-{message_id}"

    def message(self, message_id: str) -> str:
        return f"/message/{message_id}"

    def repo(self, name: str) -> str | None:
        return "/repo/" + quote(name, safe="")

    def attachment(self, message_id: str, name: str) -> str | None:
        return f"/attachment/{message_id}/" + quote(name, safe="")


class ExportLinks(Links):
    """In an exported file every thread is on the one page: links are anchors within it."""

    live = False

    def thread(self, message_id: str) -> str:
        return f"#m-{message_id}"

    def message(self, message_id: str) -> str:
        return f"#m-{message_id}"

    def repo(self, name: str) -> str | None:
        return None

    def attachment(self, message_id: str, name: str) -> str | None:
        return None  # an export lists attachments, never their content


def visible(text: object) -> str:
    """Control characters, bidirectional overrides and invisible format characters (a zero-width space in a name)
    shown as escapes, as everywhere gitmail shows text, instead of acting on the page's text or hiding in it. Line
    breaks and tabs stay (bodies are shown as written), and so do the joiners emoji and some scripts need."""
    lines = str(text).replace("\r\n", "\n").split("\n")
    return "\n".join("\t".join(escaped(part, joiners=True) for part in line.split("\t")) for line in lines)


def when(date: datetime) -> str:
    return date.strftime("%Y-%m-%d %H:%M %z")


def ago(date: datetime, now: datetime | None = None) -> str:
    seconds = max(0, int(((now or datetime.now(UTC)) - date).total_seconds()))
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds >= size:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return "under a minute"


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("gitmail.web", "templates"),
        autoescape=True,  # every value printed is escaped, whatever the template's file name
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        visible=visible, when=when, ago=ago, epoch_ago=lambda t: ago(datetime.fromtimestamp(t, UTC)), size=size_text
    )
    return env


def static(name: str) -> str:
    return (resources.files("gitmail.web") / "templates" / name).read_text(encoding="utf-8")


def render(template: str, snap: Snapshot, *, links: Links, **context: Any) -> str:
    context.setdefault("tokens", None)  # the forms' tokens: None where nothing may be written (export, read-only)
    return (
        environment()
        .get_template(template)
        .render(snap=snap, links=links, mailbox=str(snap.store.path), poll=POLL_SECONDS, **context)
    )


# -- export --------------------------------------------------------------------------------------------------------


def export(store: Store, target: Path) -> int:
    """Write the whole view to one self-contained HTML file (styles inline, no script, nothing fetched); returns
    how many conversations it holds. Written aside and renamed into place, so a failure leaves no half file. An
    export is made to be shared: it leaves out where things are on this machine (the mailbox's path, the paths of
    the repositories that use each name), which the served view shows."""
    snap = snapshot.load(store)
    css = static("view.css")
    digest = base64.b64encode(hashlib.sha256(css.encode()).digest()).decode()
    policy = f"default-src 'none'; style-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    chunks = (
        environment()
        .get_template("export.html")
        .generate(
            snap=snap,
            links=ExportLinks(),
            mailbox="",  # not shown: see above
            overview=pages.overview(snap),
            waiting=pages.waiting(snap, limit=_ALL),
            threads=pages.every_thread(snap),
            css=css,
            policy=policy,
            made=datetime.now(UTC).astimezone(),
        )
    )
    target = target.expanduser()
    if target.is_dir():
        raise UsageError(f"{target} is a directory; name the file to write, e.g. {target / 'mailbox.html'}")
    try:  # made to be shared, so readable by others as any file the user writes
        write_atomically(target, (chunk.encode() for chunk in chunks), durable=False, mode=0o644)
    except Unwritable as error:  # the file named, not the mailbox
        raise GitmailError(f"cannot write {target}: {error.reason}") from None
    return len(snap.index.order)


def open_browser(url: str) -> bool:
    """Open the page in the user's browser, unless only a terminal browser could be found: that would take over
    the terminal the server runs in. False when nothing was opened."""
    import sys
    import webbrowser

    graphical = sys.platform in ("darwin", "win32") or any(
        os.environ.get(name) for name in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER")
    )
    try:
        return graphical and webbrowser.open(url)
    except webbrowser.Error:
        return False


def stop_on_terminate() -> None:
    """Let `kill` (SIGTERM) stop the server as Ctrl-C does, cleanly; a process started in the background ignores
    Ctrl-C's signal, so SIGTERM is how scripts stop it. Main thread only."""
    import signal

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)


# -- the server ----------------------------------------------------------------------------------------------------


class Server:
    """The view of one mailbox on 127.0.0.1: `url` carries the token, `serve_forever` answers until `close`."""

    def __init__(self, store: Store, *, port: int = 0, read_only: bool = False) -> None:
        self.store = store
        self.read_only = read_only
        self.snapshot = snapshot.load(store)  # read before the URL is given out: the first page is quick
        for name in ("overview.html", "thread.html", "error.html"):
            environment().get_template(name)  # compiled now for the same reason
        self.secret = secrets.token_urlsafe(32)
        self.tokens = None if read_only else answering.Tokens(self.secret)
        self.notes: dict[str, tuple[str, ...]] = {}  # what the action layer said of a message the page wrote
        self._refreshing = threading.Lock()
        try:
            self.httpd = _HTTPServer(("127.0.0.1", port), _Handler)
        except OSError as error:
            where = f"port {port}" if port else "a free port"
            raise GitmailError(f"cannot serve on 127.0.0.1 {where}: {error.strerror or error}") from None
        self.httpd.view = self
        self.port = self.httpd.server_address[1]
        self.host = f"127.0.0.1:{self.port}"
        self.cookie = f"gitmail-view-{self.port}"  # one per port: two views side by side keep their own

    @property
    def url(self) -> str:
        return f"http://{self.host}/?token={self.secret}"

    def current(self) -> Snapshot:
        """The mailbox as it is now; one request at a time brings the index up to date."""
        with self._refreshing:
            self.snapshot = snapshot.load(self.store, self.snapshot)
            return self.snapshot

    def serve_forever(self) -> None:
        self._announce(True)
        try:
            self.httpd.serve_forever(poll_interval=0.2)
        finally:
            self._announce(False)

    def told(self, message_id: str, notes: tuple[str, ...]) -> None:
        """Keep what the action layer said of a write, for the message's page (the last 100 writes)."""
        if notes:
            self.notes[message_id] = notes
            while len(self.notes) > 100:
                self.notes.pop(next(iter(self.notes)))

    def _announce(self, serving: bool) -> None:
        """Say where the page is (without its token) in gitmail/view while it serves, for notifications' links."""
        path = self.store.path / "gitmail" / "view"
        base = f"http://{self.host}"
        try:
            if serving and self.store.exists():
                write_atomically(path, (base + "\n").encode(), durable=False)
            elif not serving and path.read_text().strip() == base:
                path.unlink()
        except (OSError, GitmailError):
            pass  # only a notification's link is lost

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.server_close()


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True  # an open page's connection never keeps the process from stopping
    view: Server


class _Response(Exception):
    """Stop handling a request with this answer."""

    def __init__(self, status: HTTPStatus, text: str = "", headers: Mapping[str, str] | None = None) -> None:
        super().__init__(text)
        self.status, self.text, self.headers = status, text, dict(headers or {})


class _Deadline(io.RawIOBase):
    """A connection's reads, each allowed only what is left of the time the whole request may take: a client that
    sends a byte now and then never resets the clock, as a timeout on each read would."""

    def __init__(self, connection: socket.socket) -> None:
        self.connection = connection
        self.until = time.monotonic()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self.until - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request took too long to arrive")
        self.connection.settimeout(left)
        return self.connection.recv_into(buffer)


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    server_version = "gitmail-view"
    sys_version = ""
    timeout = IDLE_SECONDS  # a connection whose next request has not arrived whole this long after it began is closed

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # the plain file of the connection: reads go through the deadline instead
        self.reads = _Deadline(self.connection)
        self.rfile = io.BufferedReader(self.reads)

    def handle_one_request(self) -> None:
        self.reads.until = time.monotonic() + (self.timeout or IDLE_SECONDS)  # for this request, however it trickles
        super().handle_one_request()

    def do_GET(self) -> None:
        self._answer(head=False)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def do_POST(self) -> None:
        if self.server.view.read_only:
            self._answer(head=False, allowed=False)
            return
        self.connection.settimeout(self.timeout)
        try:
            status, content_type, body, extra = self._post()
        except _Response as response:
            status, content_type = response.status, "text/html; charset=utf-8"
            body = _error_page(response.status, response.text).encode() if response.text else b""
            extra = response.headers
        self._send(status, content_type, body, extra, head=False)
        self.close_connection = True  # a refused body may not have been read whole

    def _post(self) -> tuple[HTTPStatus, str, bytes, dict[str, str]]:
        """One of the person's answers: checked whole (host, cookie, origin, size, token) before it is acted on."""
        view = self.server.view
        assert view.tokens is not None
        if self.headers.get("Host") != view.host:
            raise _Response(HTTPStatus.FORBIDDEN, f"This server answers only requests for {view.host}.")
        url = urlsplit(self.path)
        if url.path not in answering.PATHS:
            raise _Response(HTTPStatus.METHOD_NOT_ALLOWED, "Only GET, HEAD here.", {"Allow": "GET, HEAD"})
        self._authorise(url.path, {})
        problem = answering.origin_problem(self.headers.get("Origin"), view.host)
        if problem:
            raise _Response(HTTPStatus.FORBIDDEN, problem)
        length = self.headers.get("Content-Length", "")
        limit = actions.attachment_limits(view.store)[0] * 2 + answering.FIELD_BYTES  # base64-free multipart
        if not length.isdigit():
            raise _Response(HTTPStatus.LENGTH_REQUIRED, "A form must say its length.")
        if int(length) > limit:
            raise _Response(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "The form is larger than a message may carry.")
        data = self.rfile.read(int(length))
        try:
            form = answering.parse(self.headers.get("Content-Type", ""), data)
            nonce = view.tokens.spend(form.get("token"))
        except answering.Refused as refused:
            raise _Response(HTTPStatus(refused.status), refused.text) from None
        try:
            done = answering.act(view.store, url.path, form)
        except NotFound as error:
            view.tokens.release(nonce)
            raise _Response(HTTPStatus.NOT_FOUND, str(error)) from None
        except GitmailError as error:  # the action layer's own words; nothing was written
            view.tokens.release(nonce)
            raise _Response(HTTPStatus.BAD_REQUEST, str(error)) from None
        except BaseException:
            view.tokens.release(nonce)
            raise
        view.tokens.answered(nonce, done.location.partition("#")[0])
        view.told(done.message_id, done.notes)
        return HTTPStatus.SEE_OTHER, "text/html; charset=utf-8", b"", {"Location": done.location}

    def __getattr__(self, name: str) -> Any:
        # http.server looks up `do_<METHOD>` for each request: every other method is refused the same way.
        if name.startswith("do_"):
            return lambda: self._answer(head=False, allowed=False)
        raise AttributeError(name)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # request lines carry the token; nothing is logged

    def _answer(self, *, head: bool, allowed: bool = True) -> None:
        self.connection.settimeout(self.timeout)  # the answer gets the whole time to go out, not what the reads left
        view = self.server.view
        try:
            if self.headers.get("Host") != view.host:
                raise _Response(HTTPStatus.FORBIDDEN, f"This server answers only requests for {view.host}.")
            url = urlsplit(self.path)
            form = url.path in answering.PATHS and not view.read_only
            if not allowed or form:
                allow = "POST" if form else "GET, HEAD"
                said = "This view is read-only: GET and HEAD only." if view.read_only else f"Only {allow} here."
                raise _Response(HTTPStatus.METHOD_NOT_ALLOWED, said, {"Allow": allow})
            query = parse_qs(url.query, keep_blank_values=True)
            self._authorise(url.path, query)
            status, content_type, body, extra = self._route(url.path, query)
        except _Response as response:
            status, content_type = response.status, "text/html; charset=utf-8"
            body = _error_page(response.status, response.text).encode() if response.text else b""
            extra = response.headers
        except Exception:  # a bug: the page says so, the traceback goes to the terminal that runs the server
            text = "Something went wrong in gitmail view; the terminal running it shows what."
            self._send(
                HTTPStatus.INTERNAL_SERVER_ERROR,
                "text/html; charset=utf-8",
                _error_page(HTTPStatus.INTERNAL_SERVER_ERROR, text).encode(),
                {},
                head=head,
            )
            raise
        self._send(status, content_type, body, extra, head=head)

    def _authorise(self, path: str, query: dict[str, list[str]]) -> None:
        view = self.server.view
        given = query.get("token", [""])[-1]
        if given:
            if not hmac.compare_digest(given.encode(), view.secret.encode()):
                raise _Response(HTTPStatus.FORBIDDEN, "This link's token is not this server's.")
            rest = urlencode([(k, v) for k, values in query.items() if k != "token" for v in values], doseq=True)
            cookie = f"{view.cookie}={view.secret}; Path=/; HttpOnly; SameSite=Strict"
            here = "/" + path.lstrip("/\\")  # never "//host" or "/\\host", which a browser takes for another site
            location = here + (f"?{rest}" if rest else "")
            raise _Response(HTTPStatus.SEE_OTHER, "", {"Location": location, "Set-Cookie": cookie})
        jar = http.cookies.SimpleCookie()
        try:
            jar.load(self.headers.get("Cookie", ""))
        except http.cookies.CookieError:
            pass
        held = jar.get(view.cookie)
        if held is None or not hmac.compare_digest(held.value.encode(), view.secret.encode()):
            raise _Response(
                HTTPStatus.FORBIDDEN, "Open this view with the link `gitmail view` printed: it carries a token."
            )

    def _route(self, path: str, query: dict[str, list[str]]) -> tuple[HTTPStatus, str, bytes, dict[str, str]]:
        if path in _STATIC:
            name, kind = _STATIC[path]
            return HTTPStatus.OK, kind, static(name).encode(), {}
        view = self.server.view
        try:
            snap = view.current()
            if path == "/changes":
                return HTTPStatus.OK, "application/json", f'{{"token": "{snap.token}"}}'.encode(), {}
            if path.startswith("/attachment/"):
                return _download(snap, path)
            html = self._page(snap, path, query)
        except NotFound as error:
            raise _Response(HTTPStatus.NOT_FOUND, str(error)) from None
        except UsageError as error:
            raise _Response(HTTPStatus.BAD_REQUEST, str(error)) from None
        except GitmailError as error:
            raise _Response(HTTPStatus.SERVICE_UNAVAILABLE, f"The mailbox cannot be read: {error}") from None
        return HTTPStatus.OK, "text/html; charset=utf-8", html.encode(), {}

    def _page(self, snap: Snapshot, path: str, query: dict[str, list[str]]) -> str:
        links = Links()
        page = _number(query.get("page", ["1"])[-1])
        text = query.get("q", [""])[-1]

        def page_url(number: int) -> str:
            return path + "?" + urlencode({"q": text, "page": number} if path == "/search" else {"page": number})

        def show(template: str, **context: Any) -> str:
            return render(template, snap, links=links, page_url=page_url, tokens=self.server.view.tokens, **context)

        parts = path.split("/")
        if path == "/":
            return show(
                "overview.html",
                overview=pages.overview(snap, page=page),
                person=pages.waiting(snap, repo=PERSON, limit=_ALL),
                sessions=(here := actions.sessions_here(snap.store, None, all_repos=True) if snap.exists else []),
                addresses=self._addresses(snap, here) if self.server.view.tokens is not None else (),
                to=query.get("to", [""])[-1],
                leases=[line(v) for v in actions.all_leases(snap.store)] if snap.exists else [],
                back=path,
            )
        if path == "/broadcasts":
            return show("broadcasts.html", broadcasts=pages.broadcasts(snap, page=page))
        if path == "/search":
            if "\0" in text:
                raise _Response(HTTPStatus.BAD_REQUEST, "A search cannot hold a NUL character.")
            return show("search.html", query=text, results=pages.search(snap, text, page=page))
        if len(parts) != 3 or parts[1] not in ("thread", "message", "repo") or not parts[2]:
            raise NotFound(f"nothing at {path}")
        try:
            name = unquote(parts[2], errors="strict")
        except UnicodeDecodeError:
            raise NotFound(f"nothing at {path}") from None
        if parts[1] == "thread":
            notes = self.server.view.notes.get(name, ())
            return show("thread.html", thread=pages.thread(snap, name), focus=name, back=path, notes=notes)
        if parts[1] == "message":
            item, replies = pages.message(snap, name)
            return show("message.html", item=item, replies=replies, back=path)
        known = {str(r.name): r for r in pages.repos(snap)}
        if name not in known:
            raise NotFound(f"no repo named {name!r} has used this mailbox")
        return show(
            "repo.html",
            repo=known[name],
            sessions=actions.sessions_here(snap.store, RepoName(name)) if not name_problem(name) else None,
            leases=[line(v) for v in actions.leases_here(snap.store, RepoName(name))] if not name_problem(name) else [],
            waiting=pages.waiting(snap, repo=name, limit=_ALL),
            conversations=pages.conversations(snap, repo=name, page=page),
        )

    def _addresses(self, snap: Snapshot, sessions: list[actions.SessionView]) -> list[str]:
        """Whom the compose form offers: every repository, then each live session by its address."""
        names = [str(r.name) for r in pages.repos(snap) if not r.name.is_person]
        live = [v.address for v in sessions if v.info.state != "ended"]
        # A name holding an invisible or control character is not offered (the list would show it as it is, not
        # as the escape every other place shows); it can still be typed.
        return [a for a in [*names, *sorted(set(live))] if escaped(a) == a]

    def _send(
        self, status: HTTPStatus, content_type: str, body: bytes, extra: Mapping[str, str], *, head: bool
    ) -> None:
        try:
            self.send_response(status)
            headers = {
                "Content-Type": content_type,
                "Content-Length": str(len(body)),
                "Content-Security-Policy": _SERVED_POLICY,
                "X-Content-Type-Options": "nosniff",
                "Referrer-Policy": "same-origin",  # a form's POST names its Origin; no other site hears of a page
                "X-Frame-Options": "DENY",
                "Cross-Origin-Opener-Policy": "same-origin",
                "Cross-Origin-Resource-Policy": "same-origin",
                "Cache-Control": "no-store",
                **extra,
            }
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            if not head:
                self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the browser went away


def _download(snap: Snapshot, path: str) -> tuple[HTTPStatus, str, bytes, dict[str, str]]:
    """An attachment, as a download only: whatever it holds (HTML, SVG, a script), the browser saves it and never
    shows it as a page: `Content-Disposition: attachment`, a type no browser renders, no sniffing, a sandbox."""
    parts = path.split("/")
    if len(parts) != 4 or not parts[2] or not parts[3]:
        raise NotFound(f"nothing at {path}")
    try:
        name = unquote(parts[3], errors="strict")
    except UnicodeDecodeError:
        raise NotFound(f"nothing at {path}") from None
    item, content = pages.attachment(snap, parts[2], name)
    fallback = re.sub(r"[^A-Za-z0-9._ ()-]", "_", item.name) or "attachment"
    headers = {
        "Content-Disposition": f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(item.name, safe='')}",
        "Content-Security-Policy": _DOWNLOAD_POLICY,
    }
    return HTTPStatus.OK, "application/octet-stream", content, headers


def _number(text: str) -> int:
    if not re.fullmatch(r"[1-9][0-9]{0,8}", text):
        raise _Response(HTTPStatus.BAD_REQUEST, f"{text!r} is not a page number")
    return int(text)


def _error_page(status: HTTPStatus, text: str) -> str:
    return environment().get_template("error.html").render(status=status, text=text)
