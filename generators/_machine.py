"""The agent-loop state machine and ``run_scenarios``: the conformance suite as a callable.

A hypothesis ``RuleBasedStateMachine`` drives a live target like an agent would: ask with tools,
validate the call, send a tool result or a tool failure, expect a retry or an answer, ask for
structured output, send the same request streamed and not. The invariant is the contracts: any error
finding fails the run, hypothesis shrinks it to the shortest sequence, and the report says how to
reproduce it (the seed, and the exact request as a curl line).

Through a gateway with wirecheck's taps on both sides (``taps``), each request is judged over what the
two taps recorded for it, as ``wirecheck check`` judges a dual-tap capture: the contracts pair the two
sides and attribute each finding once (one both sides share is the engine side's, one only the caller
side has is the gateway's). The runner attributes nothing itself.
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

__all__ = [
    "ScenarioFailure",
    "ScenarioReport",
    "Taps",
    "engine_tap_line",
    "header_placeholder",
    "header_variable",
    "run_scenarios",
]

#: Given the ``x-wirecheck-id`` a scenario request was sent with, what wirecheck's taps around a
#: gateway recorded for it: the caller tap's exchange and the engine tap's (none when the gateway
#: answered by itself, several when it retried). ``MemorySink.take`` is one (``via_proxy``);
#: ``accept --via-proxy`` reads them back from its store.
Taps = Callable[[str], list[Exchange]]


#: where a finding was seen, as a failure's lines say it (the scenario's own record is a single tap)
_SIDES = {"caller": "at the caller tap", "engine": "at the engine tap"}


@dataclass(slots=True)
class ScenarioFailure:
    findings: list[Finding]
    request: dict[str, Any]
    curl: str
    seed: int | None
    note: str = ""

    def lines(self) -> list[str]:
        """One line per finding: rule, fault, and with both taps the side it was seen on (the engine
        side when the engine sent it so, the caller side when only the caller got it)."""
        out = []
        for f in self.findings:
            side = _SIDES.get(f.tap)
            out.append(f"{f.rule} [{f.fault}] " + (f"{side}: " if side else "") + f.message)
        return out


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


def engine_tap_line(engine: str, listen: str) -> str:
    """The command that brings back an engine tap that ended with its run: the gateway forwards to
    it, so a reproduce line through the gateway needs it first (``--no-store``: it only forwards)."""
    tap = ["wirecheck", "proxy", "--tap", "engine", "--upstream", engine, "--listen", listen]
    return shlex.join([*tap, "--no-store", "--admin", "off"])


def _curl(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> str:
    extra = "".join(f" -H {header_placeholder(k)}" for k in (headers or {}))
    return (
        f"curl -sN {shlex.quote(url)} -H 'content-type: application/json'{extra} "
        f"-d {shlex.quote(json.dumps(body))}"
    )


@dataclass(frozen=True, slots=True)
class _Drive:
    """What one run's machine sends, where, and how it judges the answers."""

    #: where requests go (through taps: the caller tap's URL)
    url: str
    #: what a curl line names: it must run after the taps are gone, so through taps the gateway itself
    repro_url: str
    path: str
    endpoint: str
    model: str | None
    stream_mode: str
    headers: dict[str, str]
    config: CheckConfig
    taps: Taps | None
    progress: Callable[[ScenarioReport], None] | None
    #: one client for the run: a client per example cost about 40 ms each (its TLS context), a
    #: third of a shrink's time against a fast target
    client: httpx.Client


