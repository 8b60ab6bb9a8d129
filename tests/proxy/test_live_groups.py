"""The live checker with several taps that do not pair by correlation id (a gateway that drops
``x-wirecheck-id``): each batch is judged with its group (the exchanges around it reached by shared
kin keys, ``proxy/_kin.py``), read a page at a time, never the whole window at once. Within the
group's byte budget the findings are those of one check of the whole capture; past it, the
exchanges nearest the batch in time are loaded, the rest counted, and every exchange still checked."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

import wirecheck.proxy._live as live
from tests.support import wire
from tests.support.orders import written_in_batches
from tests.support.wire import call, completion, message, req, tool_req
from wirecheck.contracts import CheckConfig, Exchange, check_exchanges
from wirecheck.proxy import check_pending
from wirecheck.proxy._kin import Kin, KinIndex, nearest
from wirecheck.proxy._live import CheckerSupervisor, Recent
from wirecheck.record import Store


@pytest.fixture(autouse=True, params=["native", "python"])
def kin_index(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs with the window's kin indexed by the compiled twin (proxy/_kin_c.c)
    and by its Python reference."""
    import wirecheck.proxy._kin as kin_module

    if request.param == "python":
        monkeypatch.setattr(kin_module, "_owners", kin_module._owners_py)
    elif kin_module._native is None:
        pytest.skip("the compiled twin is not built here (or WIRECHECK_PURE_PYTHON is set)")
    return str(request.param)


T0 = 1_796_199_000.0
BAD_ARGS = completion(message(None, tool_calls=[call(args='{"city": Tokyo}')]), "tool_calls")
GOOD_CALL = completion(message(None, tool_calls=[call()]), "tool_calls")
UNDECLARED = completion(message(None, tool_calls=[call(name="get_weather_v2")]), "tool_calls")


def ask(text: str, **kw: Any) -> dict[str, Any]:
    """A request of its own: its own user message (``user=`` would only name the end user)."""
    return req(messages=[{"role": "user", "content": text}], **kw)


def _at(ex: Exchange, t: float) -> Exchange:
    ex.started_at = datetime.fromtimestamp(T0 + t, UTC).isoformat()
    return ex


def _answer(body: dict[str, Any], cid: str) -> dict[str, Any]:
    out = copy.deepcopy(body)
    out["id"] = cid
    return out


def distinct_requests() -> list[Exchange]:
    """Requests each of their own, both sides recorded: the gateway broke one, the model another,
    one caller side has no engine side and one engine side no caller side."""
    exs = []
    for i in range(8):
        rq = ask(f"question {i}", tools=tool_req()["tools"])
        at_caller = BAD_ARGS if i in (2, 5) else GOOD_CALL
        at_engine = BAD_ARGS if i == 5 else GOOD_CALL
        exs.append(
            _at(wire.exchange(rq, _answer(at_caller, f"chatcmpl-d{i}"), tap="caller", id=f"c{i}"), i * 0.3)
        )
        if i != 6:
            exs.append(
                _at(
                    wire.exchange(rq, _answer(at_engine, f"chatcmpl-d{i}"), tap="engine", id=f"e{i}"),
                    i * 0.3 + 0.01,
                )
            )
    exs.append(_at(wire.exchange(ask("engine only"), completion(), tap="engine", id="e-alone"), 1.0))
    return exs


def identical_requests() -> list[Exchange]:
    """One prompt sent again and again (a load test): every exchange is kin of every other; the
    answers differ, and some completion ids are shared (fingerprint and time decide then)."""
    exs = []
    answers = [GOOD_CALL, BAD_ARGS, UNDECLARED, GOOD_CALL, GOOD_CALL, BAD_ARGS]
    for i, body in enumerate(answers):
        cid = f"chatcmpl-s{i}" if i % 2 else "chatcmpl-same"
        gateway = UNDECLARED if i == 3 else body  # the gateway changed one answer
        exs.append(_at(wire.exchange(tool_req(), _answer(gateway, cid), tap="caller", id=f"c{i}"), i * 0.25))
        exs.append(
            _at(wire.exchange(tool_req(), _answer(body, cid), tap="engine", id=f"e{i}"), i * 0.25 + 0.02)
        )
    return exs


