"""`gitmail mcp` driven by the MCP SDK's own client over stdio, as a real process: every tool, identity from roots,
resource updates when another process sends mail, concurrent clients, and faults. Plus the argument checks and the
identity rules in-process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from jsonschema import Draft202012Validator
from mcp import Client, StdioServerParameters
from mcp.client.session import MessageHandlerFnT
from mcp.client.stdio import stdio_client
from pydantic import FileUrl

from gitmail import delivery, mailbox
from gitmail.errors import GitmailError, UsageError
from gitmail.mcp import roots, server, tools
from gitmail.store.repository import Store
from gitmail.values.mail import status
from gitmail.values.names import RepoName
from tests.conftest import CliRunner, RepoFactory, mailbox_snapshot, run_gitmail
from tests.hooked import Session

# Roots and resources/subscribe are what today's clients use, though deprecated for the 2026 protocol.
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

LOCK_WAIT = 2.0  # seconds the server waits for the mailbox in the test that holds it
CALL_WAIT = 30.0  # seconds any one request may take (a held lock makes a write wait 10)


@asynccontextmanager
async def connect(
    cwd: Path,
    *,
    roots: list[Path] | None = None,
    mode: str = "legacy",
    on_message: MessageHandlerFnT | None = None,
    errors: Path | None = None,
) -> AsyncIterator[Client]:
    """`gitmail mcp` started in `cwd` by the SDK's client, offering `roots` (a list it may change later)."""
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")  # as when the venv is active
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "gitmail", "mcp"], env={**os.environ, "PATH": path}, cwd=str(cwd)
    )

    async def list_roots(context: Any) -> types.ListRootsResult:
        assert roots is not None
        return types.ListRootsResult(roots=[types.Root(uri=FileUrl(path.as_uri())) for path in roots])

    with open(errors or os.devnull, "a") as log:
        async with Client(
            stdio_client(params, errlog=log),
            mode=mode,
            list_roots_callback=list_roots if roots is not None else None,
            message_handler=on_message,
            read_timeout_seconds=CALL_WAIT,
        ) as client:
            yield client


async def call(client: Client, tool: str, **arguments: Any) -> types.CallToolResult:
    return await client.call_tool(tool, arguments)


def text(result: types.CallToolResult) -> str:
    [content] = result.content
    assert isinstance(content, types.TextContent)
    return content.text


def ok(result: types.CallToolResult) -> str:
    assert not result.is_error, text(result)
    return text(result)


def refused(result: types.CallToolResult) -> str:
    """A tool error: one line, gitmail's own."""
    assert result.is_error, text(result)
    line = text(result)
    assert line.startswith("gitmail: error: ") and "\n" not in line and len(line) < 400, line
    return line


# -- in-process: the surface, arguments, identity -----------------------------------------------------------------


def test_the_tool_list_is_small_and_every_schema_is_valid() -> None:
    listed = types.ListToolsResult.model_validate({"tools": server.tool_list()}).model_dump(
        by_alias=True, mode="json", exclude_none=True
    )
    names = ["send", "inbox", "done", "log", "show", "retract", "sessions", "lease", "leases"]
    assert [tool["name"] for tool in listed["tools"]] == names
    assert len(json.dumps(listed)) <= 7000
    for tool in tools.TOOLS:
        Draft202012Validator.check_schema(tool.schema)


@pytest.mark.parametrize(
    ("tool", "arguments", "said"),
    [
        (
            "sned",
            {},
            'no tool named "sned"; the tools are send, inbox, done, log, show, retract, sessions, lease, leases',
        ),
        ("show", {}, 'show: missing argument "id"'),
        ("show", {"id": 7}, "show: id must be a string"),
        (
            "send",
            {"to": "web", "subjet": "x"},
            'send: unknown argument "subjet" (known: to, broadcast, reply_to, subject, message, or_repo, urgency, '
            "attach, patch, repo)",
        ),
        ("log", {"limit": 0}, "log: limit must be at least 1"),
        ("log", {"limit": 10_000}, "log: limit must be at most 200"),
        ("done", {"ids": []}, "done: ids must list at least 1"),
        ("done", {"ids": ["x" * 100_000]}, None),
        ("inbox", {"peek": "yes"}, "inbox: peek must be a boolean"),
        ("send", {"to": ["x" * 1_000_000]}, "send: to must be a string"),
    ],
)
def test_a_bad_argument_is_one_short_line(tool: str, arguments: dict[str, Any], said: str | None) -> None:
    if said is None:
        tools.find(tool).check(arguments)  # well-formed; the core judges the value
        return
    with pytest.raises(UsageError) as caught:
        tools.find(tool).check(arguments)
    assert str(caught.value) == said


def test_roots_name_one_repository_or_the_call_must(repos: RepoFactory, tmp_path: Path) -> None:
    api, web = repos("api"), repos("web")
    (api / "src").mkdir()
    who = roots.from_roots([(api / "src").as_uri(), api.as_uri(), "https://example.com/x"])
    assert who is not None and who[:3] == (RepoName("api"), str(api), f"the client's root {api}")
    assert roots.from_roots(["https://example.com/x"]) is None  # nothing local offered: not a decision
    with pytest.raises(GitmailError, match=r'several repositories \("api", "web"\); name one with repo'):
        roots.from_roots([api.as_uri(), web.as_uri()])
    (tmp_path / "notes").mkdir()
    with pytest.raises(GitmailError, match="not inside a git repository; name one with repo"):
        roots.from_roots([(tmp_path / "notes").as_uri()])
    assert roots.from_directory(str(tmp_path / "notes")) is None
    found = roots.from_directory(str(web))
    assert found is not None and found[:3] == (RepoName("web"), str(web), f"the server's directory {web}")
    spaced = repos("My App")
    found = roots.from_roots([spaced.as_uri()])
    assert found is not None and found[:3] == (RepoName("My App"), str(spaced), f"the client's root {spaced}")


