"""The pytest plugin, run by pytest itself (pytester) as a team's CI would."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.wire import call, completion, exchange, message, tool_req
from wirecheck.contracts import write_exchanges
from wirecheck.record import serve
from wirecheck.sim import SimConfig, create_app, parse_faults


def test_scenarios_test_passes_on_a_clean_target_and_fails_on_a_faulty_one(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_nothing="def test_ok():\n    assert True\n")
    with serve(create_app(SimConfig(time_scale=0.0005))) as url:
        ok = pytester.runpytest_subprocess(
            "--wirecheck-target", url, "--wirecheck-examples", "8", "-p", "no:cacheprovider"
        )
    ok.assert_outcomes(passed=2)
    with serve(create_app(SimConfig(time_scale=0.0005, faults=parse_faults("model.undeclared_tool")))) as url:
        bad = pytester.runpytest_subprocess(
            "--wirecheck-target",
            url,
            "--wirecheck-examples",
            "20",
            "--wirecheck-seed",
            "4",
            "-p",
            "no:cacheprovider",
        )
    bad.assert_outcomes(passed=1, failed=1)
    out = bad.stdout.str()
    assert "tool-call-undeclared [model]" in out and "reproduce: curl -sN" in out and "seed: 4" in out


def test_a_capture_becomes_one_test_per_exchange(pytester: pytest.Pytester, tmp_path: Path) -> None:
    good = exchange(tool_req(), completion(message(None, tool_calls=[call()]), "tool_calls"), id="good")
    bad = exchange(
        tool_req(), completion(message(None, tool_calls=[call("rm_rf", "{}")]), "tool_calls"), id="bad"
    )
    cap = tmp_path / "cap.jsonl"
    with cap.open("w") as fh:
        write_exchanges([good, bad], fh)
    pytester.makepyfile(
        test_capture=f"""
import pytest
from wirecheck.pytest_plugin import wirecheck_params

@pytest.mark.parametrize("exchange", wirecheck_params({str(cap)!r}))
def test_recorded(exchange, wirecheck_check):
    wirecheck_check(exchange)
"""
    )
    result = pytester.runpytest_subprocess("-v", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "test_recorded[engine:good] PASSED" in out and "test_recorded[engine:bad] FAILED" in out
    assert "tool-call-undeclared [model] tool 'rm_rf' was not declared" in out