def retries() -> list[Exchange]:
    """A gateway that retried: two engine attempts (a 500, then an answer) for one caller request,
    beside an unrelated request."""
    rq = ask("retried")
    err = {"error": {"message": "boom", "type": "server_error", "code": 500}}
    return [
        _at(wire.exchange(rq, completion(), tap="caller", id="c-r"), 0.0),
        _at(wire.exchange(rq, err, status=500, tap="engine", id="e-r1"), 0.01),
        _at(wire.exchange(rq, completion(), tap="engine", id="e-r2"), 0.02),
        _at(wire.exchange(ask("other"), completion(), tap="caller", id="c-o"), 0.5),
        _at(wire.exchange(ask("other"), completion(), tap="engine", id="e-o"), 0.51),
    ]


def twins_across_taps() -> list[Exchange]:
    """The same request streamed and plain, at both taps; the plain answer names an undeclared tool."""
    rq = tool_req(temperature=0)
    exs = []
    for tap, t in (("caller", 0.0), ("engine", 0.01)):
        exs.append(_at(wire.streamed(rq, wire.k2_tool_stream(), tap=tap, id=f"{tap}-stream"), t))
        exs.append(_at(wire.exchange(rq, UNDECLARED, tap=tap, id=f"{tap}-plain"), t + 1.0))
    exs.append(_at(wire.exchange(ask("else"), completion(), tap="caller", id="c-else"), 0.5))
    return exs


CAPTURES: dict[str, Callable[[], list[Exchange]]] = {
    "distinct": distinct_requests,
    "identical": identical_requests,
    "retries": retries,
    "twins": twins_across_taps,
}