def test_the_inbox_answer_keeps_within_the_hooks_budget(box: Store, web: Path) -> None:
    for n in range(4):
        mailbox.send(box, sender="api", to="web", subject=f"log dump {n}", body="x" * 60_000)
    mailbox.send(box, sender="api", to="web", subject="short", body="hello")
    who = roots.Who(RepoName("web"), str(web), "test")
    answer = tools.inbox(tools.Call(box, who), peek=True)
    budget = delivery.BUDGETS["mcp"]
    assert budget is not None and len(answer.text.encode()) <= budget and answer.data is None
    assert "too long to show here" in answer.text and "> hello" in answer.text


def test_print_config_names_this_interpreter(cli: CliRunner) -> None:
    result = cli("mcp", "--print-config")
    assert result.code == 0
    assert json.loads(result.out) == {
        "mcpServers": {"gitmail": {"command": sys.executable, "args": ["-P", "-m", "gitmail", "mcp"]}}
    }


def test_other_commands_import_neither_the_sdk_nor_pydantic(api: Path, web: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    runs = [
        (["send", "--to", "web", "-s", "hi", "-m", "x"], api, b""),
        (["inbox"], web, b""),
        (["hook", "session-start"], web, json.dumps({"cwd": str(web), "session_id": "s"}).encode()),
    ]
    for args, cwd, stdin in runs:
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "gitmail", *args],
            cwd=cwd,
            input=stdin,
            capture_output=True,
            env=env,
        )
        assert done.returncode == 0, done.stderr
        imported = {line.split("|")[-1].strip() for line in done.stderr.decode().splitlines() if "|" in line}
        assert imported and not {m for m in imported if m.split(".")[0] in ("mcp", "mcp_types", "pydantic")}, args


# -- over stdio: every tool -------------------------------------------------------------------------------------


def test_the_server_imports_neither_the_sdk_nor_a_schema_library(api: Path) -> None:
    """What serving needs, and no more: the SDK's types alone cost most of a second to import."""
    server = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "gitmail", "mcp"],
        cwd=api, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    _initialize(server)
    assert server.stdin is not None and server.stderr is not None
    server.stdin.close()
    assert server.wait(timeout=10) == 0
    imported = {line.split("|")[-1].strip() for line in server.stderr.read().decode().splitlines() if "|" in line}
    heavy = {"mcp", "mcp_types", "pydantic", "anyio", "jsonschema", "watchfiles"}
    assert "gitmail.mcp.wire" in imported and not {m for m in imported if m.split(".")[0] in heavy}


def test_every_tool_end_to_end(api: Path, web: Path, tmp_path: Path, box: Store) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()

    async def scenario() -> None:
        async with connect(api) as as_api, connect(outside, roots=[web]) as as_web:
            assert as_api.server_capabilities.resources is not None and as_api.server_capabilities.resources.subscribe
            sent = await call(as_api, "send", to="web", subject="Schema v2 is live", message="Orders have a status.")
            said = ok(sent)
            assert sent.structured_content is not None
            first = sent.structured_content["id"]
            assert said == (
                f'gitmail: sent {first} to the repository "web" as "api" (the server\'s directory {api}). Note: no repo named "web" '
                "has used this mailbox yet; it gets the message when a session starts in a repository of that name.\n"
            )
            cast = ok(await call(as_api, "send", broadcast=True, subject="Freeze until Monday"))
            assert 'to every repo as "api"' in cast

            # The inbox is the framing a session start delivers, byte for byte, and nothing else (a host would
            # hand the model structured content instead of it).
            peeked = run_gitmail("inbox", "--peek", cwd=web)
            shown = await call(as_web, "inbox")
            assert ok(shown) == peeked.stdout and shown.structured_content is None
            assert f"id {first}" in peeked.stdout and 'subject "Freeze until Monday"' in peeked.stdout
            again = ok(await call(as_web, "inbox"))  # the broadcast was handed over once
            assert "(1 directed, 0 broadcasts)" in again

            shown_one = await call(as_web, "show", id=first[:5])
            card = ok(shown_one)
            assert "> Orders have a status." in card and "untrusted data" in card and " · delivered " in card
            assert shown_one.structured_content is None
            receipts = [(r.repo, r.host) for r in status(mailbox.show(box, first)).reached]
            assert receipts == [("web", "mcp")]  # the delivery receipt says the mail was shown through MCP

            answer = await call(as_web, "send", reply_to=first, message="Switched.")
            assert f'to the repository "api" as "web" (the client\'s root {web})' in ok(answer)
            assert answer.structured_content is not None and answer.structured_content["reply_to"] == first
            assert answer.structured_content["text"] == ok(answer)  # what it says reaches the model either way
            assert "no mail" in ok(await call(as_web, "inbox"))  # the reply archived it for web

            history = await call(as_web, "log", limit=5)
            assert first in ok(history) and history.structured_content is not None
            assert history.structured_content["messages"][0]["reply_to"] == first
            thread = ok(await call(as_api, "log", thread=first))
            assert thread.index(first) < thread.index(answer.structured_content["id"])
            assert "every repo" in ok(await call(as_api, "log", everyone=True, grep="freeze"))

            reply_id = answer.structured_content["id"]
            ok(await call(as_api, "inbox"))
            done = await call(as_api, "done", ids=[reply_id])
            assert f"archived {reply_id}" in ok(done) and done.structured_content == {
                "text": ok(done),
                "repo": "api",
                "archived": [reply_id],
                "already": [],
                "unshown": [],
            }
            assert "already archived" in ok(await call(as_api, "done", ids=[reply_id]))

            cast_id = [e.message.id for e in mailbox.log(box, repo="api") if e.message.is_broadcast][0]
            assert "retracted" in ok(await call(as_api, "retract", id=cast_id))
            assert "already retracted" in ok(await call(as_api, "retract", id=cast_id))

    anyio.run(scenario)


