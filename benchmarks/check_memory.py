"""What ``wirecheck check`` holds in memory over a large capture, as a ratio to reading it alone.

For each size N a HAR file of N exchanges is generated, streamed to disk: a dual-tap recording of
agent traffic, a request every ``1/--rate`` seconds, each seen at the caller tap and at the engine tap
(one correlation id), a quarter of them streamed (SSE chunks with their times), and every tenth
streamed request asked again plain a second after its answer (a stream/non-stream twin); one request
in fifty calls a tool it was not given, and one in sixty has its answer rewritten by the gateway (so
that there are findings to hold equal). Then, each
in a process of its own, peak RSS and CPU time from the kernel (``wait4``):

- ``read``: every exchange read with ``wirecheck.replay.read_capture``, one at a time, none kept (the
  baseline: what any reader of the file costs);
- ``check``: ``wirecheck check FILE --format json`` (read once, sorted by time, a window held);
- ``whole`` (up to ``--whole-up-to`` exchanges): ``check_exchanges`` over the capture held at once,
  the way ``check`` worked before it held a window; its findings are held equal to ``check``'s.

Target: ``check`` within 4x of ``read`` at every size, flat in N (the window depends on the rate and
the minute within which pairs are looked for, not on the capture's length). Prints a table and
writes JSON.

    python benchmarks/check_memory.py [--sizes 10000,50000,200000] [--rate 20] [--whole-up-to 50000] \
        [--out benchmarks/results/check_memory.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench_output import write_json
from hostile_captures import measure

from wirecheck.contracts import Chunk, Exchange, HttpRequest, HttpResponse
from wirecheck.proxy import to_har

MODEL = "moonshotai/Kimi-K2-Thinking"
BASE = datetime(2026, 3, 1, tzinfo=UTC).timestamp()
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
JSON = [("content-type", "application/json")]

_READ = (
    "import sys; from wirecheck.replay import CaptureLimits, read_capture; "
    "n = sum(1 for _ in read_capture(sys.argv[1], limits=CaptureLimits(exchanges=10**9))); "
    "print(f'{n} exchanges read', file=sys.stderr)"
)
_WHOLE = (
    "import sys; from wirecheck.contracts import check_exchanges, render_json; "
    "from wirecheck.replay import CaptureLimits, read_capture; "
    "exs = list(read_capture(sys.argv[1], limits=CaptureLimits(exchanges=10**9))); "
    "open(sys.argv[2], 'w').write(render_json(check_exchanges(exs)))"
)


def _request(i: int, *, stream: bool) -> bytes:
    body: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"What is the weather in city {i}?"}],
        "tools": TOOLS,
    }
    if stream:
        body["stream"] = True
    return json.dumps(body).encode()


def _answer(i: int, tap: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": f"Sunny in city {i}.", "tool_calls": []}
    finish = "stop"
    if i % 50 == 7:  # the model calls a tool it was not given (at both taps: the model's fault)
        call = {
            "id": f"call_{i:016x}",
            "type": "function",
            "function": {"name": "delete_all", "arguments": "{}"},
        }
        message, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
    elif i % 60 == 13 and tap == "caller":  # the gateway rewrote the answer (the gateway's fault)
        message["content"] = f"Cloudy in city {i}."
    return {
        "id": f"chatcmpl-{i:016x}",
        "object": "chat.completion",
        "created": 1796199188,
        "model": MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 6, "total_tokens": 26},
    }


def _frames(i: int) -> list[Chunk]:
    def frame(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-{i:016x}",
            "object": "chat.completion.chunk",
            "created": 1796199188,
            "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    parts = [
        frame({"role": "assistant", "content": ""}),
        *(frame({"content": w}) for w in ("Sunny ", "in ", f"city {i}.")),
        frame({}, "stop"),
    ]
    chunks = [Chunk(40.0 + 12.0 * n, f"data: {json.dumps(p)}\n\n".encode()) for n, p in enumerate(parts)]
    chunks.append(Chunk(40.0 + 12.0 * len(parts), b"data: [DONE]\n\n"))
    return chunks


def _side(i: int, tap: str, t: float, *, stream: bool, suffix: str = "") -> Exchange:
    response = (
        HttpResponse(200, [("content-type", "text/event-stream")], b"", _frames(i))
        if stream
        else HttpResponse(200, JSON, json.dumps(_answer(i, tap)).encode())
    )
    return Exchange(
        id=f"{tap}-{i:09d}{suffix}",
        tap=tap,
        request=HttpRequest("POST", "/v1/chat/completions", JSON, _request(i, stream=stream)),
        response=response,
        correlation=f"corr-{i:09d}{suffix}",
        started_at=datetime.fromtimestamp(t, UTC).isoformat(),
    )


def exchanges(n: int, rate: float) -> Any:
    """``n`` exchanges of the recording described above, in the order they started."""
    made = 0
    i = 0
    while made < n:
        t = BASE + i / rate
        stream = i % 4 == 0
        for tap, dt in (("caller", 0.0), ("engine", 0.004)):
            if made < n:
                yield _side(i, tap, t + dt, stream=stream)
                made += 1
        if stream and i % 40 == 0:  # its plain twin, a second after the answer
            for tap, dt in (("caller", 1.1), ("engine", 1.104)):
                if made < n:
                    yield _side(i, tap, t + dt, stream=False, suffix="-plain")
                    made += 1
        i += 1


def write_har(path: Path, n: int, rate: float) -> None:
    """The HAR file, one entry at a time (as ``wirecheck export --format har`` writes each)."""
    with path.open("w", encoding="utf-8") as fh:
        fh.write('{"log": {"version": "1.2", "creator": {"name": "bench", "version": "1"}, "entries": [\n')
        for k, ex in enumerate(exchanges(n, rate)):
            [entry] = to_har([ex])["log"]["entries"]
            fh.write(("," if k else "") + json.dumps(entry) + "\n")
        fh.write("]}}\n")


def _findings(path: Path) -> list[Any]:
    return list(json.loads(path.read_text())["findings"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,50000,200000", help="exchanges per capture, comma-separated")
    ap.add_argument("--rate", type=float, default=20.0, help="requests a second in the recording")
    ap.add_argument("--whole-up-to", type=int, default=50_000, help="largest size also checked whole")
    ap.add_argument("--out", default="benchmarks/results/check_memory.json")
    args = ap.parse_args()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="wirecheck-checkmem-") as tmp_name:
        tmp = Path(tmp_name)
        for n in [int(x) for x in args.sizes.split(",") if x.strip()]:
            har = tmp / f"capture-{n}.har"
            write_har(har, n, args.rate)
            streamed_out, whole_out = tmp / "check.json", tmp / "whole.json"
            row: dict[str, Any] = {"exchanges": n, "har_mb": round(har.stat().st_size / 1e6, 1)}
            row["read"] = measure([sys.executable, "-c", _READ, str(har)])
            check_cmd = [sys.executable, "-m", "wirecheck", "check", str(har), "--format", "json"]
            row["check"] = measure([*check_cmd, "-o", str(streamed_out)])
            row["check_findings"] = len(_findings(streamed_out))
            if n <= args.whole_up_to:
                row["whole"] = measure([sys.executable, "-c", _WHOLE, str(har), str(whole_out)])
                row["equal_findings"] = _findings(whole_out) == _findings(streamed_out)
            row["check_vs_read"] = round(row["check"]["peak_rss_mb"] / row["read"]["peak_rss_mb"], 2)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            har.unlink()
    print(
        f"{'exchanges':>10} {'HAR MB':>8} {'read MB':>8} {'check MB':>9} {'ratio':>6} {'whole MB':>9} "
        f"{'read cpu s':>10} {'check cpu s':>11} {'whole cpu s':>11}  findings equal"
    )
    for r in rows:
        whole = r.get("whole")
        print(
            f"{r['exchanges']:>10} {r['har_mb']:>8.1f} {r['read']['peak_rss_mb']:>8.1f} "
            f"{r['check']['peak_rss_mb']:>9.1f} {r['check_vs_read']:>6.2f} "
            f"{whole['peak_rss_mb'] if whole else '-':>9} {r['read']['cpu_s']:>10.1f} "
            f"{r['check']['cpu_s']:>11.1f} {whole['cpu_s'] if whole else '-':>11}  "
            f"{r['check_findings']:>8} {r.get('equal_findings', '-')}"
        )
    failed = [r for r in rows if r["check"]["rc"] not in (0, 1) or r.get("equal_findings") is False]
    write_json(
        args.out,
        {"python": platform.python_version(), "rate": args.rate, "rows": rows, "target_ratio": 4.0},
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
