"""Who an MCP connection acts for: the repository of the client's MCP roots when it offers them, else the git
toplevel of the server's working directory, else the repo a call names. Every answer says which repo it acted for
and why."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple
from urllib.parse import unquote, urlparse

from gitmail import render
from gitmail.errors import GitmailError
from gitmail.mcp.wire import Request, WireError
from gitmail.values.names import RepoName, repo_problem
from gitmail.workspace import Actor, Place, place

ROOTS_WAIT = 5.0  # seconds a client may take to list its roots
ROOTS_KEY = "roots"  # the name of the roots input request on a 2026 connection


class Who(NamedTuple):
    """The repo a call acts for, and how that was decided."""

    repo: RepoName
    here: str | None  # the repository's own path, when known (not for a name given as an argument)
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
    homes: dict[str, Place] = {}
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

    def resolve(self, request: Request, explicit: object = None, *, may_ask: bool = True) -> Who:
        if isinstance(explicit, str):
            return Who(RepoName.of_repository(explicit), None, "the argument")
        roots = self._roots(request, may_ask)
        who = from_roots(roots) if roots else None
        who = who or from_directory(self.directory)
        if who is None:
            raise GitmailError(
                "no repository to act for: the client offers no roots and the server runs outside a git "
                "repository; name one with repo"
            )
        return who

    def _roots(self, request: Request, may_ask: bool) -> list[str]:
        if self.roots is not None:
            return self.roots
        if not isinstance(request.client_capabilities.get("roots"), dict):
            return []
        if request.modern:
            responses = request.params.get("inputResponses")
            answer = responses.get(ROOTS_KEY) if isinstance(responses, dict) else None
            listed = answer.get("roots") if isinstance(answer, dict) else None
            if not isinstance(listed, list):
                if may_ask:
                    raise RootsWanted()
                return []
            self.roots = _uris(listed)
            return self.roots
        try:
            result = request.peer.ask("roots/list", None, ROOTS_WAIT)
        except TimeoutError:
            raise GitmailError(f"the client did not list its roots within {ROOTS_WAIT:g} s; name a repo") from None
        except WireError:  # the client refused: as if it offered none
            return []
        listed = result.get("roots")
        self.roots = _uris(listed if isinstance(listed, list) else [])
        return self.roots

    def forget_roots(self) -> None:
        self.roots = None


def _uris(listed: Sequence[Any]) -> list[str]:
    return [str(root["uri"]) for root in listed if isinstance(root, dict) and isinstance(root.get("uri"), str)]


def ask_for_roots() -> dict[str, Any]:
    """A 2026 answer asking the client to send the call again with its roots."""
    return {"inputRequests": {ROOTS_KEY: {"method": "roots/list"}}, "resultType": "input_required"}


def short(value: object, limit: int = 60) -> str:
    """A value for a message, on one line and never long (an argument may be huge)."""
    import json

    text = json.dumps(value, ensure_ascii=False) if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