def test_a_running_server_answers_what_it_kept_until_the_mail_changes_and_then_the_change(
    api: Path, web: Path, box: Store
) -> None:
    """The server keeps a repository's refs and pending mail while nothing they were made from changed: the same
    answer again, and each change made by another process (a send, a done, refs packed) at the next call."""
    first = mailbox.send(box, sender="web", to="api", subject="first").message.id
    then = time.time_ns() - 10 * 10**9  # settled: what the server reads now, it keeps
    for path in [box.path, *box.path.rglob("*")]:
        os.utime(path, ns=(then, then), follow_symlinks=False)

    def subjects(answer: str) -> list[str]:
        return [line.split('subject "')[1].split('"')[0] for line in answer.splitlines() if 'subject "' in line]

    async def scenario() -> None:
        async with connect(api) as client:
            kept = ok(await call(client, "inbox", peek=True))
            assert subjects(kept) == ["first"] and ok(await call(client, "inbox", peek=True)) == kept
            assert run_gitmail("send", "--to", "api", "-s", "second", "-m", "x", cwd=web).returncode == 0
            assert subjects(ok(await call(client, "inbox", peek=True))) == ["first", "second"]
            assert run_gitmail("done", first, cwd=api).returncode == 0
            assert subjects(ok(await call(client, "inbox", peek=True))) == ["second"]
            packed = subprocess.run(["git", "--git-dir", str(box.path), "pack-refs", "--all", "--prune"])
            assert packed.returncode == 0 and subjects(ok(await call(client, "inbox", peek=True))) == ["second"]

    anyio.run(scenario)


def test_log_narrows_to_one_session_of_the_repo(api: Path, web: Path, box: Store) -> None:
    box.create()  # sessions are recorded in the mailbox's own folder
    builder, other = Session(api, "11111111-aaaa"), Session(api, "22222222-bbbb")
    builder("session-start")
    other("session-start")
    assert builder.gitmail("session", "--name", "builder").returncode == 0
    for to, subject in (("api#builder", "for builder"), ("api#2222", "for the other"), ("api", "for both")):
        assert run_gitmail("send", "--to", to, "-s", subject, "-m", "x", cwd=web).returncode == 0

    async def scenario() -> None:
        async with connect(api) as as_api:
            logged = await call(as_api, "log", session="builder")
            assert logged.structured_content is not None
            assert [m["subject"] for m in logged.structured_content["messages"]] == ["for builder"]
            assert ok(logged).startswith('gitmail: mail of "api#builder" (')
            assert "session is one session of a repo" in refused(await call(as_api, "log", session="b", everyone=True))

    anyio.run(scenario)


def test_a_whole_float_limit_and_a_nul_character_are_answered_as_such(api: Path, box: Store) -> None:
    mailbox.send(box, sender="web", to="api", subject="hello")

    async def scenario() -> None:
        async with connect(api) as client:
            logged = await call(client, "log", limit=20.0)  # JSON Schema takes 20.0 for an integer
            assert logged.structured_content is not None and len(logged.structured_content["messages"]) == 1
            assert "cannot hold a NUL character" in refused(await call(client, "log", grep="\0"))
            attached = refused(await call(client, "send", to="web", subject="x", attach=["a\0b"]))
            assert "a path cannot hold a NUL character" in attached

    anyio.run(scenario)
    assert (
        not (box.path.parent / "gitmail.log").exists()
        or "Traceback" not in (box.path.parent / "gitmail.log").read_text()
    )


def test_tool_errors_change_nothing_and_the_server_keeps_serving(api: Path, web: Path, box: Store) -> None:
    async def scenario() -> None:
        async with connect(api) as client:
            first = ok(await call(client, "send", to="web", subject="hello"))
            before = mailbox_snapshot(box.path)
            mistakes: list[tuple[str, dict[str, Any], str]] = [
                ("send", {"to": "web"}, "send: a subject is required"),
                ("send", {"to": "web", "broadcast": True, "subject": "x"}, "exactly one of to, broadcast or reply_to"),
                ("send", {"to": "_broadcast", "subject": "x"}, "reserved"),
                ("send", {"to": "web", "subject": "x", "message": "x" * 2_000_000}, "the limit is 65,536"),
                ("send", {"to": "web", "subject": "x" * 300}, "the limit is 200"),
                ("show", {"id": "zzzzzzzzzz"}, "no message with id zzzzzzzzzz"),
                ("show", {"id": "not an id!"}, "is not a message id"),
                ("done", {"ids": [first.split()[2]]}, "is addressed to 'web', not to 'api'"),
                (
                    "done",
                    {"ids": ["a"], "all": True},
                    "done: name the messages to mark done, or ask for all of them with all (not both)",
                ),
                ("retract", {"id": first.split()[2]}, "is not a broadcast"),
                ("log", {"everyone": True, "repo": "api"}, "log: everyone takes no repo"),
                ("inbox", {"repo": "a/b"}, "invalid repo name"),
                ("nope", {}, "no tool named"),
            ]
            for tool, arguments, said in mistakes:
                assert said in refused(await client.call_tool(tool, arguments)), tool
            assert mailbox_snapshot(box.path) == before
            assert len((await client.list_tools()).tools) == 9

    anyio.run(scenario)


