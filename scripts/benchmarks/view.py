"""The view group: `gitmail view --no-open` started fresh for every run at each archive size. The time until it
prints its URL (it reads the whole mailbox's index first), then its first page (the token request, its redirect
and the overview, over HTTP), then the same page again after a message arrived (the index carried forward over
the change); the first page must list every conversation and the last one the new message."""

from __future__ import annotations

import subprocess
import time

from .fixtures import PENDING, RECIPIENT, SENDER, Sandbox, gitmail_command, pending_refs, remove_sent
from .runner import WARMUPS, BenchError, Row, Settings, rotated, summarise

ROWS = ("view: start until URL", "view: first page", "view: page after new mail")


def measure_view(box: Sandbox, settings: Settings) -> list[Row]:
    """Start-up, first page and the page after new mail, each run a fresh process, alternating between sizes."""
    sizes = settings.sizes
    for size in sizes:
        for _ in range(WARMUPS):
            view_run(box, size)
    seconds: dict[int, list[tuple[float, float, float]]] = {size: [] for size in sizes}
    for turn in range(settings.runs):
        for size in rotated(sizes, turn):
            seconds[size].append(view_run(box, size))
    return [summarise(name, size, [run[n] for run in seconds[size]]) for n, name in enumerate(ROWS) for size in sizes]


def view_run(box: Sandbox, size: int) -> tuple[float, float, float]:
    """Seconds until the URL is printed, for the first page, and for the page after one message arrived."""
    import http.client
    import re
    import signal

    from gitmail import mailbox as api
    from gitmail.store.repository import Store

    start = time.perf_counter()
    server = subprocess.Popen(
        [*gitmail_command(), "view", "--no-open"],
        cwd=box.root,
        env=box.env(size),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        started = time.perf_counter() - start
        found = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/\?token=(\S+)", url)
        if not found:
            raise BenchError(f"gitmail view printed {url!r} instead of its URL")
        port, token = int(found[1]), found[2]

        def get(path: str, cookie: str = "") -> tuple[int, str, str]:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            connection.request("GET", path, headers={"Cookie": cookie} if cookie else {})
            response = connection.getresponse()
            answer = (response.status, response.getheader("Set-Cookie") or "", response.read().decode())
            connection.close()
            return answer

        begin = time.perf_counter()
        status, cookie, _ = get(f"/?token={token}")
        cookie = cookie.split(";")[0]
        status, _, page = get("/", cookie)
        first = time.perf_counter() - begin
        listed = f'Conversations <span class="n">{size + PENDING}</span>'
        if status != 200 or listed not in page:
            raise BenchError(
                f"gitmail view's first page (status {status}) does not list {size + PENDING} conversations"
            )
        mailbox = box.mailbox(size)
        before = pending_refs(box, size)
        api.send(Store(mailbox), sender=SENDER, to=RECIPIENT, subject="bench view", body="new mail")
        begin = time.perf_counter()
        status, _, page = get("/", cookie)
        after = time.perf_counter() - begin
        if status != 200 or f'Conversations <span class="n">{size + PENDING + 1}</span>' not in page:
            raise BenchError("gitmail view's page does not show a message that arrived after it started")
        remove_sent(box, size, before, 1, "view")
    finally:
        server.send_signal(signal.SIGTERM)  # SIGINT would do, but not where this runs in the background
        _, errors = server.communicate(timeout=60)
    if server.returncode != 0:
        raise BenchError(f"gitmail view exited {server.returncode}: {errors.strip()}")
    return started, first, after
