"""The capacity phase's load on Locust (master/worker over ZeroMQ), driven from the acceptance run.

The master is a separate process (Locust patches the standard library with gevent, which must not
reach this asyncio process), spoken to with JSON lines: a step goes in (its request specs, users and
open-loop rate), the raw per-request measurements come back. Local workers are started with
``--locust-workers N``; with ``--locust-master HOST:PORT`` the master listens there and waits for
workers that the team starts on its load machines.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import sys
import time
from typing import Any

from wirecheck._errors import TransportError
from wirecheck.contracts import ConfigError
from wirecheck.record import free_port

from ._client import Sample

__all__ = ["LocustLoad", "locustfile_path"]

_MASTER = "from gevent import monkey; monkey.patch_all(); from wirecheck.acceptance.locustfile import master_main; master_main()"


def locustfile_path() -> str:
    """Where the locustfile is, found without importing it (importing it patches with gevent)."""
    found = importlib.util.find_spec("wirecheck.acceptance.locustfile")
    if found is None or found.origin is None:
        raise ConfigError("wirecheck.acceptance.locustfile is not installed")
    return found.origin


class LocustLoad:
    def __init__(
        self, *, workers: int = 2, master: str | None = None, expect_workers: int | None = None
    ) -> None:
        if workers < 1 and master is None:
            raise ConfigError("--locust-workers must be at least 1")
        self.local_workers = 0 if master else workers
        host, _, port = (master or "127.0.0.1:0").rpartition(":")
        if not port.isdigit():
            raise ConfigError(f"--locust-master: expected HOST:PORT, got {master!r}")
        self.bind_host = host or "127.0.0.1"
        self.port = int(port) or free_port()
        self.expect = expect_workers or (workers if not master else 1)
        self.master: asyncio.subprocess.Process | None = None
        self.workers: list[asyncio.subprocess.Process] = []
        self._steps = 0
        self.info: dict[str, Any] = {}

    async def start(self, target: str) -> None:
        self.master = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _MASTER,
            "--bind-host",
            self.bind_host,
            "--port",
            str(self.port),
            "--workers",
            str(self.expect),
            "--target",
            target,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        path = locustfile_path()
        for _ in range(self.local_workers):
            self.workers.append(
                await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "locust",
                    "-f",
                    path,
                    "--worker",
                    "--master-host",
                    "127.0.0.1" if self.bind_host in ("0.0.0.0", "") else self.bind_host,
                    "--master-port",
                    str(self.port),
                    "--loglevel",
                    "ERROR",
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.DEVNULL,
                )
            )
        ready = await self._read(timeout=180)
        if ready.get("event") != "ready":
            await self.close()
            raise TransportError(f"Locust: {ready.get('message', ready)}")
        self.info = {
            "engine": "locust",
            "workers": ready["workers"],
            "master": f"{self.bind_host}:{self.port}",
            "local_workers": self.local_workers,
        }

    async def _read(self, timeout: float) -> dict[str, Any]:
        assert self.master is not None and self.master.stdout is not None
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TransportError("Locust master: no answer in time")
            line = await asyncio.wait_for(self.master.stdout.readline(), left)
            if not line:
                raise TransportError(f"Locust master exited (status {await self.master.wait()})")
            if line.startswith(b"{"):
                obj: dict[str, Any] = json.loads(line)
                return obj

    async def step(
        self,
        label: str,
        specs: list[dict[str, Any]],
        *,
        url: str,
        headers: dict[str, str],
        users: int,
        rate: float | None = None,
    ) -> list[Sample]:
        assert self.master is not None and self.master.stdin is not None
        self._steps += 1
        cmd = {
            "cmd": "step",
            "step": f"s{self._steps}",
            "label": label,
            "specs": specs,
            "url": url,
            "headers": headers,
            "users": users,
            "rate": rate,
        }
        self.master.stdin.write((json.dumps(cmd) + "\n").encode())
        await self.master.stdin.drain()
        reply = await self._read(timeout=7200)
        if reply.get("event") != "done":
            raise TransportError(f"Locust step {label}: {reply.get('message', reply)}")
        return [Sample.from_raw(raw) for raw in reply["samples"]]

    async def close(self) -> None:
        if self.master is not None and self.master.returncode is None:
            with contextlib.suppress(OSError, AttributeError):
                assert self.master.stdin is not None
                self.master.stdin.write(b'{"cmd": "quit"}\n')
                await self.master.stdin.drain()
            try:
                await asyncio.wait_for(self.master.wait(), 20)
            except TimeoutError:
                self.master.kill()
                await self.master.wait()
        for w in self.workers:
            try:
                await asyncio.wait_for(w.wait(), 20)
            except TimeoutError:
                w.kill()
                await w.wait()
