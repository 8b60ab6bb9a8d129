"""Scripted model faults in every family's own markup, against its real vLLM through wirecheck's
proxy, on chat completions, Responses and Messages, streamed and not: each gives the rule and blame
listed here, or nothing where the real parser hides the fault from the wire (say why).

The scripts come from the simulator's writer for the family (tests/real_vllm/families.py), so the
real parser reads exactly the markup the simulator's parser is held to. Outcomes are facts seen on
the real 0.32 server; ``WIRECHECK_REALTIER_RECORD=FILE`` writes what a run saw, to update them.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.real_vllm import apis, traffic
from tests.real_vllm.conftest import FamilyServer
from tests.real_vllm.families import script, xargs
from tests.support import wire
from wirecheck.contracts import FAMILIES, Exchange

TOOLS = [wire.WEATHER, wire.SEARCH]
LONG_CITY = " ".join(["Tokyo"] * 60)
STREAMS = {"whole": False, "stream": True}


def unclosed_think(family: str) -> str:
    """The family's output with a thinking block that never closes: the writer's block, cut right
    after the reasoning. A family that does not think (unless asked) writes an open <think> tag
    into what is then its answer."""
    if not FAMILIES[family].thinks_by_default:
        return "<think>Thinking forever"
    text = script(family, content="Hello.", reasoning="Thinking forever")
    return text[: text.index("Thinking forever") + len("Thinking forever")]


def fault(family: str, name: str) -> dict[str, Any]:
    """The chat-form request of fault ``name`` for ``family``."""
    base: dict[str, Any] = {"messages": [{"role": "user", "content": "Weather in Tokyo?"}], "tools": TOOLS}
    calls = {
        "invalid-json": ("get_weather", '{"city": Tokyo}'),
        "schema-violation": ("get_weather", '{"days": 3}'),
        "undeclared-tool": ("delete_all", "{}"),
        "wrong-type": ("get_weather", '{"city": 42}'),
        "cut-in-arguments": ("get_weather", json.dumps({"city": LONG_CITY})),
    }
    if name in calls:
        base.update(xargs(script(family, calls[name])))
        if name == "cut-in-arguments":
            base["max_tokens"] = 30
        return base
    assert name == "unclosed-think", name
    return {**base, **xargs(unclosed_think(family))}


FAULTS = (
    "invalid-json",
    "schema-violation",
    "undeclared-tool",
    "wrong-type",
    "cut-in-arguments",
    "unclosed-think",
)

# (family, fault) -> {(api, stream): {(rule, blame)}}; default per fault below, families override
EXPECTED: dict[str, set[tuple[str, str]]] = {
    "invalid-json": {("tool-call-args-invalid-json", "model")},
    "schema-violation": {("tool-call-args-schema", "model")},
    "undeclared-tool": {("tool-call-undeclared", "model")},
    "wrong-type": {("tool-call-args-schema", "model")},
    "cut-in-arguments": {("tool-call-args-truncated", "caller")},
    "unclosed-think": {("reasoning-unclosed", "model")},
}
#: where a family's real parser gives another outcome than the default, and why
OVERRIDES: dict[tuple[str, str, str, bool], set[tuple[str, str]]] = {}


def expected(family: str, name: str, api: str, stream: bool) -> set[tuple[str, str]]:
    return OVERRIDES.get((family, name, api, stream), EXPECTED[name])


@pytest.fixture(scope="module")
def fault_traffic(
    family: FamilyServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[tuple[str, str, bool], tuple[apis.Sent, Exchange | None]]]:
    model = traffic.model_of(family.family)
    cases = {
        (name, api, stream): apis.Sent(
            api, stream, apis.body_for(api, {"model": model, **fault(family.family, name)}, stream=stream)
        )
        for name, api, stream in itertools.product(FAULTS, apis.APIS, STREAMS.values())
    }
    with traffic.tapped(family.url, tmp_path_factory.mktemp(f"faults-{family.family}")) as (url, store):
        apis.send_all(url, cases.values())
        got = apis.recorded(store, (s.tag for s in cases.values()))
        out = {key: (sent, got.get(sent.tag)) for key, sent in cases.items()}
    if record := os.environ.get("WIRECHECK_REALTIER_RECORD"):
        seen = {
            f"{family.family} {n} {a} {'stream' if s else 'whole'}": sorted(apis.judged(apis.findings(ex)))
            if ex is not None
            else f"status {sent.status}: {sent.text[:300]}"
            for (n, a, s), (sent, ex) in out.items()
        }
        path = Path(record)
        old = json.loads(path.read_text()) if path.exists() else {}
        path.write_text(json.dumps({**old, **seen}, indent=1, sort_keys=True))
    yield out


@pytest.mark.parametrize("stream", STREAMS.values(), ids=STREAMS.keys())
@pytest.mark.parametrize("api", apis.APIS)
@pytest.mark.parametrize("name", FAULTS)
def test_fault_gives_its_rule_and_blame(
    fault_traffic: dict[tuple[str, str, bool], tuple[apis.Sent, Exchange | None]],
    family: FamilyServer,
    name: str,
    api: str,
    stream: bool,
) -> None:
    sent, ex = fault_traffic[(name, api, stream)]
    assert ex is not None, f"the proxy recorded nothing (status {sent.status}: {sent.text[:500]})"
    assert apis.judged(apis.findings(ex)) == expected(family.family, name, api, stream)
