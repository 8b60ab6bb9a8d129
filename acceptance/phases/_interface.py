"""The interface phase: agent requests as a careful caller sends them, their attribution, and the
hypothesis scenarios, measured into :class:`InterfaceFacts` (judged in ``_interface_judges``).

Each request of the agent set (``_interface_set``) is sent and its answer checked against the
contracts; one that breaks them is retried (as the K3 recipe advises: validate, then retry). A request
is *clean*, *recovered* (a retry passed) or *failed* (every attempt broke a contract). Then the
hypothesis scenarios run against the same target, and a shrunk failure is re-sent to see whether a
retry fixes it.

Blame comes from one attribution, the contracts' (``check_exchanges``): with both taps
(``--via-proxy``) over what each side recorded; without them over what the caller saw, as a single
caller-side tap. Through a gateway that single tap cannot rule the gateway out, so a finding the
model, the parser or the engine would carry is ``unknown``, and says the engine tap is missing: the
same for the agent requests, their retries and the scenarios.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from wirecheck.contracts import CheckConfig, Exchange, Finding, build_view, check_exchanges
from wirecheck.generators import Taps, run_scenarios

from .._blocks import Block, Code, Table, Text
from .._model import Facts
from ..load import Sample, measure
from ._context import RunContext, TapSource, Target
from ._interface_set import failed_tool, interface_requests

__all__ = ["Attempt", "InterfaceFacts", "ToolRetry", "measure_interface"]

BOTH_TAPS = "both taps (caller and engine)"
CALLER_ONLY = "caller only (no taps: gateway faults cannot be told from engine faults)"
UNVERIFIED = (
    "caller only, through a gateway without an engine-side capture: the gateway is unverified, so what "
    "the model, the parser or the engine would carry is unknown (the engine tap is missing)"
)


@dataclass(slots=True)
class Attempt:
    #: the request's index in the agent set (0-based) and the attempt (0: the first send)
    request: int
    attempt: int
    samples: list[Sample]
    #: the contract errors the caller saw in these answers
    errors: list[Finding]


@dataclass(frozen=True, slots=True)
class ToolRetry:
    """A tool-failure request's final answer: did it call the failed tool again?"""

    #: the request's number (1-based, as the report shows it)
    request: int
    tool: str
    #: every answer the caller finally got calls the tool
    called: bool
    #: an engine-side answer (both taps only) called it
    engine_called: bool


