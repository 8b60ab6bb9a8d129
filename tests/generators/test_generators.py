"""Strategies produce valid inputs; the scenarios pass a clean simulator and find each fault."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from jsonschema import Draft202012Validator

from tests.support.servers import port_open, process, run_wirecheck
from wirecheck.contracts import CheckConfig, Exchange, HttpRequest, check_exchanges
from wirecheck.generators import (
    SAMPLE_SET_VERSION,
    agent_sample_set,
    cache_probe_set,
    conversations,
    json_schemas,
    run_scenarios,
    structured_output_schemas,
    tool_lists,
)
from wirecheck.record import serve
from wirecheck.sim import SimConfig, create_app, parse_faults


@settings(max_examples=60, deadline=None)
@given(json_schemas())
def test_json_schemas_are_valid_2020_12(schema: dict[str, Any]) -> None:
    Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object"


@settings(max_examples=40, deadline=None)
@given(tool_lists().flatmap(lambda tools: conversations(tools).map(lambda msgs: (tools, msgs))))
def test_conversations_keep_the_tool_call_id_chain(
    pair: tuple[list[dict[str, Any]], list[dict[str, Any]]],
) -> None:
    tools, msgs = pair
    import json

    ex = Exchange(
        id="c",
        tap="caller",
        request=HttpRequest(body=json.dumps({"model": "m", "messages": msgs, "tools": tools}).encode()),
    )
    rules = {f.rule for f in check_exchanges([ex], CheckConfig(direct=True)).findings}
    assert not rules & {
        "request-orphan-tool-call-id",
        "request-malformed",
        "request-tool-schema-invalid",
        "request-empty-tools",
    }


@settings(max_examples=30, deadline=None)
@given(structured_output_schemas())
def test_structured_output_schemas(fmt: dict[str, Any]) -> None:
    assert fmt["type"] in ("json_object", "json_schema")
    if fmt["type"] == "json_schema":
        Draft202012Validator.check_schema(fmt["json_schema"]["schema"])


def test_sample_sets_are_versioned_and_deterministic() -> None:
    a, b = agent_sample_set(), agent_sample_set()
    assert a == b and a["version"] == SAMPLE_SET_VERSION and len(a["tools"]) == 24
    probes = cache_probe_set()
    assert probes["version"] == SAMPLE_SET_VERSION
    assert probes["cold"] == probes["warm_a"] and probes["warm_b"] != probes["cold"]
    assert probes["control"]["messages"][0] != probes["cold"]["messages"][0]


def test_scenarios_pass_against_a_clean_simulator() -> None:
    with serve(create_app(SimConfig(time_scale=0.0005))) as url:
        report = run_scenarios(url, examples=12, seed=3)
    assert report.ok, report.failure and [f.message for f in report.failure.findings]
    assert report.requests >= 12


EXPECTED = {
    "model.invalid_json": ("tool-call-args-invalid-json", "model"),
    "model.schema_violation": ("tool-call-args-schema", "model"),
    "model.undeclared_tool": ("tool-call-undeclared", "model"),
    # vLLM 0.32's parsers end the reasoning where a call opens (vllm/parser/kimi_k2.py, qwen3.py):
    # a call the simulator leaves in reasoning is a parser's hand-off failing, whatever the fault's name
    "model.call_in_think": ("tool-call-in-reasoning", "parser"),
    # vLLM decodes under the requested format (structured outputs): JSON output that breaks it was
    # not constrained, the engine's, whatever the simulator's fault name says
    "model.bad_json_output": ("json-output-invalid", "engine"),
    "parser.markup_in_content": ("tool-markup-in-content", "parser"),
    "parser.call_dropped": ("finish-reason-mismatch", "parser"),
    "parser.reasoning_in_content": ("reasoning-markup-in-content", "parser"),
    "parser.truncated_args": ("tool-call-args-invalid-json", "parser"),
}


#: finding and attributing each fault needs no shrinking (the shrunk request is tested with the CLI
#: below); without it each of these runs is several seconds shorter
FIND_ONLY = settings(
    max_examples=50,
    stateful_step_count=6,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate],
    print_blob=False,
)


@pytest.mark.parametrize("fault", sorted(EXPECTED))
def test_scenarios_find_each_fault_within_50_examples_and_attribute_it(fault: str) -> None:
    with serve(create_app(SimConfig(time_scale=0.0005, faults=parse_faults(fault)))) as url:
        report = run_scenarios(url, examples=50, seed=1, settings_=FIND_ONLY)
    assert report.failure is not None, f"{fault} not found in {report.requests} requests"
    got = {(f.rule, str(f.fault)) for f in report.failure.findings}
    assert EXPECTED[fault] in got, got
    assert report.failure.curl.startswith("curl -sN ") and "/v1/chat/completions" in report.failure.curl


def test_scenarios_cli_prints_the_shrunk_request_and_how_to_reproduce() -> None:
    with serve(create_app(SimConfig(time_scale=0.0005, faults=parse_faults("model.undeclared_tool")))) as url:
        args = ["scenarios", "--target", url, "--examples", "20", "--seed", "5", "--progress-every", "0"]
        out = run_wirecheck(*args, timeout=180)
    # --quiet on a clean target: the same progress path, without a second shrink (half this test's time)
    with serve(create_app(SimConfig(time_scale=0.0005))) as clean:
        quiet = run_wirecheck(
            "scenarios", "--target", clean, "--examples", "3", "--progress-every", "0", "--quiet"
        )
    assert out.returncode == 1
    assert (
        "tool-call-undeclared [model]" in out.stdout
        and "reproduce:" in out.stdout
        and "--seed 5" in out.stdout
    )
    # progress on stderr without a terminal (a CI log): examples done of N, requests, failures
    ticks = [line for line in out.stderr.splitlines() if line.startswith("scenarios: example ")]
    assert ticks and all("/20, " in t and " requests sent, " in t for t in ticks), out.stderr
    assert any("ETA " in t for t in ticks) and "failing example(s), shrinking the failure" in ticks[-1]
    assert quiet.returncode == 0 and "scenarios: example" not in quiet.stderr, quiet.stderr


def test_the_same_seed_gives_the_same_run() -> None:
    with serve(
        create_app(SimConfig(time_scale=0.0005, faults=parse_faults("model.undeclared_tool=0.3", seed=2)))
    ) as url:
        a = run_scenarios(url, examples=8, seed=11)
    with serve(
        create_app(SimConfig(time_scale=0.0005, faults=parse_faults("model.undeclared_tool=0.3", seed=2)))
    ) as url:
        b = run_scenarios(url, examples=8, seed=11)
    assert a.requests == b.requests
    assert (a.failure.request if a.failure else None) == (b.failure.request if b.failure else None)


GATEWAY_EXPECTED = {
    "reasoning_dropped": "gateway-reasoning-dropped",
    "tool_index_from_one": "stream-tool-index-gap",
    "finish_reason_changed": "gateway-finish-reason-changed",
    "args_double_encoded": "gateway-tool-calls-changed",
    "response_format_stripped": "gateway-request-changed",
    "ids_rewritten": "gateway-tool-calls-changed",
}


@pytest.mark.parametrize("fault", sorted(GATEWAY_EXPECTED))
def test_scenarios_through_the_taps_find_each_gateway_fault_and_blame_the_gateway(fault: str) -> None:
    from wirecheck.record import free_port
    from wirecheck.sim import GatewayConfig, create_gateway, parse_gateway_faults

    engine_port = free_port()
    with serve(create_app(SimConfig(time_scale=0.0005))) as sim_url:
        gw = create_gateway(
            GatewayConfig(upstream=f"http://127.0.0.1:{engine_port}", faults=parse_gateway_faults(fault))
        )
        with serve(gw) as gw_url:
            # none of these faults is about timing: under CPU contention the tap threads can stall
            # and make a stream look buffered, which would stop the run before the fault is met
            quiet = CheckConfig(disabled=frozenset({"gateway-stream-buffered"}))
            report = run_scenarios(
                gw_url,
                examples=50,
                seed=1,
                via_proxy=(sim_url, engine_port),
                config=quiet,
                settings_=FIND_ONLY,
            )
    assert report.failure is not None, f"{fault} not found in {report.requests} requests"
    got = {(f.rule, str(f.fault), f.tap) for f in report.failure.findings}
    assert (GATEWAY_EXPECTED[fault], "gateway", "caller") in got, got
    assert {str(f.fault) for f in report.failure.findings} == {"gateway"}


def reasoning_of(text: str) -> str:
    """The reasoning text of a chat completion, streamed or whole; raises if it is neither."""
    if not text.startswith("data:"):
        return json.loads(text)["choices"][0]["message"].get("reasoning") or ""
    out, choices = "", 0
    for frame in text.split("\n\n"):
        data = frame.removeprefix("data:").strip()
        if data and data != "[DONE]":
            for ch in json.loads(data).get("choices") or []:
                choices += 1
                out += ch["delta"].get("reasoning") or ""
    assert choices, text[:300]
    return out


def test_scenarios_cli_via_proxy_blames_the_gateway() -> None:
    from wirecheck.record import free_port
    from wirecheck.sim import GatewayConfig, create_gateway, parse_gateway_faults

    engine_port = free_port()
    with serve(create_app(SimConfig(time_scale=0.0005))) as sim_url:
        # the gateway drops x-wirecheck-id (as LiteLLM does): every request must still pair, at once
        gw = create_gateway(
            GatewayConfig(
                upstream=f"http://127.0.0.1:{engine_port}",
                faults=parse_gateway_faults("reasoning_dropped,correlation_header_dropped"),
            )
        )
        with serve(gw) as gw_url:
            args = [
                "scenarios",
                "--target",
                gw_url,
                "--examples",
                "20",
                "--seed",
                "2",
                "--via-proxy",
                "--engine-upstream",
                sim_url,
                "--engine-listen",
                f"127.0.0.1:{engine_port}",
            ]
            # the run IS the line it will print to rerun it, run as printed: in a shell where the
            # installed ``wirecheck`` is on PATH (a second run of the same line to check that it
            # reproduces cost a second search and shrink, ~20 s; the same seed giving the same run is
            # test_the_same_seed_gives_the_same_run's)
            env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
            expected_line = "wirecheck " + " ".join(args)
            t0 = time.monotonic()
            out = subprocess.run(
                ["bash", "-c", expected_line],
                env=env,
                capture_output=True,
                text=True,
                timeout=180,
                check=False,
            )
            took = time.monotonic() - t0
            assert out.returncode == 1, out.stderr
            # paired: attributed to the gateway, not judged on the caller side alone
            assert "gateway-reasoning-dropped [gateway] at the caller tap: " in out.stdout, out.stdout
            assert "tap missing" not in out.stdout
            # no 5 s wait per request for an engine side that never came
            requests = int(out.stdout.split("contract broken after ")[1].split()[0])
            assert took < 30 + requests, (took, requests)
            # every request paired: no unpaired warning, nothing judged one-sided
            assert "unpaired" not in out.stdout + out.stderr
            # the reproduce lines name the gateway, not a tap's temporary port, and keep the taps' flags
            tap_line, curl_line, line = (
                r.strip() for r in out.stdout.split("reproduce:\n", 1)[1].splitlines()
            )
            assert tap_line.startswith("wirecheck proxy --tap engine") and tap_line.endswith(" &")
            assert curl_line.startswith(f"curl -sN {gw_url}/v1/chat/completions")
            assert line == expected_line, line  # so the run above was this line, run as printed
            # ... and the other two rerun as printed too
            # the shell in a group of its own: stopping it stops the tap it started, nothing else
            with process(
                ["bash", "-c", f"{tap_line} wait"], env=env, group=True, ready=port_open(engine_port)
            ):
                answer = subprocess.run(
                    ["bash", "-c", curl_line], env=env, capture_output=True, text=True, timeout=60, check=True
                ).stdout
            # the shrunk request, sent as printed, shows the finding: the engine reasons, the caller
            # gets no reasoning through the gateway
            argv = shlex.split(curl_line)
            body = json.loads(argv[argv.index("-d") + 1])
            direct = httpx.post(f"{sim_url}/v1/chat/completions", json=body, timeout=60).text
            assert reasoning_of(direct) and not reasoning_of(answer), (direct[:300], answer[:300])
    bad = run_wirecheck("scenarios", "--target", "http://127.0.0.1:1", "--via-proxy", timeout=60)
    assert bad.returncode == 2 and "--engine-upstream" in bad.stderr
