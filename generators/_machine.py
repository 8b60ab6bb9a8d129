"""The agent-loop state machine and ``run_scenarios``: the conformance suite as a callable.

A hypothesis ``RuleBasedStateMachine`` drives a live target like an agent would: ask with tools,
validate the call, send a tool result or a tool failure, expect a retry or an answer, ask for
structured output, send the same request streamed and not. The invariant is the contracts: any error
finding fails the run, hypothesis shrinks it to the shortest sequence, and the report says how to
reproduce it (the seed, and the exact request as a curl line).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import seed as hseed
from hypothesis import strategies as st
from hypothesis.errors import Flaky, FlakyStrategyDefinition
from hypothesis.stateful import (
    RuleBasedStateMachine,
    get_state_machine_test,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)

from wirecheck.contracts import (
    CheckConfig,
    Exchange,
    Finding,
    HttpRequest,
    check_exchanges,
)
from wirecheck.record import CORRELATION_HEADER, dual_taps, mint_correlation, record_sync

from ._endpoints import ENDPOINT_PATHS, endpoint_body
from ._strategies import CITIES, structured_output_schemas, tool_lists

__all__ = ["ScenarioFailure", "ScenarioReport", "run_scenarios"]


@dataclass(slots=True)
class ScenarioFailure:
    findings: list[Finding]
    request: dict[str, Any]
    curl: str
    seed: int | None
    note: str = ""


@dataclass(slots=True)
class ScenarioReport:
    target: str
    examples: int
    requests: int = 0
    exchanges: list[Exchange] = field(default_factory=list)
    failure: ScenarioFailure | None = None
    #: for progress lines: examples run (shrinking runs more than asked) and failing ones
    examples_done: int = 0
    failures: int = 0

    @property
    def ok(self) -> bool:
        return self.failure is None

    def progress_line(self, eta: str) -> str:
        """One progress line (``scenarios --examples 50`` ran minutes without a word)."""
        done = min(self.examples_done, self.examples)
        where = "shrinking the failure" if self.failures else eta
        return (
            f"scenarios: example {done}/{self.examples}, {self.requests} requests sent, "
            f"{self.failures} failing example(s), {where}"
        )


class _ContractBroken(AssertionError):
    pass


def header_variable(name: str) -> str:
    """The shell variable a printed command line reads a ``--header`` value from."""
    return "WIRECHECK_HEADER_" + re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def header_placeholder(name: str) -> str:
    """A shell word for a header whose value is the operator's (``--header``: a credential, as
    a rule), with a variable in place of the value: a printed command line must not show it (it
    lands in terminals, CI logs and bug reports), yet reruns as printed once the variable is set."""
    return shlex.quote(f"{name}: ") + f'"${{{header_variable(name)}}}"'


def _curl(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> str:
    extra = "".join(f" -H {header_placeholder(k)}" for k in (headers or {}))
    return (
        f"curl -sN {shlex.quote(url)} -H 'content-type: application/json'{extra} "
        f"-d {shlex.quote(json.dumps(body))}"
    )


def _machine(  # noqa: PLR0917 - one private factory, called once
    target: str,
    model: str | None,
    stream_mode: str,
    report: ScenarioReport,
    config: CheckConfig,
    headers: dict[str, str],
    sink: Any = None,
    reproduce_target: str | None = None,
    progress: Callable[[ScenarioReport], None] | None = None,
    endpoint: str = "chat",
) -> type[RuleBasedStateMachine]:
    path = ENDPOINT_PATHS[endpoint]
    url = target.rstrip("/") + path
    # the curl line must run after the taps are gone: through a gateway it names the gateway itself
    repro_url = (reproduce_target or target).rstrip("/") + path

    class AgentLoop(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.client = httpx.Client(timeout=120)
            self.tools: list[dict[str, Any]] = []
            self.messages: list[dict[str, Any]] = []
            self.pending: list[dict[str, Any]] = []

        def teardown(self) -> None:
            self.client.close()
            report.examples_done += 1
            if progress is not None:
                progress(report)

        def _post(self, body: dict[str, Any]) -> Exchange:
            if model:
                body = {"model": model, **body}
            body = endpoint_body(endpoint, body)  # the loop speaks chat; the wire speaks the endpoint
            raw = json.dumps(body).encode()
            corr = mint_correlation()  # the caller tap keeps only ids it can verify
            ex = Exchange(
                id=f"scenario-{report.requests + 1}",
                tap="scenario",
                request=HttpRequest("POST", path, [("content-type", "application/json")], raw),
            )
            sent = {"content-type": "application/json", CORRELATION_HEADER: corr, **headers}
            record_sync(self.client, ex, url, headers=sent)
            report.requests += 1
            if progress is not None:
                progress(report)
            judged = [ex]
            if sink is not None:
                # through the taps: judge what both sides recorded, with gateway attribution
                judged = sink.take(corr) or [ex]
            report.exchanges.extend(judged)
            errors = [f for f in check_exchanges(judged, config).findings if f.severity == "error"]
            if errors:
                report.failure = ScenarioFailure(errors, body, _curl(repro_url, body, headers), None)
                report.failures += 1
                raise _ContractBroken("; ".join(f"{f.rule} [{f.fault}]: {f.message}" for f in errors))
            return ex

        def _stream_flag(self, draw_stream: bool) -> bool:
            return {"on": True, "off": False}.get(stream_mode, draw_stream)

        def _ask(self, stream: bool) -> None:
            body: dict[str, Any] = {
                "messages": self.messages,
                "tools": self.tools,
                "stream": self._stream_flag(stream),
            }
            ex = self._post(body)
            from wirecheck.contracts import build_view

            view = build_view(ex)
            self.pending = []
            if view.ok and view.choices:
                ch = view.choices[0]
                if ch.calls:
                    calls = [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments},
                        }
                        for c in ch.calls
                    ]
                    self.messages.append(
                        {"role": "assistant", "content": ch.content or None, "tool_calls": calls}
                    )
                    self.pending = calls
                else:
                    self.messages.append({"role": "assistant", "content": ch.content or ""})

        @initialize(tools=tool_lists(max_size=3), city=st.sampled_from(CITIES), stream=st.booleans())
        def start(self, tools: list[dict[str, Any]], city: str, stream: bool) -> None:
            self.tools = tools
            name = tools[0]["function"]["name"]
            self.messages = [{"role": "user", "content": f"Please call {name} for {city}."}]
            self._ask(stream)

        @precondition(lambda self: bool(self.pending))
        @rule(fail=st.booleans(), stream=st.booleans())
        def tool_result(self, fail: bool, stream: bool) -> None:
            for call in self.pending:
                content = (
                    "error: the service timed out" if fail else json.dumps({"ok": True, "result": "done"})
                )
                self.messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
            self._ask(stream)

        @rule(city=st.sampled_from(CITIES), stream=st.booleans())
        def user_turn(self, city: str, stream: bool) -> None:
            if self.pending:
                return  # an open call must be answered first (the contract on requests)
            name = self.tools[-1]["function"]["name"]
            self.messages.append({"role": "user", "content": f"Now use {name} for {city}."})
            self._ask(stream)

        @rule(fmt=structured_output_schemas(), city=st.sampled_from(CITIES), stream=st.booleans())
        def structured_output(self, fmt: dict[str, Any], city: str, stream: bool) -> None:
            self._post(
                {
                    "messages": [{"role": "user", "content": f"Describe {city} as JSON."}],
                    "response_format": fmt,
                    "stream": self._stream_flag(stream),
                }
            )

        @rule(city=st.sampled_from(CITIES))
        def stream_and_plain(self, city: str) -> None:
            body = {
                "messages": [
                    {
                        "role": "user",
                        "content": f"Please call {self.tools[0]['function']['name']} for {city}.",
                    }
                ],
                "tools": self.tools,
                "temperature": 0,
            }
            a = self._post({**body, "stream": True})
            b = self._post({**body, "stream": False})
            twins = [
                f
                for f in check_exchanges([a, b], config).findings
                if f.rule == "stream-nonstream-mismatch" and f.severity == "error"
            ]
            if twins:
                report.failure = ScenarioFailure(twins, body, _curl(repro_url, body, headers), None)
                report.failures += 1
                raise _ContractBroken("; ".join(f.message for f in twins))

    return AgentLoop


def run_scenarios(
    target: str,
    *,
    examples: int = 50,
    seed: int | None = None,
    stream: str = "both",
    model: str | None = None,
    headers: dict[str, str] | None = None,
    config: CheckConfig | None = None,
    via_proxy: tuple[str, int] | None = None,
    settings_: settings | None = None,
    progress: Callable[[ScenarioReport], None] | None = None,
    quiet: bool = False,
    endpoint: str = "chat",
) -> ScenarioReport:
    """Run the agent-loop scenarios against ``target``; the report holds the shrunk failure, if any.

    ``endpoint``: ``chat`` (/v1/chat/completions), ``responses`` (/v1/responses) or ``messages``
    (/v1/messages): the same agent loop, written in that endpoint's wire form.

    ``via_proxy=(engine_url, engine_port)``: ``target`` is a gateway; the scenarios go through a
    caller tap to it, and the gateway must forward to an engine tap on ``engine_port`` (which
    forwards to ``engine_url``), so that every failure is attributed with both sides seen.

    ``progress(report)`` is called after each request and each example (``report.progress_line``).

    Two lines for a team's CI::

        report = run_scenarios("http://vllm:8000", examples=50, seed=1)
        assert report.ok, report.failure
    """
    if stream not in ("both", "on", "off"):
        raise ValueError("stream is both, on or off")
    if endpoint not in ENDPOINT_PATHS:
        raise ValueError(f"endpoint is one of {', '.join(ENDPOINT_PATHS)}")
    report = ScenarioReport(target=target, examples=examples)
    if via_proxy is not None:
        engine, engine_port = via_proxy
        with dual_taps(target, engine, engine_port) as (caller_url, sink):
            machine = _machine(
                caller_url,
                model,
                stream,
                report,
                config or CheckConfig(),
                headers or {},
                sink,
                reproduce_target=target,
                progress=progress,
                endpoint=endpoint,
            )
            return _run(machine, report, examples, seed, settings_, quiet=quiet)
    machine = _machine(
        target,
        model,
        stream,
        report,
        config or CheckConfig(direct=True),
        headers or {},
        progress=progress,
        endpoint=endpoint,
    )
    return _run(machine, report, examples, seed, settings_, quiet=quiet)


def _run(
    machine: type[RuleBasedStateMachine],
    report: ScenarioReport,
    examples: int,
    seed: int | None,
    settings_: settings | None,
    *,
    quiet: bool = False,
) -> ScenarioReport:
    s = settings_ or settings(
        verbosity=Verbosity.quiet if quiet else Verbosity.normal,
        max_examples=examples,
        stateful_step_count=6,
        deadline=None,
        database=None,
        derandomize=seed is None,  # unseeded runs are repeatable too
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        print_blob=False,
    )

    if seed is None:

        def runner() -> None:
            run_state_machine_as_test(machine, settings=s)
    else:
        # the @given test behind the machine, seeded: the same seed and target give the same run
        runner = hseed(seed)(get_state_machine_test(machine, settings=s))
    try:
        runner()
    except _ContractBroken:
        if report.failure is not None:
            report.failure.seed = seed
    except (Flaky, FlakyStrategyDefinition) as exc:
        # The target answered the same request differently on a replay (faults that fire at a rate,
        # sampling): the failure seen stands, but it could not be shrunk further.
        if report.failure is None:
            raise
        report.failure.seed = seed
        report.failure.note = (
            f"the target is not deterministic, so shrinking stopped early ({type(exc).__name__})"
        )
    return report
