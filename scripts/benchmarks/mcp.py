"""The MCP group: tool-call round trips to one long-running `gitmail mcp` per archive size, started in `api` as its
clients start it, through the MCP SDK's own client over stdio, timed from the request to its answer; each timed
run of a row is 5 calls (the inbox peeks at `web`'s mail and must show the 20 pending messages).

Then, in one interleaved run beside `python3 -c pass`, over the wire itself (a JSON line each way): a new server's
first answer (from the process's start to the answer to `initialize`), its resident memory once it has answered
`tools/list` and an inbox call and sits idle, and an inbox call to a running server at 1,000 pending (the 20
gitmail wrote and 980 more, each a loose ref as gitmail writes them)."""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import time
from typing import IO, Any

from . import fixtures
from .fixtures import PENDING, RECIPIENT, SENDER, Sandbox, copy_mailbox, gitmail_command, pending_refs, remove_sent
from .runner import WARMUPS, BenchError, Row, Settings, rotated, summarise, times

SIDE = (
    "mcp: python3 -c pass",
    "mcp: first answer after start",
    "mcp: idle memory",
    "mcp: inbox call at 1,000 pending",
)
ROWS = ("mcp send", "mcp inbox", *SIDE)
MANY = 1000  # pending messages of the inbox row
MCP_CALLS_PER_RUN = 5  # tool calls are short: each timed run of an MCP row is this many calls


def measure_mcp(box: Sandbox, settings: Settings) -> list[Row]:
    import anyio

    rows: list[Row] = anyio.run(mcp_rows, box, settings)
    return rows + side_by_side(box, settings)


async def mcp_rows(box: Sandbox, settings: Settings) -> list[Row]:
    from contextlib import AsyncExitStack

    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    sizes, calls = settings.sizes, settings.runs * MCP_CALLS_PER_RUN
    command, *args = gitmail_command()
    async with AsyncExitStack() as stack:
        errors = stack.enter_context(open(os.devnull, "w"))
        clients: dict[int, Any] = {}
        for size in sizes:
            params = StdioServerParameters(
                command=command, args=[*args, "mcp"], env=box.env(size), cwd=str(box.repo(SENDER))
            )
            clients[size] = await stack.enter_async_context(Client(stdio_client(params, errlog=errors), mode="legacy"))

        async def call(size: int, tool: str, arguments: dict[str, Any]) -> float:
            start = time.perf_counter()
            result = await clients[size].call_tool(tool, arguments)
            elapsed = time.perf_counter() - start
            if result.is_error:
                raise BenchError(f"mcp {tool} at {size:,} archived failed: {result.content[0].text}")
            if tool == "inbox" and not result.content[0].text.startswith(f"gitmail: {PENDING} messages for "):
                raise BenchError(f"mcp inbox at {size:,} archived did not show the {PENDING} pending messages")
            return elapsed

        rows = []
        before = {size: pending_refs(box, size) for size in sizes}
        tools: dict[str, tuple[str, dict[str, Any]]] = {
            "mcp inbox": ("inbox", {"repo": RECIPIENT, "peek": True}),
            "mcp send": ("send", {"to": RECIPIENT, "subject": "bench", "message": "hello"}),
        }
        for name, (tool, arguments) in tools.items():
            for size in sizes:
                for _ in range(WARMUPS):
                    await call(size, tool, arguments)
            seconds: dict[int, list[float]] = {size: [] for size in sizes}
            for turn in range(calls):
                for size in rotated(sizes, turn):
                    seconds[size].append(await call(size, tool, arguments))
            rows += [summarise(name, size, seconds[size]) for size in sizes]
    for size in sizes:
        remove_sent(box, size, before[size], calls + WARMUPS, "mcp send")
    for row in rows:
        row.note = "one tool call over stdio (p50)"
    return rows


# -- beside python3 -c pass, over the wire ---------------------------------------------------------------------