def _rows(found: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((f["exchange_id"], f["rule"], f["fault"], f["severity"], f["message"]) for f in found)


def _whole(capture: list[Exchange]) -> list[tuple[Any, ...]]:
    result = check_exchanges(capture, CheckConfig())
    return _rows(
        [{**f.to_dict(), "fault": str(f.fault), "severity": str(f.severity)} for f in result.findings]
    )


def _live_check(path: Path, capture: list[Exchange], batch: int, recent: Recent) -> list[tuple[Any, ...]]:
    """Write the whole capture, then check it in batches of ``batch`` as a lagging checker claims them."""
    store = Store(path)
    try:
        store.write_now(capture)
        while check_pending(store, settle_s=0, recent=recent, limit=batch):
            pass
        assert not store.unchecked(0.0, limit=1)
        return _rows(store.findings())
    finally:
        store.close()


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pieces of one exchange, pages of one or two, no views kept: the least held at once."""
    monkeypatch.setattr(live, "PIECE_BYTES", 1)
    monkeypatch.setattr(live, "NEIGHBOUR_FIRST_PAGE", 1)
    monkeypatch.setattr(live, "NEIGHBOUR_PAGE", 2)


@pytest.mark.parametrize("name", sorted(CAPTURES))
@pytest.mark.usefixtures("small")
def test_groups_give_the_findings_of_the_whole_check(tmp_path: Path, name: str) -> None:
    capture = CAPTURES[name]()
    whole = _whole(capture)
    assert whole, "a capture with findings"
    for batch in (1, 3, len(capture)):
        recent = Recent(limit_bytes=1)
        assert _live_check(tmp_path / f"{name}-{batch}.db", capture, batch, recent) == whole, batch
        assert (recent.cut_checked, recent.cut_left_out) == (0, 0)
    # the capture's faults are among them: not a vacuous agreement
    expected = {
        "distinct": {("c2", "gateway"), ("e5", "model")},
        "identical": {("c3", "gateway")},
        "retries": set(),
        "twins": {("engine-plain", "model")},
    }[name]
    assert expected <= {(f[0], f[2]) for f in whole}, whole


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=written_in_batches(CAPTURES))
def test_the_findings_do_not_depend_on_the_write_order_nor_the_batches(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[str, list[list[str]]]
) -> None:
    # each batch checked as soon as it is written: an exchange that arrives later may take another's
    # partner (the fingerprint pairs first with first) or end a "none paired"; what was judged before
    # it is judged again with it, so the store ends with the whole check's findings
    name, batches = case
    by_id = {ex.id: ex for ex in CAPTURES[name]()}
    store = Store(tmp_path_factory.mktemp(name) / "live.db")
    try:
        recent = Recent()
        for ids in batches:
            store.write_now([by_id[i] for i in ids])
            while check_pending(store, settle_s=0, recent=recent):
                pass
        assert _rows(store.findings()) == _whole(CAPTURES[name]()), batches
    finally:
        store.close()


def test_all_captures_in_one_window(tmp_path: Path, small: None) -> None:
    # every kind of group side by side in one window, each capture's exchanges at their own times
    capture = []
    for n, make in enumerate(CAPTURES.values()):
        for ex in make():
            ex.id = f"{n}-{ex.id}"
            _at(ex, (ex.started_epoch or T0) - T0 + n * 0.05)
            capture.append(ex)
    capture.sort(key=lambda ex: ex.started_epoch or 0.0)
    assert _live_check(tmp_path / "all.db", capture, 4, Recent(limit_bytes=1)) == _whole(capture)


def test_a_batch_loads_its_group_not_the_window(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    capture = distinct_requests()
    checked: list[list[str]] = []
    real = live.check_exchanges

    def spy(exchanges: list[Exchange], *args: Any, **kw: Any) -> Any:
        checked.append([ex.id for ex in exchanges])
        return real(exchanges, *args, **kw)

    monkeypatch.setattr(live, "check_exchanges", spy)
    assert _live_check(tmp_path / "g.db", capture, 2, Recent()) == _whole(capture)
    # the first batch (c0 and e0) is judged with nothing else: no other exchange shares its keys
    assert sorted(checked[0]) == ["c0", "e0"]
    assert max(len(ids) for ids in checked) < len(capture)


def test_the_set_rules_count_the_whole_window(tmp_path: Path) -> None:
    # a gateway that rewrote every request: nothing pairs, and each batch's first caller exchange is
    # told so with the window's counts, as when the whole window was judged with it
    capture = []
    for i in range(4):
        capture.append(
            _at(
                wire.exchange(
                    ask(f"asked {i}"), _answer(completion(), f"chatcmpl-a{i}"), tap="caller", id=f"c{i}"
                ),
                i * 0.2,
            )
        )
        capture.append(
            _at(
                wire.exchange(
                    ask(f"sent {i}"), _answer(completion(), f"chatcmpl-s{i}"), tap="engine", id=f"e{i}"
                ),
                i * 0.2 + 0.01,
            )
        )
    store = Store(tmp_path / "u.db")
    got: list[tuple[Any, ...]] = []
    expected: list[tuple[Any, ...]] = []
    try:
        store.write_now(capture)
        recent = Recent()
        for batch in (["c0", "e0", "c1"], ["e1", "c2", "e2"], ["c3", "e3"]):
            # the old way: the batch with every other exchange of the window
            first = [ex for ex in capture if ex.id in batch]
            result = check_exchanges(first + [ex for ex in capture if ex.id not in batch], focus=set(batch))
            expected += [
                (f.exchange_id, f.rule, str(f.fault), str(f.severity), f.message)
                for f in result.findings
                if f.exchange_id in batch
            ]
            assert check_pending(store, settle_s=0, recent=recent, limit=len(batch)) == len(batch)
        got = _rows(store.findings())
    finally:
        store.close()
    assert got == sorted(expected)
    unpaired = [f for f in got if f[1] == "taps-unpaired"]
    assert [f[0] for f in unpaired] == ["c0", "c2", "c3"]
    assert all("4 caller and 4 engine exchanges" in f[4] for f in unpaired), unpaired


def test_a_group_past_its_bytes_is_cut_and_every_exchange_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    capture = identical_requests()
    monkeypatch.setattr(live, "GROUP_BYTES", 1)  # the batch's own bytes: as many neighbours
    loaded: list[int] = []
    real = live.check_exchanges

    def spy(exchanges: list[Exchange], *args: Any, **kw: Any) -> Any:
        loaded.append(len(exchanges))
        return real(exchanges, *args, **kw)

    monkeypatch.setattr(live, "check_exchanges", spy)
    recent = Recent()
    store = Store(tmp_path / "cut.db")
    try:
        store.write_now(capture)
        while check_pending(store, settle_s=0, recent=recent, limit=2):
            pass
        assert not store.unchecked(0.0, limit=1)  # every exchange has its check row
        found = {f["exchange_id"] for f in store.findings()}
    finally:
        store.close()
    sizes = sorted(live.recorded_bytes(ex) for ex in capture)
    assert sizes[-1] + sizes[-2] < sizes[0] * 3  # a batch's two hold fewer than three neighbours' bytes
    assert max(loaded) <= 2 + 2  # a batch of two and two neighbours at the most
    assert recent.cut_checked == len(capture)  # every batch had part of its group left out
    assert recent.cut_left_out > 0
    # each exchange's own faults are still found (where a partner was left out, an exchange may be
    # judged as one tap's alone: that is what the cut counts say)
    assert found >= {f[0] for f in _whole(capture)} >= {"c3", "e1", "e2"}


def test_nearest_keeps_what_is_closest_to_the_batch_within_its_bytes() -> None:
    kin = [
        Kin((f"x{n}", 1), "caller", start, 10, True, (), ())
        for n, start in enumerate([0.0, 4.0, 5.5, 9.0, None])
    ]
    kept, left = nearest(kin, [0, 1, 2, 3, 4], 5.0, 6.0, 30)
    # x2 is inside the batch's span, x4 has no time (it may pair with any), x1 is 1 s away
    assert (kept, left) == ([1, 2, 4], 2)
    assert nearest(kin, [0, 1], 5.0, 6.0, 5) == ([], 2)
    # one that does not fit is left out, and those after it that fit are kept
    big = [Kin(k.row, k.tap, k.start, 25 if n == 2 else k.size, True, (), ()) for n, k in enumerate(kin)]
    assert nearest(big, [0, 1, 2, 3, 4], 5.0, 6.0, 20) == ([1, 4], 3)
    assert nearest(big, [0, 1, 2, 3, 4], 5.0, 6.0, 35) == ([2, 4], 3)


def test_a_group_is_found_whole_from_any_member() -> None:
    # a wants what b owns, b what c owns (through b's other key): a reaches c; d stands apart
    kin = [
        Kin(("a", 1), "caller", 0.0, 1, True, (1,), (2,)),
        Kin(("b", 1), "engine", 0.0, 1, True, (2, 3), (1, 4)),
        Kin(("c", 1), "caller", 0.0, 1, True, (4,), (3,)),
        Kin(("d", 1), "engine", 0.0, 1, True, (5,), (6,)),
    ]
    for start in range(3):
        index = KinIndex(kin)
        assert sorted(index.reach(kin[start].wanted)) == [0, 1, 2]
        assert list(index.others()) == []  # d alone holds one tap: it may pair with nothing


@pytest.mark.usefixtures("small")
def test_a_request_split_between_batches_is_paired_whatever_its_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # batches of one: each caller side is checked before its engine side is claimed, and its engine
    # side (a few bytes larger than some caller sides) is loaded beyond the group's own bytes
    monkeypatch.setattr(live, "GROUP_BYTES", 64)
    capture = distinct_requests()
    assert all(live.recorded_bytes(ex) > 64 for ex in capture)
    recent = Recent(limit_bytes=1)
    assert _live_check(tmp_path / "split.db", capture, 1, recent) == _whole(capture)
    assert (recent.cut_checked, recent.cut_left_out) == (0, 0)


def test_the_supervisor_reports_cut_groups(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db", writer=True)
    try:
        sup = CheckerSupervisor(store)
        assert sup.state()["cut"] == {"checked": 0, "left_out": 0}
        import multiprocessing

        r, w = multiprocessing.Pipe(duplex=False)
        w.send(("cut", (2, 7)))
        w.send(("cut", (1, 1)))
        sup._drain(r)
        assert sup.state()["cut"] == {"checked": 3, "left_out": 8}
    finally:
        store.close()