# -- identity over the protocol ---------------------------------------------------------------------------------


def test_identity_follows_the_clients_roots_and_their_changes(api: Path, web: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()

    async def scenario() -> None:
        roots = [web]
        async with connect(api, roots=roots) as client:
            assert f'as "web" (the client\'s root {web})' in ok(await call(client, "send", to="api", subject="a"))
            roots[:] = [api, web]
            await client.send_roots_list_changed()
            assert "several repositories" in refused(await call(client, "send", to="api", subject="b"))
            assert 'as "web" (the argument)' in ok(await call(client, "send", to="api", subject="c", repo="web"))
        async with connect(outside) as client:  # no roots, no repository: the call must say
            assert "name one with repo" in refused(await call(client, "inbox"))
            assert ok(await call(client, "inbox", repo="docs")) == 'gitmail: no mail for "docs" (the argument).\n'

    anyio.run(scenario)


# -- new mail while the server runs -----------------------------------------------------------------------------


def test_a_subscriber_hears_of_mail_another_process_sends(api: Path, web: Path, box: Store) -> None:
    """The mailbox does not exist yet when the client subscribes; the first send creates it."""
    updates: list[str] = []
    arrived = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.append(str(message.params.uri))
            arrived.set()

    async def scenario() -> None:
        nonlocal arrived
        async with connect(web, on_message=on_message) as client:
            [resource] = (await client.list_resources()).resources
            assert str(resource.uri) == "gitmail://inbox"
            await client.subscribe_resource("gitmail://inbox")
            assert not box.path.exists()
            for round_ in range(2):
                subject = f"news {round_}"
                sent = await anyio.to_thread.run_sync(
                    partial(run_gitmail, "send", "--to", "web", "-s", subject, "-m", "x", cwd=api)
                )
                assert sent.returncode == 0, sent.stderr
                with anyio.fail_after(10):
                    await arrived.wait()
                arrived = anyio.Event()
                read = await client.read_resource("gitmail://inbox")
                [contents] = read.contents
                assert isinstance(contents, types.TextResourceContents)
                assert f'subject "news {round_}"' in contents.text
            assert updates == ["gitmail://inbox", "gitmail://inbox"]
            # Mail for another repo says nothing to this one.
            await anyio.to_thread.run_sync(lambda: run_gitmail("send", "--to", "api", "-s", "x", cwd=web))
            await anyio.sleep(1)
            assert len(updates) == 2
        left = mailbox.pending(box, repo="web")
        assert not left.receipted.among(e.message.id for e in left.directed)  # reading the resource hands nothing over

    anyio.run(scenario)


def test_the_watch_follows_the_clients_roots(api: Path, web: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    arrived = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            arrived.set()

    async def scenario() -> None:
        roots = [web]
        async with connect(outside, roots=roots, on_message=on_message) as client:
            await client.subscribe_resource("gitmail://inbox")
            roots[:] = [api]
            await client.send_roots_list_changed()
            # The next call asks for the new roots, and the watch moves to api's mail before it answers.
            assert f'no mail for "api" (the client\'s root {api})' in ok(await call(client, "inbox", peek=True))
            sent = await anyio.to_thread.run_sync(partial(run_gitmail, "send", "--to", "api", "-s", "hi", cwd=web))
            assert sent.returncode == 0, sent.stderr
            with anyio.fail_after(10):
                await arrived.wait()

    anyio.run(scenario)


def test_a_2026_client_listens_for_the_same_updates_and_is_asked_for_its_roots(
    api: Path, web: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()

    async def scenario() -> None:
        async with connect(outside, roots=[web], mode="auto") as client:
            assert client.protocol_version == "2026-07-28"
            async with client.listen(resource_subscriptions=["gitmail://inbox"]) as events:
                # The stream opened before any call: the roots come with the first call that needs them.
                said = ok(await call(client, "inbox", peek=True))
                assert said == f'gitmail: no mail for "web" (the client\'s root {web}).\n'
                sent = await anyio.to_thread.run_sync(partial(run_gitmail, "send", "--to", "web", "-s", "hi", cwd=api))
                assert sent.returncode == 0, sent.stderr
                with anyio.fail_after(10):
                    event = await events.__anext__()
                assert getattr(event, "uri", None) == "gitmail://inbox"
            assert 'subject "hi"' in ok(await call(client, "inbox", peek=True))

    anyio.run(scenario)


# -- concurrency and faults ---------------------------------------------------------------------------------------


def test_two_clients_and_the_cli_at_once_lose_nothing(api: Path, web: Path, box: Store) -> None:
    rounds = 12

    async def scenario() -> None:
        async with connect(api) as as_api, connect(web) as as_web:

            async def sends(client: Client, to: str) -> None:
                for n in range(rounds):
                    ok(await call(client, "send", to=to, subject=f"{n}"))

            def cli_sends() -> None:
                for n in range(rounds // 3):
                    assert run_gitmail("send", "--to", "web", "-s", f"cli {n}", cwd=api).returncode == 0

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(sends, as_api, "web")
                tasks.start_soon(sends, as_web, "api")
                tasks.start_soon(anyio.to_thread.run_sync, cli_sends)
            for client, count in [(as_web, rounds + rounds // 3), (as_api, rounds)]:
                said = ok(await call(client, "inbox", peek=True))
                assert said.startswith(f"gitmail: {count} messages for ")

    anyio.run(scenario)
    web_mail, api_mail = mailbox.pending(box, repo="web").directed, mailbox.pending(box, repo="api").directed
    assert len(web_mail) == rounds + rounds // 3 and {e.message.sender for e in web_mail} == {"api"}
    assert len(api_mail) == rounds and {e.message.sender for e in api_mail} == {"web"}


def test_a_held_lock_is_a_tool_error_after_a_bounded_wait_and_reads_go_on(
    api: Path, box: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "GITMAIL_LOCK_WAIT", str(LOCK_WAIT)
    )  # the server's writes wait this for the lock, not WRITE_WAIT
    mailbox.send(box, sender="api", to="web", subject="first")
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with box.locked():
            held.set()
            release.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    try:

        async def scenario() -> None:
            async with connect(api) as client:
                result: list[types.CallToolResult] = []

                async def blocked_send() -> None:
                    result.append(await call(client, "send", to="web", subject="second"))

                start = time.monotonic()
                async with anyio.create_task_group() as tasks:
                    for _ in range(5):  # more writes than a reader's worker threads: none of them holds a read up
                        tasks.start_soon(blocked_send)
                    await anyio.sleep(0.5)
                    peeked = ok(await call(client, "inbox", repo="web", peek=True))  # answered while the sends wait
                    assert 'subject "first"' in peeked
                    assert ok(await call(client, "log", repo="web")) and ok(await call(client, "sessions"))
                    assert not result
                assert len(result) == 5
                assert all("stayed locked by another gitmail process" in refused(r) for r in result)
                waited = time.monotonic() - start
                assert LOCK_WAIT <= waited < 2 * LOCK_WAIT, waited  # each waited its wait at once, none behind another

        anyio.run(scenario)
    finally:
        release.set()
        holder.join()
    assert [e.message.subject for e in mailbox.pending(box, repo="web").directed] == ["first"]


@pytest.mark.parametrize("problem", ["a file", "a foreign repository", "relative"])
def test_a_broken_mailbox_is_a_tool_error(
    api: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, problem: str
) -> None:
    place = tmp_path / "mail.git"
    if problem == "a file":
        place.write_text("not a mailbox")
    elif problem == "a foreign repository":
        subprocess.run(["git", "init", "-q", "--bare", str(place)], check=True)
    monkeypatch.setenv("GITMAIL_DIR", "mail.git" if problem == "relative" else str(place))

    async def scenario() -> None:
        async with connect(api) as client:
            for tool, arguments in [("send", {"to": "web", "subject": "x"}), ("inbox", {}), ("log", {})]:
                refused(await client.call_tool(tool, arguments))
            assert len((await client.list_tools()).tools) == 9

    anyio.run(scenario)


def test_a_missing_mailbox_reads_as_empty_and_stays_missing(api: Path, box: Store) -> None:
    async def scenario() -> None:
        async with connect(api) as client:
            assert ok(await call(client, "inbox")) == f'gitmail: no mail for "api" (the server\'s directory {api}).\n'
            assert "0 messages" in ok(await call(client, "log"))
            assert "no message with id" in refused(await call(client, "show", id="abc"))

    anyio.run(scenario)
    assert not box.path.exists()


def _initialize(server: subprocess.Popen[bytes]) -> None:
    assert server.stdin is not None and server.stdout is not None
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"},
        },
    }
    server.stdin.write(json.dumps(hello).encode() + b"\n")
    server.stdin.flush()
    assert json.loads(server.stdout.readline())["result"]["serverInfo"]["name"] == "gitmail"


@pytest.mark.parametrize("how", ["stdin closed", "client killed"])
def test_the_server_exits_cleanly_when_the_client_goes(api: Path, tmp_path: Path, how: str) -> None:
    errors = tmp_path / "server.err"
    with open(errors, "wb") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "gitmail", "mcp"], cwd=api, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log
        )
    try:
        _initialize(server)
        assert server.stdin is not None and server.stdout is not None
        for message in [
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 3, "method": "resources/subscribe", "params": {"uri": "gitmail://inbox"}},
        ]:
            server.stdin.write(json.dumps(message).encode() + b"\n")
        server.stdin.flush()
        assert json.loads(server.stdout.readline()) == {"jsonrpc": "2.0", "id": 3, "result": {}}  # watching now
        if how == "client killed":  # both pipes gone at once, as when the client process dies
            call_ = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
            server.stdin.write(json.dumps(call_).encode() + b"\n")
            server.stdout.close()
        server.stdin.close()
        assert server.wait(timeout=10) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert "Traceback" not in errors.read_text()


@contextmanager
def line_server(cwd: Path, *, stderr: int = subprocess.DEVNULL) -> Iterator[subprocess.Popen[bytes]]:
    """`gitmail mcp` spoken to a line at a time, as a client would that sends what it likes: initialized here, and
    closed (or, if it will not stop, killed) at the end."""
    server = subprocess.Popen(
        [sys.executable, "-m", "gitmail", "mcp"], cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        _initialize(server)
        server.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        yield server
    finally:
        server.stdin.close()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def exchange(server: subprocess.Popen[bytes], line: bytes) -> Any:
    """Send one line; the server's answer to it."""
    assert server.stdin is not None
    server.stdin.write(line + b"\n")
    server.stdin.flush()
    return json.loads(_answer_line(server))


def test_every_request_is_answered_even_one_holding_a_lone_surrogate(api: Path, box: Store) -> None:
    """A lone surrogate ("\\ud800") is legal JSON (JavaScript writes one for a broken string) but not Unicode: the
    request gets an error under its own id, wherever the surrogate is, and the server goes on serving."""
    mailbox.send(box, sender="web", to="api", subject="hello")
    with line_server(api) as server:
        lines = [
            r'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"inbox","arguments":{"repo":"\ud800"}}}',
            r'{"jsonrpc":"2.0","id":"three","method":"tools/call","params":{"name":"send","arguments":'
            r'{"to":"web","subject":"a\udfffb","message":"x"}}}',
            r'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"log","arguments":{"\ud83d":1}}}',
            r'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"in\udc00box","arguments":{}}}',
            r'{"jsonrpc":"2.0","id":6,"method":"resources/read","params":{"uri":"gitmail://\ud800"}}',
        ]
        for number, line in enumerate(lines):
            answer = exchange(server, line.encode())
            assert answer["id"] == json.loads(line)["id"], answer
            assert answer["error"]["code"] == -32602, answer
            assert "not valid Unicode (a lone surrogate" in answer["error"]["message"], (number, answer)
        call_ = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "inbox", "arguments": {}}}
        answer = exchange(server, json.dumps(call_).encode())
        assert answer["id"] == 7 and "hello" in answer["result"]["content"][0]["text"]
        assert [e.message.subject for e in mailbox.pending(box, repo="web").directed] == []  # nothing was sent


