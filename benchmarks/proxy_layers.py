"""Where the proxy's CPU goes under load, by layer: what per-event and per-exchange work costs in the
kernel, the interpreter and native code, and so what a change of one layer can buy at most.

The script runs the same paced SSE upstream as ``proxy_overhead.py`` and ``wirecheck proxy`` before
it at ``--streams`` streams (a connection a stream) for ``--duration`` seconds, counting its CPU per
event as ``proxy_overhead.py`` does (all its processes, the live checker's catching up included).
Then it runs the level again, and after a quarter of it samples the proxy's processes with ``perf
record`` for ``--record-s`` seconds, with DWARF call graphs (the interpreter's frames named through
its perf map: ``PYTHONPERFSUPPORT=1``). Each sample of the forwarding process's loop thread is put
in one part:

- ``relay``: in the compiled relay of a streamed body's reads (``proxy/_relay_c.c``): per event;
- ``python``: under a Python frame (the exchange's own steps: heads, upstream request, record,
  close; on a build without the compiled relay, the relay's reads as well), named by its
  innermost Python function;
- ``loop``: the event loop's own work with no Python frame: the sockets' reads before their
  callbacks (most of it), accepting, closing, timers and the ready queue;
- ``wait``: the loop asking the kernel for events (``epoll_wait``);

and the forwarding process's other threads (the store writer) make one part, its helper processes
(the live checker) another. Every part is split again by where its samples stopped: the kernel, the
interpreter (``libpython``) or other native code (uvloop, the C library, SQLite, the compiled
twins). A part's CPU per event is its share of its process's samples times that process's CPU per
event in the first level (perf's sampling costs the sampled processes a little: the shares come
from the second level, the scale from the first).

nginx (one worker, as in ``proxy_overhead.py``) is measured at the same level, and ``bound`` says
what wirecheck's CPU per event would be, as a ratio to nginx's, with every sample of the ``python``
part outside the kernel gone: what a native exchange could buy at most.

Call graphs through the interpreter stop at the innermost Python frame now and then (perf's
unwinder and the perf map's trampolines): a part is then told by that frame alone.

Needs perf (Debian: ``linux-perf``) allowed to record another process (root, or
``kernel.perf_event_paranoid`` at most 1).

    python benchmarks/proxy_layers.py [--streams 256] [--duration 10] [--record-s 6] [--events 20]
        [--freq 499] [--top 12] [--out benchmarks/results/proxy_layers.json] [--script PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_output import machine, write_json
from overhead_load import level as run_level
from proxy_overhead import _catch_up, _children, _proxy, _tree_cpu, _used, _wait_port, start_upstream

from wirecheck.record import free_port

HERE = Path(__file__).resolve().parent

#: the parts of the forwarding process's loop thread, then its other threads and its helper processes
PARTS = ("relay", "python", "loop", "wait", "threads", "helpers")
#: where a sample stopped
LEAVES = ("kernel", "interpreter", "native")


@dataclass
class Sample:
    """One perf sample: its process and thread, and its frames (symbol, object), innermost first."""

    pid: int
    tid: int
    frames: list[tuple[str, str]]


def parse_script(text: str) -> list[Sample]:
    """The samples of ``perf script -F pid,tid,ip,sym,dso``: a ``pid/tid`` line, then one frame a
    line (address, symbol, the object in brackets), a blank line after each sample."""
    samples: list[Sample] = []
    cur: Sample | None = None
    for line in text.splitlines():
        if not line.strip():
            cur = None
            continue
        if not line.startswith("\t"):
            head = line.split()[0]
            pid, _, tid = head.partition("/")
            cur = Sample(int(pid), int(tid or pid), [])
            samples.append(cur)
            continue
        parts = line.split(None, 1)
        if cur is None or len(parts) < 2:
            continue
        rest = parts[1]
        sym, _, dso = rest.rpartition(" (")
        cur.frames.append((sym or rest, dso.rstrip(")") if sym else ""))
    return samples


def leaf(sample: Sample) -> str:
    """Where the sample stopped: the kernel, the interpreter (or a Python frame's trampoline) or
    other native code."""
    # an inlined function is written as a frame of its own, its object ``inlined``: the object is
    # that of the next frame, the function it was inlined into
    sym, dso = next(((s, d) for s, d in sample.frames if d != "inlined"), ("", ""))
    if not sym and not dso:
        return "native"
    if "kernel" in dso:
        return "kernel"
    if "libpython" in dso or sym.startswith("py::") or dso.startswith("/tmp/perf-"):
        return "interpreter"
    return "native"


def python_frame(sample: Sample) -> str | None:
    """The innermost Python function on the sample's stack (``py::name:file`` in the perf map), or
    None."""
    for sym, _ in sample.frames:
        if sym.startswith("py::"):
            name, _, path = sym[4:].partition(":")
            return f"{name} ({Path(path).name})" if path else name
    return None


#: libuv's dispatch in uvloop: what its callbacks (Python's, the relay's) are called from
DISPATCH = frozenset(
    (
        "uv__io_poll",
        "uv_run",
        "uv__run_timers",
        "uv__run_idle",
        "uv__run_check",
        "uv__run_prepare",
        "uv__run_pending",
        "uv__run_closing_handles",
    )
)


def part(sample: Sample, loop_pid: int) -> str:
    """The part of :data:`PARTS` a sample of the proxy's processes is in (``loop_pid``: the
    forwarding process, whose main thread runs the loop). Told by the first frame, from the
    innermost out, that is the compiled relay, a Python function or ``epoll_wait``, up to the loop's
    dispatch (the loop itself runs under ``asyncio.run``'s Python frames); a stack cut short before
    the dispatch is told by any such frame on it."""
    if sample.pid != loop_pid:
        return "helpers"
    if sample.tid != loop_pid:
        return "threads"
    for sym, dso in sample.frames:
        if "_relay_c" in dso:
            return "relay"
        if sym.startswith("py::"):
            return "python"
        if "epoll_wait" in sym or "epoll_pwait" in sym:
            return "wait"
        if sym in DISPATCH:
            return "loop"
    return "loop"


def layers(samples: list[Sample], loop_pid: int, top: int = 12) -> dict[str, Any]:
    """Each part's samples by leaf, and the Python functions most often innermost, in the loop
    thread's ``python`` part and in the helpers."""
    by: dict[str, Counter[str]] = {p: Counter() for p in PARTS}
    funcs: dict[str, Counter[str]] = {"python": Counter(), "helpers": Counter()}
    per_pid: Counter[int] = Counter()
    for s in samples:
        p = part(s, loop_pid)
        by[p][leaf(s)] += 1
        per_pid[s.pid] += 1
        if p in funcs:
            funcs[p][python_frame(s) or "(no Python frame)"] += 1
    return {
        "parts": {p: {lf: by[p][lf] for lf in LEAVES} for p in PARTS},
        "samples": {"forwarding": per_pid[loop_pid], "helpers": sum(per_pid.values()) - per_pid[loop_pid]},
        "functions": {p: funcs[p].most_common(top) for p in funcs},
    }


def per_event(found: dict[str, Any], us_per_event: dict[str, float]) -> dict[str, dict[str, float]]:
    """Each part's CPU per event by leaf, in us: its share of its process's samples times that
    process's CPU per event (``us_per_event``: ``forwarding`` and ``helpers``)."""
    out: dict[str, dict[str, float]] = {}
    for p, leaves in found["parts"].items():
        proc = "helpers" if p == "helpers" else "forwarding"
        n = found["samples"][proc]
        out[p] = {lf: (c / n * us_per_event[proc] if n else 0.0) for lf, c in leaves.items()}
    return out


def bound(us: dict[str, dict[str, float]], nginx_us: float) -> dict[str, float]:
    """wirecheck's CPU per event as it is and with the ``python`` part's interpreter and native
    samples gone (its kernel work stays: the sockets' calls a native exchange makes too), each as
    a ratio to nginx's."""
    total = sum(sum(v.values()) for v in us.values())
    cut = us["python"]["interpreter"] + us["python"]["native"]
    return {
        "nginx_us_per_event": nginx_us,
        "us_per_event": total,
        "x_nginx": total / nginx_us,
        "without_python_us": total - cut,
        "without_python_x_nginx": (total - cut) / nginx_us,
    }


def _perf(*cmd: str) -> str:
    """What a perf command printed; where it fails, the script stops with its message in a line."""
    done = subprocess.run(["perf", *cmd], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"proxy_layers.py: perf {cmd[0]} failed: {done.stderr.strip()[-300:]}")
    return done.stdout


def _perf_usable(paranoid: Path = Path("/proc/sys/kernel/perf_event_paranoid")) -> str | None:
    """Why perf cannot record here, or None. Where it may record only user space (not root, the
    kernel's ``perf_event_paranoid`` over 1) it is refused too: every part's kernel share would read
    as nothing."""
    perf = shutil.which("perf")
    if perf is None:
        return "perf is not installed (Debian: apt-get install linux-perf)"
    if os.geteuid() != 0:
        try:
            level = int(paranoid.read_text())
        except (OSError, ValueError):
            return f"cannot read {paranoid}: whether perf may sample the kernel is not known"
        if level > 1:
            return (
                f"perf may not sample the kernel here ({paranoid.name} is {level}): run as root, or "
                "set kernel.perf_event_paranoid to 1 or less"
            )
    with tempfile.TemporaryDirectory() as tmp:
        probe = subprocess.run(
            [perf, "record", "-q", "-o", f"{tmp}/probe.data", "--", "true"],
            capture_output=True,
            text=True,
            check=False,
        )
    if probe.returncode != 0:
        return f"perf cannot record here: {probe.stderr.strip()[-300:]}"
    return None


@contextlib.contextmanager
def _load(port: int, streams: int, duration: float, stream_s: float) -> Iterator[dict[str, Any]]:
    """The level's load in a thread of its own; its result in the dict once it has ended."""
    out: dict[str, Any] = {}

    def run() -> None:
        out.update(asyncio.run(run_level(port, streams, duration, stream_s, False)))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        yield out
    finally:
        t.join(timeout=duration + 120)


def _measure(
    kind: str, up_port: int, tmp: Path, args: argparse.Namespace, record: Path | None
) -> tuple[dict[str, float], dict[str, Any]]:
    """One proxy under the level, as ``proxy_overhead.py`` measures it: CPU per event of its first
    process (``forwarding``), of those below it (``helpers``) and of all (``total``) over the whole
    level, the live checker's catching up after it included. Then, where ``record`` is given, the
    level again, perf sampling the processes for ``--record-s`` after its first quarter."""
    stream_s = args.events * args.interval_ms / 1000
    env = {"PYTHONPERFSUPPORT": "1"} if record is not None else None
    with _proxy(kind, up_port, tmp, env=env) as (port, proc, _):
        assert proc is not None
        asyncio.run(run_level(port, 4, stream_s, stream_s, False))  # warm the pools
        before = _tree_cpu(proc.pid)
        result = asyncio.run(run_level(port, args.streams, args.duration, stream_s, False))
        if kind == "wirecheck":
            _catch_up(tmp / f"{kind}.db")
        after = _tree_cpu(proc.pid)
        if record is not None:
            with _load(port, args.streams, args.duration, stream_s):
                time.sleep(args.duration / 4)
                _perf(
                    *("record", "-q", "-F", str(args.freq), "--call-graph", "dwarf,16384"),
                    *("-p", ",".join(map(str, _children(proc.pid))), "-o", str(record)),
                    *("--", "sleep", str(args.record_s)),
                )
    # as proxy_overhead.py counts them: a helper started during the level counts from nothing
    total = _used(before, after)[0]
    main = _used({proc.pid: before[proc.pid]}, {proc.pid: after[proc.pid]})[0]
    us = {"forwarding": main, "helpers": total - main, "total": total}
    return {k: v * 1e6 / max(result["events"], 1) for k, v in us.items()}, result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=256)
    ap.add_argument("--duration", type=float, default=10.0, help="seconds of load a level")
    ap.add_argument("--record-s", type=float, default=6.0, help="seconds of the sampled level's load sampled")
    ap.add_argument("--events", type=int, default=20, help="SSE events per stream")
    ap.add_argument("--interval-ms", type=float, default=20.0)
    ap.add_argument("--freq", type=int, default=499, help="samples a second of CPU")
    ap.add_argument("--top", type=int, default=12, help="Python functions listed a part")
    ap.add_argument("--out", default=str(HERE / "results" / "proxy_layers.json"))
    ap.add_argument("--script", type=Path, help="also keep perf's samples here, as perf script wrote them")
    args = ap.parse_args(argv)
    if args.record_s <= 0 or args.duration * 3 / 4 < args.record_s:
        ap.error("--record-s must be positive and fit in the last three quarters of --duration")
    if why := _perf_usable():
        print(f"proxy_layers.py: {why}", file=sys.stderr)
        return 2
    up_port = free_port()
    up = start_upstream(up_port, args.events, args.interval_ms, "vllm")
    try:
        _wait_port(up_port, up)
        with tempfile.TemporaryDirectory(prefix="wc-layers-") as tmpd:
            tmp = Path(tmpd)
            os.chmod(tmp, 0o777)
            nginx_us, _ = _measure("nginx", up_port, tmp, args, None)
            data = tmp / "perf.data"
            us, result = _measure("wirecheck", up_port, tmp, args, data)
            script = _perf("script", "-i", str(data), "-F", "pid,tid,ip,sym,dso")
    finally:
        up.terminate()
        up.wait(timeout=10)
    if args.script is not None:
        args.script.write_text(script)
    samples = parse_script(script)
    found = layers(samples, _loop_pid(samples), args.top)
    parts_us = per_event(found, us)
    b = bound(parts_us, nginx_us["total"])
    _print(args, found, parts_us, b, result)
    path = write_json(
        args.out,
        {
            "machine": machine(),
            "streams": args.streams,
            "events": args.events,
            "record_s": args.record_s,
            "freq": args.freq,
            "nginx_us_per_event": nginx_us["total"],
            "us_per_event": us,
            "events_per_s": result["events_per_s"],
            "samples": found["samples"],
            "parts": found["parts"],
            "parts_us": parts_us,
            "functions": found["functions"],
            "bound": b,
        },
    )
    print(f"wrote {path}")
    return 0


