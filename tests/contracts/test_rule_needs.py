"""A rule that declares what it needs of a view (``Rule.needs``) is left out of ``check_view`` on a
view without it: that must never change a finding. Every rule runs on a spread of views (each rule's
failing and passing cases, the corpus, the stream checker's cases, hostile shapes) with and without
the leaving out, and a rule left out must find nothing and raise nothing there."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.contracts.rule_cases import SINGLE
from tests.contracts.rule_cases_pairs import PAIRS
from tests.contracts.test_stream_check import RULE_CASES
from tests.corpus import load_cases
from tests.support.wire import call, chunk, completion, exchange, message, req, role_chunk, streamed, tool_req
from wirecheck.contracts import CheckConfig, Exchange, ExchangeView, build_view
from wirecheck.contracts._check import _run, check_view, view_facts
from wirecheck.contracts._registry import (
    ALL_ENDPOINTS,
    ANOMALY,
    FACTS,
    REGISTRY,
    Fault,
    Hit,
    hit,
    rule,
    rules,
    rules_judging,
)
from wirecheck.contracts._rules_request import TRUNCATION_SAFE, truncated_sides

# run whole with the compiled twins and again with the pure-Python reference (conftest.py)
pytestmark = pytest.mark.usefixtures("both_paths")


def _hostile() -> list[Exchange]:
    """Shapes the facts or the rules may trip on: a model that is not a string and no model in the
    answer, messages that are not objects, a tool turn without an id, a format that is not JSON,
    bodies and frames past the JSON bounds, two reasoning fields that disagree."""
    odd = req(messages=[5, {"role": "tool"}, {"role": "assistant", "tool_calls": "x"}])
    odd["model"] = 5
    body = completion()
    body.pop("model", None)
    formats = req(response_format={"type": "json_object"}, structured_outputs={"json": "{"})
    deep: Any = "x"
    for _ in range(200):  # past the JSON bounds (``json-limit``)
        deep = [deep]
    whole = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": "{}"},
    }
    again = {"index": 0, "function": {"name": "get_weather"}}
    return [
        streamed(tool_req(), [role_chunk(), chunk({"tool_calls": [whole]}), chunk({"tool_calls": [whole]})]),
        streamed(tool_req(), [role_chunk(), chunk({"tool_calls": [whole]}), chunk({"tool_calls": [again]})]),
        streamed(
            req(),
            [role_chunk(), chunk({"content": "a"}, model="other"), chunk({}, "stop"), chunk({}, "length")],
        ),
        exchange(odd, body),
        exchange(req(messages="hi"), completion()),
        exchange(formats, completion(message("not json"))),
        exchange(req(extra=deep), completion()),
        streamed(req(), [role_chunk(), {**chunk({"content": "a"}), "extra": deep}, chunk({}, "stop")]),
        streamed(
            req(), [role_chunk(), chunk({"reasoning": "a", "reasoning_content": "b"}), chunk({}, "stop")]
        ),
        streamed(tool_req(), [role_chunk(), chunk({"tool_calls": [{"index": "a"}]})]),
        exchange(tool_req(), completion(message(None, tool_calls=[call(), call(idx=1)]), "tool_calls")),
    ]


def _exchanges() -> Iterator[tuple[str, Exchange, dict[str, Any]]]:
    for name, (bad, good, _) in {**SINGLE, **PAIRS}.items():
        for ex in [*bad(), *good()]:
            yield f"rule:{name}", ex, {}
    for case in load_cases():
        for ex in case.exchanges:
            yield f"corpus:{case.id}", ex, case.config
    for name, make in RULE_CASES.items():
        for ex in make():
            yield f"stream:{name}", ex, {}
    for n, ex in enumerate(_hostile()):
        yield f"hostile:{n}", ex, {}


def _views() -> list[tuple[str, ExchangeView, dict[str, Any]]]:
    out = []
    for name, ex, config in _exchanges():
        try:
            out.append((name, build_view(ex), config))
        except Exception:  # an unreadable exchange is judged by no rule (view_or_crash)
            continue
    return out


VIEWS = _views()


def _all_rules(view: ExchangeView, ctx: CheckConfig) -> list[dict[str, Any]]:
    """``check_view`` as it was before rules declared their needs: every rule of the endpoint."""
    cut = bool(truncated_sides(view))
    out = []
    for r in rules_judging("exchange", view.endpoint):
        if r.id not in ctx.disabled and (not cut or r.id in TRUNCATION_SAFE):
            out.extend(f.to_dict() for f in _run(r, view, ctx, view.id, view.tap))
    return out


def test_the_spread_is_wide() -> None:
    # every fact and every anomaly kind a rule needs is there on some view, and missing on others
    needs = {n for r in rules("exchange") for n in r.needs}
    seen: dict[str, int] = {}
    for _, view, _ in VIEWS:
        for fact in view_facts(view) or ():
            seen[fact] = seen.get(fact, 0) + 1
    assert len(VIEWS) > 400
    assert set(seen) >= FACTS
    assert {n for n in needs if n not in seen} == set()
    assert all(seen[n] < len(VIEWS) for n in needs)


@pytest.mark.parametrize("direct", [True, False])
def test_leaving_out_what_a_view_lacks_changes_no_finding(direct: bool) -> None:
    for name, view, config in VIEWS:
        ctx = CheckConfig(**{"direct": direct, **config})
        assert [f.to_dict() for f in check_view(view, ctx)] == _all_rules(view, ctx), name


def test_a_rule_left_out_finds_nothing_there() -> None:
    ctx = CheckConfig(direct=True)
    gated = [r for r in rules("exchange") if r.needs]
    assert len(gated) >= 20
    fired: set[str] = set()
    for name, view, _ in VIEWS:
        facts = view_facts(view)
        for r in gated:
            found = _run(r, view, ctx, view.id, view.tap)
            if found:
                fired.add(r.id)
            if facts is not None and r.needs.isdisjoint(facts):
                assert found == [], (name, r.id, [f.message for f in found])
    # and each of them does find something where its needs are met (its failing case)
    assert fired == {r.id for r in gated}


def test_a_need_is_one_the_facts_know() -> None:
    with pytest.raises(ValueError, match="unknown need"):
        rule("needs-something-odd", fault=Fault.MODEL, needs=("tool-list",))
    assert "needs-something-odd" not in REGISTRY
    assert all(n in FACTS or n.startswith(ANOMALY) for r in rules() for n in r.needs)


def test_a_rule_that_raises_loses_its_hits_and_the_others_still_run() -> None:
    def raises(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
        yield hit("found before it raised")
        raise RuntimeError("a shape it did not expect")

    ids = ("aaa-raises-first", "stream-done-missing-raises", "zzz-raises-last")
    for rule_id in ids:
        rule(rule_id, fault=Fault.MODEL, summary="Raises.", endpoints=ALL_ENDPOINTS)(raises)
    try:
        view = build_view(
            streamed(req(), [role_chunk(), chunk({"content": "a"}), chunk({}, "stop")], done=False)
        )
        found = check_view(view, CheckConfig(direct=True))
    finally:
        for rule_id in ids:
            REGISTRY.pop(rule_id)
    rules_found = [f.rule for f in found]
    assert rules_found == ["check-crashed", "stream-done-missing", "check-crashed", "check-crashed"]
    assert [f.message.split(" raised")[0] for f in found if f.rule == "check-crashed"] == [
        f"rule {i}" for i in ids
    ]
    assert all(
        "RuntimeError: a shape it did not expect" in f.message for f in found if f.rule == "check-crashed"
    )
