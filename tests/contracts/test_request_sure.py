"""request-malformed leaves a request it is sure of unvalidated (``_surely_valid``): every request
it is sure of must pass ChatRequest, for any value of any field."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from tests.contracts.rule_cases import SINGLE
from tests.contracts.rule_cases_pairs import PAIRS
from tests.corpus import load_cases
from wirecheck.contracts import build_view
from wirecheck.contracts._rules_request import _REQUEST_FIELDS, _SURE_MESSAGE, _SURE_REQUEST, _surely_valid
from wirecheck.contracts._wire import ChatMessage, ChatRequest


def _valid(req: dict[str, Any]) -> bool:
    try:
        ChatRequest.model_validate(req)
    except ValidationError:
        return False
    return True


_POOL = [None, True, False, 0, 1, -1, 2**64, 10**400, 0.5, 1e308, float("inf"), float("nan"), "", "x", "3", "\ud800",
         [], [1], ["x"], [{}], {}, {"a": 1}, {"type": "json_object"}]  # fmt: skip


_values = st.sampled_from(_POOL)


def _value(draw: Any, kinds: tuple[type, ...] | None) -> Any:
    """Mostly a value of a class the table is sure of for the field (so that whole requests come
    out sure, edge values and all), else any."""
    if kinds and draw(st.integers(0, 3)):
        return draw(st.sampled_from([v for v in _POOL if v.__class__ in kinds]))
    return draw(_values)


@st.composite
def _requests(draw: Any) -> dict[str, Any]:
    fields = sorted(_REQUEST_FIELDS | {"tools", "other"})
    req: dict[str, Any] = {}
    for k in draw(st.lists(st.sampled_from(fields), max_size=4)):
        req[k] = _value(draw, _SURE_REQUEST.get(k))
    msgs = []
    for _ in range(draw(st.integers(1, 3))):
        m: dict[str, Any] = {"role": draw(st.sampled_from(["user", "assistant", "tool"]))}
        for k in draw(st.lists(st.sampled_from([*sorted(ChatMessage.model_fields), "other"]), max_size=3)):
            if k != "role":
                m[k] = _value(draw, _SURE_MESSAGE.get(k))
        msgs.append(m)
    req["messages"] = msgs
    return req


@settings(max_examples=600, deadline=None)
@given(_requests())
def test_a_request_it_is_sure_of_passes_the_model(req: dict[str, Any]) -> None:
    if _surely_valid(req, req["messages"]):
        assert _valid(req), req


def _case_requests() -> list[tuple[str, dict[str, Any], list[dict[str, Any]]]]:
    """The chat requests of the rule cases and the corpus whose messages get as far as validation."""
    exchanges = [ex for bad, good, _ in {**SINGLE, **PAIRS}.values() for ex in [*bad(), *good()]]
    exchanges += [ex for case in load_cases() for ex in case.exchanges]
    out = []
    for ex in exchanges:
        view = build_view(ex)
        msgs = view.req.get("messages")
        if view.is_chat and isinstance(msgs, list) and all(isinstance(m, dict) for m in msgs):
            out.append((ex.id, view.req, msgs))
    return out


def test_every_request_of_the_cases_it_is_sure_of_passes_and_plain_ones_are_sure() -> None:
    sure = [(name, req) for name, req, msgs in _case_requests() if _surely_valid(req, msgs)]
    assert len(sure) > 50
    assert [name for name, req in sure if not _valid(req)] == []
    plain = {
        "model": "m",
        "stream": True,
        "temperature": 0.5,
        "messages": [{"role": "user", "content": "hi"}],
    }
    assert _surely_valid(plain, plain["messages"])


def test_a_field_the_model_types_is_sure_only_as_the_table_says() -> None:
    # a field added to ChatRequest and not to the table is left to the model
    assert set(_SURE_REQUEST) <= _REQUEST_FIELDS
    unknown = sorted(_REQUEST_FIELDS - set(_SURE_REQUEST))
    assert unknown == ["tools"]
    assert not _surely_valid({"tools": [], "messages": []}, [])
    assert not _surely_valid(
        {"messages": [{"role": "assistant", "tool_calls": []}]}, [{"role": "assistant", "tool_calls": []}]
    )