def _loop_pid(samples: list[Sample]) -> int:
    """The forwarding process: the one whose samples include the relay (the helpers' never do),
    else the one with the most samples."""
    for s in samples:
        if any("_relay_c" in d for _, d in s.frames):
            return s.pid
    counts = Counter(s.pid for s in samples)
    return counts.most_common(1)[0][0] if counts else 0


def _print(
    args: argparse.Namespace,
    found: dict[str, Any],
    us: dict[str, dict[str, float]],
    b: dict[str, float],
    result: dict[str, Any],
) -> None:
    nginx_us = b["nginx_us_per_event"]
    n = found["samples"]
    print(
        f"{args.streams} streams of {args.events} events, {result['events_per_s']:.0f} events/s; "
        f"{args.record_s:.0f} s sampled at {args.freq}/s: {n['forwarding']} samples of the forwarding "
        f"process, {n['helpers']} of its helpers"
    )
    print(f"{'part':10s} {'kernel':>8s} {'interp':>8s} {'native':>8s} {'us/ev':>8s} {'x nginx':>8s}")
    for p in PARTS:
        v = us[p]
        total = sum(v.values())
        print(
            f"{p:10s} {v['kernel']:8.2f} {v['interpreter']:8.2f} {v['native']:8.2f} "
            f"{total:8.2f} {total / nginx_us:8.2f}"
        )
    print(f"{'nginx':10s} {'':8s} {'':8s} {'':8s} {nginx_us:8.2f} {1.0:8.2f}")
    print(
        f"wirecheck {b['us_per_event']:.2f} us/event = {b['x_nginx']:.2f}x nginx; without the python "
        f"part's interpreter and native samples {b['without_python_us']:.2f} = "
        f"{b['without_python_x_nginx']:.2f}x (the bound of a native exchange)"
    )
    for p, funcs in found["functions"].items():
        total = sum(found["parts"][p].values()) or 1
        print(f"innermost Python functions, {p} part:")
        for name, c in funcs:
            print(f"  {100 * c / total:5.1f}%  {name}")


if __name__ == "__main__":
    raise SystemExit(main())
