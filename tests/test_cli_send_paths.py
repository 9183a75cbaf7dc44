"""`gitmail send` answers through the lean path (cli/plain.py) or through typer (cli/app.py) with the same words:
the same output, the same one-line errors and exit codes, for good input and bad, and nothing written when refused."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gitmail import mailbox
from gitmail.cli import plain
from gitmail.store.repository import Store
from tests.conftest import CliRunner, Result, mailbox_snapshot


def lean(cli: CliRunner, *args: str, cwd: Path) -> Result:
    """What the lean path answers, run as the process's entry runs it (the typer app is never asked)."""
    cli.monkeypatch.chdir(cwd)
    cli.monkeypatch.setattr(sys, "stdin", None)
    cli.capsys.readouterr()
    code = plain.main(list(args))
    assert code is not None, "the lean path handed this form over to typer"
    captured = cli.capsys.readouterr()
    return Result(code, captured.out, captured.err)


def same(first: Result, second: Result, *names: str) -> None:
    """Equal but for the new message's id (what a send prints on standard output) and the names given."""

    def spelled(result: Result, name: str) -> tuple[int, str, str]:
        new = result.out.strip()
        out, err = (text.replace(new, "ID") if new else text for text in (result.out, result.err))
        return result.code, out.replace(name, "NAME"), err.replace(name, "NAME")

    assert spelled(first, names[0] if names else "") == spelled(second, names[1] if names else "")


GOOD = [
    ("send", "--to", "web", "--subject", "hello", "--message", "body"),
    ("send", "--to", "web", "-s", "hello", "-m", "body", "-u", "low"),
    ("send", "--to=web", "--subject=hello", "--urgency=now"),
    ("send", "--to", "{new}", "-s", "hello"),  # a note: no repo of that name has used the mailbox
]
BAD = [
    ("send", "--to", "web"),  # no subject
    ("send", "-s", "hello"),  # nowhere to send it
    ("send", "--to", "web", "--broadcast", "-s", "hello"),
    ("send", "--to", "web", "-s", "hello", "-u", "never"),
    ("send", "--to", "no/such name", "-s", "hello"),
    ("send", "--to", "web", "-s", "x" * 201),
    ("send", "--to", "web", "-s", "hello", "--from", "../x"),
    ("send", "--to", "@user", "-s", "hello", "--from", "@user"),
    ("send", "--to", "web#", "-s", "hello"),
    ("send", "--to", "web#nobody", "-s", "hello"),
    ("send", "--reply-to", "zzzzzzzzzz", "-m", "hi"),
    ("send", "--retract", "zzzzzzzzzz", "-s", "hello"),
]


@pytest.mark.parametrize("args", GOOD)
def test_a_good_send_says_the_same_on_either_path(
    cli: CliRunner, api: Path, web: Path, box: Store, args: tuple[str, ...]
) -> None:
    mailbox.send(box, sender="api", to="web", subject="web is known")
    names = ("nobody-1", "nobody-2")  # each path its own new name, which the first send makes known
    by_typer = cli(*(a.replace("{new}", names[0]) for a in args), cwd=api)
    by_lean = lean(cli, *(a.replace("{new}", names[1]) for a in args), cwd=api)
    assert by_typer.code == 0, by_typer
    same(by_typer, by_lean, *names)
    ids = [r.out.strip() for r in (by_typer, by_lean)]
    shown = [mailbox.show(box, i).message for i in ids]
    written = [
        (m.sender, m.to.replace(name, "NAME"), m.subject, m.body, m.urgency)
        for m, name in zip(shown, names, strict=True)
    ]
    assert written[0] == written[1]


@pytest.mark.parametrize("args", BAD)
def test_a_bad_send_is_refused_alike_on_either_path(
    cli: CliRunner, api: Path, web: Path, box: Store, args: tuple[str, ...]
) -> None:
    mailbox.send(box, sender="api", to="web", subject="web is known")
    before = mailbox_snapshot(box.path)
    by_typer, by_lean = cli(*args, cwd=api), lean(cli, *args, cwd=api)
    assert by_typer.code != 0 and by_typer.out == "", by_typer
    assert by_typer.err.startswith("gitmail: error: ") and by_typer.err.count("\n") == 1, by_typer
    same(by_typer, by_lean)
    assert mailbox_snapshot(box.path) == before
