"""Attribution (DESIGN.md): who is blamed, with one tap and with two."""

from __future__ import annotations

from tests.support import wire
from tests.support.wire import call, completion, exchange, message, req, tool_req, tool_turn
from wirecheck.contracts import CheckConfig, Exchange, check_exchanges

BAD_ARGS = completion(message(None, tool_calls=[call(args='{"city": Tokyo}')]), "tool_calls")
GOOD = completion(message(None, tool_calls=[call()]), "tool_calls")


def by_rule(exs: list[Exchange], **cfg: object) -> dict[str, tuple[str, str, str]]:
    res = check_exchanges(exs, CheckConfig(**cfg))  # type: ignore[arg-type]
    return {f.rule: (str(f.fault), f.tap, f.message) for f in res.findings}


def correlated(caller: Exchange, engine: Exchange, key: str = "k1") -> list[Exchange]:
    caller.tap, engine.tap = "caller", "engine"
    caller.correlation = engine.correlation = key
    return [caller, engine]


def test_caller_tap_alone_cannot_blame_the_model() -> None:
    found = by_rule([exchange(tool_req(), BAD_ARGS, tap="caller")])
    fault, tap, msg = found["tool-call-args-invalid-json"]
    assert (fault, tap) == ("unknown", "caller")
    assert "engine tap missing" in msg


def test_direct_tap_keeps_the_rules_fault() -> None:
    found = by_rule([exchange(tool_req(), BAD_ARGS, tap="caller")], direct=True)
    assert found["tool-call-args-invalid-json"][0] == "model"


def test_engine_tap_alone_blames_the_model_but_not_the_caller() -> None:
    ex = exchange(tool_req(guided_json={"type": "object"}), BAD_ARGS, tap="engine")
    found = by_rule([ex])
    assert found["tool-call-args-invalid-json"][0] == "model"
    fault, _, msg = found["request-guided-fields"]
    assert fault == "unknown" and "caller tap missing" in msg


def test_fault_present_at_both_taps_is_the_engine_sides_and_reported_once() -> None:
    res = check_exchanges(correlated(exchange(tool_req(), BAD_ARGS), exchange(tool_req(), BAD_ARGS)))
    hits = [f for f in res.findings if f.rule == "tool-call-args-invalid-json"]
    assert [(str(f.fault), f.tap) for f in hits] == [("model", "engine")]
    assert "reached the caller too" in hits[0].message


def test_fault_only_at_the_caller_tap_is_the_gateways() -> None:
    found = by_rule(correlated(exchange(tool_req(), BAD_ARGS), exchange(tool_req(), GOOD)))
    assert found["tool-call-args-invalid-json"][:2] == ("gateway", "caller")
    assert found["gateway-tool-calls-changed"][:2] == ("gateway", "caller")


def test_parser_leak_at_both_taps_is_the_parser() -> None:
    leak = completion(message('<tool_call>{"name": "get_weather"}</tool_call>'))
    found = by_rule(correlated(exchange(tool_req(), leak), exchange(tool_req(), leak)))
    assert found["tool-markup-in-content"][:2] == ("parser", "engine")


def test_request_broken_on_the_way_in_is_the_gateways() -> None:
    history = tool_turn("weather?", "sunny")
    dropped = [history[0], history[2]]  # the gateway dropped the assistant turn
    found = by_rule(
        correlated(
            exchange(tool_req(messages=history), completion()),
            exchange(tool_req(messages=dropped), completion()),
        )
    )
    assert found["request-orphan-tool-call-id"][:2] == ("gateway", "engine")
    assert found["gateway-request-changed"][:2] == ("gateway", "caller")


def test_caller_fault_at_both_taps_is_the_callers_and_reported_once() -> None:
    r = tool_req(guided_json={"type": "object"})
    res = check_exchanges(correlated(exchange(r, completion()), exchange(r, completion())))
    hits = [f for f in res.findings if f.rule == "request-guided-fields"]
    assert [(str(f.fault), f.tap) for f in hits] == [("caller", "caller")]


def test_engine_error_passed_through_is_the_engines() -> None:
    err = {"error": {"message": "queue full", "type": "Service Unavailable", "param": None, "code": 503}}
    found = by_rule(correlated(exchange(req(), err, status=503), exchange(req(), err, status=503)))
    assert found["http-server-error"][:2] == ("engine", "engine")
    assert "gateway-status-changed" not in found


def test_pairing_without_a_correlation_id_needs_no_flag() -> None:
    c = exchange(tool_req(), BAD_ARGS, tap="caller")
    e = exchange(tool_req(), GOOD, tap="engine")
    c.started_at = "2026-12-02T10:00:00.000+00:00"
    e.started_at = "2026-12-02T10:00:00.040+00:00"
    # the offline check pairs as the live one does, with or without the old flag
    assert by_rule([c, e])["tool-call-args-invalid-json"][0] == "gateway"
    assert by_rule([c, e], pair_by_fingerprint=True)["tool-call-args-invalid-json"][0] == "gateway"


