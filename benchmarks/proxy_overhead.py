"""What the proxy adds to a stream: direct vs wirecheck vs nginx vs mitmproxy, same SSE upstream.

Each run starts one paced SSE upstream (a raw asyncio HTTP/1.1 server: N events, one every
``--interval-ms``), then, for each proxy, the proxy in its own process in front of it, and drives
``level`` concurrent streams through it (each caller starts its next stream when one ends, their
starts spread out, for ``--duration`` seconds) from a raw asyncio client that notes when each SSE
event (``\\n\\n``) arrives. Reported per proxy and level, all measured in the same run:

- added TTFT p50 / p99: the proxy's time-to-first-event percentile minus the direct one;
- inter-event delay p50 / p99 (the upstream paces at ``--interval-ms``);
- throughput ratio: events per second through the proxy over events per second direct;
- proxy RSS: the largest resident set of the proxy's processes during the level (MB);
- CPU per forwarded event: user + system CPU of all the proxy's processes (its workers, store
  writer and live checker included; ``/proc/PID/stat``) over the SSE events the callers received.
  On a shared machine this is far less noisy than latency (issue 17);
- the load generator's own CPU (percent of one core): near 100 % the generator, not the proxy, is
  the bottleneck, and the row says so.

With ``--workers N`` wirecheck is measured again as ``wirecheck-wN`` (``wirecheck proxy --workers N``),
and ``direct``, ``wirecheck`` and ``wirecheck-wN`` are also measured at ``--workers-levels`` (default
256,1024). ``--clients K`` spreads the load over K client processes (for levels one process cannot
drive; each reports its events and they are merged).

With ``--viewers N`` wirecheck is measured a second time (row ``wirecheck+Nv``) with N live-view
viewers (issue 18) connected to its ``/wirecheck/events`` stream for the whole run, reading every
exchange and finding event from a separate process; the same targets apply to that row, and the
events the viewers received are reported.

Targets (issue 4): at 64 streams added TTFT p50 <= 1 ms and p99 <= 5 ms; throughput >= 0.9x direct;
less added latency than mitmproxy at every level; RSS <= 150 MB at 256 streams. wirecheck runs as
deployed: recording into a store with the live-check worker on. nginx runs with
``proxy_buffering off``, mitmproxy in reverse mode with streaming on.

    python benchmarks/proxy_overhead.py [--levels 1,16,64,256] [--proxies direct,wirecheck,nginx,mitmproxy]
                                        [--viewers 10]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wirecheck.record import free_port

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


# --- the paced SSE upstream (run with --role upstream) -------------------------------------------


async def _upstream(port: int, events: int, interval_ms: float) -> None:
    frame = b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok"},"finish_reason":null}]}\n\n'
    chunk = b"%x\r\n%s\r\n" % (len(frame), frame)
    done = b"data: [DONE]\n\n"
    done_chunk = b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                if length:
                    await reader.readexactly(length)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                )
                for _ in range(events):
                    await asyncio.sleep(interval_ms / 1000)
                    writer.write(chunk)
                    await writer.drain()
                writer.write(done_chunk)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


# --- live-view viewers (run with --role viewers) ------------------------------------------------


async def _viewers(port: int, n: int) -> None:
    """``n`` event-stream readers on the proxy's live view, until SIGTERM; then prints how many
    events they received (JSON on stdout)."""
    received = [0] * n
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    connected = [asyncio.Event() for _ in range(n)]

    async def viewer(i: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            b"GET /wirecheck/events?backlog=0 HTTP/1.1\r\nhost: bench\r\naccept: text/event-stream\r\n\r\n"
        )
        await writer.drain()
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                connected[i].set()
                received[i] += data.count(b"\nevent: ")

    tasks = [asyncio.ensure_future(viewer(i)) for i in range(n)]
    await asyncio.gather(*(c.wait() for c in connected))
    print("ready", flush=True)  # every viewer has its stream open
    await stop.wait()
    for t in tasks:
        t.cancel()
    print(json.dumps({"viewers": n, "events": sum(received), "per_viewer": received}), flush=True)


# --- the client ---------------------------------------------------------------------------------


async def _one_stream(port: int, body: bytes) -> tuple[float, list[float]] | None:
    t0 = time.perf_counter()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return None
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
    )
    await writer.drain()
    arrivals: list[float] = []
    buf = b""
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            now = time.perf_counter()
            buf += data
            n = buf.count(b"\n\n")
            if n:
                arrivals.extend([now - t0] * n)
                buf = buf[buf.rfind(b"\n\n") + 2 :]
            if b"[DONE]" in data:
                break
    except ConnectionError:
        return None
    finally:
        writer.close()
    if not arrivals:
        return None
    return arrivals[0], [b - a for a, b in itertools.pairwise(arrivals)]


async def _level(port: int, streams: int, duration_s: float, stream_s: float) -> dict[str, Any]:
    """``streams`` workers keep one stream each in flight for ``duration_s``, back to back, their
    starts spread over one stream's length (as independent callers are, not in lockstep)."""
    body = json.dumps(
        {"model": "bench", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    ).encode()
    ttft: list[float] = []
    gaps: list[float] = []
    events = 0
    failed = 0
    t0 = time.perf_counter()
    end = t0 + duration_s

    async def worker(i: int) -> None:
        nonlocal events, failed
        await asyncio.sleep(stream_s * i / streams)
        while time.perf_counter() < end:
            r = await _one_stream(port, body)
            if r is None:
                failed += 1
                continue
            ttft.append(r[0])
            gaps.extend(r[1])
            events += len(r[1]) + 1

    await asyncio.gather(*(worker(i) for i in range(streams)))
    elapsed = time.perf_counter() - t0
    return {
        "ttft": ttft,
        "gaps": gaps,
        "events": events,
        "elapsed_s": elapsed,
        "events_per_s": events / elapsed,
        "failed": failed,
    }


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def _rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total / 1024


def _cpu_s(pid: int | None) -> float:
    """CPU seconds (user + system) the process has used so far: the cost of the proxy's own event
    loop, which contention on a busy host does not inflate the way it inflates latency."""
    if pid is None:
        return 0.0
    with contextlib.suppress(OSError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return 0.0


def _tree_cpu_s(pid: int | None) -> float:
    """CPU seconds of ``pid`` and every process below it (workers, store writer, live checker)."""
    if pid is None:
        return 0.0
    return sum(_cpu_s(p) for p in _children(pid))


def _children(pid: int) -> list[int]:
    out = [pid]
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            children = (task / "children").read_text().split()
            for c in children:
                out.extend(_children(int(c)))
    return out


# --- proxies ------------------------------------------------------------------------------------


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
    kind: str, upstream_port: int, tmp: Path
) -> Iterator[tuple[int, subprocess.Popen[bytes] | None, int]]:
    """The proxy of ``kind`` on a free port: (its port, its process, its admin port or 0)."""
    if kind == "direct":
        yield upstream_port, None, 0
        return
    port, admin = free_port(), 0
    up = f"http://127.0.0.1:{upstream_port}"
    if kind.startswith("wirecheck"):
        cmd = [
            sys.executable,
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
        if kind.startswith("wirecheck-w"):  # wirecheck-wN: N proxy processes on the port (issue 17)
            cmd += ["--workers", kind.removeprefix("wirecheck-w")]
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
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
    ap.add_argument("--role", choices=("bench", "upstream", "viewers", "client"), default="bench")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--levels", default="1,16,64,256")
    ap.add_argument("--proxies", default="direct,wirecheck,nginx,mitmproxy")
    ap.add_argument("--events", type=int, default=20, help="SSE events per stream")
    ap.add_argument("--interval-ms", type=float, default=20.0)
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
    ap.add_argument("--streams", type=int, default=0, help=argparse.SUPPRESS)  # --role client
    ap.add_argument("--stream-s", type=float, default=0.0, help=argparse.SUPPRESS)  # --role client
    ap.add_argument("--out", default=str(HERE / "results" / "proxy_overhead.json"))
    args = ap.parse_args(argv)
    if args.role == "client":
        t = time.process_time()
        r = asyncio.run(_level(args.port, args.streams, args.duration, args.stream_s))
        r["cpu_s"] = time.process_time() - t
        print(json.dumps(r), flush=True)
        return 0
    if args.role == "upstream":
        asyncio.run(_upstream(args.port, args.events, args.interval_ms))
        return 0
    if args.role == "viewers":
        asyncio.run(_viewers(args.port, args.viewers))
        return 0

    levels = [int(x) for x in args.levels.split(",")]
    proxies = args.proxies.split(",")
    if "direct" not in proxies:
        proxies.insert(0, "direct")
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
    up = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--role",
            "upstream",
            "--port",
            str(up_port),
            "--events",
            str(args.events),
            "--interval-ms",
            str(args.interval_ms),
        ]
    )
    rows: list[dict[str, Any]] = []
    try:
        _wait_port(up_port, up)
        with tempfile.TemporaryDirectory(prefix="wc-bench-") as tmpd:
            tmp = Path(tmpd)
            os.chmod(tmp, 0o777)
            raw: dict[tuple[str, int], dict[str, Any]] = {}
            for kind in proxies:
                with (
                    _proxy(kind, up_port, tmp) as (port, proc, admin_port),
                    _viewing(admin_port, args.viewers if kind == viewed else 0, viewer_events),
                ):
                    for level in levels_of(kind):
                        stream_s = args.events * args.interval_ms / 1000
                        asyncio.run(_level(port, min(level, 4), stream_s, stream_s))  # warm the pools
                        pid = proc.pid if proc else None
                        cpu0 = _tree_cpu_s(pid)
                        result = asyncio.run(_measure(port, level, args, stream_s, pid))
                        result["cpu_s"] = _tree_cpu_s(pid) - cpu0
                        raw[(kind, level)] = result
            for kind in proxies:
                for level in levels_of(kind):
                    r, d = raw[(kind, level)], raw[("direct", level)]
                    rows.append(
                        {
                            "proxy": kind,
                            "streams": level,
                            "ttft_p50_ms": _pct(r["ttft"], 0.5) * 1000,
                            "ttft_p99_ms": _pct(r["ttft"], 0.99) * 1000,
                            "added_ttft_p50_ms": (_pct(r["ttft"], 0.5) - _pct(d["ttft"], 0.5)) * 1000,
                            "added_ttft_p99_ms": (_pct(r["ttft"], 0.99) - _pct(d["ttft"], 0.99)) * 1000,
                            "gap_p50_ms": _pct(r["gaps"], 0.5) * 1000,
                            "gap_p99_ms": _pct(r["gaps"], 0.99) * 1000,
                            "throughput_ratio": r["events_per_s"] / d["events_per_s"],
                            "rss_mb": r["rss_mb"],
                            # CPU of all the proxy's processes (workers, writer, checker) per stream
                            # and per SSE event the callers received (issue 17)
                            "cpu_ms_per_stream": r["cpu_s"] * 1000 / max(len(r["ttft"]), 1),
                            "cpu_us_per_event": r["cpu_s"] * 1e6 / max(r["events"], 1),
                            "events": r["events"],
                            # the load generator's busiest process, in percent of one core
                            "loadgen_cpu_pct": r["loadgen_cpu_pct"],
                            "loadgen_bound": r["loadgen_cpu_pct"] >= LOADGEN_BOUND_PCT,
                            "failed_streams": r["failed"],
                            "samples": len(r["ttft"]),
                        }
                    )
    finally:
        up.send_signal(signal.SIGTERM)
        up.wait(timeout=10)

    print(
        f"paced SSE upstream: {args.events} events x {args.interval_ms:g} ms; {args.duration:g} s of load a level; {os.cpu_count()} cores"
    )
    head = f"{'proxy':12} {'streams':>7} {'+TTFT p50':>10} {'+TTFT p99':>10} {'gap p50':>8} {'gap p99':>8} {'thru x':>7} {'RSS MB':>7} {'cpu/str':>8} {'cpu/ev':>8} {'gen cpu':>7} {'failed':>6}"
    print(head)
    for r in rows:
        print(
            f"{r['proxy']:12} {r['streams']:7d} {r['added_ttft_p50_ms']:9.2f}ms {r['added_ttft_p99_ms']:9.2f}ms "
            f"{r['gap_p50_ms']:7.1f}ms {r['gap_p99_ms']:7.1f}ms {r['throughput_ratio']:7.2f} {r['rss_mb']:7.1f} "
            f"{r['cpu_ms_per_stream']:6.2f}ms {r['cpu_us_per_event']:6.1f}us {r['loadgen_cpu_pct']:6.0f}% {r['failed_streams']:6d}"
        )
    bound = [f"{r['proxy']}@{r['streams']}" for r in rows if r["loadgen_bound"]]
    if bound:
        print(
            f"note: the load generator itself was the bottleneck (a client process at >= {LOADGEN_BOUND_PCT:g} % "
            f"of a core) at {', '.join(bound)}: latency and throughput there measure the generator too; "
            "try --clients 2"
        )
    if viewer_events:
        print(
            f"{viewed}: {viewer_events['viewers']} viewers on /wirecheck/events received "
            f"{viewer_events['events']} events ({viewer_events['per_viewer']})"
        )
    checks = _targets(rows, levels)
    for name, ok, detail in checks:
        print(f"target {'met   ' if ok else 'MISSED'} {name}: {detail}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "benchmark": "proxy_overhead",
                "python": platform.python_version(),
                "cpu_count": os.cpu_count(),
                "events": args.events,
                "interval_ms": args.interval_ms,
                "duration_s": args.duration,
                "clients": args.clients,
                "workers": args.workers,
                "rows": rows,
                "viewers": viewer_events or None,
                "targets": [{"target": n, "met": ok, "detail": d} for n, ok, d in checks],
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out}")
    return 0


