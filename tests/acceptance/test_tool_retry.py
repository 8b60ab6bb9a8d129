"""``interface.tool-retry``: after a failed tool result the model must call the tool again.

A model that gives up in well-formed text breaks no contract, so ``interface.contracts`` passes it;
only this check sees it. Both outcomes through ``accept`` on the simulator: the simulator's model
retries, and with ``model.no_tool_retry`` it does not.
"""

from __future__ import annotations

from pathlib import Path

from tests.acceptance.runs import FAST, checks, run_accept
from wirecheck.acceptance import AcceptanceResult, Limits
from wirecheck.acceptance.phases import failed_tool, interface_requests
from wirecheck.sim import SimConfig, parse_faults

#: two tool-failure requests (the 4th and 11th of the interface set)
REQUESTS = 14


def _interface_run(tmp_path: Path, cfg: SimConfig) -> AcceptanceResult:
    """The interface phase alone over the 14-request set, no scenarios, with an owner for limits."""
    return run_accept(
        tmp_path,
        cfg,
        phases=("interface",),
        interface_requests=REQUESTS,
        scenario_examples=0,
        limits=Limits(owner="ci"),
    )


def test_the_interface_set_holds_tool_failures_and_names_the_failed_tool() -> None:
    plan = interface_requests(REQUESTS)
    failures = [i + 1 for i, (kind, _) in enumerate(plan) if kind == "tool-failure"]
    assert failures == [4, 11]
    assert all(failed_tool(plan[i - 1][1][0]) == "get_weather" for i in failures)
    assert all(
        failed_tool(bodies[0]) is None for kind, bodies in plan if kind not in ("tool-failure", "tool-result")
    )


def test_a_model_that_retries_the_failed_tool_passes(tmp_path: Path) -> None:
    res = _interface_run(tmp_path, SimConfig(**FAST))  # type: ignore[arg-type]
    c = checks(res)["interface.tool-retry"]
    assert c.status == "pass" and c.evidence["retried"] == [4, 11] and not c.evidence["gave_up"], c.detail
    assert c.detail.startswith("2 of 2 tool-failure requests retried the failed tool")
    assert res.verdict.decision == "go"
    item = next(i for i in res.report["checklist"] if "failed tool call is retried" in i["item"])
    assert item["state"] == "done" and "interface.tool-retry" in item["checks"]


def test_a_model_that_never_retries_a_failed_tool_is_rework_though_every_answer_is_well_formed(
    tmp_path: Path,
) -> None:
    cfg = SimConfig(**FAST, faults=parse_faults("model.no_tool_retry"))  # type: ignore[arg-type]
    res = _interface_run(tmp_path, cfg)
    c = checks(res)
    # the format checks alone would have said go: every answer keeps the contracts
    assert c["interface.contracts"].status == "pass", c["interface.contracts"].detail
    retry = c["interface.tool-retry"]
    assert (retry.status, retry.leads_to) == ("fail", "rework")
    assert retry.evidence["gave_up"] == [4, 11] and not retry.evidence["retried"]
    assert "never retries a failed tool" in retry.detail and "the model" in retry.detail
    assert res.verdict.decision == "rework" and any(
        r.startswith("interface.tool-retry:") for r in res.verdict.reasons
    )
    item = next(i for i in res.report["checklist"] if "failed tool call is retried" in i["item"])
    assert item["state"] == "open"
    for fmt in ("markdown", "html"):
        assert "interface.tool-retry" in Path(res.files[fmt]).read_text(), fmt


def test_a_model_that_sometimes_gives_up_is_limited_a_bounded_fault(tmp_path: Path) -> None:
    # seed 2: the fault fires for the 4th request and not for the 11th (the simulator's hash)
    cfg = SimConfig(**FAST, faults=parse_faults("model.no_tool_retry=0.5", seed=2))  # type: ignore[arg-type]
    res = _interface_run(tmp_path, cfg)
    retry = checks(res)["interface.tool-retry"]
    assert (retry.status, retry.leads_to) == ("fail", "limited"), retry.detail
    assert (retry.evidence["retried"], retry.evidence["gave_up"]) == ([11], [4])
    assert (
        "1 of 2 tool-failure requests retried" in retry.detail
        and "retries a failed tool itself" in retry.detail
    )
    assert res.verdict.decision == "limited" and not res.verdict.granted  # no scope or rollback given
