"""``accept --via-proxy``: the hypothesis scenarios are judged with both taps, as its agent requests are.

wirecheck's taps record both sides of the gateway for every scenario request; the scenarios are judged
over both, by the contracts' dual-tap attribution (the one ``wirecheck check`` applies to the store):
a finding the engine side shares is the engine side's fault, one only the caller side has is the
gateway's. Without the engine tap the same run stays ``unknown``, the engine tap named as missing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.acceptance.facts import UNTIMED
from tests.acceptance.runs import FAST, accept_ci, checks
from tests.support.servers import gateway_process
from wirecheck.acceptance import AcceptanceResult, AcceptOptions, Progress, run_acceptance, via_taps
from wirecheck.contracts import CheckConfig, check_exchanges
from wirecheck.record import Store, free_port, serve
from wirecheck.sim import (
    SimConfig,
    create_app,
    parse_faults,
)

#: enough agent requests to pair every kind of answer, and scenarios enough to meet each fault
REQUESTS, EXAMPLES = 7, 3


def _accept(
    out: Path, engine_faults: str, gateway_faults: str, *, taps: bool
) -> tuple[AcceptanceResult, str]:
    """The interface phase through the simulated gateway, with wirecheck's taps on both of its sides
    (as ``accept --via-proxy`` puts them) or with nothing behind it (``taps=False``). Returns the
    result and the gateway's URL."""
    engine_port = free_port()
    sim = create_app(SimConfig(**{**FAST, "time_scale": 0.0005}, faults=parse_faults(engine_faults)))  # type: ignore[arg-type]
    with serve(sim) as engine:
        upstream = f"http://127.0.0.1:{engine_port}" if taps else engine
        with gateway_process(upstream, gateway_faults) as gw:
            if not taps:
                run = accept_ci(
                    gw,
                    out,
                    ["interface"],
                    engine_url=engine,
                    interface_requests=REQUESTS,
                    scenario_examples=EXAMPLES,
                )
                return run, gw

            async def through_taps() -> AcceptanceResult:
                out.mkdir(parents=True)
                store = Store(out / "wirecheck.db", writer=True)
                try:
                    async with via_taps(gw, engine, engine_port, store) as (caller, source):
                        opts = AcceptOptions(
                            target=caller,
                            engine_url=engine,
                            reviewer="ci",
                            out=out,
                            phases=["interface"],
                            slo=UNTIMED,
                            taps=source,
                            interface_requests=REQUESTS,
                            scenario_examples=EXAMPLES,
                        )
                        return await run_acceptance(opts, Progress(quiet=True))
                finally:
                    store.close()

            return asyncio.run(through_taps()), gw


def _scenarios(res: AcceptanceResult) -> dict[str, Any]:
    scen = res.phases[0].data["scenarios"]
    assert scen["ran"], scen
    return scen


def _as_check_judges(out: Path, found: list[dict[str, Any]]) -> None:
    """Every scenario finding is one ``wirecheck check`` gives for the same exchange of the store."""
    store = Store(out / "wirecheck.db")
    try:
        checked = check_exchanges(store.exchanges(), CheckConfig()).findings
    finally:
        store.close()
    judged = {(f.exchange_id, f.rule, str(f.fault), f.tap) for f in checked}
    assert {(f["exchange_id"], f["rule"], f["fault"], f["tap"]) for f in found} <= judged, (found, checked)


# the gateway drops x-wirecheck-id (as LiteLLM does): the engine sides pair by their fingerprint
@pytest.mark.parametrize("gateway_faults", ["", "correlation_header_dropped"])
def test_a_model_fault_behind_the_taps_is_the_models_seen_at_the_engine(
    tmp_path: Path, gateway_faults: str
) -> None:
    res, gw = _accept(tmp_path / "out", "model.invalid_json", gateway_faults, taps=True)
    scen = _scenarios(res)
    found = scen["findings"]
    assert found and all((f["fault"], f["tap"]) == ("model", "engine") for f in found), found
    assert all("tap missing" not in f["message"] for f in found), found
    assert scen["attributed_from"].startswith("both taps")
    _as_check_judges(tmp_path / "out", found)
    # the agent requests of the same run, paired too
    assert set(res.phases[0].data["errors_by_fault"]) == {"model"}
    detail = checks(res)["interface.scenarios"].detail
    assert "[model] at the engine tap" in detail and "[unknown]" not in detail, detail
    # reproducible after the run: through the gateway itself, to the engine tap brought back
    assert scen["curl"].startswith(f"curl -sN {gw}/v1/chat/completions ")
    assert scen["engine_tap"].startswith("wirecheck proxy --tap engine --upstream http://127.0.0.1:")
    report = (tmp_path / "out" / "report.md").read_text()
    assert f"{scen['engine_tap']} &\n{scen['curl']}" in report


def test_a_gateway_fault_between_the_taps_is_the_gateways_seen_at_the_caller(tmp_path: Path) -> None:
    res, _ = _accept(tmp_path / "out", "", "args_double_encoded", taps=True)
    found = _scenarios(res)["findings"]
    assert found and all((f["fault"], f["tap"]) == ("gateway", "caller") for f in found), found
    assert "gateway-tool-calls-changed" in {f["rule"] for f in found}, found
    _as_check_judges(tmp_path / "out", found)


def test_a_faithful_gateway_between_the_taps_draws_nothing(tmp_path: Path) -> None:
    res, _ = _accept(tmp_path / "out", "", "", taps=True)
    scen = _scenarios(res)
    assert scen["ok"] and scen["requests"] >= EXAMPLES and "findings" not in scen, scen
    assert res.phases[0].data["errors_by_fault"] == {}


def test_the_same_run_without_the_engine_tap_stays_unknown(tmp_path: Path) -> None:
    res, _ = _accept(tmp_path / "out", "model.invalid_json", "", taps=False)
    scen = _scenarios(res)
    found = scen["findings"]
    assert found and all(f["fault"] == "unknown" and "engine tap missing" in f["message"] for f in found), (
        found
    )
    assert "engine_tap" not in scen and not scen["attributed_from"].startswith("both taps")
