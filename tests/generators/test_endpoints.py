"""``run_scenarios(endpoint=...)`` and ``wirecheck scenarios --endpoint``: the agent loop over
/v1/responses and /v1/messages against the simulator."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import settings

from tests.generators.test_generators import FIND_ONLY as GENERATOR_FIND_ONLY
from wirecheck.generators import run_scenarios
from wirecheck.record import serve
from wirecheck.sim import SimConfig, create_app, parse_faults

#: the fault-finding settings of the generator tests (no shrinking), with 30 examples
FIND_ONLY = settings(GENERATOR_FIND_ONLY, max_examples=30)


# /v1/messages runs clean through the CLI below: one run per endpoint keeps the suite's budget
@pytest.mark.parametrize("endpoint", ["responses"])
def test_scenarios_pass_on_each_endpoint_of_a_clean_simulator(endpoint: str) -> None:
    with serve(create_app(SimConfig(time_scale=0.0005))) as url:
        report = run_scenarios(url, examples=6, seed=3, endpoint=endpoint)
    assert report.ok, report.failure and [f.message for f in report.failure.findings]
    assert report.requests >= 6
    assert {ex.request.path for ex in report.exchanges} == {f"/v1/{endpoint}"}


@pytest.mark.parametrize("endpoint", ["responses", "messages"])
def test_invalid_arguments_are_found_with_the_chat_rule(endpoint: str) -> None:
    # streamed: a non-streamed /v1/messages turns invalid arguments into a 400 (vLLM json.loads them)
    with serve(create_app(SimConfig(time_scale=0.0005, faults=parse_faults("model.invalid_json")))) as url:
        report = run_scenarios(url, seed=1, stream="on", endpoint=endpoint, settings_=FIND_ONLY)
    assert report.failure is not None
    assert ("tool-call-args-invalid-json", "model") in {
        (f.rule, str(f.fault)) for f in report.failure.findings
    }
    assert f"/v1/{endpoint}" in report.failure.curl


def test_scenarios_cli_takes_the_endpoint() -> None:
    with serve(create_app(SimConfig(time_scale=0.0005))) as url:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "wirecheck",
                "scenarios",
                "--target",
                url,
                "--examples",
                "4",
                "--seed",
                "2",
                "--endpoint",
                "messages",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no contract broken" in out.stdout


def test_an_unknown_endpoint_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="endpoint is one of chat, responses, messages"):
        run_scenarios("http://127.0.0.1:9", endpoint="completions")
