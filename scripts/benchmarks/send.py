"""The send group: `gitmail send --to web ...` from the `api` repository, at 0 archived messages and at the
largest size; the messages it sent are checked to have arrived pending and removed again, so every mailbox keeps
its 20 pending."""

from __future__ import annotations

from .fixtures import SEND_ARGS, SENDER, Sandbox, gitmail_command, pending_refs, remove_sent
from .runner import WARMUPS, Row, Settings, measure

ROWS = ("send",)


def measure_send(box: Sandbox, settings: Settings) -> list[Row]:
    before = {size: pending_refs(box, size) for size in settings.ends}
    argv = [*gitmail_command(), *SEND_ARGS]
    rows = measure("send", argv, env=box.env, cwd=box.repo(SENDER), sizes=settings.ends, runs=settings.runs)
    for size in settings.ends:
        remove_sent(box, size, before[size], settings.runs + WARMUPS, "send")
    return rows
