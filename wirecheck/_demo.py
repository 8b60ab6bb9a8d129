"""``wirecheck demo``: the whole request path on loopback, with faults on every side, then the findings.

    caller (this driver) -> [caller tap] -> faulty gateway -> [engine tap] -> simulator (faulty model,
    parser and engine)

The simulator and the gateway inject faults at fixed rates from a seed, the dual-tap proxy records
both sides into a store, and the contracts attribute every failure. The report goes to ``--out``
(default ``./wirecheck-demo/``): findings (JSON, JUnit, Markdown), the capture (JSONL) and the store.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from wirecheck.contracts import (
    CheckConfig,
    CheckResult,
    check_exchanges,
    render_html,
    render_json,
    render_junit,
    write_exchanges,
)
from wirecheck.proxy import ListenerServer, ProxyApp, Store, TapConfig
from wirecheck.sim import (
    GatewayConfig,
    SimConfig,
    create_app,
    create_gateway,
    parse_faults,
    parse_gateway_faults,
)

__all__ = ["DEMO_GATEWAY_FAULTS", "DEMO_SIM_FAULTS", "run_demo"]

DEMO_SIM_FAULTS = "model.invalid_json=0.12,model.undeclared_tool=0.08,parser.markup_in_content=0.1,engine.error_mid_stream=0.06"
DEMO_GATEWAY_FAULTS = "reasoning_dropped=0.2,finish_reason_changed=0.3,stream_buffered=0.15"

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
            },
            "required": ["city"],
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "search_orders",
        "description": "Search orders",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}
CITIES = ["Tokyo", "Osaka", "Kyoto", "Sapporo", "Nagoya", "Fukuoka"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _requests(model: str, n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        city = CITIES[i % len(CITIES)]
        kind = i % 4
        if kind == 0:
            body: dict[str, Any] = {
                "messages": [{"role": "user", "content": f"What is the weather in {city}?"}],
                "tools": [WEATHER, SEARCH],
            }
        elif kind == 1:
            body = {
                "messages": [{"role": "user", "content": f"Weather in {city}, and search orders for {city}"}],
                "tools": [WEATHER, SEARCH],
            }
        elif kind == 2:
            history = [
                {"role": "user", "content": f"What is the weather in {city}?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "functions.get_weather:0",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": json.dumps({"city": city})},
                        }
                    ],
                },
                {
                    "role": "tool",
                    "tool_call_id": "functions.get_weather:0",
                    "content": json.dumps({"temp_c": 18 + i % 9, "sky": "clear"}),
                },
            ]
            body = {"messages": history, "tools": [WEATHER]}
        else:
            body = {
                "messages": [{"role": "user", "content": f"Summarise the day in {city} as JSON"}],
                "response_format": {"type": "json_object"},
            }
        body["model"] = model
        body["stream"] = i % 2 == 0
        if body["stream"]:
            body["stream_options"] = {"include_usage": True}
        out.append(body)
    return out


async def _drive(url: str, bodies: list[dict[str, Any]], concurrency: int) -> None:
    """Send every request; one that breaks on the transport is recorded by the taps, and checked."""
    sem = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:

        async def one(body: dict[str, Any]) -> None:
            async with sem:
                try:
                    async with client.stream("POST", "/v1/chat/completions", json=body) as r:
                        await r.aread()
                except httpx.HTTPError:
                    pass

        await asyncio.gather(*(one(b) for b in bodies))


async def _run(out: Path, requests: int, seed: int, time_scale: float) -> tuple[Store, float]:
    sim_port, gw_port, caller_port, engine_port = (_free_port() for _ in range(4))
    sim = create_app(
        SimConfig(
            family="kimi_k2",
            faults=parse_faults(DEMO_SIM_FAULTS, seed=seed),
            seed=seed,
            time_scale=time_scale,
            decode_tokens_per_s=60.0,  # with the time scale, ~4 ms a token: streams spread out
        )
    )
    gateway = create_gateway(
        GatewayConfig(
            upstream=f"http://127.0.0.1:{engine_port}",
            faults=parse_gateway_faults(DEMO_GATEWAY_FAULTS, seed=seed),
        )
    )
    store = Store(out / "wirecheck.db", writer=True)
    caller = ProxyApp(TapConfig(upstream=f"http://127.0.0.1:{gw_port}", tap="caller"), store)
    engine = ProxyApp(
        TapConfig(upstream=f"http://127.0.0.1:{sim_port}", tap="engine", inject_correlation=False), store
    )
    servers = [
        ListenerServer(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="auto"))
        for app, port in ((sim, sim_port), (gateway, gw_port), (engine, engine_port), (caller, caller_port))
    ]
    tasks = [asyncio.ensure_future(s.serve()) for s in servers]
    while not all(s.started for s in servers):
        if any(t.done() for t in tasks):
            raise RuntimeError("a demo server failed to start")
        await asyncio.sleep(0.01)
    t0 = time.monotonic()
    await _drive(
        f"http://127.0.0.1:{caller_port}", _requests(sim.state.sim.cfg.model, requests), concurrency=4
    )
    elapsed = time.monotonic() - t0
    for s in servers:
        s.should_exit = True
    await asyncio.gather(*tasks)
    store.flush()
    return store, elapsed


def _markdown(result: CheckResult, elapsed: float, requests: int) -> str:
    by_fault: dict[str, Counter[str]] = defaultdict(Counter)
    for f in result.findings:
        by_fault[str(f.fault)][f.rule] += 1
    lines = [
        "# wirecheck demo report",
        "",
        f"{requests} requests through caller tap -> faulty gateway -> engine tap -> simulator ({elapsed:.1f} s);",
        f"{result.exchanges} exchanges recorded, {result.pairs} tap pairs, {len(result.findings)} findings.",
        "",
        f"Injected: simulator `{DEMO_SIM_FAULTS}`; gateway `{DEMO_GATEWAY_FAULTS}`.",
        "",
        "## Attribution",
        "",
        "| fault | findings | rules |",
        "|---|---|---|",
    ]
    for fault in sorted(by_fault):
        rules = ", ".join(f"`{r}` {n}" for r, n in by_fault[fault].most_common())
        lines.append(f"| {fault} | {sum(by_fault[fault].values())} | {rules} |")
    lines += ["", "## Findings", "", "| exchange | tap | rule | fault | message |", "|---|---|---|---|---|"]
    for f in result.findings:
        msg = f.message.replace("|", "\\|")
        lines.append(f"| {f.exchange_id} | {f.tap} | `{f.rule}` | {f.fault} | {msg} |")
    return "\n".join(lines) + "\n"


def run_demo(
    out: str | Path = "wirecheck-demo", *, requests: int = 48, seed: int = 7, time_scale: float = 0.25
) -> int:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("wirecheck.db", "wirecheck.db-wal", "wirecheck.db-shm"):
        (out / stale).unlink(missing_ok=True)
    print(
        f"wirecheck demo: simulator + faulty gateway + dual-tap proxy on loopback, {requests} requests ...",
        flush=True,
    )
    store, elapsed = asyncio.run(_run(out, requests, seed, time_scale))
    exchanges = list(store.exchanges())
    store.close()
    result = check_exchanges(exchanges, CheckConfig(pair_by_fingerprint=True))
    (out / "findings.json").write_text(render_json(result), encoding="utf-8")
    (out / "findings.xml").write_text(
        render_junit(result, exchange_ids=[e.id for e in exchanges]), encoding="utf-8"
    )
    (out / "report.md").write_text(_markdown(result, elapsed, requests), encoding="utf-8")
    (out / "report.html").write_text(
        render_html(result, exchanges, title="wirecheck demo report"), encoding="utf-8"
    )
    with (out / "capture.jsonl").open("w", encoding="utf-8") as fh:
        write_exchanges(exchanges, fh)
    summary = result.summary()
    print(
        f"{result.exchanges} exchanges ({result.pairs} caller/engine pairs), {len(result.findings)} findings in {elapsed:.1f} s"
    )
    for fault, n in summary["by_fault"].items():
        rules = sorted({f.rule for f in result.findings if str(f.fault) == fault})
        print(f"  {fault:8} {n:3}  {', '.join(rules)}")
    print(
        f"report: {out / 'report.html'} and {out / 'report.md'} (also findings.json, findings.xml, capture.jsonl, wirecheck.db)"
    )
    return 0
