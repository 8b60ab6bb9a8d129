"""How fast recorded SSE is checked, as a ratio to the bare JSON parse of the same frames.

Both run in this one process on one core, over the same corpus of recorded streams (vLLM 0.33 frames:
reasoning then content, Kimi K2 tool calls, K3 whole calls; chunked as a TCP reader sees them):

- baseline: ``json.loads`` of every frame's payload, already cut out of the stream (the least any
  checker must do);
- checked: the whole ``wirecheck check`` path (SSE decoding, assembly, every exchange rule,
  attribution) from the raw recorded chunks.

Target: checked within 2x of the baseline. Prints a table and writes JSON.

    python benchmarks/check_throughput.py [--exchanges 400] [--repeat 5] [--out benchmarks/results/check_throughput.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from pathlib import Path
from typing import Any

from bench_output import write_json

from wirecheck.contracts import CheckConfig, Chunk, Exchange, HttpRequest, HttpResponse, check_exchanges

MODEL = "moonshotai/Kimi-K2-Thinking"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
                "required": ["city"],
            },
        },
    }
]


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-8a9e95f5621789de",
        "object": "chat.completion.chunk",
        "created": 1796199188,
        "model": MODEL,
        "choices": [
            {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish, "token_ids": None}
        ],
        "kv_transfer_params": None,
    }


def _words(rng: random.Random, n: int) -> list[str]:
    vocab = [
        "the",
        " weather",
        " in",
        " Tokyo",
        " is",
        " sunny",
        ",",
        " with",
        " a",
        " high",
        " of",
        " 21",
        "°C",
        ".",
    ]
    return [rng.choice(vocab) for _ in range(n)]


def _stream(rng: random.Random, kind: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    req: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "weather?"}],
        "stream": True,
    }
    objs: list[dict[str, Any]] = [
        {
            "id": "chatcmpl-8a9e95f5621789de",
            "object": "chat.completion.chunk",
            "created": 1796199188,
            "model": MODEL,
            "choices": [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": ""},
                    "logprobs": None,
                    "finish_reason": None,
                }
            ],
        }
    ]
    objs += [_chunk({"reasoning": w}) for w in _words(rng, rng.randint(20, 80))]
    if kind == "text":
        objs += [_chunk({"content": w}) for w in _words(rng, rng.randint(50, 200))]
        objs.append(_chunk({}, "stop"))
    else:
        req["tools"] = TOOLS
        args = json.dumps({"city": "Tokyo", "days": rng.randint(1, 7)})
        if kind == "k2":
            objs.append(
                _chunk(
                    {
                        "tool_calls": [
                            {
                                "id": "functions.get_weather:0",
                                "type": "function",
                                "index": 0,
                                "function": {"name": "get_weather", "arguments": args[:2]},
                            }
                        ]
                    }
                )
            )
            objs += [
                _chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[i : i + 3]}}]})
                for i in range(2, len(args), 3)
            ]
        else:
            objs.append(
                _chunk(
                    {
                        "tool_calls": [
                            {
                                "id": "chatcmpl-tool-0123456789abcdef",
                                "type": "function",
                                "index": 0,
                                "function": {"name": "get_weather", "arguments": args},
                            }
                        ]
                    }
                )
            )
        objs.append(_chunk({}, "tool_calls"))
    return req, objs


def corpus(n: int, seed: int = 7) -> tuple[list[Exchange], list[str], int]:
    rng = random.Random(seed)
    exchanges, payloads, size = [], [], 0
    for i in range(n):
        req, objs = _stream(rng, rng.choice(["text", "text", "k2", "k3"]))
        texts = [json.dumps(o, separators=(",", ":")) for o in objs] + ["[DONE]"]
        raw = "".join(f"data: {t}\n\n" for t in texts).encode()
        payloads += texts[:-1]
        size += len(raw)
        # cut as a TCP reader sees it: pieces of 1-4 frames' worth, not on frame borders
        chunks, pos, t = [], 0, 0.0
        while pos < len(raw):
            step = rng.randint(200, 1400)
            chunks.append(Chunk(t, raw[pos : pos + step]))
            pos += step
            t += rng.uniform(5, 30)
        exchanges.append(
            Exchange(
                id=f"b{i}",
                tap="engine",
                request=HttpRequest(
                    "POST",
                    "/v1/chat/completions",
                    [("content-type", "application/json")],
                    json.dumps(req).encode(),
                ),
                response=HttpResponse(200, [("content-type", "text/event-stream")], b"", chunks),
            )
        )
    return exchanges, payloads, size


def _best(fn: Any, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--exchanges", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "check_throughput.json"))
    ap.add_argument(
        "--target",
        type=float,
        default=2.0,
        help="fail (exit 1) when checked is slower than this many times the baseline",
    )
    args = ap.parse_args(argv)

    exchanges, payloads, size = corpus(args.exchanges)
    config = CheckConfig(direct=True)
    res = check_exchanges(exchanges, config)
    if res.errors:
        print(f"corpus is not clean: {res.errors} error findings, e.g. {res.findings[0]}", file=sys.stderr)
        return 2
    loads = json.loads
    t_parse = _best(lambda: [loads(p) for p in payloads], args.repeat)
    t_check = _best(lambda: check_exchanges(exchanges, config), args.repeat)
    mb = size / 1e6
    rows = [
        ("bare json.loads of frames (baseline)", t_parse, mb / t_parse, 1.0),
        ("wirecheck check (decode+assemble+rules)", t_check, mb / t_check, t_check / t_parse),
    ]
    print(
        f"corpus: {len(exchanges)} streams, {len(payloads)} frames, {mb:.2f} MB of SSE; best of {args.repeat}; one core"
    )
    print(f"{'path':42} {'seconds':>9} {'MB/s':>9} {'x baseline':>11}")
    for name, t, rate, ratio in rows:
        print(f"{name:42} {t:9.4f} {rate:9.1f} {ratio:11.2f}")
    ratio = t_check / t_parse
    verdict = "met" if ratio <= args.target else "MISSED"
    print(f"target: checked within {args.target:.1f}x of the bare parse: {ratio:.2f}x, {verdict}")
    out = write_json(
        args.out,
        {
            "benchmark": "check_throughput",
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpu_count": os.cpu_count(),
            "streams": len(exchanges),
            "frames": len(payloads),
            "bytes": size,
            "repeat": args.repeat,
            "baseline_seconds": t_parse,
            "checked_seconds": t_check,
            "baseline_mb_per_s": mb / t_parse,
            "checked_mb_per_s": mb / t_check,
            "ratio": ratio,
            "target_ratio": args.target,
            "met": ratio <= args.target,
        },
    )
    print(f"wrote {out}")
    return 0 if ratio <= args.target else 1


if __name__ == "__main__":
    raise SystemExit(main())