#: a client process this busy (percent of one core) is the bottleneck, not the proxy
LOADGEN_BOUND_PCT = 90.0


async def _measure(
    port: int, level: int, args: argparse.Namespace, stream_s: float, pid: int | None
) -> dict[str, Any]:
    """Run one level (in this process, or split over ``--clients`` processes) and sample the proxy's
    RSS meanwhile; notes the load generator's CPU (its busiest process, percent of a core)."""
    pids = _children(pid) if pid is not None else []
    rss = 0.0
    t0, cpu0 = time.perf_counter(), time.process_time()
    if args.clients <= 1:
        task: asyncio.Future[Any] = asyncio.ensure_future(_level(port, level, args.duration, stream_s))
    else:
        task = asyncio.ensure_future(_clients(port, level, args.clients, args.duration, stream_s))
    while not task.done():
        rss = max(rss, _rss_mb(pids))
        await asyncio.sleep(0.05)
    result: dict[str, Any] = task.result()
    wall = time.perf_counter() - t0
    if args.clients <= 1:
        result["loadgen_cpu_pct"] = (time.process_time() - cpu0) / wall * 100
    result["rss_mb"] = rss
    return result


async def _clients(port: int, level: int, n: int, duration_s: float, stream_s: float) -> dict[str, Any]:
    """``level`` streams over ``n`` client processes (each runs :func:`_level` on its share)."""
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


