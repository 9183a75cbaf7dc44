"""Fixtures for the host suite: the pinned hosts (installed once), a model stub per test, a world per test, and each
host with gitmail installed in it. A test fails if a host tried to reach anything but the stub."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from tests.hosts.harness import HOSTS, Host, Unavailable, World, find_binaries
from tests.hosts.stub import Running, Stub


@cache
def _binaries() -> dict[str, Path] | Unavailable:
    return find_binaries()


@pytest.fixture
def binaries() -> dict[str, Path]:
    found = _binaries()
    if isinstance(found, Unavailable):
        if found.skip:
            pytest.skip(found.reason)
        pytest.fail(found.reason)
    return found


@pytest.fixture
def stub() -> Iterator[Stub]:
    running = Running()
    yield running.stub
    running.close()
    assert running.stub.refused == [], f"a host tried to reach beyond the stub: {running.stub.refused}"


@pytest.fixture
def world(tmp_path: Path, home: Path, stub: Stub, binaries: dict[str, Path]) -> World:
    return World(tmp_path, home, stub, binaries)


@pytest.fixture(params=list(HOSTS))
def host(request: pytest.FixtureRequest, world: World) -> Host:
    """Each host, with gitmail installed the way its users install it."""
    chosen = HOSTS[request.param](world)
    chosen.install()
    return chosen