@dataclass(slots=True, kw_only=True)
class InterfaceFacts(Facts):
    kinds: list[str] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    retries: int = 0
    #: the share of requests that may need a retry for ``limited``
    max_retry_rate: float = 0.1
    #: every finding over the run's exchanges, attributed once (see the module docstring)
    findings: list[Finding] = field(default_factory=list)
    attributed_from: str = CALLER_ONLY
    #: through a gateway with no engine-side capture
    unverified: bool = False
    #: per checked exchange id: the request it answered and the attempt
    answered: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: the exchanges the attribution read, and the caller/engine pairs it found among them
    checked: int = 0
    pairs: int = 0
    tool_retries: list[ToolRetry] = field(default_factory=list)
    #: tool-failure requests whose every attempt broke a contract (left to interface.contracts)
    tool_unjudged: list[int] = field(default_factory=list)
    scenarios: dict[str, Any] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)

    def sent(self) -> list[Any]:
        return self.samples

    def recorded(self) -> list[Exchange]:
        return [s.exchange for s in self.samples if s.exchange is not None]

    @property
    def outcomes(self) -> dict[int, str]:
        out: dict[int, str] = {}
        for at in self.attempts:
            if at.attempt == 0:
                out[at.request] = "clean" if not at.errors else "failed"
            elif not at.errors:
                out[at.request] = "recovered"
        return out

    @property
    def counts(self) -> Counter[str]:
        return Counter(self.outcomes.values())

    @property
    def retry_rate(self) -> float:
        return self.counts["recovered"] / len(self.kinds) if self.kinds else 0.0

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def errors_by_fault(self) -> dict[str, int]:
        return dict(sorted(Counter(str(f.fault) for f in self.errors).items()))

    def _blamed(self, i: int, first_only: bool = False) -> list[Finding]:
        return [
            f
            for f in self.errors
            if (at := self.answered.get(f.exchange_id)) is not None
            and at[0] == i
            and (not first_only or at[1] == 0)
        ]

    def rows(self) -> list[dict[str, Any]]:
        return [
            {
                "request": i + 1,
                "kind": kind,
                "outcome": self.outcomes.get(i, "failed"),
                "attempts": sum(1 for at in self.attempts if at.request == i),
                "blamed": sorted({str(f.fault) for f in self._blamed(i)}),
                "first_errors": [f"{f.rule} [{f.fault}]" for f in self._blamed(i, first_only=True)],
            }
            for i, kind in enumerate(self.kinds)
        ]

    def to_json(self) -> dict[str, Any]:
        by_rule = Counter(f"{f.rule} [{f.fault}]" for f in self.errors)
        return {
            "requests": len(self.kinds),
            "retries": self.retries,
            "outcomes": dict(self.counts),
            "retry_rate": round(self.retry_rate, 4),
            "attributed_from": self.attributed_from,
            "errors_by_fault": self.errors_by_fault,
            "errors_by_rule": dict(by_rule.most_common()),
            "rows": self.rows(),
            "findings": [_finding_json(f) for f in self.findings],
            "scenarios": self.scenarios,
            "exchanges": self.checked,
            "pairs": self.pairs,
        }

    def blocks(self) -> list[Block]:
        out: list[Block] = []
        if self.kinds:
            blame = self.errors_by_fault or "none"
            out.append(Text(f"Attribution from {self.attributed_from}; errors by fault: {blame}."))
            bad = [r for r in self.rows() if r["outcome"] != "clean"]
            if bad:
                head = ["request", "kind", "outcome", "attempts", "blamed", "first errors"]
                cells = [
                    [
                        str(r["request"]),
                        r["kind"],
                        r["outcome"],
                        str(r["attempts"]),
                        ", ".join(r["blamed"]),
                        ", ".join(r["first_errors"]),
                    ]
                    for r in bad
                ]
                out.append(Table("attribution", head, cells))
        if self.scenarios.get("curl"):
            # through the gateway: its engine tap first, as it was during the run
            tap = [f"{self.scenarios['engine_tap']} &"] if self.scenarios.get("engine_tap") else []
            lines = "\n".join([*tap, self.scenarios["curl"]])
            out.append(Code(lines, caption="Shrunk scenario failure (reproduce):", lang="sh"))
        return out

    def suggestions(self) -> dict[str, str]:
        if not self.counts["recovered"]:
            return {}
        return {
            "caller_policy": f"validate tool calls against their schema and retry up to {self.retries} times"
        }


def _finding_json(f: Finding) -> dict[str, Any]:
    d = f.to_dict()
    d.pop("evidence", None)
    return d


def _errors(exchanges: list[Exchange], config: CheckConfig) -> list[Finding]:
    return [f for f in check_exchanges(exchanges, config).findings if f.severity == "error"]


def _exchanges(samples: list[Sample]) -> list[Exchange]:
    return [s.exchange for s in samples if s.exchange is not None]


class _Caller:
    """A careful caller: sends each request, checks the answers, and retries one that breaks a
    contract. ``view`` is how what it sees is attributed (a single caller-side tap)."""

    def __init__(self, client: httpx.AsyncClient, ctx: RunContext, view: CheckConfig) -> None:
        self.client, self.ctx, self.view = client, ctx, view

    async def send(self, bodies: list[dict[str, Any]], label: str) -> list[Sample]:
        t = self.ctx.target
        return [
            await measure(
                self.client,
                t.chat_url,
                b,
                headers=t.headers,
                keep=True,
                exchange_id=f"{label}-{j}",
                clock=self.ctx.clock,
            )
            for j, b in enumerate(bodies)
        ]

    async def requests(self, plan: list[tuple[str, list[dict[str, Any]]]], retries: int) -> list[Attempt]:
        attempts: list[Attempt] = []
        for i, (_kind, bodies) in enumerate(plan):
            for a in range(retries + 1):
                samples = await self.send(bodies, f"r{i + 1}.{a}")
                errors = _errors(_exchanges(samples), self.view)
                attempts.append(Attempt(i, a, samples, errors))
                if not errors:
                    break
            self.ctx.progress(f"interface: {i + 1}/{len(plan)}")
        return attempts

    async def scenarios(self, examples: int, retries: int, samples: list[Sample]) -> dict[str, Any]:
        """The hypothesis scenarios, judged as the agent requests are (with both taps: each request
        over both sides, by the contracts' dual-tap attribution), and whether a retry fixes their
        shrunk failure."""
        t, s = self.ctx.target, self.ctx.interface
        scen: dict[str, Any] = {"examples": examples, "ran": False}
        if examples <= 0:
            return scen
        self.ctx.progress(f"interface: scenarios ({examples} examples)")
        via = s.taps
        report = await asyncio.to_thread(
            run_scenarios,
            t.url,
            examples=examples,
            seed=s.seed,
            model=t.model,
            headers=t.headers,
            config=self.view if via is None else CheckConfig(family=t.family),
            taps=None if via is None else _scenario_taps(via, asyncio.get_running_loop()),
            reproduce_target=None if via is None else via.gateway,
            quiet=True,
        )
        blame = BOTH_TAPS if via is not None else UNVERIFIED if t.through_gateway else CALLER_ONLY
        scen.update(ran=True, requests=report.requests, ok=report.ok, attributed_from=blame)
        fail = report.failure
        if fail is None:
            return scen
        if via is not None:
            scen["engine_tap"] = via.engine_tap  # the curl line goes through the gateway to it
        fixed = False
        for _ in range(max(retries, 1)):
            again = await self.send([fail.request], "scenario-retry")
            samples.extend(again)
            if not _errors(_exchanges(again), self.view):
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
        return scen