def test_fingerprint_pairing_survives_a_changed_request() -> None:
    c = exchange(tool_req(response_format={"type": "json_object"}), completion(message("{}")), tap="caller")
    e = exchange(tool_req(), completion(message("{}")), tap="engine")
    assert "gateway-request-changed" in by_rule([c, e])


def test_a_gateway_retry_pairs_the_caller_with_the_last_engine_attempt() -> None:
    err = {"error": {"message": "boom", "type": "InternalServerError", "param": None, "code": 500}}
    c = exchange(req(), completion(), tap="caller", correlation="k")
    e1 = exchange(req(), err, status=500, tap="engine", correlation="k")
    e2 = exchange(req(), completion(), tap="engine", correlation="k")
    res = check_exchanges([c, e1, e2])
    assert res.pairs == 1 and res.retries == 1
    # the retry is shown (info), and nothing else is blamed on the caller side
    assert [(f.rule, f.severity) for f in res.findings if f.tap == "caller"] == [("gateway-retried", "info")]
    assert e1.id in next(f.message for f in res.findings if f.rule == "gateway-retried")


def test_buffering_is_measured_from_chunk_times() -> None:
    objs = wire.text_stream("a", "b", "c", "d")
    engine = wire.per_frame(req(), objs, gap_ms=30)
    caller = wire.per_frame(req(), objs, gap_ms=0.2)
    found = by_rule(correlated(caller, engine))
    assert found["gateway-stream-buffered"][0] == "gateway"
    assert "over 150 ms" in found["gateway-stream-buffered"][2]


ERROR_FRAME = {
    "error": {"message": "EngineCore encountered an issue", "type": "InternalServerError", "code": 500}
}


def test_reasoning_dropped_before_a_relayed_engine_error_is_the_gateways() -> None:
    """Found by the demo's ground truth: a gateway that drops reasoning went unreported
    whenever the engine later failed mid-stream, since a failed stream was never compared."""
    rq = req(stream=True)
    head = [wire.role_chunk(), wire.chunk({"reasoning": "I should look it up."})]
    emptied = [wire.role_chunk(), wire.chunk({})]  # the same events, the reasoning taken out
    engine = wire.streamed(rq, [*head, ERROR_FRAME])
    caller = wire.streamed(rq, [*emptied, ERROR_FRAME])
    found = by_rule(correlated(caller, engine))
    assert found["gateway-reasoning-dropped"][:2] == ("gateway", "caller")
    assert found["stream-error-frame"][:2] == ("engine", "engine")  # the failure stays the engine's
    # the same cut stream, reasoning kept: nothing is the gateway's
    same = by_rule(
        correlated(wire.streamed(rq, [*head, ERROR_FRAME]), wire.streamed(rq, [*head, ERROR_FRAME]))
    )
    assert not [r for r, (fault, _, _) in same.items() if fault == "gateway"]
    # a gateway that passed fewer events on is not compared event for event
    short = by_rule(correlated(wire.streamed(rq, [wire.role_chunk(), ERROR_FRAME]), engine))
    assert "gateway-reasoning-dropped" not in short


def test_twins_that_differ_by_a_model_error_are_not_the_parsers() -> None:
    """Found by the demo's ground truth: the model called an undeclared tool in one twin
    only, and the twin comparison put that on the parser as well."""
    rq = tool_req(temperature=0)
    bad = completion(message(None, tool_calls=[call(name="get_weather_v2")]), "tool_calls")
    plain = exchange(rq, bad, tap="engine")
    streamed_good = wire.streamed(rq, wire.k2_tool_stream(), tap="engine")
    res = check_exchanges([streamed_good, plain])
    assert {(f.rule, str(f.fault)) for f in res.findings} == {("tool-call-undeclared", "model")}


def test_a_squeeze_the_caller_taps_own_hold_up_explains_is_not_the_gateways() -> None:
    # a tap whose loop was held up reads what arrived meanwhile in one go (proxy/_stalls.py): the
    # engine's 150 ms of pacing squeezed into 1 ms at the caller is the gateway's only when the
    # caller tap's loop was not held up for about that long itself
    objs = wire.text_stream("a", "b", "c", "d")
    for stall_ms, blamed in ((None, True), (25.0, True), (130.0, False), (400.0, False)):
        engine = wire.per_frame(req(), objs, gap_ms=30)
        caller = wire.per_frame(req(), objs, gap_ms=0.2)
        if stall_ms is not None:
            caller.extra["stall_ms"] = stall_ms
        assert ("gateway-stream-buffered" in by_rule(correlated(caller, engine))) is blamed, stall_ms
