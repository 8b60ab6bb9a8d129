"""The live checker's peak memory by stream length: what it holds must not grow with the streams.

The live checker (proxy/_live.py) claims settled exchanges in batches and checks each batch with the
exchanges recorded ``NEIGHBOUR_S`` around it, keeping the views it built for the next batch. For each
``--events`` (frames a stream), this script records ``--exchanges`` streamed chat completions into a
fresh SQLite store, ``1 / --rate`` seconds apart (640 a second is what ``proxy_overhead.py`` drives at
256 streams), in a process of its own; then checks them all, batches of ``--batch`` as a lagging
checker claims them, in another process, and reports that process's peak resident memory over its
memory before the first batch (imports and store opened: the baseline).

The target: the memory held (peak over baseline) at the longest streams at most ``--target`` times
that at the shortest (the same exchanges a second, the same batches; only the streams' length
differs). What the checker holds is bounded in bytes: the views it keeps (``RECENT_BYTES`` of their
exchanges' recorded bytes) and the piece of a batch it checks at once (``PIECE_BYTES``), about four
times as much resident. A checker that keeps every view of the window, or a batch whole, holds memory
in proportion to the streams' length instead: 14x at 400 frames against 20, before the bound. Short
streams stay well under the bytes bound and long ones reach it, so a bounded checker still holds about
2.5x as much at 400 frames as at 20 (and the same at 2,000 as at 400): the default target, 3x, tells
the two apart.

``--taps 2`` records each request at the caller and the engine tap, without a correlation id (a
gateway that drops ``x-wirecheck-id``): any exchange around a batch may then be a partner, and the
checker loads the batch's group only (``proxy/_kin.py``), within ``GROUP_BYTES``. ``--same-prompt``
sends one prompt every time, which makes the group the whole window: the columns ``cut checked`` and
``left out`` say how many exchanges were checked with part of it, and how many were left out.

    python benchmarks/checker_memory.py [--events 20,400] [--exchanges 3000] [--rate 640] [--batch 1000]
        [--taps 2] [--same-prompt]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_output import machine, write_json

HERE = Path(__file__).resolve().parent


def _record(
    path: str,
    exchanges: int,
    rate: float,
    events: int,
    *,
    taps: int,
    same_prompt: bool,
    correlated: bool,
    stream: str = "answer",
) -> None:
    """Record the store, a few hundred exchanges at a time (this process's memory stays small). With
    two taps each request is recorded at the caller tap and, 2 ms later, at the engine tap, with no
    correlation id (a gateway that drops ``x-wirecheck-id``): they pair by completion id; or, with
    ``correlated``, with one on both sides."""
    from live_checker import recorded

    from wirecheck.record import Store

    t0 = time.time() - exchanges / rate - 60
    store = Store(path)
    try:
        for k in range(0, exchanges, 200):
            store.write_now(
                [
                    e
                    for i in range(k, min(exchanges, k + 200))
                    for e in recorded(
                        i,
                        t0,
                        rate,
                        events,
                        taps=taps,
                        same_prompt=same_prompt,
                        correlated=correlated,
                        stream=stream,
                    )
                ]
            )
    finally:
        store.close()


def _check(path: str, batch: int) -> dict[str, float]:
    """Check every exchange of the store as the worker does; this process's memory before and at peak."""
    from wirecheck.proxy._live import Recent, check_pending, settle_checker_gc
    from wirecheck.record import Store

    settle_checker_gc()
    store = Store(path)
    recent = Recent()
    base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    done = 0
    cpu = time.process_time()
    try:
        while n := check_pending(store, settle_s=0.0, recent=recent, limit=batch):
            done += n
    finally:
        store.close()
    return {
        "checked": done,
        "base_mb": base_kb / 1024,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "cpu_s": time.process_time() - cpu,
        # exchanges checked with part of their group (several taps, past GROUP_BYTES), and left out
        "cut_checked": recent.cut_checked,
        "cut_left_out": recent.cut_left_out,
    }


def _child(*args: str) -> str:
    proc = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, cwd=HERE, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"checker_memory.py {args[0]} failed:\n{proc.stderr[-2000:]}")
    return proc.stdout


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(HERE))
    from live_checker import shape_args, shape_label

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--role", choices=("bench", "record", "check"), default="bench")
    ap.add_argument("--store", default="", help=argparse.SUPPRESS)  # --role record / check
    ap.add_argument("--events", default="20,400", help="frames a stream, one run each ([DONE] besides)")
    ap.add_argument("--exchanges", type=int, default=3000)
    ap.add_argument("--rate", type=float, default=640.0, help="exchanges a second of recorded time")
    ap.add_argument("--batch", type=int, default=1000, help="exchanges claimed at once (a lagging checker's)")
    shape_args(ap)
    ap.add_argument(
        "--target", type=float, default=3.0, help="longest streams' peak over shortest's, at most"
    )
    ap.add_argument("--out", default=str(HERE / "results" / "checker_memory.json"))
    args = ap.parse_args(argv)
    if args.role == "record":
        _record(
            args.store,
            args.exchanges,
            args.rate,
            int(args.events),
            taps=args.taps,
            same_prompt=args.same_prompt,
            correlated=args.correlated,
            stream=args.stream,
        )
        return 0
    if args.role == "check":
        print(json.dumps(_check(args.store, args.batch)))
        return 0
    lengths = sorted(int(e) for e in args.events.split(","))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for events in lengths:
            store = str(Path(tmp) / f"e{events}.db")
            common = ["--store", store, "--exchanges", str(args.exchanges), "--rate", str(args.rate)]
            shape = ["--taps", str(args.taps), *(["--same-prompt"] if args.same_prompt else [])]
            shape += ["--correlated"] if args.correlated else []
            shape += ["--stream", args.stream]
            _child("--role", "record", "--events", str(events), *shape, *common)
            got = json.loads(_child("--role", "check", "--batch", str(args.batch), *common))
            if got["checked"] != args.exchanges * args.taps:
                raise SystemExit(
                    f"checked {got['checked']} of {args.exchanges * args.taps} exchanges of {events} frames"
                )
            rows.append({"events": events, **got, "held_mb": got["peak_mb"] - got["base_mb"]})
    first, last = rows[0], rows[-1]
    ratio = last["held_mb"] / max(first["held_mb"], 1.0)
    met = ratio <= args.target
    print(
        f"{args.exchanges} requests{shape_label(args)}, {args.rate:.0f} a second of recorded time, batches of "
        f"{args.batch}; the checking process's resident memory"
    )
    print(
        f"{'frames a stream':>16s} {'before MB':>10s} {'peak MB':>9s} {'held MB':>9s} {'cpu s':>7s} "
        f"{'cut checked':>12s} {'left out':>9s}"
    )
    for r in rows:
        print(
            f"{r['events']:16d} {r['base_mb']:10.1f} {r['peak_mb']:9.1f} {r['held_mb']:9.1f} {r['cpu_s']:7.1f} "
            f"{r['cut_checked']:12d} {r['cut_left_out']:9d}"
        )
    print(
        f"target {'met   ' if met else 'MISSED'} memory held at {last['events']} frames a stream <= "
        f"{args.target:g}x that at {first['events']}: {ratio:.2f}x ({last['held_mb']:.0f} / "
        f"{first['held_mb']:.0f} MB)"
    )
    path = write_json(
        args.out,
        {
            "machine": machine(),
            "exchanges": args.exchanges,
            "rate": args.rate,
            "batch": args.batch,
            "taps": args.taps,
            "same_prompt": args.same_prompt,
            "correlated": args.correlated,
            "stream": args.stream,
            "rows": rows,
            "ratio": ratio,
            "target": args.target,
            "met": met,
        },
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
