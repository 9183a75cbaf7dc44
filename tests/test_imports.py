"""What each entry point imports: the hooks run at every session start and tool call and must stay lean; no
command pays for pydantic."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

import gitmail
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


def imported_beyond_the_interpreter(*args: str, cwd: Path, stdin: str = "") -> set[str]:
    """The modules a gitmail process loaded that the interpreter itself does not: run without `site` (an editable
    install's finder would load pathlib, re and enum for every process), gitmail found on PYTHONPATH and its
    dependencies after it (PyNaCl signs a send; without it ssh-keygen would, through subprocess)."""
    import nacl

    root = str(Path(gitmail.__file__).resolve().parent.parent)
    packages = str(Path(nacl.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((root, packages))}
    bare = subprocess.run(
        [sys.executable, "-S", "-c", "import sys; print(' '.join(sys.modules))"],
        capture_output=True, text=True, env=env, timeout=60, check=True,
    )  # fmt: skip
    out = cwd.parent / "modules.json"
    probe = (
        "import atexit, sys\n"
        f"atexit.register(lambda: open({str(out)!r}, 'w').write(' '.join(sorted(sys.modules))))\n"
        "from gitmail.__main__ import main\n"
        f"sys.argv = ['gitmail', *{list(args)!r}]\n"
        "sys.exit(main())\n"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", probe], cwd=cwd, input=stdin, capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return set(out.read_text().split()) - set(bare.stdout.split())


NEVER_ON_A_READ = (
    "typing", "typer", "click", "rich", "pygit2", "frontmatter", "yaml", "dataclasses", "subprocess",
    "datetime",  # its pure-Python twin runs whole at import (3.11): the C classes are taken from _datetime
)  # fmt: skip
# What sends, addresses sessions, gathers attachments, wakes sessions or judges leases: not loaded to read mail.
SENDING_SIDE = (
    "gitmail.actions.sending", "gitmail.actions.addressing", "gitmail.actions.attaching", "gitmail.actions.leases",
    "gitmail.waking", "gitmail.codex", "gitmail.guarding", "gitmail.mailbox.leasing", "gitmail.store.lease_refs",
    "gitmail.values.lease", "gitmail.values.edits", "gitmail.values.attachments",
)  # fmt: skip


def _loaded(modules: set[str], names: Sequence[str]) -> set[str]:
    return {m for m in modules if m in names or m.split(".")[0] in names}


def test_a_session_start_python_answers_loads_only_what_reading_mail_uses(web: Path, box: Store) -> None:
    """A resumed session with directed mail, answered by Python: no typing (value classes are built without it), no
    command-line library, no pygit2, nothing of the sending, waking or lease side while no lease is held."""
    for number in range(3):
        mailbox.send(box, sender="api", to="web", subject=f"hello {number}", body="Please read this.")
    start = json.dumps({"session_id": "s1", "cwd": str(web), "hook_event_name": "SessionStart", "source": "resume"})
    modules = imported_beyond_the_interpreter("hook", "session-start", "--host", "claude", cwd=web, stdin=start)
    assert "gitmail.delivery" in modules and "gitmail.render.frames" in modules
    assert _loaded(modules, NEVER_ON_A_READ) == set()
    assert _loaded(modules, SENDING_SIDE) == set()
    assert "gitmail.store.catfile" not in modules  # its messages are loose objects, read without git


@pytest.mark.parametrize("args", [("inbox", "--peek"), ("log", "-n", "20")])
def test_inbox_and_log_load_only_what_reading_mail_uses(web: Path, box: Store, args: tuple[str, ...]) -> None:
    """`inbox --peek` and `log -n 20`: no typing, no command-line library, no pygit2, and nothing that sends,
    addresses sessions, wakes them or judges leases; `log` not even the delivery policy or a session's record."""
    for number in range(3):
        mailbox.send(box, sender="api", to="web", subject=f"hello {number}", body="Please read this.")
    modules = imported_beyond_the_interpreter(*args, cwd=web)
    assert "gitmail.cli.commands" in modules
    assert _loaded(modules, NEVER_ON_A_READ) == set()
    assert _loaded(modules, SENDING_SIDE) == set()
    if args[0] == "log":
        assert _loaded(modules, ("gitmail.delivery", "gitmail.store.sessions", "gitmail.render.frames")) == set()
    else:
        assert "fcntl" not in modules  # a peek writes nothing, so it never takes the lock
        assert "gitmail.store.catfile" not in modules  # its messages are loose objects, read without git


# The standard library's heavier modules, which none of the four commonest paths (a send, a peek at the inbox, the
# log, a session start answered by Python) runs. json they read and write through its accelerator (jsontext.py), so
# neither json nor the re beneath it (with enum) is loaded: names and ids are checked with string methods. pathlib
# (with urllib.parse, ipaddress, fnmatch and ntpath beneath it) they do without: the store spells its paths as str.
NEVER_ON_A_COMMON_PATH = (
    "typing", "dataclasses", "subprocess", "datetime", "tempfile", "shutil", "logging", "threading", "inspect",
    "argparse", "hashlib", "socket", "email", "importlib.util", "asyncio", "uuid", "base64", "string", "textwrap",
    "pathlib", "urllib", "ipaddress", "fnmatch", "ntpath", "json", "re", "enum",
    "typer", "click", "rich", "pygit2", "frontmatter", "yaml", "pydantic", "mcp",
)  # fmt: skip
# And what each of them need not load beyond those.
LEFT_OUT = {
    "send": ("gitmail.delivery", "gitmail.render.frames", "gitmail.store.sessions", "gitmail.waking"),
    "inbox": ("contextlib", "fcntl", "gitmail.store.writer", "gitmail.store.transaction", *SENDING_SIDE),
    "log": ("gitmail.delivery", "gitmail.store.sessions", "gitmail.render.frames", *SENDING_SIDE),
    "start": ("gitmail.cli", *SENDING_SIDE),
}


@pytest.mark.parametrize("path", sorted(LEFT_OUT))
def test_the_commonest_paths_load_none_of_the_heavy_modules_they_do_not_run(
    api: Path, web: Path, box: Store, path: str
) -> None:
    """A send to a known repository, `inbox --peek` with mail pending, `log -n 20`, and a resumed session's start
    with new mail (Python answering it): none loads a module it does not run, so what makes them quick cannot
    silently go."""
    for number in range(3):
        mailbox.send(box, sender="api", to="web", subject=f"hello {number}", body="Please read this.")
    start = json.dumps({"session_id": "s1", "cwd": str(web), "hook_event_name": "SessionStart", "source": "resume"})
    runs = {
        "send": (("send", "--to", "web", "-s", "hello", "-m", "body"), api, "", "gitmail.store.writer"),
        "inbox": (("inbox", "--peek"), web, "", "gitmail.render.frames"),
        "log": (("log", "-n", "20"), web, "", "gitmail.mailbox.browsing"),
        "start": (("hook", "session-start", "--host", "claude"), web, start, "gitmail.delivery"),
    }
    args, cwd, stdin, ran = runs[path]
    modules = imported_beyond_the_interpreter(*args, cwd=cwd, stdin=stdin)
    assert ran in modules  # it did its work
    assert _loaded(modules, NEVER_ON_A_COMMON_PATH) == set()
    assert _loaded(modules, LEFT_OUT[path]) == set()


def test_a_send_to_a_repository_imports_only_what_it_runs(api: Path, web: Path, box: Store) -> None:
    """The commonest send (to a repository, nothing attached) runs on the lean path: no command-line library, no
    typing (its value classes and the signature's are built without it), and none of the modules only sessions as
    addresses, attachments or waking use."""
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
    assert {m for m in modules if m.startswith("gitmail") and _imports_typing(m)} == set()


def _imports_typing(module: str) -> bool:
    """Whether a gitmail module imports typing when it runs (not only for a type checker, which is indented)."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    return re.search(r"^(from typing import|import typing)\b", Path(spec.origin).read_text(), re.M) is not None
