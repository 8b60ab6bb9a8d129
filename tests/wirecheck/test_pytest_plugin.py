"""The pytest plugin, run by pytest itself (pytester) as a team's CI would."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.support.wire import call, completion, exchange, message, tool_req
from wirecheck.contracts import write_exchanges
from wirecheck.record import Store, serve
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


def test_a_stores_gap_rows_are_tests_too(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """The plugin opens a capture as ``wirecheck check`` does, and keeps what the store says it lost:
    a gap row is one more test, whose finding ``wirecheck_check`` returns (a warning, as in check)."""
    good = exchange(tool_req(), completion(message(None, tool_calls=[call()]), "tool_calls"), id="good")
    db = tmp_path / "wc.db"
    store = Store(db, writer=True)
    store.write_now([good])
    store.close()
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO gaps(dropped, first_at, last_at, replica) VALUES (7, '2026-01-01T00:00:00Z', "
            "'2026-01-01T00:00:05Z', 'test:1')"
        )
    pytester.makepyfile(
        test_store=f"""
import pytest
from wirecheck.pytest_plugin import wirecheck_params

@pytest.mark.parametrize("exchange", wirecheck_params({str(db)!r}))
def test_recorded(exchange, wirecheck_check):
    found = wirecheck_check(exchange)
    print("RULES", sorted(f.rule for f in found), [f.evidence.get("lost") for f in found])
"""
    )
    result = pytester.runpytest_subprocess("-v", "-s", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "test_recorded[engine:good] PASSED" in out or "test_recorded[engine:good]" in out, out
    assert "test_recorded[store:store-gap-1]" in out, out
    assert "RULES ['store-gap'] [7]" in out, out
