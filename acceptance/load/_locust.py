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

from ._client import REQUEST_READ_TIMEOUT_S, Sample

__all__ = ["LocustLoad", "locustfile_path"]

_MASTER = "from gevent import monkey; monkey.patch_all(); from wirecheck.acceptance.load.locustfile import master_main; master_main()"


#: slack over the request timeout before a worker without a new sample fails the step
IDLE_SLACK_S = 60.0
#: the master ticks every 2 s; this long without a line from it means it is stuck
SILENT_S = 60.0


def locustfile_path() -> str:
    """Where the locustfile is, found without importing it (importing it patches with gevent)."""
    found = importlib.util.find_spec("wirecheck.acceptance.load.locustfile")
    if found is None or found.origin is None:
        raise ConfigError("wirecheck.acceptance.load.locustfile is not installed")
    return found.origin


class LocustLoad:
    def __init__(
        self,
        *,
        workers: int = 2,
        master: str | None = None,
        expect_workers: int | None = None,
        request_timeout_s: float = REQUEST_READ_TIMEOUT_S,
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
        #: no sample from a worker for this long fails the step: the capacity client's request
        #: (read) timeout plus slack
        self.idle_s = request_timeout_s + IDLE_SLACK_S
        #: no line (tick or answer) from the master for this long fails the step
        self.silent_s = SILENT_S
        self._silent = False
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
        try:
            ready = await self._read(timeout=180)
        except BaseException:  # a master that never answers: leave no process behind
            await self.close()
            raise
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
        """The master's next answer (ticks skipped), waiting at most ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            obj = await self._line(deadline - time.monotonic(), "no answer in time")
            if obj.get("event") != "tick":
                return obj

    async def _line(self, wait: float, why: str) -> dict[str, Any]:
        assert self.master is not None and self.master.stdout is not None
        deadline = time.monotonic() + wait
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TransportError(f"Locust master: {why}")
            try:
                line = await asyncio.wait_for(self.master.stdout.readline(), left)
            except TimeoutError:
                continue  # the loop raises with the reason
            if not line:
                raise TransportError(f"Locust master exited (status {await self.master.wait()})")
            if line.startswith(b"{"):
                obj: dict[str, Any] = json.loads(line)
                return obj

    async def _answer(self, label: str, idle_s: float) -> dict[str, Any]:
        """The step's answer. The master ticks every couple of seconds with the step's sample count and
        fails the step itself when a worker is lost or silent; this side bounds its own wait the same
        way (no tick for SILENT_S, or no new sample for the request timeout plus slack), so a stuck or
        dead master cannot keep the acceptance run waiting for hours."""
        seen, gained = -1, time.monotonic()
        bound = idle_s + self.silent_s
        while True:
            left = min(self.silent_s, gained + bound - time.monotonic())
            why = (
                f"step {label}: no new sample for {bound:.0f} s"
                if left < self.silent_s
                else f"step {label}: silent for {self.silent_s:g} s"
            )
            try:
                obj = await self._line(left, why)
            except TransportError:
                self._silent = True  # close() kills it rather than waiting for it to quit
                raise
            if obj.get("event") != "tick":
                return obj
            if int(obj.get("samples") or 0) > seen:
                seen, gained = int(obj.get("samples") or 0), time.monotonic()

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
            # the master fails the step when a worker sends no sample for this long
            "idle_s": self.idle_s,
        }
        self.master.stdin.write((json.dumps(cmd) + "\n").encode())
        await self.master.stdin.drain()
        # an open-loop step sends nothing between its due times: one interval more
        reply = await self._answer(label, self.idle_s + (1 / rate if rate else 0.0))
        if reply.get("event") != "done":
            raise TransportError(f"Locust step {label}: {reply.get('message', reply)}")
        return [Sample.from_raw(raw) for raw in reply["samples"]]

    async def close(self) -> None:
        """Stop the master and the local workers; whatever does not exit in time is killed. A master
        that went silent gets no ``quit`` (it would not read it) and its workers none either."""
        quit_sent = False
        if self.master is not None and self.master.returncode is None:
            if not self._silent:
                with contextlib.suppress(OSError, AttributeError):
                    assert self.master.stdin is not None
                    self.master.stdin.write(b'{"cmd": "quit"}\n')
                    await self.master.stdin.drain()
                    quit_sent = True
            try:
                await asyncio.wait_for(self.master.wait(), 20 if quit_sent else 0.1)
            except TimeoutError:
                quit_sent = False
                self.master.kill()
                await self.master.wait()
        for w in self.workers:
            try:
                # a worker hears "quit" from a master that quit cleanly; otherwise nobody tells it
                await asyncio.wait_for(w.wait(), 20 if quit_sent else 0.1)
            except TimeoutError:
                w.kill()
                await w.wait()
