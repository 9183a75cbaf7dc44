"""The MCP group: tool-call round trips to one long-running `gitmail mcp` per archive size, started in `api` as its
clients start it, through the MCP SDK's own client over stdio, timed from the request to its answer; each timed
run of a row is 5 calls (the inbox peeks at `web`'s mail and must show the 20 pending messages)."""

from __future__ import annotations

import os
import time
from typing import Any

from .fixtures import PENDING, RECIPIENT, SENDER, Sandbox, gitmail_command, pending_refs, remove_sent
from .runner import WARMUPS, BenchError, Row, Settings, rotated, summarise

ROWS = ("mcp send", "mcp inbox")
MCP_CALLS_PER_RUN = 5  # tool calls are short: each timed run of an MCP row is this many calls


def measure_mcp(box: Sandbox, settings: Settings) -> list[Row]:
    import anyio

    rows: list[Row] = anyio.run(mcp_rows, box, settings)
    return rows


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
