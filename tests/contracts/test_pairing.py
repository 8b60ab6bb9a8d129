"""One pairing for live and offline checks, and the false alarms a fault-free gateway
caused: dropped defaults, usage nobody asked for, a close right after [DONE], a relayed engine error,
emptied chunks taken for buffering."""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.support import wire
from tests.support.wire import completion, exchange, message, per_frame, req, streamed, tool_req
from wirecheck.contracts import (
    CheckConfig,
    Chunk,
    Exchange,
    ExchangeError,
    build_view,
    check_exchanges,
    pair_taps,
    pair_twins,
)
from wirecheck.contracts._pairs import _hash, _message


def at(ex: Exchange, ms: float) -> Exchange:
    ex.started_at = f"2026-12-03T10:00:{ms / 1000:06.3f}+00:00"
    return ex


def with_id(body: dict[str, Any], cid: str) -> dict[str, Any]:
    return {**body, "id": cid}


def stream_with_id(objs: list[dict[str, Any]], cid: str) -> list[dict[str, Any]]:
    return [{**o, "id": cid} for o in objs]


def findings(exs: list[Exchange]) -> list[tuple[str, str, str]]:
    return [(f.rule, str(f.fault), f.tap) for f in check_exchanges(exs, CheckConfig()).findings]


def test_identical_concurrent_requests_pair_by_completion_id() -> None:
    # eight callers send the same request at once; the gateway drops x-wirecheck-id and answers out
    # of order: only the completion id can tell them apart
    callers, engines = [], []
    for i in range(8):
        body = with_id(completion(message(f"answer {i}")), f"chatcmpl-{i:04d}")
        callers.append(at(exchange(req(model="alias"), body, tap="caller", id=f"c{i}"), i))
        engines.append(at(exchange(req(), body, tap="engine", id=f"e{i}"), 30 - i))
    pairs = pair_taps([build_view(x) for x in callers + engines[::-1]])
    assert sorted((p.caller.id, p.engine.id, p.by) for p in pairs) == [
        (f"c{i}", f"e{i}", "completion-id") for i in range(8)
    ]
    assert findings(callers + engines) == []


def test_the_fingerprint_ignores_what_gateways_legitimately_rewrite() -> None:
    history = wire.tool_turn("weather?", "sunny")
    caller = at(
        exchange(
            tool_req(messages=history, model="my-alias", stream=False, temperature=None, n=1),
            with_id(completion(message("ok")), "chatcmpl-caller"),
            tap="caller",
        ),
        0,
    )
    # LiteLLM: model renamed, "stream": false and null fields dropped, content: null dropped, the
    # tool call's arguments re-serialised, and its own completion id (no id to pair by)
    sent = json.loads(json.dumps(history))
    del sent[1]["content"]
    sent[1]["tool_calls"][0]["function"]["arguments"] = '{"city":"Tokyo"}'
    engine = at(
        exchange(
            tool_req(messages=sent), with_id(completion(message("ok")), "chatcmpl-engine"), tap="engine"
        ),
        20,
    )
    other = at(exchange(req(), with_id(completion(message("ok")), "chatcmpl-x"), tap="engine"), 10)
    pairs = pair_taps([build_view(x) for x in (caller, other, engine)])
    assert [(p.caller.id, p.engine.id, p.by) for p in pairs] == [(caller.id, engine.id, "fingerprint")]
    assert [f for f in findings([caller, engine]) if f[0] == "gateway-request-changed"] == []


def test_an_engine_side_that_started_after_the_caller_ended_is_not_its_pair() -> None:
    caller = at(exchange(req(), with_id(completion(), "chatcmpl-a"), tap="caller", times=[5.0]), 0)
    assert caller.response is not None
    caller.response.chunks = [Chunk(5.0, caller.response.body)]
    late = at(exchange(req(), with_id(completion(), "chatcmpl-b"), tap="engine"), 3000)
    assert pair_taps([build_view(caller), build_view(late)]) == []
    assert ("taps-unpaired", "unknown", "caller") in findings([caller, late])


def test_a_retry_without_correlation_pairs_with_the_attempt_that_answered() -> None:
    err = {"error": {"message": "busy", "type": "ServiceUnavailableError", "param": None, "code": 503}}
    body = with_id(completion(message("done")), "chatcmpl-r")
    caller = at(exchange(req(model="alias"), body, tap="caller"), 0)
    a1 = at(exchange(req(), err, status=503, tap="engine"), 10)
    a2 = at(exchange(req(), err, status=503, tap="engine"), 40)
    a3 = at(exchange(req(), body, tap="engine"), 90)
    res = check_exchanges([caller, a1, a2, a3], CheckConfig())
    assert (res.pairs, res.retries, res.paired_by) == (1, 2, {"completion-id": 1})
    retried = [f for f in res.findings if f.rule == "gateway-retried"]
    assert len(retried) == 1 and a1.id in retried[0].message and a2.id in retried[0].message
    assert {f.rule for f in res.findings if f.tap == "caller"} == {"gateway-retried"}


