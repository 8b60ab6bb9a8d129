"""``check_exchanges(focus=...)``: what the live checker asks for each batch. The batch's
neighbours are there only as partners; each focused exchange must get exactly the findings it gets
when the whole capture is checked at once (pairing, retries, twins and attribution included)."""

from __future__ import annotations

from tests.support import wire
from tests.support.wire import call, completion, exchange, message, req, tool_req
from wirecheck.contracts import CheckConfig, Exchange, Finding, TapSet, build_view, check_exchanges

BAD_ARGS = completion(message(None, tool_calls=[call(args='{"city": Tokyo}')]), "tool_calls")
GOOD = completion(message(None, tool_calls=[call()]), "tool_calls")
ERR = {"error": {"message": "boom", "type": "InternalServerError", "param": None, "code": 500}}


def dual_tap_capture() -> list[Exchange]:
    """Dual-tap pairs (by correlation and by fingerprint), a gateway retry, twins, a gateway fault, a
    model fault at both taps and an unpaired caller-side exchange, with distinct ids."""
    exs = [
        exchange(tool_req(), BAD_ARGS, tap="caller", correlation="k1", id="c1"),
        exchange(tool_req(), GOOD, tap="engine", correlation="k1", id="e1"),  # the gateway broke it
        exchange(tool_req(), BAD_ARGS, tap="caller", correlation="k2", id="c2"),
        exchange(tool_req(), BAD_ARGS, tap="engine", correlation="k2", id="e2"),  # the model's
        exchange(req(), completion(), tap="caller", correlation="k3", id="c3"),
        exchange(req(), ERR, status=500, tap="engine", correlation="k3", id="e3a"),  # retried
        exchange(req(), completion(), tap="engine", correlation="k3", id="e3b"),
        exchange(
            tool_req(response_format={"type": "json_object"}),
            completion(message("{}")),
            tap="caller",
            id="c4",
        ),
        exchange(tool_req(), completion(message("{}")), tap="engine", id="e4"),  # fingerprint pair
    ]
    rq = tool_req(temperature=0)
    bad = completion(message(None, tool_calls=[call(name="get_weather_v2")]), "tool_calls")
    exs.append(exchange(rq, bad, tap="engine", id="t-plain"))
    exs.append(wire.streamed(rq, wire.k2_tool_stream(), tap="engine", id="t-stream"))
    # each group in its own seconds, as in a real capture (a group's engine side starts in its caller's
    # time; with one shared time every engine exchange of the same request would look like a retry)
    group = {"c1": 0, "e1": 0, "c2": 1, "e2": 1, "c3": 2, "e3a": 2, "e3b": 2, "c4": 3, "e4": 3}
    for ex in exs:
        ex.started_at = f"2026-12-03T10:00:{10 * group.get(ex.id, 4):02d}.000+00:00"
    return exs


def _key(f: Finding) -> tuple[str, str, str, str, str]:
    return (f.exchange_id, f.rule, str(f.fault), str(f.severity), f.message)


def test_each_focused_exchange_gets_the_findings_of_the_whole_check() -> None:
    whole = check_exchanges(dual_tap_capture(), CheckConfig())
    assert {f.exchange_id for f in whole.findings} >= {"c1", "e2", "c3", "c4", "t-plain"}  # a rich capture
    assert whole.pairs == 4 and whole.retries == 1 and whole.twins == 1
    for ex in dual_tap_capture():
        focused = check_exchanges(dual_tap_capture(), CheckConfig(), focus={ex.id})
        mine = sorted(_key(f) for f in focused.findings if f.exchange_id == ex.id)
        assert mine == sorted(_key(f) for f in whole.findings if f.exchange_id == ex.id), ex.id
    # a batch of several, as the live checker claims them
    batch = {"c1", "e3a", "t-stream"}
    focused = check_exchanges(dual_tap_capture(), CheckConfig(), focus=batch)
    assert sorted(_key(f) for f in focused.findings if f.exchange_id in batch) == sorted(
        _key(f) for f in whole.findings if f.exchange_id in batch
    )


def test_the_rest_of_a_capture_counts_for_the_set_rules() -> None:
    # a part closed under pairing, judged with the rest in summary (``around``), finds what the whole
    # capture finds, the set rules included: nothing pairs in the part nor in the rest
    def side(tap: str, n: int) -> Exchange:
        ex = exchange(
            req(messages=[{"role": "user", "content": f"{tap} {n}"}]), None, tap=tap, id=f"{tap}{n}"
        )
        ex.started_at = f"2026-12-03T10:00:0{n}.000+00:00"
        return ex

    capture = [side("caller", 0), side("engine", 0), side("caller", 1), side("engine", 1), side("engine", 2)]
    whole = check_exchanges(capture, CheckConfig())
    unpaired = [f for f in whole.findings if f.rule == "taps-unpaired"]
    assert [(f.exchange_id, "2 caller and 3 engine" in f.message) for f in unpaired] == [("caller0", True)]
    part, rest = capture[:1], capture[1:]
    around = TapSet()
    for n, ex in enumerate(rest):
        around.add(build_view(ex), n)
    assert sorted(map(_key, check_exchanges(part, CheckConfig(), around=around).findings)) == sorted(
        _key(f) for f in whole.findings if f.exchange_id == "caller0"
    )
    # where the rest paired, the part is not told that nothing did
    around.pairs = 1
    assert not [
        f for f in check_exchanges(part, CheckConfig(), around=around).findings if f.rule == "taps-unpaired"
    ]
