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
from tests.real_vllm.families import script, thinking_on, xargs
from tests.support import wire
from wirecheck.contracts import FAMILIES, Exchange, build_view

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
    if name == "call-in-think":
        # the model writes its call before the thinking closes, thinking on (DeepSeek V3.1 thinks
        # only when asked; Qwen3-Coder never thinks: a plain call); what reaches the wire is the
        # family parser's doing
        text = script(
            family, ("get_weather", '{"city": "Tokyo"}'), reasoning="I call tools.", call_in_think=True
        )
        return {**base, **xargs(text), **thinking_on(family)}
    assert name == "unclosed-think", name
    return {**base, **xargs(unclosed_think(family))}


FAULTS = (
    "invalid-json",
    "schema-violation",
    "undeclared-tool",
    "wrong-type",
    "cut-in-arguments",
    "unclosed-think",
    "call-in-think",
)

NONE: set[tuple[str, str]] = set()
#: families whose 0.32 parser leaves a call written inside the thinking in the reasoning
CALL_LEFT_IN_REASONING = {
    "kimi_k3": {("tool-call-in-reasoning", "parser")},
    "deepseek_v31": {("tool-call-in-reasoning", "parser")},
}
#: what each fault gives where the family's parser does nothing special to it
EXPECTED: dict[str, set[tuple[str, str]]] = {
    "invalid-json": {("tool-call-args-invalid-json", "model")},
    "schema-violation": {("tool-call-args-schema", "model")},
    "undeclared-tool": {("tool-call-undeclared", "model")},
    "wrong-type": {("tool-call-args-schema", "model")},
    "cut-in-arguments": {("tool-call-args-truncated", "caller")},
    "unclosed-think": {("reasoning-unclosed", "model")},
    "call-in-think": NONE,
}
#: families whose model writes each argument as raw text that the parser converts by the tool's
#: schema (XML parameters, K3 argument channels)
_RAW_VALUES = {"kimi_k3", "qwen3_coder", "minimax_m2", "glm45"}


#: faults the family's 0.32 grammar keeps off the wire: vLLM serves glm45 with GLM-4.7's parser,
#: whose structural tag constrains even auto calls (default_tool_strict_level FUNCTION: the call's
#: envelope, its name among the declared tools and its argument keys), so the model cannot write a
#: broken or undeclared call; the tiny model is then steered to some legal completion, which says
#: nothing about any party and is not pinned here: only that the scripted fault did not get through
GRAMMAR_FORBIDS = {("glm45", "invalid-json"), ("glm45", "undeclared-tool")}
#: streamed faults whose wire depends on how the engine grouped tokens into deltas: deepseek_v31's
#: streaming parser, on the delta that closes a call, sends that delta's text only up to a '"}' in it
#: (vllm/tool_parsers/deepseekv31_tool_parser.py), so invalid arguments reach the wire whole, cut,
#: or not at all (an empty object) as the batch's timing groups them: any arguments the model wrote
#: wrong that do not end in a string ('{"city": Tokyo}', '{"city": 42}', '{"days": 3}': the closing
#: delta's '3}' has no '"}' and is dropped). Seen: invalid JSON on the model, the same moved to the
#: parser by the evidence, a schema violation on the model, a wrong-typed value cut into invalid JSON
#: on the parser, a schema violation cut into invalid JSON on the model. The test holds that the
#: fault is found, as an arguments finding, on one of the two parties that wrote or mangled it.
_ARGUMENTS_FOUND = ({"tool-call-args-invalid-json", "tool-call-args-schema"}, {"model", "parser"})
DELTA_DEPENDENT = {
    ("deepseek_v31", name): _ARGUMENTS_FOUND for name in ("invalid-json", "wrong-type", "schema-violation")
}
#: the same cut on a call whose arguments are not the fault ('{}' for the undeclared tool: no '"}'
#: either): the fault's own finding stays, and an arguments finding may come with it (seen: invalid
#: JSON on the model beside the undeclared tool)
ARGUMENTS_MAY_BE_CUT = {("deepseek_v31", "undeclared-tool")}
#: where a loaded server groups the whole call (its start, name, arguments and end) into one delta,
#: that parser takes the closing branch with no call begun ("attempting to close tool call, but no
#: tool call") and sends nothing of it: no call reaches the wire, and the answer is empty by the
#: parser's doing (seen in a clean-clone run: the schema violation, streamed). For every fault above
#: that wirecheck then finds, as it should, is the dropped answer
CALL_DROPPED = {("answer-empty", "parser")}


def expected(family: str, name: str, api: str, stream: bool) -> set[tuple[str, str]]:
    """What the real 0.32 server's wire lets wirecheck see of a fault (seen in a tier run), and why
    it differs from ``EXPECTED`` where it does."""
    whole_messages = api == "messages" and not stream
    thinks = FAMILIES[family].thinks_by_default
    if name == "call-in-think":
        # vLLM 0.32's parsers that end the reasoning where a call opens take it out (kimi_k2 since
        # vllm PR 33646, and the engine parsers of minimax_m2, glm45, and qwen3 for hermes); Kimi
        # K3's leaves it in the reasoning (vllm #54273, open), as does deepseek_v3's think-tag split
        return CALL_LEFT_IN_REASONING.get(family, NONE)
    if name == "unclosed-think":
        if not thinks:
            # no reasoning parser was meant to read it (qwen3_coder has none; deepseek's is the
            # identity parser unless thinking is asked for): the model wrote <think> into its answer
            return {("reasoning-markup-in-content", "model")}
        if api == "messages":
            # the Messages answer carries the thinking block but no sign that it never closed
            return {("answer-empty", "parser")}
        # the rest: all reasoning, whichever way the engine grouped the tokens into deltas (vLLM
        # 0.32's engine parsers leave the reasoning that came with the end out of the streamed
        # count: _translate.uncounted_reasoning); hermes and glm45 models write <think> themselves,
        # so usage counts that tag outside the reasoning (Family.writes_think_open)
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
    if (family.family, name) in GRAMMAR_FORBIDS:
        rules = {rule for rule, _ in apis.judged(apis.findings(ex))}
        assert not rules & {rule for rule, _ in EXPECTED[name]}, rules
        calls = [c for ch in build_view(ex).choices for c in ch.calls]
        assert not [c for c in calls if c.name == "delete_all" or c.arguments == '{"city": Tokyo}'], calls
        return
    judged = apis.judged(apis.findings(ex))
    delta_dependent = stream and (family.family, name) in DELTA_DEPENDENT.keys() | ARGUMENTS_MAY_BE_CUT
    if delta_dependent and not [c for ch in build_view(ex).choices for c in ch.calls]:
        assert judged == CALL_DROPPED, judged  # the whole call came in one delta and was dropped
        return
    if stream and (family.family, name) in DELTA_DEPENDENT:
        rules, parties = DELTA_DEPENDENT[(family.family, name)]
        calls = [c.arguments for ch in build_view(ex).choices for c in ch.calls]
        assert len(judged) == 1, (judged, calls)
        ((rule, party),) = judged
        assert rule in rules and party in parties, (judged, calls)
        return
    if stream and (family.family, name) in ARGUMENTS_MAY_BE_CUT:
        rules, parties = _ARGUMENTS_FOUND
        want = expected(family.family, name, api, stream)
        cut = judged - want
        calls = [c.arguments for ch in build_view(ex).choices for c in ch.calls]
        assert want <= judged and len(cut) <= 1, (judged, calls)
        assert all(rule in rules and party in parties for rule, party in cut), (judged, calls)
        return
    assert judged == expected(family.family, name, api, stream)
