"""The family table, row by row: every family is served by the simulator, covered by
the rules and held to its own flags by acceptance compat; one detector, and an unknown model is
judged generic with a note. Each test iterates over the table, so a new row is tested with no edit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.sim.test_app import battery
from tests.support import wire
from tests.support.recording import post
from wirecheck.acceptance import AcceptOptions
from wirecheck.acceptance.phases import CompatInputs, run_compat
from wirecheck.cli import main
from wirecheck.contracts import (
    FAMILIES,
    FAMILY_CHOICES,
    FAMILY_NAMES,
    GENERIC,
    CheckConfig,
    ConfigError,
    Exchange,
    Fault,
    check_exchanges,
    detect_family,
    write_exchanges,
)
from wirecheck.record import RecordingTransport, StreamingASGITransport
from wirecheck.sim import SIM_FAMILIES, SimConfig, create_app, parse_faults, write_environment
from wirecheck.sim._config import DIALECTS

# run whole with the compiled twins and again with the pure-Python reference (conftest.py)
pytestmark = pytest.mark.usefixtures("both_paths")

TOOL_TURN = {
    "messages": [{"role": "user", "content": "What is the weather in Tokyo?"}],
    "tools": [wire.WEATHER, wire.SEARCH],
}
#: families whose recipe has a reasoning parser: asked to think
THINKING = [f.name for f in FAMILIES.values() if f.reasoning_parser is not None]


def _turn(family: str) -> dict[str, Any]:
    return {**TOOL_TURN, "chat_template_kwargs": {"thinking": family in THINKING}}


async def _serve(family: str, bodies: list[dict[str, Any]], **cfg: Any) -> list[Exchange]:
    """Each body streamed and not, straight to a simulator of ``family``, recorded at the engine."""
    if isinstance(cfg.get("faults"), str):
        cfg["faults"] = parse_faults(cfg["faults"])
    app = create_app(SimConfig(family=family, time_scale=0.0005, **cfg))
    sink: list[Exchange] = []
    transport = RecordingTransport(StreamingASGITransport(app), "engine", sink)
    model = FAMILIES[family].example_model
    async with httpx.AsyncClient(transport=transport, base_url="http://sim") as client:
        for i, body in enumerate(bodies):
            for stream in (False, True):
                r = await post(client, {**body, "model": model, "stream": stream}, corr=f"c{i}{stream}")
                assert r.status_code == 200, r.text
    return sink


def test_the_simulator_has_a_row_for_every_family_and_dialect() -> None:
    assert set(SIM_FAMILIES) == set(FAMILY_NAMES)
    for name, row in SIM_FAMILIES.items():
        assert set(row.stream_styles) == set(DIALECTS), name
    assert ("auto", *FAMILY_NAMES, GENERIC) == FAMILY_CHOICES


@pytest.mark.parametrize("family", FAMILY_NAMES)
async def test_every_family_is_served_and_its_tool_calls_check_clean(family: str) -> None:
    exchanges = await _serve(family, [_turn(family)])
    res = check_exchanges(exchanges, CheckConfig(direct=True))
    assert [(f.rule, f.message) for f in res.findings] == []
    for ex in exchanges:
        assert ex.response is not None
        sent = ex.response.body + b"".join(c.data for c in ex.response.chunks or [])
        assert b'"tool_calls"' in sent and b"get_weather" in sent, sent[:300]
    assert res.twins == 1
    # the one detector knows the model the simulator serves for the family
    assert detect_family(FAMILIES[family].example_model) == family


@pytest.mark.parametrize("family", FAMILY_NAMES)
async def test_with_the_tool_parser_off_the_familys_markup_is_found_and_blamed_on_the_parser(
    family: str,
) -> None:
    exchanges = await _serve(family, [_turn(family)], tool_parser=False)
    hits = [f for f in check_exchanges(exchanges, CheckConfig(direct=True)).findings]
    markup = [f for f in hits if f.rule == "tool-markup-in-content"]
    assert len(markup) == 2, [(f.rule, f.message) for f in hits]  # streamed and not
    assert {f.fault for f in markup} == {Fault.PARSER}


@pytest.mark.parametrize("family", THINKING)
async def test_a_failed_reasoning_parse_leaves_the_familys_think_markup_found(family: str) -> None:
    exchanges = await _serve(family, [_turn(family)], faults="parser.reasoning_in_content")
    hits = check_exchanges(exchanges, CheckConfig(direct=True)).findings
    found = [f for f in hits if f.rule == "reasoning-markup-in-content"]
    assert len(found) == 2 and {f.fault for f in found} == {Fault.PARSER}, [(f.rule, f.message) for f in hits]


@pytest.mark.parametrize(
    ("family", "token"), [(f.name, t) for f in FAMILIES.values() for t in f.special_tokens]
)
@pytest.mark.parametrize("field", ["content", "reasoning"])
def test_every_special_token_of_every_family_is_found_leaking(family: str, token: str, field: str) -> None:
    text = {"content": "The weather is fine.", "reasoning": "The user wants the weather."}
    text[field] += token
    req = wire.req(model=FAMILIES[family].example_model)
    body = wire.completion(wire.message(text["content"], reasoning=text["reasoning"]))
    res = check_exchanges([wire.exchange(req, body)], CheckConfig(direct=True))
    leaks = [f for f in res.findings if f.rule == "special-token-leak"]
    assert len(leaks) == 1 and leaks[0].evidence["pointer"].endswith(field), res.findings


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_compat_holds_a_deployment_to_its_own_familys_flags_only(family: str, tmp_path: Path) -> None:
    log = str(write_environment(tmp_path, SimConfig(family=family))["startup_log"])

    def flags(judged_as: str) -> tuple[str, str]:
        ph = run_compat(CompatInputs(startup_log=log, family=judged_as))
        check = next(c for c in ph.checks if c.id == "compat.flags")
        return check.status, check.detail

    assert flags(family) == ("pass", flags(family)[1])
    for other, row in FAMILIES.items():
        if dict(row.recipe_flags) != dict(FAMILIES[family].recipe_flags):
            assert flags(other)[0] == "fail", (family, other)
    # an unknown model is held to no family's parser flags: a note, not a failure
    status, detail = flags(GENERIC)
    assert status == "warn" and "matches no family" in detail


@pytest.mark.parametrize(
    ("model", "family"),
    [
        *((f.example_model, f.name) for f in FAMILIES.values()),
        ("Qwen/Qwen3-32B", "hermes"),  # acceptance once held this to the K3 flags
        ("moonshotai/Kimi-K2.5", "kimi_k2"),
        ("mistralai/Mistral-Large-Instruct-2411", GENERIC),
        ("k2-finetune", GENERIC),  # acceptance once read any "k2" as Kimi K2
        ("", GENERIC),
    ],
)
def test_one_detector_for_the_rules_the_cli_and_acceptance(model: str, family: str, tmp_path: Path) -> None:
    assert detect_family(model) == family
    assert AcceptOptions(target="http://x", reviewer="r", out=tmp_path).family_of(model) == family


def test_a_model_or_an_id_that_is_not_a_string_tells_no_family() -> None:
    # a hostile answer's: the detector reads past it, where it raised and the rules that asked it
    # left a check-crashed finding instead of judging
    assert detect_family(5) == GENERIC  # type: ignore[arg-type]
    assert detect_family(None, [7, None, "functions.search:0"]) == "kimi_k2"  # type: ignore[list-item]
    body = wire.completion(wire.message(None, tool_calls=[wire.call(id="functions.search:0")]), "tool_calls")
    body["model"] = 5
    found = check_exchanges([wire.exchange(wire.tool_req(model=5), body)], CheckConfig(direct=True)).findings
    assert "check-crashed" not in [f.rule for f in found]


def test_an_unknown_model_is_judged_generic_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a K2-shaped id from a model no row matches: the id rule is a Kimi K2 expectation, not generic
    req = wire.tool_req(model="acme/agent-7b")
    ex = wire.exchange(
        req,
        wire.completion(
            wire.message(None, tool_calls=[wire.call(id="search:0")]), "tool_calls", model="acme/agent-7b"
        ),
    )
    assert not [
        f for f in check_exchanges([ex], CheckConfig(direct=True)).findings if f.rule == "tool-call-id-format"
    ]
    assert [f.rule for f in check_exchanges([ex], CheckConfig(family="kimi_k2")).findings] == [
        "tool-call-id-format"
    ]
    path = tmp_path / "x.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        write_exchanges([ex], fh)
    assert main(["check", str(path)]) == 0
    err = capsys.readouterr().err
    assert "'acme/agent-7b' matches no family" in err and "generic contracts" in err
    assert main(["check", "--family", "generic", str(path)]) == 0
    assert capsys.readouterr().err == ""  # a family chosen by hand needs no note
    with pytest.raises(ConfigError, match="expected one of auto, "):
        CheckConfig(family="qwen")


@pytest.mark.parametrize("family", FAMILY_NAMES)
async def test_the_simulators_whole_battery_checks_clean_for_every_family(family: str) -> None:
    # the scripted model's every behaviour (tests/sim/test_app.py), for rows that list does not name
    bodies = [{k: v for k, v in b.items() if k != "model"} for b in battery(FAMILIES[family].example_model)]
    res = check_exchanges(await _serve(family, bodies), CheckConfig(direct=True))
    assert [(f.rule, f.message) for f in res.findings] == []
    assert res.twins == len(bodies)
