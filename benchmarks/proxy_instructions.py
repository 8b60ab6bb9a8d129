"""Instructions per forwarded event: the forwarding process against a bare relay, counted, not timed.

CPU time per event (``proxy_overhead.py``) moves by several per cent between runs on a shared
machine, so a change worth 1 % cannot be told from noise there. Counted instructions can: this
script runs each proxy under valgrind's callgrind with instrumentation off until it answers, turns
it on for the load only (``callgrind_control -i on``), drives ``--streams`` paced SSE streams through
it for ``--duration`` seconds, and divides the instructions counted by the events the client got.
Callgrind slows a process about fiftyfold, so the load is light (16 streams of 20 events 5 ms apart,
a tenth of a second each): the figure is per event as the shape of the traffic makes it (an
exchange's own work shared by its 20 events), in user space only (the kernel's socket work is not
counted), for the forwarding process only (its store writer thread included; the live checker is a
process of its own and runs natively).

- baseline: the bare relay of ``proxy_overhead.py`` (one Python callback and one write per read, on
  the proxy's loop): the floor of any proxy written that way;
- wirecheck: ``wirecheck proxy`` recording into a fresh store;
- the ratio of the two, which does not depend on the machine's speed.

Two runs of one build agree to about half a per cent. Needs valgrind (Debian: ``valgrind``).

``--split N`` counts both proxies once more with streams of ``N`` events at the same pace (read by
read as before: a faster pace would join events in one read under callgrind's slowness), and solves
the two counts for what an event costs and what an exchange costs (instructions an event is
``a + b / events``: ``a`` the work of each forwarded read, ``b`` the exchange's own, from its request
head to its record). Which of the two a change must cut, and by how much, depends on how long the
streams are; the split says it for any length.

``--functions N`` runs wirecheck once more with Python's perf trampolines on (``PYTHONPERFSUPPORT``:
each Python function is entered through a stub of its own, named in ``/tmp/perf-PID.map``) and lists
the N Python functions with the most instructions per event **inclusive** of what they call (their
callees, C and Python, and for a coroutine each of its steps): where a cut is worth making, which a
sampling profiler's broken stacks and callgrind's own view by C function do not say. The trampolines
add about a tenth to the count, so that run gives only the list; the rows come from the plain run.

    python benchmarks/proxy_instructions.py [--streams 16] [--duration 15] [--events 20] [--interval-ms 5]
                                            [--split 200] [--functions 40]
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_output import machine, write_json
from proxy_overhead import start_upstream

from wirecheck.record import free_port

HERE = Path(__file__).resolve().parent
OVERHEAD = HERE / "proxy_overhead.py"
#: a process under callgrind starts about fifty times slower than it would
START_S = 120.0


def _answers(port: int) -> bool:
    """Whether a POST on ``port`` gets a whole answer (the proxy is up, through to the upstream)."""
    import httpx

    try:
        return httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions", content=b"{}", timeout=30
        ).is_success
    except httpx.HTTPError:
        return False


def _counted(
    kind: str, up_port: int, args: argparse.Namespace, tmp: Path, *, functions: int = 0
) -> dict[str, Any]:
    """Run proxy ``kind`` under callgrind, count its instructions over the load; per event. With
    ``functions``, through Python's perf trampolines, and the top Python functions by inclusive
    instructions per event too (``by_function``)."""
    port = free_port()
    out = tmp / f"{kind}{'-functions' if functions else ''}.callgrind"
    if kind == "relay":
        target = [
            sys.executable,
            str(OVERHEAD),
            "--role",
            "relay",
            "--port",
            str(port),
            "--upstream-port",
            str(up_port),
        ]
    else:
        target = [
            sys.executable,
            "-m",
            "wirecheck",
            "proxy",
            "--upstream",
            f"http://127.0.0.1:{up_port}",
            "--listen",
            f"127.0.0.1:{port}",
            "--store",
            str(tmp / "store.db"),
            "--admin",
            "off",
        ]
    log = tmp / f"{kind}.log"
    with log.open("w") as fh:
        proc = subprocess.Popen(
            [
                "valgrind",
                "--tool=callgrind",
                "--instr-atstart=no",
                "--trace-children=no",
                f"--callgrind-out-file={out}",
                *target,
            ],
            stdout=subprocess.DEVNULL,
            stderr=fh,
            env={**os.environ, "PYTHONPERFSUPPORT": "1"} if functions else None,
        )
    try:
        deadline = time.monotonic() + START_S
        while not _answers(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{kind} did not answer under callgrind:\n{log.read_text()[-2000:]}")
            time.sleep(1)
        _answers(port)  # warm: the first exchange's imports and first calls are not counted
        subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], check=True, capture_output=True)
        client = subprocess.run(
            [
                sys.executable,
                str(OVERHEAD),
                "--role",
                "client",
                "--port",
                str(port),
                "--streams",
                str(args.streams),
                "--duration",
                str(args.duration),
                "--stream-s",
                str(args.stream_s),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        subprocess.run(["callgrind_control", "-i", "off", str(proc.pid)], check=True, capture_output=True)
    finally:
        proc.send_signal(signal.SIGINT if kind == "wirecheck" else signal.SIGTERM)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    got = json.loads(client.stdout.strip().splitlines()[-1])
    counted = re.search(r"Collected : (\d+)", log.read_text())
    if counted is None or not got["events"] or got["failed"]:
        raise SystemExit(
            f"{kind}: no count or no clean load ({got.get('failed')} failed):\n{log.read_text()[-2000:]}"
        )
    result: dict[str, Any] = {
        "events": got["events"],
        "instructions": int(counted.group(1)),
        "per_event": int(counted.group(1)) / got["events"],
    }
    if functions:
        perf_map = Path(f"/tmp/perf-{proc.pid}.map")  # valgrind runs the target in its own pid
        try:
            result["by_function"] = _by_function(out, perf_map, got["events"], functions)
        finally:
            perf_map.unlink(missing_ok=True)
    return result


def _by_function(profile: Path, perf_map: Path, events: int, top: int) -> list[dict[str, Any]]:
    """The ``top`` Python functions by inclusive instructions per event: each trampoline address in
    callgrind's inclusive listing named through the perf map (a function entered through several
    trampolines, or listed once per recursion level, counts at its largest)."""
    stubs: list[tuple[int, int, str]] = []
    for line in perf_map.read_text().splitlines():
        start, size, name = line.split(" ", 2)
        stubs.append((int(start, 16), int(size, 16), name.removeprefix("py::")))
    stubs.sort()
    starts = [s[0] for s in stubs]
    listing = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(profile)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    best: dict[str, int] = {}
    for m in re.finditer(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+\?\?\?:0x([0-9a-f]+)", listing, re.M):
        addr = int(m.group(2), 16)
        i = bisect.bisect_right(starts, addr) - 1
        if i < 0 or addr >= stubs[i][0] + stubs[i][1]:
            continue  # not a trampoline: C code without symbols
        name, count = stubs[i][2], int(m.group(1).replace(",", ""))
        best[name] = max(best.get(name, 0), count)
    ranked = sorted(best.items(), key=lambda kv: -kv[1])[:top]
    return [{"function": name, "per_event": count / events} for name, count in ranked]


def split(events: tuple[int, int], per_event: tuple[float, float]) -> dict[str, float]:
    """What an event and what an exchange cost, from the instructions an event counted with streams of
    ``events[0]`` and of ``events[1]`` events: ``per_event[i] = a + b / events[i]``, solved for the
    per-event ``a`` and the per-exchange ``b``."""
    (n1, n2), (y1, y2) = events, per_event
    if n1 == n2 or n1 <= 0 or n2 <= 0:
        raise ValueError(f"two different stream lengths are needed, not {n1} and {n2}")
    exchange = (y1 - y2) / (1 / n1 - 1 / n2)
    return {"per_event": y1 - exchange / n1, "per_exchange": exchange}


def _count_both(
    args: argparse.Namespace, tmp: Path, events: int, stream_s: float, functions: int = 0
) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """The relay and wirecheck counted against one upstream of ``events`` events a stream at
    ``args``' pace, the callers' starts spread over ``stream_s`` (and wirecheck's Python functions,
    with ``functions``)."""
    rows: dict[str, dict[str, Any]] = {}
    found: list[dict[str, Any]] = []
    shape = argparse.Namespace(**{**vars(args), "events": events, "stream_s": stream_s})
    up_port = free_port()
    up = start_upstream(
        up_port, events, args.interval_ms, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for kind in ("relay", "wirecheck"):
            rows[kind] = _counted(kind, up_port, shape, tmp)
        if functions:
            found = _counted("wirecheck", up_port, shape, tmp, functions=functions)["by_function"]
    finally:
        up.send_signal(signal.SIGTERM)
        up.wait(timeout=30)
    return rows, found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--duration", type=float, default=15.0, help="seconds of load, counted")
    ap.add_argument("--stream-s", type=float, default=0.1, help="how long a stream lasts")
    ap.add_argument("--events", type=int, default=20, help="SSE events per stream")
    ap.add_argument("--interval-ms", type=float, default=5.0)
    ap.add_argument(
        "--functions",
        type=int,
        default=0,
        help="also list this many Python functions by inclusive instructions",
    )
    ap.add_argument(
        "--split",
        type=int,
        default=0,
        help="also count streams of this many events, and solve for per event and per exchange",
    )
    ap.add_argument("--out", default=str(HERE / "results" / "proxy_instructions.json"))
    args = ap.parse_args(argv)
    if args.split < 0 or (args.split and args.split == args.events):
        ap.error(f"--split needs another stream length than --events ({args.events}), of one event or more")
    if not (shutil.which("valgrind") and shutil.which("callgrind_control")):
        print("proxy_instructions.py needs valgrind (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    other: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        rows, functions = _count_both(args, tmp, args.events, args.stream_s, args.functions)
        if args.split:
            # at the same pace, so that each read still carries one event: the streams last longer
            other, _ = _count_both(args, tmp, args.split, args.split * args.interval_ms / 1000)
    ratio = rows["wirecheck"]["per_event"] / rows["relay"]["per_event"]
    print(
        f"{args.streams} streams of {args.events} events {args.interval_ms:g} ms apart, {args.duration:g} s counted; "
        "user-space instructions of the forwarding process (callgrind)"
    )
    print(f"{'proxy':12s} {'events':>8s} {'instructions':>14s} {'per event':>10s} {'x relay':>8s}")
    for kind, r in rows.items():
        x = r["per_event"] / rows["relay"]["per_event"]
        print(f"{kind:12s} {r['events']:8d} {r['instructions']:14d} {r['per_event']:10.0f} {x:8.2f}")
    parts: dict[str, dict[str, float]] = {}
    if other:
        print(f"\nwith {args.split} events a stream at the same pace; the two counts solved:")
        print(f"{'proxy':12s} {'per event':>10s} {'x relay':>8s} {'per exchange':>13s} {'x relay':>8s}")
        for kind in rows:
            parts[kind] = split(
                (args.events, args.split), (rows[kind]["per_event"], other[kind]["per_event"])
            )
        for kind, part in parts.items():
            ev, exch = part["per_event"], part["per_exchange"]
            x_ev, x_ex = ev / parts["relay"]["per_event"], exch / parts["relay"]["per_exchange"]
            print(f"{kind:12s} {ev:10.0f} {x_ev:8.2f} {exch:13.0f} {x_ex:8.2f}")
    if functions:
        print("\nwirecheck's Python functions by instructions per event, inclusive (perf trampolines on):")
        for f in functions:
            print(f"{f['per_event']:10.0f}  {f['function']}")
    path = write_json(
        args.out,
        {
            "machine": machine(),
            "streams": args.streams,
            "duration_s": args.duration,
            "events": args.events,
            "interval_ms": args.interval_ms,
            "rows": rows,
            "ratio": ratio,
            "by_function": functions,
            "split_events": args.split or None,
            "split_rows": other,
            "split": parts,
        },
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