def test_sides_with_two_correlation_ids_are_two_requests_however_alike() -> None:
    # the caller tap's id travels with the request, a gateway's retry included: an engine side that
    # carries another id is another request's, neither this caller's retry nor its pair by
    # fingerprint, even while that request's own caller side is not recorded yet (the live checker
    # meets that between batches)
    caller = at(exchange(req(), completion(), tap="caller", id="c"), 0)
    answered = at(exchange(req(), completion(), tap="engine", id="e"), 20)
    other = at(exchange(req(), completion(), tap="engine", id="e-other"), 10)
    caller.correlation = answered.correlation = "corr-1"
    other.correlation = "corr-2"
    pairs = pair_taps([build_view(x) for x in (caller, other, answered)])
    assert [(p.caller.id, p.engine.id, p.by, p.retries) for p in pairs] == [("c", "e", "correlation", [])]
    # without its own engine side, the caller is not paired with the other request's, by completion
    # id (the two answers share one here) nor by fingerprint
    assert pair_taps([build_view(x) for x in (caller, other)]) == []
    other.response.body = json.dumps(with_id(completion(), "chatcmpl-other")).encode()
    assert pair_taps([build_view(x) for x in (caller, other)]) == []
    # an engine side without an id (a gateway that drops the header) still pairs
    other.correlation = None
    pairs = pair_taps([build_view(x) for x in (caller, other)])
    assert [(p.caller.id, p.engine.id, p.by) for p in pairs] == [("c", "e-other", "fingerprint")]


def test_a_dropped_default_is_not_a_changed_request() -> None:
    c = exchange(req(stream=False, parallel_tool_calls=True), completion(), tap="caller", correlation="k")
    e = exchange(req(), completion(), tap="engine", correlation="k")
    assert findings([c, e]) == []
    c2 = exchange(req(stream=False), completion(), tap="caller", correlation="k")
    e2 = exchange(req(stream=True), completion(), tap="engine", correlation="k")
    assert ("gateway-request-changed", "gateway", "caller") in findings([c2, e2])


def test_usage_is_compared_only_where_the_caller_asked_for_it() -> None:
    objs = wire.text_stream("hi", usage=True)
    bare = wire.text_stream("hi")
    # LiteLLM asks upstream for usage and strips it again
    c = streamed(req(), bare, tap="caller", correlation="k")
    e = streamed(req(stream_options={"include_usage": True}), objs, correlation="k")
    assert findings([c, e]) == []
    asked = req(stream_options={"include_usage": True})
    c2 = streamed(asked, bare, tap="caller", correlation="k")
    e2 = streamed(asked, objs, correlation="k")
    assert ("gateway-usage-changed", "gateway", "caller") in findings([c2, e2])


def test_a_close_right_after_done_is_a_complete_exchange() -> None:
    # the openai SDK closes after data: [DONE], before the chunked terminator; the exchange still
    # gets judged (here: the gateway dropped the reasoning, a real finding the abort used to hide)
    abort = ExchangeError("client_abort", "the caller disconnected mid-response", 50.0)
    objs = wire.text_stream("Hello", reasoning=("The ", "user"))
    c = streamed(req(), wire.text_stream("Hello"), tap="caller", correlation="k", error=abort)
    e = streamed(req(), objs, correlation="k")
    got = findings([c, e])
    assert ("gateway-reasoning-dropped", "gateway", "caller") in got
    assert not [f for f in got if f[0] == "transport-error"]
    # a close before [DONE] is still an abort
    cut = streamed(req(), wire.text_stream("He"), tap="caller", correlation="k", error=abort, done=False)
    assert ("transport-error", "caller", "caller") in findings([cut, streamed(req(), objs, correlation="k")])


def test_an_engine_error_relayed_by_the_gateway_is_the_engines_only() -> None:
    reset = ExchangeError("upstream_reset", "peer closed connection", 30.0)
    e = streamed(req(), wire.text_stream("He")[:2], correlation="k", error=reset, done=False)
    # LiteLLM: 200, an error frame with code "500" and type null, no [DONE]
    frame = {"error": {"message": "peer closed connection", "type": None, "param": None, "code": "500"}}
    c = streamed(req(), [*wire.text_stream("He")[:2], frame], tap="caller", correlation="k", done=False)
    got = findings([c, e])
    assert got and {fault for _, fault, _ in got} == {"engine"}, got
    assert all(tap == "engine" for _, _, tap in got), got


def test_emptied_chunks_at_the_engines_pace_are_not_buffering() -> None:
    # the gateway dropped the reasoning but passed every chunk on as it came: no buffering
    objs = wire.text_stream("Hi", reasoning=tuple("abcdefgh"))
    emptied = [
        {**o, "choices": [{**o["choices"][0], "delta": {}}]} if "reasoning" in o["choices"][0]["delta"] else o
        for o in objs
    ]
    e = per_frame(req(), objs, gap_ms=30, correlation="k")
    c = per_frame(req(), emptied, gap_ms=30, tap="caller", correlation="k")
    rules = [f[0] for f in findings([c, e])]
    assert "gateway-reasoning-dropped" in rules and "gateway-stream-buffered" not in rules