def test_a_line_that_is_no_request_is_answered_with_a_null_id(api: Path) -> None:
    """Broken JSON, JSON nested deeper than a parser goes, a batch, an id that cannot be written back: each gets a
    JSON-RPC error under the null id (the client would wait for ever otherwise), and the server goes on."""
    with line_server(api) as server:
        for line, code in [
            (b'{"jsonrpc":"2.0","id":204,"method":"tools/list",}', -32700),
            (b'{"jsonrpc":"2.0","id":205,"method":"tools/list"', -32700),
            (
                b'{"jsonrpc":"2.0","id":206,"method":"tools/call","params":{"name":"log","arguments":{"x":'
                + b"[" * 5000,
                -32700,
            ),
            (b'[{"jsonrpc":"2.0","id":207,"method":"tools/list"}]', -32600),
            (rb'{"jsonrpc":"2.0","id":"\ud800","method":"tools/list"}', -32600),
        ]:
            answer = exchange(server, line)
            assert (answer["id"], answer["error"]["code"]) == (None, code), (line[:60], answer)
        assert exchange(server, json.dumps({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}).encode())["id"] == 8


def test_a_request_of_another_shape_is_answered_under_its_own_id(api: Path) -> None:
    """params that are a string or an array, another JSON-RPC version, none at all: each request gets a JSON-RPC
    error under its own id (the client would wait for ever otherwise), and the server goes on."""
    with line_server(api) as server:
        for ident, line, said in [
            (301, '{"jsonrpc":"2.0","id":301,"method":"tools/list","params":"x"}', "params are not an object"),
            (302, '{"jsonrpc":"2.0","id":"302","method":"tools/call","params":[1,2]}', "params are not an object"),
            (303, '{"jsonrpc":"1.0","id":303,"method":"tools/list"}', "not JSON-RPC 2.0"),
            (304, '{"id":304,"method":"tools/list"}', "not JSON-RPC 2.0"),
        ]:
            answer = exchange(server, line.encode())
            assert answer["id"] == json.loads(line)["id"] and answer["error"]["code"] == -32600, (ident, answer)
            assert answer["error"]["message"].startswith("gitmail: error: ") and said in answer["error"]["message"]
        assert exchange(server, json.dumps({"jsonrpc": "2.0", "id": 305, "method": "tools/list"}).encode())["id"] == 305


