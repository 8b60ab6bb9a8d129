"""Run a framework case with and without wirecheck's proxy, and judge what the proxy recorded.

One case runs twice against the same kind of upstream: straight, and through a caller tap (the
proxy as ``wirecheck proxy`` serves it, over loopback sockets) recording into a fresh store. The
caller must see the same both times; the recorded exchanges are then checked as ``wirecheck check
--direct`` would. Every run is held to loopback: a connection or name lookup for anything else fails
the run and is listed (a framework's telemetry would show up here).
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.frameworks.clients import Case, Outcome, Target, run_case
from wirecheck.contracts import CheckConfig, Exchange, Finding, check_exchanges
from wirecheck.proxy import ProxyApp, TapConfig, serve_listener
from wirecheck.record import Store

__all__ = ["Compared", "compare", "loopback_only"]


def _loopback(host: Any) -> bool:
    if not isinstance(host, str):
        return False
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


@contextlib.contextmanager
def loopback_only() -> Iterator[list[str]]:
    """Refuse, and list, every connection or name lookup that is not for loopback."""
    refused: list[str] = []
    connect, connect_ex, getaddrinfo = socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo

    def check(address: Any) -> None:
        if isinstance(address, tuple) and not _loopback(address[0]):
            refused.append(f"connect {address[0]}:{address[1]}")
            raise OSError(f"the frameworks tests reach loopback only, not {address[0]}")

    def guarded_connect(self: socket.socket, address: Any) -> None:
        check(address)
        connect(self, address)

    def guarded_connect_ex(self: socket.socket, address: Any) -> int:
        check(address)
        return connect_ex(self, address)

    def guarded_getaddrinfo(host: Any, *args: Any, **kw: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name is not None and not _loopback(name):
            refused.append(f"resolve {name}")
            raise socket.gaierror(f"the frameworks tests reach loopback only, not {name}")
        return getaddrinfo(host, *args, **kw)

    socket.socket.connect = guarded_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = guarded_connect_ex  # type: ignore[method-assign]
    socket.getaddrinfo = guarded_getaddrinfo
    try:
        yield refused
    finally:
        socket.socket.connect, socket.socket.connect_ex = connect, connect_ex  # type: ignore[method-assign]
        socket.getaddrinfo = getaddrinfo


@dataclass(slots=True)
class Compared:
    """One case, straight and through the proxy."""

    case: Case
    direct: Outcome
    proxied: Outcome
    exchanges: list[Exchange]
    findings: list[Finding]
    refused: list[str] = field(default_factory=list)

    @property
    def differences(self) -> list[str]:
        return self.direct.same_as(self.proxied)

    @property
    def judged(self) -> list[tuple[str, str]]:
        """The error and warning findings as (rule, blamed party), in the order found."""
        return [(f.rule, str(f.fault)) for f in self.findings]


def _recorded(store: Store, n: int) -> list[Exchange]:
    """The store's exchanges once ``n`` are written (the proxy writes each as it finishes)."""
    deadline = time.monotonic() + 10
    while True:
        store.flush()
        if store.count() >= n or time.monotonic() > deadline:
            return list(store.exchanges())
        time.sleep(0.01)


def compare(
    case: Case,
    upstream: Callable[[], AbstractContextManager[str]],
    model: str,
    workdir: Path,
    *,
    extra_body: dict[str, Any] | None = None,
    proxied_upstream: Callable[[], AbstractContextManager[str]] | None = None,
) -> Compared:
    """Run ``case`` straight against ``upstream()`` and, at the same time, through a proxy in front
    of another ``upstream()`` (a fresh simulator each, so both runs see the same request numbers;
    or the same real server twice, whose scripted answers do not depend on what else it serves),
    and check what the proxy recorded. ``proxied_upstream``, when given, serves the proxied run (a
    simulator that writes its ground truth)."""
    workdir.mkdir(parents=True, exist_ok=True)
    store = Store(workdir / f"{case.id}.db", writer=True)

    def direct() -> Outcome:
        with upstream() as url:
            return run_case(case, Target(url, model, extra_body))

    def proxied() -> tuple[Outcome, list[Exchange]]:
        with (proxied_upstream or upstream)() as url:
            app = ProxyApp(TapConfig(upstream=url), store)
            with serve_listener(app) as proxy_url:
                out = run_case(case, Target(proxy_url, model, extra_body))
                return out, _recorded(store, out.requests)

    try:
        # the two runs side by side: each waits on its server most of the time
        with loopback_only() as refused, ThreadPoolExecutor(2) as pool:
            straight = pool.submit(direct)
            through, exchanges = pool.submit(proxied).result()
            alone = straight.result()
    finally:
        store.close()
    found = check_exchanges(exchanges, CheckConfig(direct=True)).findings
    judged = [f for f in found if str(f.severity) in ("error", "warning")]
    return Compared(case, alone, through, exchanges, judged, list(refused))
