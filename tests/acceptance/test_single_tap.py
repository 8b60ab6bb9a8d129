"""Through a gateway with only the caller's side seen, the scenarios blame as the rest of the run does.

The contracts' single-tap attribution is the one attribution: a tap in front of a gateway cannot rule
the gateway out, so what the model, the parser or the engine would carry is ``unknown`` and says the
engine tap is missing. ``accept``'s agent requests did so; its scenarios, and ``wirecheck
scenarios``, put a gateway's doing on the model (a double-encoding gateway's arguments became
``tool-call-args-not-object [model]``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from jsonschema import Draft202012Validator

from tests.acceptance.runs import FAST, ROOT, accept_ci, checks
from tests.support.servers import run_wirecheck
from wirecheck.record import serve
from wirecheck.sim import GatewayConfig, SimConfig, create_app, create_gateway, parse_gateway_faults

#: a gateway that merges reasoning into content and encodes tool arguments twice: both reach the
#: caller as contract breaks the model would carry at the engine
FAULTS = "reasoning_merged,args_double_encoded"
NOT_THE_GATEWAYS = {"model", "parser", "engine"}


def test_accept_scenarios_through_a_single_tap_gateway_blame_as_its_agent_requests_do(tmp_path: Path) -> None:
    with serve(create_app(SimConfig(**FAST))) as engine:  # type: ignore[arg-type]
        gateway = create_gateway(GatewayConfig(upstream=engine, faults=parse_gateway_faults(FAULTS)))
        with serve(gateway) as gw:
            res = accept_ci(
                gw,
                tmp_path / "out",
                ["interface"],
                engine_url=engine,
                interface_requests=7,
                scenario_examples=3,
            )
    data = res.phases[0].data
    requests_blame = set(data["errors_by_fault"])
    assert requests_blame and not requests_blame & NOT_THE_GATEWAYS, requests_blame
    found = data["scenarios"]["findings"]
    assert found, "the gateway's double encoding broke a scenario"
    assert {f["fault"] for f in found} <= requests_blame, (found, requests_blame)
    assert all("engine tap missing" in f["message"] for f in found), found
    detail = checks(res)["interface.scenarios"].detail
    assert "[unknown]" in detail and "[model]" not in detail, detail
    # the blame is one the documented report names (a label of its own broke the schema)
    schema = json.loads((ROOT / "docs" / "acceptance-report.schema.json").read_text())
    report = json.loads(Path(res.files["json"]).read_text())
    assert not list(Draft202012Validator(schema).iter_errors(report))


def test_wirecheck_scenarios_through_a_gateway_without_an_engine_tap_blames_unknown() -> None:
    with serve(create_app(SimConfig(**FAST))) as engine:  # type: ignore[arg-type]
        gateway = create_gateway(GatewayConfig(upstream=engine, faults=parse_gateway_faults(FAULTS)))
        with serve(gateway) as gw:
            proc = run_wirecheck(
                "scenarios",
                "--target",
                gw,
                "--through-gateway",
                "--examples",
                "3",
                "--seed",
                "1",
                "--quiet",
                timeout=180,
            )
    assert proc.returncode == 1, proc.stderr
    blamed = [line for line in proc.stdout.splitlines() if re.match(r"  [a-z0-9-]+ \[\w+\] ", line)]
    assert blamed and all("[unknown]" in line and "engine tap missing" in line for line in blamed), (
        proc.stdout
    )
    assert "--through-gateway" in proc.stdout  # the line that reruns it keeps the single-tap blame