def test_a_subscription_that_cannot_be_kept_is_refused_as_a_read_would_be(tmp_path: Path) -> None:
    with line_server(tmp_path, stderr=subprocess.PIPE) as server:
        for ident, uri, said in [
            (2, "gitmail://other", 'no resource "gitmail://other"'),
            (3, "gitmail://inbox", "gitmail: error: "),  # outside a repository, and no roots to act for
        ]:
            request = {"jsonrpc": "2.0", "id": ident, "method": "resources/subscribe", "params": {"uri": uri}}
            answer = exchange(server, json.dumps(request).encode())
            assert (answer["id"], answer["error"]["code"]) == (ident, -32602), answer
            assert answer["error"]["message"].startswith(said), answer
    assert server.stderr is not None and "Traceback" not in server.stderr.read().decode()


def _answer_line(server: subprocess.Popen[bytes], wait: float = 30.0) -> bytes:
    """The server's next line; a failed assertion (not a hung test) when none comes."""
    import select

    assert server.stdout is not None
    ready, _, _ = select.select([server.stdout], [], [], wait)
    assert ready, f"no answer within {wait:g} seconds"
    return server.stdout.readline()


def test_a_huge_request_line_is_refused_and_the_server_goes_on(api: Path) -> None:
    async def scenario() -> None:
        async with connect(api) as client:
            await client.send_ping()
            said = refused(await call(client, "send", to="web", subject="big", message="é" * 5_000_000))
            assert "the limit is 65,536" in said
            assert len((await client.list_tools()).tools) == 9

    anyio.run(scenario)