def _scenario_taps(via: TapSource, loop: asyncio.AbstractEventLoop) -> Taps:
    """The taps as the scenarios read them, from their own thread: the taps serve and record in this
    run's event loop, which reads both sides back."""

    def taps(correlation: str) -> list[Exchange]:
        return asyncio.run_coroutine_threadsafe(via.read([correlation]), loop).result()

    return taps


def _calls(ex: Exchange | None, name: str) -> bool:
    if ex is None:
        return False
    return any(c.name == name for ch in build_view(ex).choices for c in ch.calls)


def _tool_retries(
    facts: InterfaceFacts, plan: list[tuple[str, list[dict[str, Any]]]], engine: dict[str, Exchange]
) -> None:
    """Per tool-failure request, what its final answer did with the failed tool."""
    outcomes = facts.outcomes
    for i, (kind, bodies) in enumerate(plan):
        tool = failed_tool(bodies[0]) if kind == "tool-failure" else None
        if tool is None:
            continue
        if outcomes.get(i) == "failed":
            facts.tool_unjudged.append(i + 1)
            continue
        final = [at for at in facts.attempts if at.request == i][-1].samples
        facts.tool_retries.append(
            ToolRetry(
                i + 1,
                tool,
                called=all(_calls(s.exchange, tool) for s in final),
                engine_called=any(_calls(engine.get(s.correlation), tool) for s in final),
            )
        )


async def _attribute(
    facts: InterfaceFacts, t: Target, taps: TapSource | None, view: CheckConfig
) -> dict[str, Exchange]:
    """The run's one attribution: both taps' exchanges when there are any, else the caller's. Returns
    the engine side's exchanges by correlation id (empty without both taps)."""
    samples = [s for at in facts.attempts for s in at.samples]
    at_of = {s.correlation: (at.request, at.attempt) for at in facts.attempts for s in at.samples}
    checked, config = _exchanges(samples), view
    tapped = await taps.read([s.correlation for s in samples]) if taps is not None else []
    if tapped:
        checked, config, facts.attributed_from = tapped, CheckConfig(family=t.family), BOTH_TAPS
    elif t.through_gateway:
        facts.attributed_from, facts.unverified = UNVERIFIED, True
    result = check_exchanges(checked, config)
    facts.findings, facts.pairs, facts.checked = result.findings, result.pairs, len(checked)
    facts.answered = {ex.id: at_of[ex.correlation] for ex in checked if ex.correlation in at_of}
    return {ex.correlation: ex for ex in tapped if ex.tap == "engine" and ex.correlation}


async def measure_interface(ctx: RunContext) -> InterfaceFacts:
    t, s = ctx.target, ctx.interface
    # what the caller sees is one tap: in front of the engine it decides every fault; in front of a
    # gateway it cannot tell the gateway's doing from the engine's (contracts' single-tap attribution)
    view = CheckConfig(direct=not t.through_gateway, family=t.family)
    plan = interface_requests(s.requests, t.model)
    facts = InterfaceFacts(kinds=[k for k, _ in plan], retries=s.retries, max_retry_rate=s.max_retry_rate)
    async with httpx.AsyncClient(timeout=httpx.Timeout(600, connect=10)) as client:
        caller = _Caller(client, ctx, view)
        facts.attempts = await caller.requests(plan, s.retries)
        facts.samples = [x for at in facts.attempts for x in at.samples]
        engine = await _attribute(facts, t, s.taps, view)
        facts.scenarios = await caller.scenarios(s.scenario_examples, s.retries, facts.samples)
    _tool_retries(facts, plan, engine)
    return facts
