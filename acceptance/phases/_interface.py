"""The interface phase: agent requests through the taps, with a caller's retry, and attribution.

Each request of a fixed agent set (a tool call, parallel calls, a tool result, a tool failure the model
must retry (``interface.tool-retry``, ``_toolretry``), JSON output by ``json_object`` and ``json_schema``, the same request streamed and not) is
sent as a careful caller would: the answer is checked against the contracts, and one that breaks them
is retried (as the K3 recipe advises: validate, then retry). A request is *clean*, *recovered* (a retry
passed) or *failed* (every attempt broke a contract). Attribution comes from both taps when the run has
them (the caller's view otherwise). Then the hypothesis scenarios run, and a shrunk failure is re-sent
to see whether a retry fixes it.

Verdict inputs: any failed request, any gateway- or caller-attributed error, or more recovered requests
than ``Limits.max_retry_rate`` allow lead to rework; recovered requests within the bound lead to
limited; otherwise the phase passes.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from wirecheck.contracts import CheckConfig, Exchange, Finding, check_exchanges
from wirecheck.generators import CITIES, function_tool, run_scenarios

from .._model import Check, InterfaceResult, Limits
from ..load import Sample, measure
from ._toolretry import failed_tool, tool_retry_check

__all__ = ["TapSource", "interface_requests", "run_interface"]

#: given the correlation ids the client sent, the taps' exchanges for them
TapSource = Callable[[list[str]], Awaitable[list[Exchange]]]

WEATHER = function_tool(
    "get_weather",
    "Current weather for a city",
    {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    ["city"],
)
SEARCH = function_tool("search_orders", "Search orders", {"query": {"type": "string"}}, ["query"])
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "summary": {"type": "string"}, "score": {"type": "integer"}},
    "required": ["city", "summary"],
}


def _history(city: str, i: int, *, fail: bool) -> list[dict[str, Any]]:
    cid = "functions.get_weather:0"
    return [
        {"role": "user", "content": f"What is the weather in {city}?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": json.dumps({"city": city})},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": cid,
            "content": "error: upstream timeout"
            if fail
            else json.dumps({"temp_c": 18 + i % 9, "sky": "clear"}),
        },
    ]


def interface_requests(n: int, model: str | None = None) -> list[tuple[str, list[dict[str, Any]]]]:
    """``n`` agent requests as ``(kind, bodies)``; a twin pair is two bodies (streamed, then not)."""
    out: list[tuple[str, list[dict[str, Any]]]] = []
    kinds = (
        "tool-call",
        "parallel-calls",
        "tool-result",
        "tool-failure",
        "json-object",
        "json-schema",
        "stream-pair",
    )
    for i in range(n):
        city = CITIES[i % len(CITIES)]
        kind = kinds[i % len(kinds)]
        if kind == "tool-call":
            body: dict[str, Any] = {
                "messages": [{"role": "user", "content": f"What is the weather in {city}?"}],
                "tools": [WEATHER, SEARCH],
            }
        elif kind == "parallel-calls":
            body = {
                "messages": [{"role": "user", "content": f"Weather in {city}, and search orders for {city}"}],
                "tools": [WEATHER, SEARCH],
            }
        elif kind in ("tool-result", "tool-failure"):
            body = {"messages": _history(city, i, fail=kind == "tool-failure"), "tools": [WEATHER]}
        elif kind == "json-object":
            body = {
                "messages": [{"role": "user", "content": f"Summarise the day in {city} as JSON"}],
                "response_format": {"type": "json_object"},
            }
        elif kind == "json-schema":
            body = {
                "messages": [{"role": "user", "content": f"Describe {city} as JSON."}],
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "answer", "schema": ANSWER_SCHEMA, "strict": True},
                },
            }
        else:
            body = {
                "messages": [{"role": "user", "content": f"Please call get_weather for {city}."}],
                "tools": [WEATHER],
                "temperature": 0,
            }
        if model:
            body["model"] = model
        if kind == "stream-pair":
            out.append(
                (
                    kind,
                    [
                        {**body, "stream": True, "stream_options": {"include_usage": True}},
                        {**body, "stream": False},
                    ],
                )
            )
            continue
        body["stream"] = i % 2 == 0
        if body["stream"]:
            body["stream_options"] = {"include_usage": True}
        out.append((kind, [body]))
    return out


@dataclass(slots=True)
class _Attempt:
    request: int
    kind: str
    attempt: int
    samples: list[Sample]
    errors: list[Finding]


def _errors(exchanges: list[Exchange], config: CheckConfig) -> list[Finding]:
    return [f for f in check_exchanges(exchanges, config).findings if f.severity == "error"]


async def _send(
    client: httpx.AsyncClient, url: str, bodies: list[dict[str, Any]], headers: dict[str, str], label: str
) -> list[Sample]:
    return [
        await measure(client, url, b, headers=headers, keep=True, exchange_id=f"{label}-{j}")
        for j, b in enumerate(bodies)
    ]


#: the blame for what a caller saw through an unverified gateway: never model, parser or engine
UNVERIFIED = "gateway-or-engine (unverified)"


def _blame(f: Finding, unverified: bool) -> str:
    fault = str(f.fault)
    return UNVERIFIED if unverified and fault not in ("caller", "gateway") else fault


def _finding_json(f: Finding, unverified: bool = False) -> dict[str, Any]:
    d = f.to_dict()
    d.pop("evidence", None)
    if unverified:
        d["fault"] = _blame(f, True)
    return d


async def run_interface(
    *,
    target: str,
    model: str | None,
    headers: dict[str, str],
    requests: int,
    retries: int,
    scenario_examples: int,
    seed: int | None,
    limits: Limits,
    taps: TapSource | None,
    family: str = "auto",
    progress: Callable[[str], None],
    through_gateway: bool = False,
) -> tuple[InterfaceResult, list[Sample]]:
    """``through_gateway``: the target is not the engine; without ``taps`` (an engine-side capture) the
    gateway is unverified and no fault is put on the model, the parser or the engine."""
    ph = InterfaceResult("interface")
    url = target.rstrip("/") + "/v1/chat/completions"
    direct = CheckConfig(direct=True, family=family)
    attempts: list[_Attempt] = []
    all_samples: list[Sample] = []
    plan = interface_requests(requests, model)
    async with httpx.AsyncClient(timeout=httpx.Timeout(600, connect=10)) as client:
        for i, (kind, bodies) in enumerate(plan):
            for a in range(retries + 1):
                samples = await _send(client, url, bodies, headers, f"r{i + 1}.{a}")
                all_samples.extend(samples)
                errs = _errors([s.exchange for s in samples if s.exchange is not None], direct)
                attempts.append(_Attempt(i, kind, a, samples, errs))
                if not errs:
                    break
            progress(f"interface: {i + 1}/{len(plan)}")
        outcomes: dict[int, str] = {}
        for at in attempts:
            if at.attempt == 0:
                outcomes[at.request] = "clean" if not at.errors else "failed"
            elif not at.errors:
                outcomes[at.request] = "recovered"
        # attribution: from both taps when there are taps, else what the caller saw
        corrs = [s.correlation for at in attempts for s in at.samples]
        attributed_from = "caller only (no taps: gateway faults cannot be told from engine faults)"
        exchanges = [s.exchange for at in attempts for s in at.samples if s.exchange is not None]
        config = direct
        engine_side: dict[str, Exchange] = {}
        if taps is not None:
            tapped = await taps(corrs)
            engine_side = {ex.correlation: ex for ex in tapped if ex.tap == "engine" and ex.correlation}
            if tapped:
                exchanges, config, attributed_from = (
                    tapped,
                    CheckConfig(family=family),
                    "both taps (caller and engine)",
                )
        result = check_exchanges(exchanges, config)
        errors = [f for f in result.findings if f.severity == "error"]
        unverified = through_gateway and taps is None
        if unverified:
            attributed_from = (
                "caller only, through a gateway without an engine-side capture: the gateway is unverified, "
                "and what the caller saw may be the gateway's doing (nothing is put on the model)"
            )
        by_corr = {ex.id: ex.correlation for ex in exchanges}
        req_of = {s.correlation: at.request for at in attempts for s in at.samples}
        by_fault: Counter[str] = Counter(_blame(f, unverified) for f in errors)
        by_rule: Counter[str] = Counter(f"{f.rule} [{_blame(f, unverified)}]" for f in errors)
        per_request: dict[int, set[str]] = {}
        for f in errors:
            r = req_of.get(by_corr.get(f.exchange_id) or "")
            if r is not None:
                per_request.setdefault(r, set()).add(_blame(f, unverified))
        # scenarios: hypothesis agent loops against the same target, their shrunk failure re-sent
        scen: dict[str, Any] = {"examples": scenario_examples, "ran": False}
        if scenario_examples > 0:
            progress(f"interface: scenarios ({scenario_examples} examples)")
            report = await asyncio.to_thread(
                run_scenarios,
                target,
                examples=scenario_examples,
                seed=seed,
                model=model,
                headers=headers,
                config=direct,
                quiet=True,
            )
            scen.update(ran=True, requests=report.requests, ok=report.ok)
            if report.failure is not None:
                fail = report.failure
                fixed = False
                for _ in range(max(retries, 1)):
                    again = await _send(client, url, [fail.request], headers, "scenario-retry")
                    all_samples.extend(again)
                    if not _errors([s.exchange for s in again if s.exchange is not None], direct):
                        fixed = True
                        break
                scen.update(
                    request=fail.request,
                    curl=fail.curl,
                    seed=fail.seed,
                    note=fail.note,
                    findings=[_finding_json(f) for f in fail.findings],
                    fixed_by_retry=fixed,
                )
    n = len(plan)
    counts = Counter(outcomes.values())
    rate = counts["recovered"] / n if n else 0.0
    rows = [
        {
            "request": i + 1,
            "kind": plan[i][0],
            "outcome": outcomes.get(i, "failed"),
            "attempts": sum(1 for at in attempts if at.request == i),
            "blamed": sorted(per_request.get(i, set())),
            "first_errors": [
                f"{f.rule} [{_blame(f, unverified)}]"
                for at in attempts
                if at.request == i and at.attempt == 0
                for f in at.errors
            ],
        }
        for i in range(n)
    ]
    ph.data = {
        "requests": n,
        "retries": retries,
        "outcomes": dict(counts),
        "retry_rate": round(rate, 4),
        "attributed_from": attributed_from,
        "errors_by_fault": dict(sorted(by_fault.items())),
        "errors_by_rule": dict(by_rule.most_common()),
        "rows": rows,
        "findings": [_finding_json(f, unverified) for f in result.findings],
        "scenarios": scen,
        "exchanges": len(exchanges),
        "pairs": result.pairs,
    }
    ph.retries = retries
    ph.outcomes = dict(counts)
    ph.errors_by_fault = dict(sorted(by_fault.items()))
    ph.attributed_from = attributed_from
    blame = ", ".join(f"{k} {v}" for k, v in sorted(by_fault.items())) or "none"
    summary = f"{n} requests: {counts['clean']} clean, {counts['recovered']} fixed by retry, {counts['failed']} failed; errors by fault: {blame}"
    for fault, title in (
        ("gateway", "The gateway forwards answers unchanged"),
        ("caller", "Requests keep the contract"),
    ):
        k = by_fault.get(fault, 0)
        if fault == "gateway" and unverified:
            ph.add(
                Check(
                    "interface.gateway",
                    title,
                    "missing",
                    "unverified: the target is a gateway and there is no engine-side capture "
                    "(run with --via-proxy --engine-listen, so wirecheck taps both sides); "
                    f"{by_fault.get(UNVERIFIED, 0)} errors could be the gateway's or the engine's",
                    leads_to="rework",
                )
            )
        elif k:
            rules = sorted({f.rule for f in errors if str(f.fault) == fault})
            ph.add(
                Check(
                    f"interface.{fault}",
                    title,
                    "fail",
                    f"{k} errors blamed on the {fault}: {', '.join(rules)}",
                    {"rules": rules},
                    leads_to="rework",
                )
            )
        else:
            ph.add(Check(f"interface.{fault}", title, "pass", f"no errors blamed on the {fault}"))
    title = "Agent requests keep the contracts (a retry may fix an occasional one)"
    if counts["failed"]:
        ph.add(
            Check(
                "interface.contracts",
                title,
                "fail",
                summary + " (not fixed by retry)",
                {"outcomes": dict(counts)},
                leads_to="rework",
            )
        )
    elif counts["recovered"] and rate > limits.max_retry_rate:
        ph.add(
            Check(
                "interface.contracts",
                title,
                "fail",
                summary + f": retry rate {rate:.1%} > {limits.max_retry_rate:.1%}, not occasional",
                {"outcomes": dict(counts)},
                leads_to="rework",
            )
        )
    elif counts["recovered"]:
        ph.add(
            Check(
                "interface.contracts",
                title,
                "fail",
                summary + f": retry rate {rate:.1%} within {limits.max_retry_rate:.1%}",
                {"outcomes": dict(counts), "retry_rate": rate},
                leads_to="limited",
            )
        )
    else:
        ph.add(Check("interface.contracts", title, "pass", summary))
    # did the model call the tool again after its result said it failed?
    judged: list[tuple[int, str, list[Sample]]] = []
    unjudged: list[int] = []
    for i, (kind, bodies) in enumerate(plan):
        tool = failed_tool(bodies[0]) if kind == "tool-failure" else None
        if tool is None:
            continue
        if outcomes.get(i) == "failed":
            unjudged.append(i + 1)
            continue
        final = [at for at in attempts if at.request == i][-1]
        judged.append((i + 1, tool, final.samples))
    ph.add(tool_retry_check(judged, unjudged, engine_side, unverified=unverified))
    if scen.get("ran"):
        stitle = f"Hypothesis agent scenarios ({scenario_examples} examples)"
        if scen.get("ok"):
            ph.add(
                Check(
                    "interface.scenarios", stitle, "pass", f"{scen['requests']} requests, no contract broken"
                )
            )
        else:
            what = "; ".join(f"{f['rule']} [{f['fault']}]" for f in scen.get("findings", []))
            leads = "limited" if scen.get("fixed_by_retry") else "rework"
            ph.add(
                Check(
                    "interface.scenarios",
                    stitle,
                    "fail",
                    f"shrunk failure: {what}; "
                    + ("a retry passed" if scen.get("fixed_by_retry") else "retries failed too")
                    + "; the shrunk request and its curl line are in the interface section",
                    {"request": scen.get("request"), "curl": scen.get("curl")},
                    leads_to=leads,
                )
            )
    return ph, all_samples
