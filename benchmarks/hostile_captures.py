"""What hostile captures cost ``wirecheck check``: peak memory and time for large HAR files, and the
exit code of each kind of malformed file.

Each row runs ``wirecheck check FILE --format json -o /dev/null`` in a process of its own and reads its
peak resident set and CPU time from the kernel (``wait4``), so the figures are the command's whole
cost. The files are made here, streamed to disk (the generator never holds a capture):

- ``har-N``: a HAR 1.2 file of N chat completion entries, as ``wirecheck export --format har`` writes
  them (about 1.3 KB an entry);
- the malformed kinds: a mitmproxy flow nested 100 000 levels deep, type-confused HARs, a store row
  whose ``doc`` is not an exchange, a HAR entry without a URL, a JSONL exchange with ``"path": 123``,
  a JSONL line of ``--big-line-mb`` MB. Each must end with exit 2 and a message that names the entry,
  never a traceback.

    python benchmarks/hostile_captures.py [--entries 200000,1000000] [--malformed] \
        [--check-arg=--max-exchanges=2000000] [--out benchmarks/results/hostile_captures.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_output import write_json

_REQUEST = {
    "model": "moonshotai/Kimi-K2-Thinking",
    "messages": [{"role": "user", "content": "What is the weather in Osaka?"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
}
_RESPONSE = {
    "id": "chatcmpl-8a9e95f5621789de",
    "object": "chat.completion",
    "created": 1796199188,
    "model": "moonshotai/Kimi-K2-Thinking",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Sunny, 21 degrees.", "tool_calls": []},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 20, "completion_tokens": 6, "total_tokens": 26},
}


def _entry(i: int) -> dict[str, Any]:
    return {
        "startedDateTime": "2026-01-01T00:00:00+00:00",
        "time": 12.5,
        "request": {
            "method": "POST",
            "url": "http://127.0.0.1:8000/v1/chat/completions",
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "content-type", "value": "application/json"}],
            "queryString": [],
            "cookies": [],
            "headersSize": -1,
            "bodySize": 200,
            "postData": {"mimeType": "application/json", "text": json.dumps(_REQUEST)},
        },
        "response": {
            "status": 200,
            "statusText": "",
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "content-type", "value": "application/json"}],
            "cookies": [],
            "content": {"size": 300, "mimeType": "application/json", "text": json.dumps(_RESPONSE)},
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": 300,
        },
        "cache": {},
        "timings": {"send": 0, "wait": 0, "receive": 0},
        "_wirecheck": {"id": f"caller-{i:012d}", "tap": "caller"},
    }


def write_har(path: Path, n: int) -> None:
    with path.open("w", encoding="utf-8") as fh:
        fh.write('{"log": {"version": "1.2", "creator": {"name": "bench", "version": "1"}, "entries": [\n')
        for i in range(n):
            fh.write(("," if i else "") + json.dumps(_entry(i)) + "\n")
        fh.write("]}}\n")


def _har(entries: list[Any]) -> str:
    return json.dumps({"log": {"version": "1.2", "entries": entries}})


def _deep_flow(path: Path, depth: int = 100_000) -> None:
    """A tnetstring list nested ``depth`` levels (mitmproxy's flow format), written outside in."""
    totals = [3]  # b"0:]", the innermost empty list
    for _ in range(depth):
        inner = totals[-1]
        totals.append(len(str(inner)) + 1 + inner + 1)
    with path.open("wb") as fh:
        for k in range(depth, 0, -1):
            fh.write(b"%d:" % totals[k - 1])
        fh.write(b"0:]" + b"]" * depth)


def _bad_store(path: Path) -> None:
    from wirecheck.contracts import Exchange, HttpRequest
    from wirecheck.record import Store

    store = Store(str(path), writer=True)
    store.write_now([Exchange(id="fine", tap="caller", request=HttpRequest("POST", "/v1/x", [], b"{}"))])
    store.write_now([Exchange(id="bad", tap="caller", request=HttpRequest("POST", "/v1/x", [], b"{}"))])
    store.close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE exchanges SET doc = ? WHERE id = 'bad'", ('{"id": "bad", "request": 7}',))


def _big_line(path: Path, mb: int) -> None:
    with path.open("w", encoding="utf-8") as fh:
        fh.write('{"id": "big", "request": {"method": "POST", "path": "/v1/chat/completions", "body_text": "')
        block = "x" * (1 << 20)
        for _ in range(mb):
            fh.write(block)
        fh.write('"}}\n')


def malformed(tmp: Path, big_line_mb: int) -> dict[str, Path]:
    """The malformed kinds, each written into ``tmp``."""
    url = "http://127.0.0.1:8000/v1/chat/completions"
    files: dict[str, Callable[[Path], None]] = {
        "deep-mitm-flow.mitm": _deep_flow,
        "har-response-is-a-string.har": lambda p: p.write_text(
            _har([{"request": {"method": "GET", "url": url}, "response": "x"}])
        ),
        "har-headers-not-a-list.har": lambda p: p.write_text(
            _har([{"request": {"method": "GET", "url": url, "headers": 5}}])
        ),
        "har-base64-text-a-number.har": lambda p: p.write_text(
            _har([{"request": {"method": "POST", "url": url, "postData": {"text": 5, "encoding": "base64"}}}])
        ),
        "har-chunk-not-an-object.har": lambda p: p.write_text(
            _har([{"request": {"method": "GET", "url": url}, "_wirecheck": {"chunks": [1]}}])
        ),
        "har-entry-without-url.har": lambda p: p.write_text(_har([{"request": {"method": "GET"}}])),
        "store-bad-doc.db": _bad_store,
        "jsonl-path-123.jsonl": lambda p: p.write_text(
            json.dumps({"id": "x", "request": {"method": "POST", "path": 123}}) + "\n"
        ),
        "jsonl-big-line.jsonl": lambda p: _big_line(p, big_line_mb),
    }
    out = {}
    for name, make in files.items():
        path = tmp / name
        make(path)
        out[name] = path
    return out


#: reading alone: every exchange of the capture, one at a time, none kept (what the loaders cost)
_READ = (
    "import sys; from wirecheck.replay import CaptureLimits, read_capture; "
    "n = sum(1 for _ in read_capture(sys.argv[1], limits=CaptureLimits(exchanges=10**9))); "
    "print(f'{n} exchanges read', file=sys.stderr)"
)


def run_check(path: Path, extra: list[str], *, read_only: bool = False) -> dict[str, Any]:
    """``wirecheck check`` on ``path`` (or, ``read_only``, just reading it) in its own process: exit
    code, wall and CPU time, peak RSS."""
    cmd = [
        sys.executable,
        "-m",
        "wirecheck",
        "check",
        str(path),
        "--format",
        "json",
        "-o",
        os.devnull,
        *extra,
    ]
    if read_only:
        cmd = [sys.executable, "-c", _READ, str(path)]
    return measure(cmd)


def measure(cmd: list[str]) -> dict[str, Any]:
    """Run ``cmd`` in a process of its own: exit code, wall and CPU time, peak RSS (from ``wait4``),
    whether it ended in a traceback, and its last line on stderr."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    text = err.decode("utf-8", "replace")
    return {
        "rc": proc.returncode,
        "wall_s": round(time.monotonic() - t0, 2),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "traceback": "Traceback" in text,
        "message": text.strip().splitlines()[-1][:200] if text.strip() else "",
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", default="200000", help="HAR sizes, comma-separated ('' for none)")
    ap.add_argument("--malformed", action="store_true", help="also run the malformed kinds")
    ap.add_argument("--big-line-mb", type=int, default=400)
    ap.add_argument("--check-arg", action="append", default=[], help="passed on to wirecheck check")
    ap.add_argument(
        "--read-only", action="store_true", help="for the HAR rows: read the capture only (no check)"
    )
    ap.add_argument("--out", default="benchmarks/results/hostile_captures.json")
    args = ap.parse_args()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="wirecheck-hostile-") as tmp_name:
        tmp = Path(tmp_name)
        for n in [int(x) for x in args.entries.split(",") if x.strip()]:
            path = tmp / f"har-{n}.har"
            write_har(path, n)
            row = {
                "file": f"har-{n}" + (" (read)" if args.read_only else ""),
                "bytes": path.stat().st_size,
                **run_check(path, args.check_arg, read_only=args.read_only),
            }
            path.unlink()
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
        if args.malformed:
            for name, path in malformed(tmp, args.big_line_mb).items():
                row = {"file": name, "bytes": path.stat().st_size, **run_check(path, args.check_arg)}
                path.unlink()
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    print(
        f"{'file':34} {'MB':>8} {'rc':>3} {'wall s':>8} {'cpu s':>8} {'peak RSS MB':>12}  traceback  message"
    )
    for r in rows:
        print(
            f"{r['file']:34} {r['bytes'] / 1e6:8.1f} {r['rc']:3} {r['wall_s']:8.2f} {r['cpu_s']:8.2f} "
            f"{r['peak_rss_mb']:12.1f}  {'yes' if r['traceback'] else 'no ':9}  {r['message'][:90]}"
        )
    write_json(
        args.out,
        {"python": platform.python_version(), "check_args": args.check_arg, "rows": rows},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
