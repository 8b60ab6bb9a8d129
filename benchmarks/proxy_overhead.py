"""What the proxy adds to a stream: direct vs wirecheck vs nginx vs mitmproxy, same SSE upstream.

Each run starts one paced SSE upstream (a raw asyncio HTTP/1.1 server: N events, one every
``--interval-ms``, streamed as vLLM streams a chat completion: a role chunk, content, a last chunk
with the finish_reason; ``--upstream-shape bare`` leaves the finish_reason out, so that the live
checker has a finding to judge and store on every exchange; ``thinking`` streams a thinking model's
reasoning before its answer, ``tool-call`` a call of the tool the callers' request declares, its
arguments piece by piece: an agent's traffic, as conforming as the default), then, for each proxy, the proxy in its
own process in front of it, and drives ``level`` concurrent streams through it (each caller starts
its next stream when one ends, their starts spread out, for ``--duration`` seconds; on a connection
of its own each, or with ``--keep-alive`` on the caller's one connection, as an SDK's pool keeps it)
from a raw asyncio client that notes when each SSE
event (``\\n\\n``) arrives. Reported per proxy and level, all measured in the same run:

- added TTFT p50 / p99: the proxy's time-to-first-event percentile minus the direct one;
- inter-event delay p50 / p99 (the upstream paces at ``--interval-ms``);
- throughput ratio: events per second through the proxy over events per second direct;
- proxy RSS: the largest resident set of the proxy's processes during the level (MB);
- CPU per forwarded event: user + system CPU of all the proxy's processes (its workers, store
  writer and live checker included; ``/proc/PID/stat``) over the SSE events the callers received,
  counted until the live checker has checked every exchange of the level (it runs on idle CPU time
  and catches up after the load: ``catch-up`` is how long that took, and ``cpu/ev`` includes it).
  On a shared machine this is far less noisy than latency; ``x nginx`` is it as a ratio to nginx's
  at the same level in the same run; ``sys/ev`` is the part of ``cpu/ev`` spent in the kernel
  (system time: the sockets' reads and writes every proxy pays, and the store's writes); ``main/ev`` is the same for the proxy's top process alone,
  during the load (for wirecheck without ``--workers``: the forwarding process, without its live
  checker and live view); ``loop/ev`` that process's first thread alone, the one that runs the event
  loop (``/proc/PID/task/PID/stat``, to a clock tick of its process's figure): ``main/ev`` less
  ``loop/ev`` is its other threads (the store writer's), ``cpu/ev`` less ``main/ev`` its helper
  processes and the catch-up;
- the load generator's own CPU (percent of one core): near 100 % the generator, not the proxy, is
  the bottleneck, and the row says so.

The proxy kind ``relay`` is a bare byte relay in Python on the loop the proxy runs on (uvloop
where installed): no HTTP parsing, recording or checking, one callback and one write per read
(``overhead_load.relay``). Its CPU per event is the floor of any proxy written that way, so
wirecheck's minus the relay's is what parsing, recording and checking cost per event.

The proxy kind ``wirecheck-asgi`` is wirecheck with ``WIRECHECK_DIRECT_BODY=0``: every body piece
through one ASGI ``send``, as before the direct body; list it in ``--proxies`` for an A/B
of the two paths in one run.

The proxy kind ``wirecheck-base`` is wirecheck as another build runs it: ``--base PYTHON`` names that
build's interpreter (another checkout's ``.venv/bin/python``, its compiled twins built). Listed in
``--proxies`` beside ``wirecheck``, it gives an A/B of two builds measured minutes apart in one run:
CPU per event moves by more between runs than a change of a few per cent, and far less within one.
Swap the two in ``--proxies`` from one run to the next, so that neither is always measured first.

With ``--workers N`` wirecheck is measured again as ``wirecheck-wN`` (``wirecheck proxy --workers N``),
and ``direct``, ``wirecheck`` and ``wirecheck-wN`` are also measured at ``--workers-levels`` (default
256,1024). ``--clients K`` spreads the load over K client processes (for levels one process cannot
drive; each reports its events and they are merged).

With ``--viewers N`` wirecheck is measured a second time (row ``wirecheck+Nv``) with N live-view
viewers connected to its ``/wirecheck/events`` stream for the whole run, reading every
exchange and finding event from a separate process; the same targets apply to that row, and the
events the viewers received are reported.

``--contend N`` runs everything (the direct baseline too) beside N processes that each keep one core
busy (pinned to cores 0 to N-1): the figures under contention.

Targets: at 64 streams added TTFT p50 <= 1 ms and p99 <= 5 ms; throughput >= 0.9x direct;
less added latency than mitmproxy at every level; RSS <= 150 MB at 256 streams; at 256 streams
+TTFT p50 <= 5 ms, p99 <= 25 ms, >= 0.95x direct and, with nginx in the run, CPU per event at
most 2x nginx's. wirecheck runs as
deployed: recording into a store with the live-check worker on. nginx runs with
``proxy_buffering off``, mitmproxy in reverse mode with streaming on.

    python benchmarks/proxy_overhead.py [--levels 1,16,64,256] [--proxies direct,wirecheck,nginx,mitmproxy]
                                        [--viewers 10] [--contend 1]

This script starts the proxies, follows their processes' memory and CPU, and runs the levels; the
upstream, the viewers and the client are in ``overhead_load.py``, the rows, table and targets in
``overhead_report.py`` (run as a script, this folder is on ``sys.path``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench_output import python_build, write_json
from overhead_load import SHAPES, relay, upstream, viewers
from overhead_load import level as run_level
from overhead_report import print_table, row, targets, vs_nginx

from wirecheck.record import free_port

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


# --- the proxy's processes: their memory and CPU from /proc ---------------------------------------


def _rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total / 1024


def _cpu(pid: int | None, *, thread: bool = False) -> tuple[int, int]:
    """Clock ticks of CPU the process has used so far: user + system, and system alone, from one
    reading (two readings a tick apart can show more system time than the total). The cost of the
    proxy's own event loop, which contention on a busy host does not inflate the way it inflates
    latency. System time is the kernel's work for it: mostly the sockets' reads and writes, which
    every proxy pays per event, so it says how much of a proxy's CPU no user-space code can cut.
    ``thread``: the process's first thread alone (its id is the process's), not all its threads."""
    if pid is None:
        return 0, 0
    with contextlib.suppress(OSError):
        path = f"/proc/{pid}/task/{pid}/stat" if thread else f"/proc/{pid}/stat"
        fields = Path(path).read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12]), int(fields[12])
    return 0, 0


def _tree_cpu(pid: int | None) -> dict[int, tuple[int, int]]:
    """``_cpu`` of ``pid`` and of every process below it (workers, store writer, live checker)."""
    return {} if pid is None else {p: _cpu(p) for p in _children(pid)}


def _used(before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]]) -> tuple[float, float]:
    """CPU seconds (total, system) the processes of ``after`` used since ``before``: process by
    process, one that started since counting from nothing, in whole ticks until the end (seconds
    subtracted as floats could leave the system time a last bit over a total of the same ticks).
    Summed first and subtracted after, a helper that ended in between took its CPU out of the sum."""
    total = system = 0
    for p, (t1, s1) in after.items():
        t0, s0 = before.get(p, (0, 0))
        total += t1 - t0
        system += s1 - s0
    tick = os.sysconf("SC_CLK_TCK")
    return total / tick, system / tick


def _children(pid: int) -> list[int]:
    out = [pid]
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            children = (task / "children").read_text().split()
            for c in children:
                out.extend(_children(int(c)))
    return out


def _catch_up(store: Path, timeout: float = 120.0) -> float:
    """Seconds until the live checker has checked every exchange in ``store`` (it settles each one
    first, and runs on idle CPU time: under load it falls behind and catches up after)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        time.sleep(0.2)
        with contextlib.suppress(sqlite3.Error):
            conn = sqlite3.connect(f"{store.resolve().as_uri()}?mode=ro", uri=True, timeout=5)
            try:
                if conn.execute("SELECT COUNT(*) FROM checks").fetchone()[0] == 0:
                    break
            finally:
                conn.close()
    return time.monotonic() - t0