def _machine(d: _Drive, report: ScenarioReport) -> type[RuleBasedStateMachine]:
    model, stream_mode, headers, config, progress = d.model, d.stream_mode, d.headers, d.config, d.progress

    class AgentLoop(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.tools: list[dict[str, Any]] = []
            self.messages: list[dict[str, Any]] = []
            self.pending: list[dict[str, Any]] = []

        def teardown(self) -> None:
            report.examples_done += 1
            if progress is not None:
                progress(report)

        def _post(self, body: dict[str, Any]) -> tuple[Exchange, list[Exchange]]:
            """Send one request; its answer as the caller got it, and what is judged of it (with
            taps: both sides as recorded, else the caller's answer as one tap)."""
            body = self._wire(body)
            raw = json.dumps(body).encode()
            corr = mint_correlation()  # the caller tap keeps only ids it can verify
            ex = Exchange(
                id=f"scenario-{report.requests + 1}",
                tap="scenario",
                request=HttpRequest("POST", d.path, [("content-type", "application/json")], raw),
            )
            sent = {"content-type": "application/json", CORRELATION_HEADER: corr, **headers}
            record_sync(d.client, ex, d.url, headers=sent)
            report.requests += 1
            if progress is not None:
                progress(report)
            # through the taps: what both sides recorded, for the contracts' dual-tap attribution; a
            # request the taps lost is judged as the caller got it, single-tap (unknown, said so)
            judged = (d.taps(corr) if d.taps is not None else []) or [ex]
            report.exchanges.extend(judged)
            self._fail(body, [f for f in check_exchanges(judged, config).findings if f.severity == "error"])
            return ex, judged

        def _wire(self, body: dict[str, Any]) -> dict[str, Any]:
            """The loop speaks chat; the wire speaks the endpoint, with the model asked for."""
            return endpoint_body(d.endpoint, {"model": model, **body} if model else body)

        def _fail(self, body: dict[str, Any], errors: list[Finding]) -> None:
            if errors:
                report.failure = ScenarioFailure(errors, body, _curl(d.repro_url, body, headers), None)
                report.failures += 1
                raise _ContractBroken("; ".join(f"{f.rule} [{f.fault}]: {f.message}" for f in errors))

        def _stream_flag(self, draw_stream: bool) -> bool:
            return {"on": True, "off": False}.get(stream_mode, draw_stream)

        def _ask(self, stream: bool) -> None:
            body: dict[str, Any] = {
                "messages": self.messages,
                "tools": self.tools,
                "stream": self._stream_flag(stream),
            }
            ex, _ = self._post(body)
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
            _, a = self._post({**body, "stream": True})
            _, b = self._post({**body, "stream": False})
            # both requests' sides at once: the twins pair at each tap, and the taps' pairs say
            # whether the engine already sent the two answers apart or the gateway did
            self._fail(
                self._wire(body),  # the request the two share, as the wire has it
                [
                    f
                    for f in check_exchanges(a + b, config).findings
                    if f.rule == "stream-nonstream-mismatch" and f.severity == "error"
                ],
            )

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
    taps: Taps | None = None,
    reproduce_target: str | None = None,
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

    ``taps``: ``target`` is a caller tap already running in front of a gateway, with an engine tap
    behind it; each request is judged over what ``taps(correlation_id)`` returns (see ``Taps``).
    ``reproduce_target``: the URL a failure's curl line names instead of ``target`` (the gateway:
    the taps end with the run).

    ``config``: how findings are judged; by default as one tap straight in front of the engine
    (``direct``), or as a dual-tap capture with ``via_proxy`` or ``taps``.

    ``progress(report)`` is called after each request and each example (``report.progress_line``).

    Two lines for a team's CI::

        report = run_scenarios("http://vllm:8000", examples=50, seed=1)
        assert report.ok, report.failure
    """
    if stream not in ("both", "on", "off"):
        raise ValueError("stream is both, on or off")
    if endpoint not in ENDPOINT_PATHS:
        raise ValueError(f"endpoint is one of {', '.join(ENDPOINT_PATHS)}")
    if via_proxy is not None and taps is not None:
        raise ValueError("via_proxy starts its own taps: give via_proxy or taps, not both")
    report = ScenarioReport(target=target, examples=examples)

    def drive(url: str, found: Taps | None, repro: str | None) -> ScenarioReport:
        path = ENDPOINT_PATHS[endpoint]
        with httpx.Client(timeout=120) as client:
            asked = model
            if asked is None and endpoint == "messages":
                asked = _served_model(client, url, headers or {}, found)
            d = _Drive(
                url=url.rstrip("/") + path,
                repro_url=(repro or url).rstrip("/") + path,
                path=path,
                endpoint=endpoint,
                model=asked,
                stream_mode=stream,
                headers=headers or {},
                config=config or CheckConfig(direct=found is None),
                taps=found,
                progress=progress,
                client=client,
            )
            return _run(_machine(d, report), report, examples, seed, settings_, quiet=quiet)

    if via_proxy is not None:
        engine, engine_port = via_proxy
        with dual_taps(target, engine, engine_port) as (caller_url, sink):
            return drive(caller_url, sink.take, reproduce_target or target)
    return drive(target, taps, reproduce_target)


def _served_model(client: httpx.Client, url: str, headers: dict[str, str], taps: Taps | None) -> str | None:
    """The model ``url`` serves (the first of ``/v1/models``): /v1/messages requires one, where chat
    completions and Responses default to it (vLLM's ``AnthropicMessagesRequest.model`` is required).
    None when it does not say: the requests then go without, and the 400 they get is the failure."""
    corr = mint_correlation()
    try:
        r = client.get(url.rstrip("/") + "/v1/models", headers={**headers, CORRELATION_HEADER: corr})
        served = r.json()["data"][0]["id"]
    except (httpx.HTTPError, ValueError, LookupError, TypeError):
        served = None
    finally:
        if taps is not None:
            taps(corr)  # what the taps recorded of this question is no scenario's to judge
    return served if isinstance(served, str) and served else None


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
