"""``run_scenarios`` given wirecheck's taps around a gateway judges both sides, as ``check`` does.

Each scenario request is judged over what the two taps recorded for it, by the contracts' dual-tap
attribution, never one of the runner's own: the findings of a failure are those ``check_exchanges``
gives for the same exchanges, each names its side, and the shrunk request reruns through the gateway."""

from __future__ import annotations

import pytest

from tests.generators.test_generators import FIND_ONLY  # finding and attributing needs no shrinking
from tests.support.servers import gateway_process
from wirecheck.contracts import CheckConfig, check_exchanges
from wirecheck.generators import ScenarioReport, run_scenarios
from wirecheck.record import dual_taps, free_port, serve
from wirecheck.sim import (
    GatewayConfig,
    SimConfig,
    create_app,
    create_gateway,
    parse_faults,
)

#: what these runs are judged with: the simulated engine at this time scale streams within a
#: millisecond, so a span its tap records is the machine holding a process up, and a gateway process
#: held up too hands the rest on at once; ``gateway-stream-buffered`` is judged on spans a paced
#: engine makes (tests/contracts), not on how busy the machine was
UNPACED = CheckConfig(buffer_min_span_ms=3_600_000.0)


def _through_taps(engine_faults: str, gateway_faults: str, **kw: object) -> tuple[ScenarioReport, str]:
    """The scenarios through a caller tap, the simulated gateway and an engine tap, the taps handed
    to ``run_scenarios`` (``taps=``) as a program that runs its own would, judged with ``UNPACED``.
    Returns the report and the gateway's URL."""
    kw.setdefault("config", UNPACED)
    engine_port = free_port()
    with (
        serve(create_app(SimConfig(time_scale=0.0005, faults=parse_faults(engine_faults)))) as sim,
        gateway_process(f"http://127.0.0.1:{engine_port}", gateway_faults) as gw,
        dual_taps(gw, sim, engine_port) as (caller, sink),
    ):
        return run_scenarios(caller, taps=sink.take, reproduce_target=gw, **kw), gw  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("engine_faults", "gateway_faults", "fault", "side"),
    [
        ("model.invalid_json", "", "model", "engine"),
        ("parser.markup_in_content", "", "parser", "engine"),
        ("", "args_double_encoded", "gateway", "caller"),
    ],
)
def test_each_finding_is_the_one_check_gives_for_the_same_exchanges(
    engine_faults: str, gateway_faults: str, fault: str, side: str
) -> None:
    report, gw = _through_taps(engine_faults, gateway_faults, examples=50, seed=1, settings_=FIND_ONLY)
    fail = report.failure
    assert fail is not None, f"{engine_faults or gateway_faults} not found in {report.requests} requests"
    assert {(str(f.fault), f.tap) for f in fail.findings} == {(fault, side)}, fail.lines()
    checked = check_exchanges(report.exchanges, UNPACED).findings
    same = {(f.exchange_id, f.rule, str(f.fault), f.tap, f.message) for f in checked}
    assert {(f.exchange_id, f.rule, str(f.fault), f.tap, f.message) for f in fail.findings} <= same
    assert all(f" [{fault}] at the {side} tap: " in line for line in fail.lines()), fail.lines()
    # the taps end with the run: the curl line goes to the gateway itself
    assert fail.curl.startswith(f"curl -sN {gw}/v1/chat/completions ")


def test_a_faithful_gateway_draws_nothing_and_every_request_pairs() -> None:
    report, _ = _through_taps("", "", examples=3, seed=1)
    assert report.ok, report.failure and report.failure.lines()
    result = check_exchanges(report.exchanges, UNPACED)
    assert result.pairs == report.requests and result.errors == 0
    # the streamed and non-streamed twins were judged at both taps
    assert result.twins >= 2 and set(result.taps) == {"caller", "engine"}


def test_without_the_engine_tap_the_same_fault_stays_unknown() -> None:
    sim_app = create_app(SimConfig(time_scale=0.0005, faults=parse_faults("model.invalid_json")))
    with serve(sim_app) as sim, serve(create_gateway(GatewayConfig(upstream=sim))) as gw:
        # what ``wirecheck scenarios --through-gateway`` runs: one tap, in front of a gateway
        report = run_scenarios(gw, examples=50, seed=1, config=CheckConfig(), settings_=FIND_ONLY)
    assert report.failure is not None
    assert all(f.fault == "unknown" and "engine tap missing" in f.message for f in report.failure.findings), (
        report.failure.lines()
    )
    with pytest.raises(ValueError, match="via_proxy or taps"):
        run_scenarios(gw, via_proxy=(sim, free_port()), taps=lambda _corr: [])
