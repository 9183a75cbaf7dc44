"""What each entry point imports: the hooks run at every session start and tool call and must stay lean; no
command pays for pydantic."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gitmail import mailbox
from gitmail.store.repository import Store
from gitmail.sync import remotes
from tests.processes import loaded
from tests.reading import inbox as read_inbox


def imported(*args: str, cwd: Path, stdin: str = "") -> set[str]:
    """The modules a gitmail process had loaded when it finished."""
    return loaded(*args, cwd=cwd, stdin=stdin)[1]


def payload(cwd: Path) -> str:
    return json.dumps({"session_id": "s1", "cwd": str(cwd), "hook_event_name": "SessionStart"})


def test_a_session_start_with_directed_mail_imports_no_command_line_library_and_no_pygit2(
    web: Path, box: Store
) -> None:
    mailbox.send(box, sender="api", to="web", subject="hello")
    read_inbox(box, repo="web")  # its receipt is written: this showing writes nothing
    modules = imported("hook", "session-start", cwd=web, stdin=payload(web))
    assert "gitmail.delivery" in modules
    assert not {m for m in modules if m.split(".")[0] in ("typer", "click", "rich", "pygit2", "frontmatter", "yaml")}


def test_a_session_start_with_attachments_loads_only_their_record(api: Path, web: Path, box: Store) -> None:
    """Framing mail with attachments reads their record in the document: nothing that sends, guesses types or
    writes files out is loaded, and their content is never read."""
    mailbox.send(box, sender="api", to="web", subject="plain")
    read_inbox(box, repo="web")
    plain = imported("hook", "session-start", cwd=web, stdin=payload(web))
    (api / "f.bin").write_bytes(b"\0" * 100)
    done = subprocess.run(
        [sys.executable, "-m", "gitmail", "send", "--to", "web", "-s", "x", "--attach", "f.bin"],
        cwd=api,
        capture_output=True,
    )
    assert done.returncode == 0, done.stderr
    read_inbox(box, repo="web")
    attached = imported("hook", "session-start", cwd=web, stdin=payload(web))
    assert attached - plain == {"gitmail.values.attachments"}


@pytest.mark.parametrize(
    "args", [("send", "--to", "api", "-s", "x"), ("inbox",), ("log",), ("done", "--all"), ("--help",)]
)
def test_no_command_imports_pydantic(web: Path, box: Store, args: tuple[str, ...]) -> None:
    mailbox.send(box, sender="api", to="web", subject="hello")
    modules = imported(*args, cwd=web)
    assert "gitmail.cli" in modules
    assert "pydantic" not in modules and "mcp" not in modules


def test_sync_imports_no_command_line_library(web: Path, box: Store, tmp_path: Path) -> None:
    """`gitmail sync` is routed before typer is imported, and its command line (cli/sync.py) needs none: the whole
    way (nothing recorded yet, so the quick check cannot answer) loads the engine but no command-line library."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    mailbox.send(box, sender="api", to="web", subject="hello")
    remotes.add_remote(box, name="origin", url=str(remote))
    modules = imported("sync", cwd=web)
    assert {"gitmail.cli.sync", "gitmail.sync.engine"} <= modules
    assert not {m for m in modules if m.split(".")[0] in ("typer", "click", "rich")}


def test_a_send_to_a_repository_imports_only_what_it_runs(api: Path, web: Path, box: Store) -> None:
    """The commonest send (to a repository, nothing attached) runs on the lean path: no command-line library, and
    none of the modules only sessions as addresses, attachments or waking use."""
    mailbox.send(box, sender="api", to="web", subject="web is known")
    modules = imported("send", "--to", "web", "-s", "hello", "-m", "body", cwd=api)
    assert "gitmail.store.writer" in modules  # it did send
    unused = {
        "gitmail.actions.attaching",
        "gitmail.codex",
        "gitmail.delivery",
        "gitmail.waking",
        "gitmail.store.sessions",
        "gitmail.values.session_info",
    }
    assert not modules & unused
    assert not {m for m in modules if m.split(".")[0] in ("typer", "click", "rich", "pygit2", "frontmatter", "yaml")}