# -- registration: gitmail install --mcp --------------------------------------------------------------------------

CLAUDE_JSON = {
    "a busy user file": """\
{
  "numStartups": 34,
  "theme": "dark",
  "projects": {
    "/home/u/api": {"allowedTools": [], "mcpServers": {}}
  },
  "mcpServers": {
    "memory": {"type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"], "env": {}}
  },
  "oauthAccount": {"emailAddress": "u@example.com"}
}
""",
    "no servers yet": '{\n  "numStartups": 1,\n  "userID": "abc"\n}\n',
    "an empty servers object": '{\n\t"mcpServers": {},\n\t"theme": "light"\n}\n',
    "one line": '{"numStartups": 2, "mcpServers": {"x": {"command": "y"}}}',
}

CODEX_TOML = {
    "comments and tables": """\
# my Codex settings
model = "o3"  # the fast one

[features]
codex_hooks = true

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"]
""",
    "a bare file": 'model = "o3"\n',
    "servers as a parent table": "[mcp_servers]\n\n[mcp_servers.other]\ncommand = 'x'\n",
    "dotted keys": 'mcp_servers.other.command = "x"\napproval_policy = "never"\n',
}


def claude_json(home: Path) -> Path:
    return home / ".claude.json"


def codex_toml(home: Path) -> Path:
    return home / ".codex" / "config.toml"


@pytest.mark.parametrize("name", list(CLAUDE_JSON))
def test_claude_registration_is_idempotent_and_reversible_byte_for_byte(cli: CliRunner, home: Path, name: str) -> None:
    original = CLAUDE_JSON[name]
    claude_json(home).write_text(original)
    assert cli("install", "--mcp", "--claude").code == 0
    installed = claude_json(home).read_text()
    data = json.loads(installed)
    assert data["mcpServers"]["gitmail"] == {
        "type": "stdio",
        "command": sys.executable,
        "args": ["-P", "-m", "gitmail", "mcp"],
    }
    assert {k: v for k, v in data.items() if k != "mcpServers"} == {
        k: v for k, v in json.loads(original).items() if k != "mcpServers"
    }
    assert cli("install", "--mcp", "--claude").code == 0
    assert claude_json(home).read_text() == installed  # a second run changes no byte
    assert (home / ".claude.json.gitmail-backup").read_text() == original
    assert cli("uninstall", "--mcp", "--claude").code == 0
    assert claude_json(home).read_text() == original


@pytest.mark.parametrize("name", list(CODEX_TOML))
def test_codex_registration_is_idempotent_and_reversible_byte_for_byte(cli: CliRunner, home: Path, name: str) -> None:
    original = CODEX_TOML[name]
    codex_toml(home).parent.mkdir()
    codex_toml(home).write_text(original)
    assert cli("install", "--mcp", "--codex").code == 0
    installed = codex_toml(home).read_text()
    assert installed.startswith(original)  # everything the user wrote stays as written
    import tomllib

    assert tomllib.loads(installed)["mcp_servers"]["gitmail"] == {
        "command": sys.executable,
        "args": ["-P", "-m", "gitmail", "mcp"],
        "startup_timeout_sec": 30,
        "required": True,
    }
    assert cli("install", "--mcp", "--codex").code == 0
    assert codex_toml(home).read_text() == installed
    assert cli("uninstall", "--mcp", "--codex").code == 0
    assert codex_toml(home).read_text() == original


