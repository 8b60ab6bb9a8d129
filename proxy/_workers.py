"""``wirecheck proxy --workers N``: N proxy processes on the same ports.

One Python process forwards with one core; a node serving hundreds of streams needs more. The
mechanism is the kernel's, not ours: the supervising process binds N listening sockets per tap with
``SO_REUSEPORT`` on the same address and hands one to each worker, and Linux spreads new connections
over them (by a hash of the connection's addresses). Each worker is a whole single-process proxy
(``_runner._serve`` over its sockets) with its own event loop, GIL and store writer.

One store: every worker writes to it in short batch transactions, SQLite in WAL mode with a busy
timeout (``_store``; a writer waits its turn, a batch that still cannot be written is counted as a
gap) or PostgreSQL, which takes many writers. Each row names the worker (``replica``, host:pid) that
wrote it, and each worker writes its own gap rows, so drop accounting stays exact. The supervising
process runs the one live-check worker (its own process, which claims rows: nothing is checked twice)
and the admin listener, which reads the shared store. Pairing works across workers because every
worker mints and verifies ``x-wirecheck-id`` under one secret, fixed here before they start.

What is per worker and not merged: the traffic counters of ``/wirecheck/metrics`` and ``in_flight``
(the admin listener's own process forwards nothing), and the memory of caller-sent correlation ids
already used (a replayed id is refused by each worker that saw it; another worker accepts it once).

A worker that dies is started again on its sockets (held by the supervisor meanwhile, so the port never
closes); SIGTERM or SIGINT stops the workers (each flushes its queue into the store), then the checker.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import replace
from multiprocessing.connection import Connection, wait
from typing import Any

from wirecheck.record import Store, correlation_secret

from ._lifeline import guard
from ._live import CheckerSupervisor, start_checker
from ._loop import run_loop
from ._runner import ProxyRun, _serve

__all__ = ["WorkerPool", "reuseport_sockets", "run_workers"]

#: a worker that dies this soon after starting is restarted only after a pause (it would die again)
_QUICK_DEATH_S = 2.0


def reuseport_sockets(host: str, port: int, n: int) -> list[socket.socket]:
    """``n`` listening sockets on one address with ``SO_REUSEPORT`` (port 0: the first one's port)."""
    if not hasattr(socket, "SO_REUSEPORT"):
        raise OSError("--workers needs SO_REUSEPORT (Linux, BSD, macOS)")
    family, _, _, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    out: list[socket.socket] = []
    try:
        for _ in range(n):
            sock = socket.socket(family, socket.SOCK_STREAM)
            out.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind(addr)
            addr = sock.getsockname()  # port 0: the others join the port the first one got
            sock.listen(2048)
    except BaseException:
        for sock in out:
            sock.close()
        raise
    return out


def _worker_main(
    run: ProxyRun, sockets: list[socket.socket], *, lifeline: Connection, parent_pid: int, index: int
) -> None:
    """One worker process: a single-process proxy over its sockets, writing into the shared store."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the parent decides

    def on_message(_msg: object) -> None:
        # the parent's stop request becomes the SIGTERM that _serve already handles (it stops the
        # listeners); PR_SET_PDEATHSIG sends the same signal when the parent dies
        os.kill(os.getpid(), signal.SIGTERM)

    store = Store(run.store_path, writer=True) if run.store_path else None
    guard(lifeline, parent_pid, on_message)
    try:
        run_loop(_serve(run, store, None, sockets=sockets))
    finally:
        if store is not None:
            store.close()  # every exchange this worker queued is written


class WorkerPool:
    """Starts the workers, restarts one that dies, and stops them all."""

    def __init__(self, run: ProxyRun, sockets: list[list[socket.socket]]) -> None:
        self.run = run
        self.sockets = sockets  # [worker][tap]
        self._ctx = multiprocessing.get_context("spawn")
        self.procs: list[multiprocessing.process.BaseProcess | None] = [None] * len(sockets)
        self._lifelines: list[Connection | None] = [None] * len(sockets)
        self._started: list[float] = [0.0] * len(sockets)
        self.restarts = 0
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def _spawn(self, i: int) -> None:
        life_r, life_w = self._ctx.Pipe(duplex=False)
        proc = self._ctx.Process(
            target=_worker_main,
            args=(self.run, self.sockets[i]),
            kwargs={"lifeline": life_r, "parent_pid": os.getpid(), "index": i},
            name=f"wirecheck-proxy-worker-{i}",
            daemon=False,  # a worker flushes its store on the way out; it is joined, never orphaned
        )
        proc.start()
        life_r.close()  # only the worker holds the read end: EOF there means the supervisor is gone
        self.procs[i], self._lifelines[i] = proc, life_w
        self._started[i] = time.monotonic()

    def start(self) -> WorkerPool:
        for i in range(len(self.sockets)):
            self._spawn(i)
        self._thread = threading.Thread(target=self._watch, name="wirecheck-worker-pool", daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._stopping.is_set():
            live = [(i, p) for i, p in enumerate(self.procs) if p is not None]
            ready = wait([p.sentinel for _, p in live], timeout=0.5)
            for i, proc in live:
                if proc.sentinel not in ready:
                    continue
                proc.join(timeout=1)
                if self._stopping.is_set():
                    return
                print(
                    f"wirecheck proxy: worker {i} died (exit code {proc.exitcode}); restarting it",
                    file=sys.stderr,
                    flush=True,
                )
                if time.monotonic() - self._started[i] < _QUICK_DEATH_S:
                    self._stopping.wait(1.0)
                self.restarts += 1
                self._spawn(i)

    def alive(self) -> int:
        return sum(1 for p in self.procs if p is not None and p.is_alive())

    def stop(self, timeout: float = 60.0) -> None:
        """Ask every worker to stop (each flushes its queue into the store) and wait for them."""
        self._stopping.set()
        for life in self._lifelines:
            if life is not None:
                with contextlib.suppress(OSError):
                    life.send("stop")
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            if proc is not None:
                proc.join(timeout=max(0.1, deadline - time.monotonic()))
                if proc.is_alive():
                    proc.terminate()
                    proc.join(timeout=5)
        if self._thread is not None:
            self._thread.join(timeout=5)


def _health(pool: WorkerPool, checker: CheckerSupervisor | None, n: int) -> dict[str, Any]:
    """What ``/wirecheck/health`` shows under ``checks``: the checker's state and the workers'."""
    state: dict[str, Any] = checker.state() if checker is not None else {"degraded": None}
    alive = pool.alive()
    state["workers"] = {"running": alive, "of": n, "restarts": pool.restarts}
    if alive < n:
        reason = f"{n - alive} of {n} proxy workers not running"
        state["degraded"] = f"{state['degraded']}; {reason}" if state.get("degraded") else reason
    return state


def run_workers(run: ProxyRun) -> int:
    """``run_proxy`` for ``run.workers`` > 1."""
    n = run.workers
    # one correlation secret for every worker, so that taps in different workers pair
    taps = [
        (replace(cfg, correlation_secret=cfg.correlation_secret or correlation_secret()), host, port)
        for cfg, host, port in run.taps
    ]
    run = replace(run, taps=taps)
    per_tap: list[list[socket.socket]] = []
    try:
        for cfg, host, port in taps:
            try:
                per_tap.append(reuseport_sockets(host, port, n))
            except OSError as exc:
                print(
                    f"wirecheck proxy: cannot listen on {host}:{port} for the {cfg.tap} tap: {exc}",
                    file=sys.stderr,
                )
                return 1
        sockets = [[tap_socks[i] for tap_socks in per_tap] for i in range(n)]
        # the parent migrates the store before any worker opens it; it writes nothing itself
        store = Store(run.store_path) if run.store_path else None
        checker = (
            start_checker(store, settle_s=run.settle_s, config=run.check_config())
            if store is not None and run.live_checks
            else None
        )
        pool = WorkerPool(replace(run, admin=None), sockets).start()
        for cfg, host, port in taps:
            upstream = cfg.redact.url(cfg.upstream)
            print(
                f"wirecheck proxy: {cfg.tap} tap on http://{host}:{port} -> {upstream} ({n} workers)",
                flush=True,
            )
        try:
            if run.admin is not None:
                print(
                    f"wirecheck proxy: admin on http://{run.admin[0]}:{run.admin[1]}/wirecheck/health",
                    flush=True,
                )
                asyncio.run(
                    _serve(run, store, None, checks=lambda: _health(pool, checker, n), serve_taps=False)
                )
            else:
                _wait_for_signal()
        finally:
            pool.stop()
            if checker is not None:
                checker.stop(timeout=30)  # the workers' last exchanges are in: it checks them
            if store is not None:
                store.close()
        return 0
    finally:
        for tap_socks in per_tap:
            for sock in tap_socks:
                sock.close()


def _wait_for_signal() -> None:
    """Block until SIGTERM or SIGINT (no admin listener to run meanwhile)."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(0.5):
        pass
