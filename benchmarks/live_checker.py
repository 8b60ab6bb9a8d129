"""What the live checker costs an exchange, by batch size, as a ratio to parsing its frames.

The proxy's live checker claims the settled exchanges of a store in batches and checks each batch
with the exchanges recorded ``NEIGHBOUR_S`` around it (proxy/_live.py). This script records
``--exchanges`` streamed chat completions into a fresh SQLite store, started ``1 / --rate`` seconds
apart (640 a second is what ``proxy_overhead.py`` drives at 256 streams), each ``--events`` frames
and ``[DONE]`` in a piece apiece, as the proxy records them; then, for each batch size, checks them
all with one worker's loop (``check_pending`` with the views it keeps between batches) and reports
its CPU time (this process, one core):

- baseline: ``json.loads`` of every frame's payload of the same exchanges (the least any checker
  must do);
- per batch size: CPU per exchange checked (reading it from the store, claiming it, its view, the
  rules, pairing with the window around it, its findings and the mark), and as a ratio to the
  baseline's per exchange.

The worker checks batches of up to 1000 when it lags and of what a second brought when it keeps up
under load (``BUSY_INTERVAL_S``): 640 at 640 a second; a quarter second's worth was 160.

``--store PATH`` checks a copy of a store recorded elsewhere instead (for one recorded by
``wirecheck proxy --no-live-checks`` under ``proxy_overhead.py``'s load: the traffic the live checker
meets there, which is not the shape recorded here); the baseline is then its frames' ``json.loads``.
Before the first batch size, a few exchanges of another store are checked once outside the timing:
a checker process pays its first-use costs (imports, compiled patterns) once, not per batch size.

``--taps 2`` records each request at the caller and the engine tap without a correlation id (the
live checker then judges each batch with its group, ``proxy/_kin.py``); with ``--correlated`` both
sides carry one (a batch whose exchanges all pair by it loads only their twins from around it);
``--same-prompt`` sends one prompt every time (the group is the whole window, loaded within
``GROUP_BYTES``). ``--stream`` says what a stream's tokens are: an answer's text (the default), a
thinking model's reasoning before its answer (``thinking``: half the tokens, ``reasoning`` deltas),
or one tool call's arguments, piece by piece (``tool-call``), each as vLLM writes them.

    python benchmarks/live_checker.py [--exchanges 12000] [--rate 640] [--batches 160,640,1000]
        [--taps 2 [--correlated]] [--same-prompt] [--stream answer|thinking|tool-call] [--store PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench_output import machine, write_json
from overhead_load import TOOL

from wirecheck.contracts import Chunk, Exchange, HttpRequest, HttpResponse, InputError
from wirecheck.proxy._live import Recent, check_pending, settle_checker_gc
from wirecheck.record import Store, open_store

#: what a stream's tokens are (``--stream``): an answer's text; a thinking model's reasoning, the first
#: half of them, before its answer; a call of the tool the request declares, its arguments piece by
#: piece (vllm-wire.md). Each conforms: the checker finds nothing in it
STREAMS = ("answer", "thinking", "tool-call")


def _exchange(i: int, t0: float, rate: float, events: int, stream: str = "answer") -> Exchange:
    def frame(delta: dict[str, Any], finish: str | None) -> bytes:
        obj = {
            "id": f"chatcmpl-{i:016x}",
            "object": "chat.completion.chunk",
            "created": 1796199188,
            "model": "bench",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"

    pieces = [frame({"role": "assistant", "content": ""}, None)]
    tokens = [f"tok{n} " for n in range(events - 2)]
    req: dict[str, Any] = {
        "model": "bench",
        "stream": True,
        "messages": [{"role": "user", "content": f"hi {i}"}],
    }
    if stream == "tool-call":
        # a call of the tool the request declares, its arguments valid against the tool's schema:
        # the first piece with its id, type and name, the last one closing the object
        req["tools"] = [TOOL]
        begin = {"id": f"functions.search:{i}", "type": "function", "index": 0}
        arguments = ['{"q": "', *tokens[2:], '"}']
        pieces.append(
            frame(
                {"tool_calls": [{**begin, "function": {"name": "search", "arguments": arguments[0]}}]}, None
            )
        )
        pieces += [
            frame({"tool_calls": [{"index": 0, "function": {"arguments": a}}]}, None) for a in arguments[1:]
        ]
    else:
        field = ("reasoning", "content") if stream == "thinking" else ("content", "content")
        pieces += [frame({field[2 * n >= len(tokens)]: t}, None) for n, t in enumerate(tokens)]
    pieces += [frame({}, "tool_calls" if stream == "tool-call" else "stop"), b"data: [DONE]\n\n"]
    body = json.dumps(req)
    return Exchange(
        id=f"caller-{i:08d}",
        tap="caller",
        correlation=None,
        started_at=datetime.fromtimestamp(t0 + i / rate, UTC).isoformat(),
        request=HttpRequest(
            "POST", "/v1/chat/completions", [("content-type", "application/json")], body.encode()
        ),
        response=HttpResponse(
            200,
            [("content-type", "text/event-stream")],
            b"",
            [Chunk(20.0 * (n + 1), p) for n, p in enumerate(pieces)],
        ),
    )


def recorded(
    i: int,
    t0: float,
    rate: float,
    events: int,
    *,
    taps: int = 1,
    same_prompt: bool = False,
    correlated: bool = False,
    stream: str = "answer",
) -> list[Exchange]:
    """Request ``i`` as recorded: at the caller tap, and with two taps also at the engine tap 2 ms
    later, with no correlation id (a gateway that drops ``x-wirecheck-id``): the two pair by
    completion id; ``correlated``: both sides carry the request's correlation id (a gateway that
    passes it on). ``same_prompt``: every request sends one prompt (a load test), so that every
    exchange may pair with every other of the other tap. ``stream``: what the stream's tokens are
    (``STREAMS``)."""
    ex = _exchange(i, t0, rate, events, stream)
    if correlated:
        ex.correlation = f"{i:024x}.{'0' * 32}"
    if same_prompt:
        body = json.dumps({"model": "bench", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
        ex.request = HttpRequest(ex.request.method, ex.request.path, ex.request.headers, body.encode())
    if taps == 1:
        return [ex]
    engine = replace(
        ex,
        id=f"engine-{i:08d}",
        tap="engine",
        started_at=datetime.fromtimestamp(t0 + i / rate + 0.002, UTC).isoformat(),
    )
    return [ex, engine]


def shape_label(args: argparse.Namespace) -> str:
    """How the requests were recorded (:func:`shape_args`'s options), for a table's title: each part
    after a comma ("" for one tap and one prompt a request)."""
    label = ""
    if args.taps == 2:
        label = ", at two taps " + ("with" if args.correlated else "without") + " correlation ids"
    return (
        label
        + (", one prompt" if args.same_prompt else "")
        + ("" if args.stream == "answer" else f", {args.stream} streams")
    )


def shape_args(ap: argparse.ArgumentParser) -> None:
    """The options that say how requests are recorded (:func:`recorded`)."""
    ap.add_argument(
        "--taps",
        type=int,
        choices=(1, 2),
        default=1,
        help="2: each request recorded at the caller and the engine tap, without a correlation id",
    )
    ap.add_argument(
        "--correlated", action="store_true", help="with --taps 2: both sides carry the correlation id"
    )
    ap.add_argument(
        "--same-prompt", action="store_true", help="every request sends one prompt (all of them kin)"
    )
    ap.add_argument(
        "--stream",
        choices=STREAMS,
        default="answer",
        help="what each stream's tokens are: an answer, a thinking model's reasoning (half of them) "
        "before its answer, or a tool call's arguments",
    )


def _frames_baseline(exchanges: list[Exchange]) -> float:
    """CPU seconds of json.loads over every frame payload (cut out beforehand)."""
    payloads = [
        line[6:]
        for ex in exchanges
        for c in (ex.response.chunks or [] if ex.response else [])
        for line in c.data.decode().split("\n")
        if line.startswith("data: {")
    ]
    t = time.process_time()
    for p in payloads:
        json.loads(p)
    return time.process_time() - t


def _write(path: Path, exchanges: list[Exchange]) -> None:
    """A fresh store at ``path`` holding ``exchanges``, closed."""
    store = Store(str(path))
    store.write_now(exchanges)
    store.close()


def _copy(src: Path, dst: Path) -> None:
    """An SQLite store's files (its WAL and shared memory where there are) copied to ``dst``."""
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{src}{suffix}").exists():
            shutil.copy(f"{src}{suffix}", f"{dst}{suffix}")


def _warm(tmp: Path, batch: int) -> None:
    """Check a few exchanges of a store of their own once: the first-use costs, out of the timing."""
    path = tmp / "warm.db"
    _write(path, [e for i in range(20) for e in recorded(i, time.time() - 120, 640.0, 20)])
    _check_all(path, batch)


def _check_all(path: Path, batch: int) -> tuple[float, int]:
    """CPU seconds to check every exchange of the store at ``path`` in batches of ``batch``."""
    store = Store(str(path))
    recent = Recent()
    done = 0
    try:
        t = time.process_time()
        while n := check_pending(store, settle_s=0.0, recent=recent, limit=batch):
            done += n
        return time.process_time() - t, done
    finally:
        store.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exchanges", type=int, default=12_000)
    ap.add_argument("--rate", type=float, default=640.0, help="exchanges a second of recorded time")
    ap.add_argument("--events", type=int, default=20, help="frames a stream, [DONE] besides")
    ap.add_argument("--batches", default="160,640,1000")
    shape_args(ap)
    ap.add_argument("--store", type=Path, help="check a copy of this store (SQLite, not yet checked) instead")
    ap.add_argument("--out", default="benchmarks/results/live_checker.json")
    args = ap.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]
    settle_checker_gc()  # as the live checker does
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        saved = Path(tmp) / "saved.db"
        if args.store is not None:
            try:
                with contextlib.closing(open_store(args.store)) as given:
                    exchanges = list(given.exchanges())
            except InputError as exc:
                ap.error(f"--store: {exc}")
            _copy(args.store, saved)
        else:
            t0 = time.time() - args.exchanges / args.rate - 60
            exchanges = [
                e
                for i in range(args.exchanges)
                for e in recorded(
                    i,
                    t0,
                    args.rate,
                    args.events,
                    taps=args.taps,
                    same_prompt=args.same_prompt,
                    correlated=args.correlated,
                    stream=args.stream,
                )
            ]
            _write(saved, exchanges)
        total = len(exchanges)
        if not total:
            ap.error("no exchanges to check")
        base = _frames_baseline(exchanges) / total
        del exchanges
        _warm(Path(tmp), batches[0])
        for batch in batches:
            copy = Path(tmp) / f"b{batch}.db"
            _copy(saved, copy)
            cpu, done = _check_all(copy, batch)
            assert done == total, (done, total)
            rows.append({"batch": batch, "us_per_exchange": cpu / done * 1e6, "x_frames": cpu / done / base})
    if args.store is not None:
        print(f"{total} exchanges of {args.store}; one core, process CPU time")
    else:
        print(
            f"{args.exchanges} requests{shape_label(args)}, {total} exchanges of {args.events} frames, "
            f"{args.rate:.0f} requests a second of recorded time; one core, process CPU time"
        )
    print(f"{'path':44s} {'us/exchange':>12s} {'x frames':>9s}")
    print(f"{'json.loads of its frames (baseline)':44s} {base * 1e6:12.1f} {1.0:9.2f}")
    for r in rows:
        label = f"live checker, batches of {r['batch']}"
        print(f"{label:44s} {r['us_per_exchange']:12.1f} {r['x_frames']:9.2f}")
    path = write_json(
        args.out,
        {
            "machine": machine(),
            "exchanges": args.exchanges,
            "rate": args.rate,
            "events": args.events,
            "taps": args.taps,
            "same_prompt": args.same_prompt,
            "correlated": args.correlated,
            "stream": args.stream,
            "store": None if args.store is None else str(args.store),
            "baseline_us_per_exchange": base * 1e6,
            "rows": rows,
        },
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
