"""The Python API as docs/python-api.md shows it: every example on the page runs as it stands, each in a fresh
interpreter with the test's own home, and does what the page says it does."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gitmail import actions
from gitmail.errors import ExitCode, NotFound, UsageError
from gitmail.values.mail import DoneResult, History
from gitmail.values.names import RepoName
from gitmail.workspace import Actor

PAGE = Path(__file__).resolve().parent.parent / "docs" / "python-api.md"
EXAMPLES = re.findall(r"^```python\n(.*?)^```$", PAGE.read_text(), flags=re.MULTILINE | re.DOTALL)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def demo_root(root: Path) -> Path:
    """What the second example asks for: a repository `api` of two commits holding `schema.sql`, and `web`, a
    clone of it one commit behind."""
    api = root / "api"
    api.mkdir(parents=True)
    git(api, "init", "-q")
    (api / "schema.sql").write_text("create table orders (id int);\n")
    git(api, "add", "schema.sql")
    git(api, "commit", "-qm", "Orders")
    git(root, "clone", "-q", str(api), str(root / "web"))
    (api / "schema.sql").write_text("create table orders (id int, status text);\n")
    git(api, "commit", "-qam", "Orders have a status")
    return root


def run_example(code: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    return done.stdout


def test_the_page_has_its_examples() -> None:
    assert len(EXAMPLES) == 2  # mail; repositories, files, sessions, sync and keys
    assert all("from gitmail import actions" in example for example in EXAMPLES)


def test_the_mail_example_runs_and_does_what_it_says(tmp_path: Path) -> None:
    out = run_example(EXAMPLES[0], tmp_path).splitlines()
    sent_id = out[0].split()[0]
    assert re.fullmatch(r"[0-9a-z]{10}", sent_id)
    assert out[-1] == f"error: no message with id zzzz {int(ExitCode.RUNTIME)}"
    assert f"{sent_id} api Schema v2 is live" in out  # web's inbox listed it
    box = actions.open_mailbox()
    assert [e.message.subject for e in actions.log(box, repo=RepoName("web"))][-1] == "Schema v2 is live"
    answers = actions.inbox(box, Actor(RepoName("api")), peek=True).mail.directed
    assert [(e.message.sender, e.message.body) for e in answers] == [("@user", "Yes.")]  # the person's reply


def test_the_repositories_example_runs_against_the_folders_it_names(tmp_path: Path) -> None:
    root = demo_root(tmp_path / "demo")
    out = run_example(EXAMPLES[1], tmp_path, env={"DEMO_ROOT": str(root)})
    assert f"api {root / 'api'}" in out.splitlines()
    assert (root / "schema-copy.sql").read_text() == "create table orders (id int, status text);\n"
    assert (root / "web" / "schema.sql").read_text() == "create table orders (id int, status text);\n"  # applied
    assert (root / "remote.git").is_dir()


def test_the_values_the_page_names_are_where_it_says() -> None:
    """What the page promises of the calls' results and errors, in-process."""
    mailbox = actions.open_mailbox()
    api, web = Actor(RepoName("api")), Actor(RepoName("web"))
    sent = actions.send(mailbox, api, to="web", subject="one")
    assert isinstance(actions.log(mailbox, repo=RepoName("web")), History)
    assert actions.show(mailbox, None, sent.entry.message.id[:4]).entry.message.id == sent.entry.message.id
    done = actions.done(mailbox, web, ids=[sent.entry.message.id])
    assert isinstance(done, DoneResult) and [e.message.id for e in done.archived] == [sent.entry.message.id]
    with pytest.raises(NotFound) as missing:
        actions.show(mailbox, None, "zzzz")
    assert missing.value.exit_code == ExitCode.RUNTIME
    with pytest.raises(UsageError) as usage:
        actions.send(mailbox, api, to="web", broadcast=True, subject="both")
    assert usage.value.exit_code == ExitCode.USAGE and "--" not in str(usage.value)  # the API's own words