class Server:
    """One `gitmail mcp` spoken to as a client speaks to it: a JSON-RPC request a line, its answer a line."""

    def __init__(self, env: dict[str, str], cwd: str) -> None:
        self.process = subprocess.Popen(
            [*gitmail_command(), "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, cwd=cwd,
        )  # fmt: skip
        self.asked = 0

    def ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.asked += 1
        self._write({"jsonrpc": "2.0", "id": self.asked, "method": method, "params": params})
        out: IO[bytes] | None = self.process.stdout
        assert out is not None
        while True:
            line = out.readline()
            if not line:
                raise BenchError(f"gitmail mcp exited before answering {method}")
            answer: dict[str, Any] = json.loads(line)
            if answer.get("id") == self.asked:
                if "error" in answer:
                    raise BenchError(f"gitmail mcp answered {method} with {answer['error']}")
                return answer

    def start(self) -> None:
        """The handshake a client makes."""
        self.ask("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": CLIENT})
        self._write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def inbox(self, repo: str) -> str:
        answer = self.ask("tools/call", {"name": "inbox", "arguments": {"repo": repo, "peek": True}})
        text: str = answer["result"]["content"][0]["text"]
        return text

    def resident_mib(self) -> float:
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        raise BenchError("no VmRSS in /proc: the idle memory row needs Linux")

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        if self.process.wait(30) != 0:
            raise BenchError(f"gitmail mcp exited {self.process.returncode}")

    def _write(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()


CLIENT = {"name": "bench", "version": "1"}


def many_pending(box: Sandbox) -> dict[str, str]:
    """A copy of the mailbox of 0 archived messages with 980 more messages pending for `web` (1,000 in all), and the
    environment that uses it."""
    mailbox = box.root / "mail-mcp-many.git"
    copy_mailbox(box.mailbox(0), mailbox)
    taken = {ref.rsplit("/", 1)[1] for ref in fixtures.refs_under(mailbox, "refs/gitmail/")}
    ids = fixtures.fresh_ids(MANY - PENDING, taken, random.Random(MANY))
    importer = subprocess.Popen(
        ["git", "--git-dir", str(mailbox), "fast-import", "--quiet", "--done"],
        stdin=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert importer.stdin is not None
    for mark, message_id in enumerate(ids, start=1):
        importer.stdin.write(fixtures.fast_import_message(mark, message_id, mark, prefix=fixtures.inbox_prefix()))
    _, errors = importer.communicate(b"done\n")
    if importer.returncode != 0:
        raise BenchError(f"git fast-import failed: {errors.decode().strip()}")
    if len(fixtures.refs_under(mailbox, fixtures.inbox_prefix())) != MANY:
        raise BenchError(f"the mailbox for the inbox row does not hold {MANY} pending messages")
    return {**box.env(0), "GITMAIL_DIR": str(mailbox)}


def side_by_side(box: Sandbox, settings: Settings) -> list[Row]:
    cwd = str(box.repo(SENDER))
    env, many = box.env(0), many_pending(box)
    running = Server(many, cwd)
    running.start()
    if f" of {MANY}: " not in running.inbox(RECIPIENT).split("\n", 2)[1]:
        raise BenchError(f"the inbox at {MANY:,} pending did not say it shows some of {MANY}")
    seconds: dict[str, list[float]] = {name: [] for name in SIDE}
    memory: list[float] = []

    def baseline() -> None:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True, env=env, cwd=cwd)
        seconds[SIDE[0]].append(time.perf_counter() - start)

    def first_answer() -> None:
        start = time.perf_counter()
        server = Server(env, cwd)
        server.start()
        seconds[SIDE[1]].append(time.perf_counter() - start)
        server.ask("tools/list", {})
        if not server.inbox(RECIPIENT).startswith(f"gitmail: {PENDING} messages for "):
            raise BenchError(f"a new server's inbox did not show the {PENDING} pending messages")
        time.sleep(0.2)  # idle: what the answers allocated and let go of is given back
        memory.append(server.resident_mib())
        server.close()

    def inbox_calls() -> None:
        for _ in range(MCP_CALLS_PER_RUN):
            start = time.perf_counter()
            running.inbox(RECIPIENT)
            seconds[SIDE[3]].append(time.perf_counter() - start)

    steps = [baseline, first_answer, inbox_calls]
    for turn in range(WARMUPS + settings.runs):
        if turn == WARMUPS:
            memory.clear()
            for recorded in seconds.values():
                recorded.clear()
        for step in rotated(steps, turn):
            step()
    running.close()
    base = summarise(SIDE[0], None, seconds[SIDE[0]])
    first = summarise(SIDE[1], None, seconds[SIDE[1]])
    first.note = times(first, base, "python3 -c pass") + "; to the answer to initialize"
    rss = Row(SIDE[2], None, 0.0, 0.0, len(memory), mib=(statistics.median(memory), min(memory)))
    rss.note = "after initialize, tools/list and an inbox call at 20 pending"
    inbox = summarise(SIDE[3], None, seconds[SIDE[3]])
    inbox.note = times(inbox, base, "python3 -c pass") + "; one tool call over stdio, a running server"
    return [base, first, rss, inbox]
