"""Who an MCP connection acts for: the repository of the client's MCP roots when it offers them, else the git
toplevel of the server's working directory, else the repo a call names. Every answer says which repo it acted for
and why."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import unquote, urlparse

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from gitmail import render
from gitmail.errors import GitmailError
from gitmail.values.names import RepoName, repo_problem
from gitmail.workspace import Actor, Place, place

ROOTS_WAIT = 5.0  # seconds a client may take to list its roots
ROOTS_KEY = "roots"  # the name of the roots input request on a 2026 connection


class Who(NamedTuple):
    """The repo a call acts for, and how that was decided."""

    repo: RepoName
    here: Path | None  # the repository's own path, when known (not for a name given as an argument)
    source: str  # said in the answer: "the client's root /x/api", "the server's directory /x/api", "the argument"
    place: Place | None = None  # the work tree the roots or the directory are in

    def said(self) -> str:
        return f"as {render.quote(self.repo)} ({self.source})"

    @property
    def actor(self) -> Actor:
        return Actor(self.repo, self.here, "mcp", None, self.place)


def from_roots(uris: Sequence[str]) -> Who | None:
    """The one repository the client's roots are in (worktrees of one repository are one); an error when they are
    in several or in none."""
    homes: dict[Path, Place] = {}
    for uri in uris:
        parsed = urlparse(uri)
        if parsed.scheme != "file":
            continue
        found = place(unquote(parsed.path))
        if found is not None:
            homes.setdefault(found.home, found)
    if not homes:
        if any(urlparse(u).scheme == "file" for u in uris):
            listed = ", ".join(short(unquote(urlparse(u).path)) for u in uris[:3])
            raise GitmailError(f"the client's roots ({listed}) are not inside a git repository; name one with repo")
        return None
    if len(homes) > 1:
        names = ", ".join(render.quote(found.name) for _, found in sorted(homes.items()))
        raise GitmailError(f"the client's roots are in several repositories ({names}); name one with repo")
    found = next(iter(homes.values()))
    return _named(found, f"the client's root {found.top}")


def from_directory(directory: str) -> Who | None:
    found = place(directory)
    return _named(found, f"the server's directory {found.top}") if found is not None else None


def _named(found: Place, source: str) -> Who:
    problem = repo_problem(found.name)
    if problem:
        raise GitmailError(f"the name {found.name!r} cannot be a mailbox name: {problem}; name one with repo")
    return Who(RepoName(found.name), found.home, source, found)


class RootsWanted(Exception):
    """A 2026-era client offers roots but can only be asked for them by answering its request with a request."""


class Identity:
    """Who this connection acts for. Roots are asked once, and again only after the client says they changed:
    on a handshake (2025) connection with a roots/list request, on a 2026 connection by answering the first call
    that needs them with an input request, which the client answers by sending the call again with its roots."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.roots: list[str] | None = None  # None: not asked yet (or changed since)

    async def resolve(
        self,
        ctx: ServerRequestContext[Any, Any],
        explicit: object = None,
        responses: Mapping[str, Any] | None = None,
        *,
        may_ask: bool = True,
    ) -> Who:
        if isinstance(explicit, str):
            return Who(RepoName.of_repository(explicit), None, "the argument")
        roots = await self._roots(ctx, responses or {}, may_ask)
        who = from_roots(roots) if roots else None
        who = who or from_directory(self.directory)
        if who is None:
            raise GitmailError(
                "no repository to act for: the client offers no roots and the server runs outside a git "
                "repository; name one with repo"
            )
        return who

    async def _roots(
        self, ctx: ServerRequestContext[Any, Any], responses: Mapping[str, Any], may_ask: bool
    ) -> list[str]:
        if self.roots is not None:
            return self.roots
        capabilities = ctx.session.client_capabilities
        if capabilities is None or capabilities.roots is None:
            return []
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            answer = responses.get(ROOTS_KEY)
            listed = getattr(answer, "roots", None)
            if listed is None and isinstance(answer, dict):
                listed = types.ListRootsResult.model_validate(answer).roots
            if listed is None:
                if may_ask:
                    raise RootsWanted()
                return []
            self.roots = [str(root.uri) for root in listed]
            return self.roots
        try:
            with anyio.fail_after(ROOTS_WAIT):
                result = await ctx.session.list_roots()
        except TimeoutError:
            raise GitmailError(f"the client did not list its roots within {ROOTS_WAIT:g} s; name a repo") from None
        except Exception:  # the client refused, or cannot be asked: as if it offered none
            return []
        self.roots = [str(root.uri) for root in result.roots]
        return self.roots

    def forget_roots(self) -> None:
        self.roots = None


def ask_for_roots() -> types.InputRequiredResult:
    return types.InputRequiredResult(input_requests={ROOTS_KEY: types.ListRootsRequest(method="roots/list")})


def short(value: object, limit: int = 60) -> str:
    """A value for a message, on one line and never long (an argument may be huge)."""
    import json

    text = json.dumps(value, ensure_ascii=False) if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
