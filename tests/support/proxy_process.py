"""Shared parts of the hostile tier: a ``wirecheck proxy`` process as deployed, and raw asyncio
upstreams that misbehave on the wire in ways a well-behaved ASGI app cannot."""

from __future__ import annotations

import contextlib
import itertools
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.servers import port_open, running, stop
from wirecheck.contracts import Exchange
from wirecheck.record import free_port, open_store


@dataclass
class ProxyProcess:
    proc: subprocess.Popen[str]
    url: str
    admin: str
    store: Path
    #: what the proxy wrote on stderr, once it has stopped
    stderr: str = ""

    def rss_mb(self) -> float:
        """Resident set of the proxy process itself (not its checker), from /proc."""
        with open(f"/proc/{self.proc.pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        raise AssertionError("no VmRSS")


@contextlib.contextmanager
def proxy_process(
    upstream: str, tmp: Path, *args: str, env: dict[str, str] | None = None
) -> Iterator[ProxyProcess]:
    """``wirecheck proxy`` in its own process, recording into ``tmp/hostile.db``. Stopped with SIGTERM
    at the end, which must flush the store and exit 0: surviving the test is part of every test."""
    port, admin = free_port(), free_port()
    tmp.mkdir(parents=True, exist_ok=True)
    store = tmp / "hostile.db"
    cmd = ["proxy", "--upstream", upstream, "--listen", f"127.0.0.1:{port}", "--store", str(store), *args]
    # every listener, the engine tap's too: they start side by side
    engine = [int(v.rsplit(":", 1)[1]) for k, v in itertools.pairwise(args) if k == "--engine-listen"]
    ports = [port, admin, *engine]
    with running(*cmd, "--admin", f"127.0.0.1:{admin}", env=env, ready=port_open(*ports)) as proc:
        px = ProxyProcess(proc, f"http://127.0.0.1:{port}", f"http://127.0.0.1:{admin}", store)
        try:
            yield px
        finally:
            _out, err = stop(proc, timeout=60)
            px.stderr = err
    assert proc.returncode == 0, f"the proxy did not survive: rc {proc.returncode}\n{err[-3000:]}"


def recorded(path: Path) -> list[Exchange]:
    """Every exchange in a store the proxy has finished writing."""
    store = open_store(path)
    try:
        return list(store.exchanges())
    finally:
        store.close()