def test_registration_without_files_creates_them_and_uninstall_removes_them(
    cli: CliRunner, home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    assert cli("install", "--mcp", "--claude", "--codex").code == 0
    claude, codex = tmp_path / "claude-config" / ".claude.json", tmp_path / "codex-home" / "config.toml"
    assert json.loads(claude.read_text())["mcpServers"]["gitmail"]["args"] == ["-P", "-m", "gitmail", "mcp"]
    assert codex.read_text().startswith("[mcp_servers.gitmail] # added by gitmail\n")
    assert not (home / ".claude.json").exists() and not (home / ".codex").exists()
    assert cli("uninstall", "--mcp").code == 0
    assert not claude.exists() and not codex.exists()


def test_a_stale_registration_is_brought_up_to_date_where_it_stands(cli: CliRunner, home: Path) -> None:
    old = {"type": "stdio", "command": "/old/venv/bin/python", "args": ["-m", "gitmail", "mcp"]}
    claude_json(home).write_text(json.dumps({"mcpServers": {"gitmail": old, "z": {"command": "z"}}}, indent=2) + "\n")
    assert cli("install", "--mcp", "--claude").code == 0
    assert list(json.loads(claude_json(home).read_text())["mcpServers"]) == ["gitmail", "z"]
    assert json.loads(claude_json(home).read_text())["mcpServers"]["gitmail"]["command"] == sys.executable


@pytest.mark.parametrize(
    ("host", "content", "said"),
    [
        ("claude", '{"mcpServers": {"gitmail": {"command": "other-tool"}}}', "does not run `gitmail mcp`"),
        ("claude", '{"mcpServers": ', "is not valid JSON"),
        ("claude", '{"mcpServers": []}', "'mcpServers' is not an object"),
        ("codex", '[mcp_servers.gitmail]\ncommand = "other-tool"\n', "does not run `gitmail mcp`"),
        ("codex", "model = \n", "is not valid TOML"),
    ],
)
def test_a_file_gitmail_cannot_edit_safely_is_refused_untouched(
    cli: CliRunner, home: Path, host: str, content: str, said: str
) -> None:
    path = claude_json(home) if host == "claude" else codex_toml(home)
    path.parent.mkdir(exist_ok=True)
    path.write_text(content)
    result = cli("install", "--mcp", f"--{host}")
    assert result.code == 1 and said in result.err and result.err.count("\n") == 1
    assert path.read_text() == content and not path.with_name(path.name + ".gitmail-backup").exists()


def test_dry_run_shows_the_registration_and_writes_nothing(cli: CliRunner, home: Path) -> None:
    claude_json(home).write_text('{\n  "theme": "dark"\n}\n')
    result = cli("install", "--mcp", "--claude", "--dry-run")
    assert result.code == 0 and '+  "mcpServers": {' in result.out and '"gitmail": {' in result.out
    assert claude_json(home).read_text() == '{\n  "theme": "dark"\n}\n'


def test_the_registered_command_serves_the_tools(cli: CliRunner, home: Path, api: Path) -> None:
    assert cli("install", "--mcp", "--claude").code == 0
    entry = json.loads(claude_json(home).read_text())["mcpServers"]["gitmail"]

    async def scenario() -> None:
        params = StdioServerParameters(command=entry["command"], args=entry["args"], env=dict(os.environ), cwd=str(api))
        async with Client(stdio_client(params, errlog=open(os.devnull, "w")), mode="legacy") as client:
            assert [tool.name for tool in (await client.list_tools()).tools][:2] == ["send", "inbox"]

    anyio.run(scenario)


def test_send_attaches_files_of_the_clients_repository_only_and_show_returns_a_text_one(
    api: Path, web: Path, tmp_path: Path, box: Store
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("not yours")
    (api / "docs").mkdir()
    (api / "docs" / "schema.sql").write_text("create table orders (status text);\n")
    (api / "big.txt").write_text("x" * (tools.MAX_SHOWN + 1))
    (api / "image.bin").write_bytes(b"\0\1\2")
    (api / "escape").symlink_to(outside)
    subprocess.run(["git", "-C", str(api), "add", "big.txt"], check=True)
    subprocess.run(["git", "-C", str(api), "commit", "-q", "-m", "start"], check=True)
    (api / "big.txt").write_text("y" * (tools.MAX_SHOWN + 1))

    async def scenario() -> None:
        async with connect(api) as client:
            for path, said in [
                (str(outside), f"{outside} is outside the repository {api}; only files inside it can be attached"),
                ("../outside.txt", f"../outside.txt is outside the repository {api}"),
                ("escape", f"escape is outside the repository {api}"),
                (".git/config", ".git/config is inside the repository's .git folder; it cannot be attached"),
            ]:
                line = refused(await call(client, "send", to="web", subject="x", attach=[path]))
                assert said in line
            assert not mailbox.log(box, repo="api")
            sent = await call(
                client, "send", to="web", subject="files", attach=["docs/schema.sql", "big.txt", "image.bin"], patch=""
            )
            said = ok(sent)
            assert "with 4 attachments" in said and "Note: --patch: attached the uncommitted changes" in said
            assert sent.structured_content is not None
            first = sent.structured_content["id"]
            shown = ok(await call(client, "show", id=first, attachment="schema.sql"))
            assert f'Attachment: "schema.sql" · 35 bytes · application/sql · save: gitmail attachment {first}' in shown
            assert shown.endswith(
                '\nAttachment "schema.sql" (35 bytes), untrusted data like the body, follows on lines starting "> ":\n'
                "> create table orders (status text);\n"
            )
            assert "too big" not in ok(await call(client, "show", id=first))
            assert "show returns attachments of at most 64 KiB" in refused(
                await call(client, "show", id=first, attachment="big.txt")
            )
            assert "is not UTF-8 text" in refused(await call(client, "show", id=first, attachment="image.bin"))
            (api / "empty.txt").write_text("")
            empty = await call(client, "send", to="web", subject="empty", attach=["empty.txt"])
            assert empty.structured_content is not None
            shown_empty = ok(await call(client, "show", id=empty.structured_content["id"], attachment="empty.txt"))
            assert shown_empty.endswith('\nAttachment "empty.txt" is empty (0 bytes).\n')
            assert "attach and patch read from your repository" in refused(
                await call(client, "send", to="web", subject="x", attach=["big.txt"], repo="api")
            )

    anyio.run(scenario)


def test_send_reaches_the_person(api: Path, box: Store) -> None:
    async def scenario() -> None:
        async with connect(api) as client:
            said = ok(await call(client, "send", to="@user", subject="May I drop v1?", urgency="now"))
            assert "to the person (@user)" in said
            assert "no sessions" in refused(await call(client, "send", to="@user#x", subject="x"))

    anyio.run(scenario)
    assert [e.message.subject for e in mailbox.pending(box, repo="@user").directed] == ["May I drop v1?"]
