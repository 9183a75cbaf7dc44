"""A real `git daemon` on 127.0.0.1 for the groups that sync over the network, and a relay in front of it that
counts the bytes passing both ways."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from .runner import BenchError


@contextmanager
def git_daemon(base: Path, env: Mapping[str, str] | None = None) -> Iterator[int]:
    """A `git daemon` serving the repositories under `base` (pushes allowed), once it accepts connections; its
    port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    daemon = subprocess.Popen(
        ["git", "daemon", "--reuseaddr", "--export-all", "--enable=receive-pack", "--listen=127.0.0.1"]
        + [f"--port={port}", f"--base-path={base}", str(base)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if daemon.poll() is not None or time.monotonic() > deadline:
                    raise BenchError("git daemon did not start") from None
                time.sleep(0.01)
        yield port
    finally:
        daemon.terminate()
        daemon.wait()


class Relay:
    """A TCP relay in front of the git daemon that counts the bytes passing both ways: what a sync costs on the
    wire, ref advertisement included."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.lock = threading.Lock()
        self.counted = 0
        self.open = 0
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            with self.lock:
                self.open += 2
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self.pump, args=(source, sink), daemon=True).start()

    def pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
                with self.lock:
                    self.counted += len(data)
        except OSError:
            pass
        finally:
            try:
                sink.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            with self.lock:
                self.open -= 1

    def take(self) -> int:
        """The bytes counted since the last take, once every connection has closed."""
        deadline = time.monotonic() + 10
        while self.open and time.monotonic() < deadline:
            time.sleep(0.001)
        with self.lock:
            counted, self.counted = self.counted, 0
        return counted

    def close(self) -> None:
        self.listener.close()


@contextmanager
def relayed(port: int) -> Iterator[Relay]:
    """A Relay in front of the daemon on `port`, closed at the end."""
    relay = Relay(port)
    try:
        yield relay
    finally:
        relay.close()
