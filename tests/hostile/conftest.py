"""Shared parts of the hostile tier: a ``wirecheck proxy`` process as deployed, and raw asyncio
upstreams that misbehave on the wire in ways a well-behaved ASGI app cannot."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.servers import free_port
from wirecheck.contracts import Exchange
from wirecheck.proxy import open_store

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@dataclass
class ProxyProcess:
    proc: subprocess.Popen[str]
    url: str
    admin: str
    store: Path

    def rss_mb(self) -> float:
        """Resident set of the proxy process itself (not its checker), from /proc."""
        with open(f"/proc/{self.proc.pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        raise AssertionError("no VmRSS")


def _wait_port(port: int, proc: subprocess.Popen[str], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the proxy exited early: {proc.communicate()[1][-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.05)
    raise AssertionError(f"port {port} did not come up")


@contextlib.contextmanager
def proxy_process(
    upstream: str, tmp: Path, *args: str, env: dict[str, str] | None = None
) -> Iterator[ProxyProcess]:
    """``wirecheck proxy`` in its own process, recording into ``tmp/hostile.db``. Stopped with SIGTERM
    at the end, which must flush the store and exit 0: surviving the test is part of every test."""
    port, admin = free_port(), free_port()
    tmp.mkdir(parents=True, exist_ok=True)
    store = tmp / "hostile.db"
    cmd = [sys.executable, "-m", "wirecheck", "proxy", "--upstream", upstream]
    cmd += ["--listen", f"127.0.0.1:{port}", "--store", str(store), *args]
    cmd += ["--admin", f"127.0.0.1:{admin}"]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    try:
        _wait_port(port, proc)
        _wait_port(admin, proc)
        yield ProxyProcess(proc, f"http://127.0.0.1:{port}", f"http://127.0.0.1:{admin}", store)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, f"the proxy did not survive: rc {proc.returncode}\n{err[-3000:]}"


@contextlib.contextmanager
def raw_server(handle: Handler) -> Iterator[str]:
    """An asyncio TCP server on loopback in its own thread and loop; ``handle`` owns each connection."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    box: dict[str, object] = {}

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        box["port"] = server.sockets[0].getsockname()[1]
        box["server"] = server
        started.set()
        async with server:
            await server.serve_forever()

    def run() -> None:
        try:
            with contextlib.suppress(asyncio.CancelledError):
                loop.run_until_complete(main())
        finally:
            loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(10), "raw server did not start"
    try:
        yield f"http://127.0.0.1:{box['port']}"
    finally:

        def stop() -> None:
            for task in asyncio.all_tasks(loop):
                task.cancel()

        loop.call_soon_threadsafe(stop)
        thread.join(timeout=10)


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One request (head, body) off a raw connection; the body is Content-Length framed (the proxy
    always sends one)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return head, await reader.readexactly(length)


def recorded(path: Path) -> list[Exchange]:
    """Every exchange in a store the proxy has finished writing."""
    store = open_store(path)
    try:
        return list(store.exchanges())
    finally:
        store.close()