def _at_s(ex: Exchange, seconds: float) -> Exchange:
    ex.started_at = (datetime(2026, 12, 3, 10, tzinfo=UTC) + timedelta(seconds=seconds)).isoformat()
    return ex


def test_a_correlation_id_seen_again_minutes_later_is_another_request() -> None:
    # the same id on an engine side more than a minute after the caller side started is a reuse
    # (a caller echoing an old id), not the attempt that answered: every pairing is bounded in time,
    # which is what lets a check of any size hold only the recent exchanges
    caller = _at_s(exchange(req(), completion(), tap="caller", id="c"), 0)
    caller.correlation = "corr-1"
    near = _at_s(exchange(req(), completion(), tap="engine", id="e-near"), 0.5)
    far = _at_s(exchange(req(), completion(), tap="engine", id="e-far"), 61 + 60)
    for e in (near, far):
        e.correlation = "corr-1"
    pairs = pair_taps([build_view(x) for x in (caller, near, far)])
    assert [(p.caller.id, p.engine.id, p.by, p.retries) for p in pairs] == [
        ("c", "e-near", "correlation", [])
    ]


def test_twins_pair_only_within_a_minute_of_each_other() -> None:
    plain = completion(message("Hello"))
    objs = [wire.role_chunk(), wire.chunk({"content": "Hello"}), wire.chunk({}, "stop")]
    s1 = _at_s(streamed(req(), objs, tap="caller", id="s1"), 0)
    p1 = _at_s(exchange(req(), plain, tap="caller", id="p1"), 5)
    # the same request asked again an hour later, and streamed another hour after that: neither is
    # the other's twin (a caller asks the twin when the first is answered, scenarios and accept alike)
    p2 = _at_s(exchange(req(), plain, tap="caller", id="p2"), 3600)
    s2 = _at_s(streamed(req(), objs, tap="caller", id="s2"), 7200)
    exs = [s1, p1, p2, s2]
    assert [(t.streamed.id, t.plain.id) for t in pair_twins([build_view(x) for x in exs])] == [("s1", "p1")]
    assert check_exchanges(exs, CheckConfig()).twins == 1


def test_a_hash_is_of_the_value_whichever_writer_writes_it() -> None:
    same = [
        ({"b": 1, "a": [1.5, "é"]}, {"a": [1.5, "é"], "b": 1}),
        ([2**70, {"y": 1, "x": 2}], [2**70, {"x": 2, "y": 1}]),
    ]
    for one, other in same:
        assert _hash(one) == _hash(other)
    # values orjson writes alike (NaN, the infinities and null are all null there), or json alike
    # to another writer's text, stay apart
    apart = [
        [float("nan")],
        [None],
        [float("inf")],
        [float("-inf")],
        [1],
        [1.0],
        [True],
        ["1"],
        [2**70],
        [2**70 + 1],
    ]
    assert len({_hash(v) for v in apart}) == len(apart)


def _message_as_written(m: Any) -> Any:
    """``_pairs._message`` as it was before a message of text only was taken as it is (the
    reference the property below holds it to)."""
    from wirecheck.contracts._json import loads as bounded_loads
    from wirecheck.contracts._pairs import _content, _drop_nulls

    if not isinstance(m, dict):
        return m
    out = {k: v for k, v in m.items() if v is not None and k != "content"}
    content = _content(m.get("content"))
    if content is not None:
        out["content"] = content
    calls = m.get("tool_calls")
    if isinstance(calls, list):
        norm = []
        for raw in calls:
            tc = raw
            if isinstance(raw, dict):
                tc = {k: v for k, v in raw.items() if k not in ("type", "index") and v is not None}
                fn = tc.get("function")
                if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                    with contextlib.suppress(ValueError):
                        tc["function"] = {**fn, "arguments": bounded_loads(fn["arguments"])}
            norm.append(tc)
        out["tool_calls"] = norm
    return _drop_nulls(out)


_field = st.sampled_from(["role", "content", "name", "tool_calls", "tool_call_id", "reasoning"])
_value = st.one_of(
    st.none(),
    st.sampled_from(["", "user", "hi", '{"a": 1}']),
    st.integers(0, 2),
    st.lists(
        st.fixed_dictionaries(
            {
                "type": st.just("function"),
                "function": st.fixed_dictionaries(
                    {"name": st.just("f"), "arguments": st.sampled_from(['{"a": 1}', "{", ""])}
                ),
            }
        ),
        max_size=2,
    ),
    st.lists(
        st.fixed_dictionaries({"type": st.just("text"), "text": st.sampled_from(["", "hi"])}), max_size=2
    ),
)


@given(st.dictionaries(_field, _value, max_size=5) | _value)
def test_a_message_hashes_as_it_did_before_text_only_messages_were_taken_as_they_are(m: Any) -> None:
    """A message whose values are all text is its own normal form (but for an empty content);
    every message hashes as the general normalising made it hash."""
    assert _hash(_message(m)) == _hash(_message_as_written(m))
