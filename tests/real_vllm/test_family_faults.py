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

#: what each fault gives where the family's parser does nothing special to it
EXPECTED: dict[str, set[tuple[str, str]]] = {
    "invalid-json": {("tool-call-args-invalid-json", "model")},
    "schema-violation": {("tool-call-args-schema", "model")},
    "undeclared-tool": {("tool-call-undeclared", "model")},
    "wrong-type": {("tool-call-args-schema", "model")},
    "cut-in-arguments": {("tool-call-args-truncated", "caller")},
    "unclosed-think": {("reasoning-unclosed", "model")},
}
#: families whose model writes each argument as raw text that the parser converts by the tool's
#: schema (XML parameters, K3 argument channels)
_RAW_VALUES = {"kimi_k3", "qwen3_coder", "minimax_m2", "glm45"}
NONE: set[tuple[str, str]] = set()


#: glm45 on vLLM 0.32: the GLM-4.7 structural tag constrains even auto calls (the parser's
#: default_tool_strict_level is FUNCTION), so the grammar does not let the model write a broken or
#: undeclared call: the tiny model's processor then steers to the shortest legal completion, and
#: what reaches the wire is that completion (an argument cut short, an empty answer), seen in a run
_GLM_CONSTRAINED: dict[tuple[str, str, bool], set[tuple[str, str]]] = {
    ("invalid-json", "chat", True): {("tool-call-args-truncated", "caller")},
    ("invalid-json", "chat", False): {
        ("output-tokens-vanished", "parser"),
        ("tool-call-args-truncated", "caller"),
    },
    ("invalid-json", "messages", True): {("tool-call-args-truncated", "caller")},
    ("invalid-json", "messages", False): {
        ("output-tokens-vanished", "parser"),
        ("tool-call-args-schema", "model"),
    },
    ("invalid-json", "responses", True): {("tool-call-args-truncated", "caller")},
    ("invalid-json", "responses", False): {("tool-call-args-truncated", "caller")},
    ("undeclared-tool", "chat", True): {("answer-empty", "parser")},
    ("undeclared-tool", "chat", False): {("tool-call-args-schema", "model")},
    ("undeclared-tool", "messages", True): {("answer-empty", "parser")},
    ("undeclared-tool", "messages", False): {("tool-call-args-schema", "model")},
    ("undeclared-tool", "responses", True): {("answer-empty", "parser")},
    ("undeclared-tool", "responses", False): {("tool-call-args-schema", "model")},
}


def expected(family: str, name: str, api: str, stream: bool) -> set[tuple[str, str]]:
    """What the real 0.32 server's wire lets wirecheck see of a fault (seen in a tier run), and why
    it differs from ``EXPECTED`` where it does."""
    if family == "glm45" and (name, api, stream) in _GLM_CONSTRAINED:
        return _GLM_CONSTRAINED[(name, api, stream)]
    whole_messages = api == "messages" and not stream
    thinks = FAMILIES[family].thinks_by_default
    if name == "unclosed-think":
        if not thinks:
            # no reasoning parser reads it (qwen3_coder has none; deepseek's is off by default):
            # the <think> stays in the answer
            return {("reasoning-markup-in-content", "parser")}
        if api == "messages":
            # the Messages answer carries the thinking block but no sign that it never closed
            return {("answer-empty", "parser")}
        if family in ("hermes", "glm45"):
            # the parser files the unclosed block (the model opened <think> itself) as reasoning,
            # and the answer is empty
            return {("answer-empty", "model")}
    # vLLM's Messages endpoint json.loads each call's arguments when not streaming: a 400
    cut_k2 = (name, family) == ("cut-in-arguments", "kimi_k2")
    if whole_messages and family in ("kimi_k2", "deepseek_v31") and (name == "invalid-json" or cut_k2):
        return {("http-client-error", "model")}
    if family == "hermes" and name in ("invalid-json", "cut-in-arguments") and not stream:
        # the legacy hermes parser leaves the raw <tool_call> markup in content when json.loads fails
        return {("tool-markup-in-content", "parser")}
    if family in _RAW_VALUES:
        if name == "invalid-json":
            # the broken text becomes one raw parameter of the call, which the schema does not allow
            return {("tool-call-args-schema", "model")}
        if name == "wrong-type" and family != "kimi_k3":
            # the raw 42 is converted to the schema's string: nothing wrong reaches the wire (K3
            # types each argument, type="number" here, so its 42 stays a number)
            return NONE
        if name == "cut-in-arguments" and family == "kimi_k3":
            # the K3 parser sends a call only once it closes: a cut call never reaches the wire
            return NONE
        if name == "cut-in-arguments" and whole_messages:
            # the Messages endpoint builds tool_use input from the partial parameters
            return {("tool-call-args-schema", "model")}
    if family == "minimax_m2" and name == "undeclared-tool":
        # the minimax_m2 parser checks names against the request (validate_tool_names) and drops
        # the call: the answer is empty
        return {("answer-empty", "parser")}
    if family == "kimi_k2" and name == "wrong-type" and not stream:
        # non-streamed arguments are coerced to the schema's types (42 -> "42"); the stream shows it
        return NONE
    if family == "deepseek_v31" and name == "cut-in-arguments" and not stream:
        # the deepseek_v31 parser drops an unclosed call when not streaming
        return NONE
    return EXPECTED[name]


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