def _targets(rows: list[dict[str, Any]], levels: list[int]) -> list[tuple[str, bool, str]]:
    by = {(r["proxy"], r["streams"]): r for r in rows}
    out: list[tuple[str, bool, str]] = []
    # wirecheck, and wirecheck with live-view viewers open (issue 18): the same targets
    for kind in sorted({r["proxy"] for r in rows if r["proxy"].startswith("wirecheck")}):
        tag = "" if kind == "wirecheck" else f" ({kind})"
        if (kind, 64) in by:
            w = by[(kind, 64)]
            out.append(
                (
                    f"added TTFT p50 <= 1 ms at 64 streams{tag}",
                    w["added_ttft_p50_ms"] <= 1.0,
                    f"{w['added_ttft_p50_ms']:.2f} ms",
                )
            )
            out.append(
                (
                    f"added TTFT p99 <= 5 ms at 64 streams{tag}",
                    w["added_ttft_p99_ms"] <= 5.0,
                    f"{w['added_ttft_p99_ms']:.2f} ms",
                )
            )
        ratios = [by[(kind, lv)]["throughput_ratio"] for lv in levels if (kind, lv) in by]
        if ratios:
            out.append(
                (
                    f"throughput >= 0.9x direct at every level{tag}",
                    min(ratios) >= 0.9,
                    f"lowest {min(ratios):.2f}x",
                )
            )
    pairs = [
        (lv, by[("wirecheck", lv)], by[("mitmproxy", lv)])
        for lv in levels
        if ("wirecheck", lv) in by and ("mitmproxy", lv) in by
    ]
    if pairs:
        worse = [lv for lv, w, m in pairs if w["added_ttft_p50_ms"] >= m["added_ttft_p50_ms"]]
        out.append(
            (
                "less added TTFT p50 than mitmproxy at every level",
                not worse,
                f"not at {worse}" if worse else "at all levels",
            )
        )
    # issue 17: at 256 streams, and for the workers row at every level it ran
    for kind in sorted(
        {r["proxy"] for r in rows if r["proxy"] == "wirecheck" or r["proxy"].startswith("wirecheck-w")}
    ):
        if (kind, 256) in by:
            w = by[(kind, 256)]
            out.append(
                (
                    f"at 256 streams ({kind}): added TTFT p50 <= 5 ms, p99 <= 25 ms, throughput >= 0.95x",
                    w["added_ttft_p50_ms"] <= 5.0
                    and w["added_ttft_p99_ms"] <= 25.0
                    and w["throughput_ratio"] >= 0.95,
                    f"{w['added_ttft_p50_ms']:.1f} / {w['added_ttft_p99_ms']:.1f} ms, {w['throughput_ratio']:.2f}x",
                )
            )
    if ("wirecheck", 256) in by:
        rss = by[("wirecheck", 256)]["rss_mb"]
        out.append(("RSS <= 150 MB at 256 streams", rss <= 150, f"{rss:.0f} MB (proxy and its worker)"))
    return out


if __name__ == "__main__":
    raise SystemExit(main())
