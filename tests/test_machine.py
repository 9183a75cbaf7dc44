"""Which machine a mailbox is on and which machine a message was written on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gitmail import mailbox
from gitmail.errors import UsageError
from gitmail.store import machines
from gitmail.store.repository import Store
from gitmail.values.machine import ELSEWHERE, Machine
from gitmail.values.message import Message, parse
from gitmail.values.names import RepoName
from tests.conftest import at


def test_the_name_comes_from_the_environment_then_the_setting_then_the_host(
    box: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    box.create()
    monkeypatch.delenv(machines.MACHINE_ENV, raising=False)
    monkeypatch.setattr(os, "uname", lambda: type("Uname", (), {"nodename": "build box.example.com"})())
    assert machines.current(box).name == "build-box.example.com"
    box.git("config", machines.SETTING, "laptop")
    assert machines.current(box).name == "laptop"
    monkeypatch.setenv(machines.MACHINE_ENV, "ci-7")
    assert machines.current(box).name == "ci-7"
    monkeypatch.setenv(machines.MACHINE_ENV, "no spaces")
    with pytest.raises(UsageError, match="invalid machine name 'no spaces' in GITMAIL_MACHINE"):
        machines.current(box)


def test_the_id_is_made_once_per_mailbox_even_by_racing_processes(box: Store, tmp_path: Path) -> None:
    box.create()
    script = "import sys; from gitmail.store import machines; from gitmail.store.repository import Store; print(machines.local_id(Store(sys.argv[1]), create=True))"
    racers = [
        subprocess.Popen([sys.executable, "-c", script, str(box.path)], stdout=subprocess.PIPE, text=True)
        for _ in range(6)
    ]
    ids = {racer.communicate()[0].strip() for racer in racers}
    assert len(ids) == 1 and ids == {machines.local_id(box)}
    other = Store(tmp_path / "other.git")
    other.create()
    assert machines.local_id(other, create=True) != machines.local_id(box)


def test_the_field_round_trips_and_a_field_gitmail_did_not_write_names_another_machine() -> None:
    here = Machine("laptop", "4kq8m2x9ab")
    message = Message("7kq2m9x4ab", RepoName("api"), "web", "Hi", "", at(0), machine=here)
    assert 'machine: "laptop 4kq8m2x9ab"' in message.document().decode()
    assert message.commit_message().endswith("To: web\nMachine: laptop 4kq8m2x9ab\n")
    assert parse(message.document()).machine == here
    for forged in ("laptop", "laptop 4kq8", "lap top 4kq8m2x9ab", ""):
        assert Machine.parse(forged) == ELSEWHERE


def test_mail_written_here_reads_as_local_and_records_this_machine(box: Store) -> None:
    sent = mailbox.send(box, sender="api", to="web", subject="Hi")
    document = box.read([f"{sent.oid}:message.md"])[0]
    assert document is not None and parse(document).machine == machines.current(box)
    assert mailbox.show(box, sent.message.id).message.machine is None
    assert mailbox.pending(box, repo="web").directed[0].message.machine is None


def test_mail_that_claims_this_machine_but_arrived_by_sync_is_not_local(box: Store) -> None:
    sent = mailbox.send(box, sender="api", to="web", subject="Hi")
    machines.remember_arrivals(box, [sent.message.id])  # as if sync had brought it
    assert mailbox.show(box, sent.message.id).message.machine == ELSEWHERE