def _busy(core: int) -> None:
    """Keep one core busy (``--contend``)."""
    with contextlib.suppress(AttributeError, OSError):  # pinned where the platform allows it
        os.sched_setaffinity(0, {core % (os.cpu_count() or 1)})
    while True:
        pass


# --- proxies ------------------------------------------------------------------------------------


def start_upstream(
    port: int, events: int, interval_ms: float, shape: str = "vllm", **popen: Any
) -> subprocess.Popen[bytes]:
    """The paced SSE upstream (``--role upstream``: ``events`` events ``interval_ms`` apart, in the
    stream ``shape``, ``overhead_load.SHAPES``) on ``port``, in a process of its own."""
    role = [sys.executable, str(Path(__file__).resolve()), "--role", "upstream", "--port", str(port)]
    paced = ["--events", str(events), "--interval-ms", str(interval_ms), "--upstream-shape", shape]
    return subprocess.Popen([*role, *paced], **popen)


def _build_of(python: str, timeout: float = 60.0) -> str:
    """``bench_output.python_build`` of another interpreter (``--base``): asked of it, here. Asked
    after the runs, so an interpreter that does not answer is said in the result, not raised."""
    code = f"import sys; sys.path.insert(0, {str(HERE)!r}); import bench_output; print(bench_output.python_build())"
    try:
        done = subprocess.run(
            [python, "-c", code], capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return f"not told (no answer in {timeout:g} s)"
    except OSError as exc:
        return f"not told ({exc.strerror or exc})"
    return done.stdout.strip() or f"not told (exit {done.returncode})"


def _wait_port(port: int, proc: subprocess.Popen[bytes] | None, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited early with {proc.returncode}")
        time.sleep(0.05)
    raise RuntimeError(f"port {port} did not open")


@contextlib.contextmanager
def _proxy(
    kind: str,
    upstream_port: int,
    tmp: Path,
    base_python: str | None = None,
    *,
    env: dict[str, str] | None = None,
) -> Iterator[tuple[int, subprocess.Popen[bytes] | None, int]]:
    """The proxy of ``kind`` on a free port: (its port, its process, its admin port or 0);
    ``base_python``: the interpreter of ``wirecheck-base``; ``env``: variables set for it besides
    this process's."""
    if kind == "direct":
        yield upstream_port, None, 0
        return
    port, admin = free_port(), 0
    up = f"http://127.0.0.1:{upstream_port}"
    extra = dict(env or {})
    if kind.startswith("wirecheck"):
        if kind == "wirecheck-asgi":  # the same proxy with one ASGI send per piece (an A/B)
            extra["WIRECHECK_DIRECT_BODY"] = "0"
        python = sys.executable
        if kind == "wirecheck-base":  # the same proxy as another build runs it (an A/B of builds)
            assert base_python is not None  # checked with the arguments
            python = base_python
        cmd = [
            python,
            # -P: not the working directory first on the path, where ``-m`` would import this
            # tree's ``wirecheck`` package into the other build's process
            "-P",
            "-m",
            "wirecheck",
            "proxy",
            "--upstream",
            up,
            "--listen",
            f"127.0.0.1:{port}",
            "--store",
            str(tmp / f"{kind}.db"),
            "--admin",
            "off",  # no admin listener unless viewers read it: its default port may be taken
        ]
        if "+" in kind:  # wirecheck+Nv: the live view lives on the admin listener
            admin = free_port()
            cmd[-1] = f"127.0.0.1:{admin}"
        if kind.startswith("wirecheck-w"):  # wirecheck-wN: N proxy processes on the port
            cmd += ["--workers", kind.removeprefix("wirecheck-w")]
    elif kind == "relay":
        cmd = [
            sys.executable,
            __file__,
            "--role",
            "relay",
            "--port",
            str(port),
            "--upstream-port",
            str(upstream_port),
        ]
    elif kind == "nginx":
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        conf = tmp / "nginx.conf"
        conf.write_text(
            f"worker_processes 1; pid {tmp}/nginx.pid; error_log {tmp}/nginx.err warn;\n"
            f"events {{ worker_connections 4096; }}\n"
            f"http {{ access_log off; proxy_temp_path {tmp}/p; client_body_temp_path {tmp}/b;\n"
            f"  upstream up {{ server 127.0.0.1:{upstream_port}; keepalive 512; }}\n"
            f"  server {{ listen 127.0.0.1:{port}; location / {{ proxy_pass http://up; proxy_http_version 1.1;\n"
            f'    proxy_set_header Connection ""; proxy_buffering off; }} }} }}\n'
        )
        cmd = [nginx, "-c", str(conf), "-g", "daemon off;", "-e", f"{tmp}/nginx.err"]
    elif kind == "mitmproxy":
        mitmdump = str(Path(sys.executable).with_name("mitmdump"))
        cmd = [
            mitmdump,
            "-q",
            "--mode",
            f"reverse:{up}",
            "--listen-host",
            "127.0.0.1",
            "-p",
            str(port),
            "--set",
            "stream_large_bodies=1",
            "--set",
            "connection_strategy=lazy",
        ]
    else:
        raise ValueError(kind)
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **extra} if extra else None,
    )
    try:
        _wait_port(port, proc)
        if admin:
            _wait_port(admin, proc)
        yield port, proc, admin
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextlib.contextmanager
def _viewing(port: int, n: int, report: dict[str, Any]) -> Iterator[None]:
    """``n`` live-view viewers in their own process while the block runs (none when n is 0)."""
    if n <= 0:
        yield
        return
    proc = subprocess.Popen(
        [sys.executable, __file__, "--role", "viewers", "--port", str(port), "--viewers", str(n)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":  # connected before the load starts
            raise RuntimeError("the live-view viewers did not connect")
        yield
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        if out.strip():
            report.update(json.loads(out.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--role", choices=("bench", "upstream", "viewers", "client", "busy", "relay"), default="bench"
    )
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--upstream-port", type=int, default=0, help=argparse.SUPPRESS)  # --role relay
    ap.add_argument("--levels", default="1,16,64,256")
    ap.add_argument("--proxies", default="direct,wirecheck,nginx,mitmproxy")
    ap.add_argument("--events", type=int, default=20, help="SSE events per stream")
    ap.add_argument("--interval-ms", type=float, default=20.0)
    ap.add_argument(
        "--upstream-shape",
        choices=SHAPES,
        default="vllm",
        help="vllm: streams as vLLM sends them (nothing to find); bare: no finish_reason (a finding each); "
        "thinking: a thinking model's, reasoning first; tool-call: one declared tool called, its arguments "
        "piece by piece",
    )
    ap.add_argument(
        "--keep-alive",
        action="store_true",
        help="each caller keeps its connection from one stream to the next, as an SDK's pool does",
    )
    ap.add_argument("--duration", type=float, default=4.0, help="seconds of load at each level")
    ap.add_argument(
        "--viewers", type=int, default=0, help="also measure wirecheck with N live-view viewers open"
    )
    ap.add_argument(
        "--workers", type=int, default=0, help="also measure wirecheck proxy --workers N (row wirecheck-wN)"
    )
    ap.add_argument(
        "--workers-levels",
        default="256,1024",
        help="with --workers: extra levels for direct, wirecheck and wirecheck-wN",
    )
    ap.add_argument("--clients", type=int, default=1, help="client processes that share the load")
    ap.add_argument(
        "--base",
        metavar="PYTHON",
        help="the interpreter of another build (its .venv/bin/python), measured as wirecheck-base",
    )
    ap.add_argument(
        "--contend", type=int, default=0, help="N processes keeping a core busy each, the whole run"
    )
    ap.add_argument("--streams", type=int, default=0, help=argparse.SUPPRESS)  # --role client
    ap.add_argument("--stream-s", type=float, default=0.0, help=argparse.SUPPRESS)  # --role client
    ap.add_argument("--out", default=str(HERE / "results" / "proxy_overhead.json"))
    args = ap.parse_args(argv)
    if args.role == "client":
        t = time.process_time()
        r = asyncio.run(
            run_level(
                args.port,
                args.streams,
                args.duration,
                args.stream_s,
                args.keep_alive,
                shape=args.upstream_shape,
            )
        )
        r["cpu_s"] = time.process_time() - t
        print(json.dumps(r), flush=True)
        return 0
    if args.role == "upstream":
        asyncio.run(upstream(args.port, args.events, args.interval_ms, args.upstream_shape))
        return 0
    if args.role == "viewers":
        asyncio.run(viewers(args.port, args.viewers))
        return 0
    if args.role == "relay":
        from wirecheck.proxy._loop import run_loop  # the loop the proxy runs on: uvloop where installed

        run_loop(relay(args.port, args.upstream_port))
        return 0
    if args.role == "busy":
        _busy(args.port)
        return 0

    levels = [int(x) for x in args.levels.split(",")]
    proxies = args.proxies.split(",")
    if "direct" not in proxies:
        proxies.insert(0, "direct")
    if "wirecheck-base" in proxies and not (args.base and os.access(args.base, os.X_OK)):
        ap.error("wirecheck-base needs --base PYTHON: the other build's interpreter, executable")
    viewed = f"wirecheck+{args.viewers}v"
    if args.viewers > 0:
        proxies.insert(proxies.index("wirecheck") + 1 if "wirecheck" in proxies else len(proxies), viewed)
    extra_levels: list[int] = []
    if args.workers > 1:
        proxies.append(f"wirecheck-w{args.workers}")
        extra_levels = [int(x) for x in args.workers_levels.split(",") if int(x) not in levels]

    def levels_of(kind: str) -> list[int]:
        # the workers' extra levels (1024 streams) only where they are compared: direct, wirecheck
        if kind in ("direct", "wirecheck") or kind.startswith("wirecheck-w"):
            return levels + extra_levels
        return levels

    viewer_events: dict[str, Any] = {}
    up_port = free_port()
    up = start_upstream(up_port, args.events, args.interval_ms, args.upstream_shape)
    busy = [
        subprocess.Popen([sys.executable, __file__, "--role", "busy", "--port", str(i)])
        for i in range(args.contend)
    ]
    rows: list[dict[str, Any]] = []
    try:
        _wait_port(up_port, up)
        with tempfile.TemporaryDirectory(prefix="wc-bench-") as tmpd:
            tmp = Path(tmpd)
            os.chmod(tmp, 0o777)
            raw: dict[tuple[str, int], dict[str, Any]] = {}
            for kind in proxies:
                with (
                    _proxy(kind, up_port, tmp, args.base) as (port, proc, admin_port),
                    _viewing(admin_port, args.viewers if kind == viewed else 0, viewer_events),
                ):
                    for level in levels_of(kind):
                        stream_s = args.events * args.interval_ms / 1000
                        # warm the pools
                        asyncio.run(
                            run_level(
                                port,
                                min(level, 4),
                                stream_s,
                                stream_s,
                                args.keep_alive,
                                shape=args.upstream_shape,
                            )
                        )
                        pid = proc.pid if proc else None
                        # the kernel scales and truncates a thread's ticks and its process's each
                        # on its own: over a level the thread's can come out a tick above
                        tree0, (main0, _) = _tree_cpu(pid), _cpu(pid)
                        loop0 = _cpu(pid, thread=True)[0]
                        result = asyncio.run(_measure(port, level, args, stream_s, pid))
                        result["cpu_load_s"] = _used(tree0, _tree_cpu(pid))[0]
                        tick = os.sysconf("SC_CLK_TCK")
                        result["loop_cpu_s"] = (_cpu(pid, thread=True)[0] - loop0) / tick
                        result["main_cpu_s"] = (_cpu(pid)[0] - main0) / tick
                        # what was left to check when the load ended is part of the level's cost
                        result["catchup_s"] = (
                            _catch_up(tmp / f"{kind}.db") if kind.startswith("wirecheck") else 0.0
                        )
                        result["cpu_s"], result["sys_s"] = _used(tree0, _tree_cpu(pid))
                        raw[(kind, level)] = result
            for kind in proxies:
                for level in levels_of(kind):
                    rows.append(row(kind, level, raw[(kind, level)], raw[("direct", level)]))
            vs_nginx(rows)
    finally:
        up.send_signal(signal.SIGTERM)
        up.wait(timeout=10)
        for b in busy:
            b.kill()
            b.wait(timeout=10)

    contended = f"; {args.contend} other process(es) keeping a core busy each" if args.contend else ""
    build = python_build()
    base_build = _build_of(args.base) if "wirecheck-base" in proxies and args.base else None
    print(
        f"paced SSE upstream: {args.events} events x {args.interval_ms:g} ms, {args.upstream_shape} streams; "
        f"{'callers keep their connections' if args.keep_alive else 'a connection a stream'}; "
        f"{args.duration:g} s of load a level; {os.cpu_count()} cores{contended}; "
        f"Python {platform.python_version()} ({build})"
        + (f"; wirecheck-base on {args.base} ({base_build})" if base_build is not None else "")
    )
    print_table(rows)
    if viewer_events:
        print(
            f"{viewed}: {viewer_events['viewers']} viewers on /wirecheck/events received "
            f"{viewer_events['events']} events ({viewer_events['per_viewer']})"
        )
    checks = targets(rows, levels)
    for name, ok, detail in checks:
        print(f"target {'met   ' if ok else 'MISSED'} {name}: {detail}")
    out = write_json(
        args.out,
        {
            "benchmark": "proxy_overhead",
            "python": platform.python_version(),
            "python_build": build,
            "cpu_count": os.cpu_count(),
            "events": args.events,
            "interval_ms": args.interval_ms,
            "upstream_shape": args.upstream_shape,
            "keep_alive": args.keep_alive,
            "duration_s": args.duration,
            "clients": args.clients,
            "workers": args.workers,
            "contend": args.contend,
            "base": args.base if "wirecheck-base" in proxies else None,
            "base_build": base_build,
            "rows": rows,
            "viewers": viewer_events or None,
            "targets": [{"target": n, "met": ok, "detail": d} for n, ok, d in checks],
        },
    )
    print(f"wrote {out}")
    return 0


async def _measure(
    port: int, level: int, args: argparse.Namespace, stream_s: float, pid: int | None
) -> dict[str, Any]:
    """Run one level (in this process, or split over ``--clients`` processes) and sample the proxy's
    RSS meanwhile; notes the load generator's CPU (its busiest process, percent of a core)."""
    pids = _children(pid) if pid is not None else []
    rss = 0.0
    t0, cpu0 = time.perf_counter(), time.process_time()
    if args.clients <= 1:
        task: asyncio.Future[Any] = asyncio.ensure_future(
            run_level(port, level, args.duration, stream_s, args.keep_alive, shape=args.upstream_shape)
        )
    else:
        task = asyncio.ensure_future(
            _clients(
                port,
                level,
                args.clients,
                args.duration,
                stream_s,
                keep_alive=args.keep_alive,
                shape=args.upstream_shape,
            )
        )
    while not task.done():
        rss = max(rss, _rss_mb(pids))
        await asyncio.sleep(0.05)
    result: dict[str, Any] = task.result()
    wall = time.perf_counter() - t0
    if args.clients <= 1:
        result["loadgen_cpu_pct"] = (time.process_time() - cpu0) / wall * 100
    result["rss_mb"] = rss
    return result


async def _clients(
    port: int, level: int, n: int, duration_s: float, stream_s: float, *, keep_alive: bool, shape: str
) -> dict[str, Any]:
    """``level`` streams over ``n`` client processes (each runs ``overhead_load.level`` on its share)."""
    shares = [level // n + (1 if i < level % n else 0) for i in range(n)]
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--role",
            "client",
            "--port",
            str(port),
            "--streams",
            str(share),
            "--duration",
            str(duration_s),
            "--stream-s",
            str(stream_s),
            *(["--keep-alive"] if keep_alive else []),
            "--upstream-shape",
            shape,
            stdout=asyncio.subprocess.PIPE,
        )
        for share in shares
        if share > 0
    ]
    outs = await asyncio.gather(*(p.communicate() for p in procs))
    parts = [json.loads(out.decode().strip().splitlines()[-1]) for out, _ in outs]
    elapsed = max(p["elapsed_s"] for p in parts)
    events = sum(p["events"] for p in parts)
    return {
        "ttft": [t for p in parts for t in p["ttft"]],
        "gaps": [g for p in parts for g in p["gaps"]],
        "events": events,
        "elapsed_s": elapsed,
        "events_per_s": events / elapsed,
        "failed": sum(p["failed"] for p in parts),
        "loadgen_cpu_pct": max(p["cpu_s"] / p["elapsed_s"] * 100 for p in parts),
    }


if __name__ == "__main__":
    raise SystemExit(main())
