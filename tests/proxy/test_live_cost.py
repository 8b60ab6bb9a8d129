"""What the live checker costs the request path: it keeps the views of recent exchanges
between batches (checked in batches with them, a store gets exactly the findings it gets when every
batch reads its neighbours from the store again, and the neighbours are not read again), and it runs
at a lower CPU priority than the forwarding."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

import wirecheck.proxy._live as live
from tests.contracts.test_build_views import unreadable_exchange
from tests.contracts.test_focus import dual_tap_capture
from tests.support import wire
from tests.support.orders import written_in_batches
from tests.support.wire import call, completion, message, tool_req
from wirecheck.contracts import CheckConfig, CheckResult, Exchange, build_view, build_views, check_exchanges
from wirecheck.proxy import check_pending
from wirecheck.proxy._live import CHECKER_NICE, CHECKER_NICE_ENV, Recent, start_checker
from wirecheck.record import Store

ROUNDS = [["c1", "e1", "c2"], ["e2", "c3", "e3a"], ["e3b", "c4", "e4", "t-plain", "t-stream"]]


def _checked(path: Path, recent: Recent | None, reads: list[int]) -> list[tuple[Any, ...]]:
    capture = dual_tap_capture()
    for n, ex in enumerate(capture):
        # all within one neighbour window (NEIGHBOUR_S): every batch loads the earlier ones around it
        ex.started_at = f"2026-12-03T10:00:0{n // 4}.{(n % 4) * 2}00+00:00"
    by_id = {ex.id: ex for ex in capture}
    store = Store(path)
    loads = store.exchanges_for

    def counted(ids: list[str], correlations: list[str]) -> list[Exchange]:
        got = loads(ids, correlations)  # the live checker reads every exchange through here
        reads.extend([1] * len(got))
        return got

    store.exchanges_for = counted  # type: ignore[method-assign]
    try:
        for ids in ROUNDS:
            store.write_now([by_id[i] for i in ids])
            assert check_pending(store, settle_s=0, recent=recent) == len(ids)
        rows = store.findings()
    finally:
        store.close()
    return sorted((f["exchange_id"], f["rule"], f["fault"], f["severity"], f["message"]) for f in rows)


def test_batches_with_kept_views_give_the_findings_of_batches_without(tmp_path: Path) -> None:
    recent = Recent()
    kept_reads: list[int] = []
    plain_reads: list[int] = []
    kept = _checked(tmp_path / "kept.db", recent, kept_reads)
    plain = _checked(tmp_path / "plain.db", None, plain_reads)
    assert kept == plain
    assert {r[1] for r in kept} >= {
        "tool-call-args-invalid-json",
        "gateway-tool-calls-changed",
        "tool-call-undeclared",
    }
    assert len(recent) > 0
    # kept, a neighbour checked in an earlier batch is not read again (only a partner by correlation
    # is, with its batch); not kept, every batch reads its neighbours from the store again
    assert sum(kept_reads) < sum(plain_reads)


def _single_tap_capture() -> list[Exchange]:
    """One tap: twins (the same deterministic request streamed and not, with other arguments), exchanges
    of one request streamed only, and others, all within one neighbour window."""
    rq = tool_req(temperature=0)
    other = completion(message(None, tool_calls=[call(args='{"city": "Paris"}')]), "tool_calls")
    exs = [wire.streamed(tool_req(), wire.k2_tool_stream(), tap="caller", id=f"s{i}") for i in range(4)]
    exs.append(wire.exchange(rq, other, tap="caller", id="t-plain"))
    exs += [
        wire.streamed(tool_req(user=f"u{i}"), wire.k2_tool_stream(), tap="caller", id=f"o{i}")
        for i in range(3)
    ]
    exs.append(wire.streamed(rq, wire.k2_tool_stream(), tap="caller", id="t-stream"))
    return _spread(exs)


def _spread(exs: list[Exchange]) -> list[Exchange]:
    """``exs`` started three a second, in their order, all within one neighbour window."""
    for n, ex in enumerate(exs):
        ex.started_at = f"2026-12-03T10:00:0{n // 3}.{(n % 3) * 3}00+00:00"
    return exs


def _live(
    path: Path, batches: list[list[Exchange]], recent: Recent, each: Callable[[list[Exchange]], None]
) -> list[Any]:
    """Each batch written, then checked by the live checker keeping ``recent`` (``each`` asked of it
    after): the store's findings, sorted as :func:`_whole` sorts a whole check's."""
    store = Store(path)
    try:
        for part in batches:
            store.write_now(part)
            assert check_pending(store, settle_s=0, recent=recent) == len(part)
            each(part)
        return sorted((f["exchange_id"], f["rule"], f["fault"], f["message"]) for f in store.findings())
    finally:
        store.close()


def _whole(result: CheckResult) -> list[Any]:
    return sorted((f.exchange_id, f.rule, str(f.fault), f.message) for f in result.findings)


def test_one_tap_batches_get_the_findings_of_the_whole_check(tmp_path: Path) -> None:
    # with one tap nothing pairs across taps, so the exchanges around a batch are narrowed to its
    # twins' kin; the findings are those of one check of the whole capture, batch by batch
    whole = check_exchanges(_single_tap_capture(), CheckConfig())
    assert whole.twins == 1 and {f.rule for f in whole.findings if f.exchange_id == "t-stream"}
    by_id = {ex.id: ex for ex in _single_tap_capture()}
    recent = Recent()

    def let_go(part: list[Exchange]) -> None:
        # a checked exchange's view is let go: of it, later batches of one tap ask only whether
        # it is a twin (t-plain, checked first, is read again for t-stream, its twin)
        assert all(recent.exchange(ex.id) is None for ex in part)
        _kinds_agree(recent)

    batches = [["s0", "t-plain", "s1"], ["o0", "s2"], ["t-stream", "o1", "s3", "o2"]]
    got = _live(tmp_path / "one.db", [[by_id[i] for i in ids] for ids in batches], recent, let_go)
    assert got == _whole(whole)


def _correlated_twins_capture() -> list[Exchange]:
    """Both taps, every request paired by correlation id: the same deterministic request sent
    streamed and not (the parser streams other arguments), and an unrelated request."""
    rq = tool_req(temperature=0)
    other = completion(message(None, tool_calls=[call(args='{"city": "Osaka"}')]), "tool_calls")
    exs = [
        wire.exchange(rq, other, tap="caller", correlation="k5", id="cp"),
        wire.exchange(rq, other, tap="engine", correlation="k5", id="ep"),
        wire.streamed(rq, wire.k2_tool_stream(), tap="caller", correlation="k6", id="cs"),
        wire.streamed(rq, wire.k2_tool_stream(), tap="engine", correlation="k6", id="es"),
        wire.exchange(wire.req(), completion(), tap="caller", correlation="k7", id="cx"),
        wire.exchange(wire.req(), completion(), tap="engine", correlation="k7", id="ex"),
    ]
    for n, ex in enumerate(exs):
        ex.started_at = f"2026-12-03T10:00:0{n // 2}.{n % 2}00+00:00"
    return exs


_CAPTURES: dict[str, Callable[[], list[Exchange]]] = {
    "dual": dual_tap_capture,
    "one": _single_tap_capture,
    "correlated": _correlated_twins_capture,
}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=written_in_batches(_CAPTURES))
def test_the_findings_do_not_depend_on_the_order_nor_the_batches(tmp_path_factory: Any, case: Any) -> None:
    # an exchange checked before its partner (its twin, its other tap's side, a retry) was recorded
    # is judged again with the partner's batch: the store ends with the whole check's findings,
    # whatever the order the exchanges were written in and wherever the batches fell
    name, batches = case
    whole = _whole(check_exchanges(_CAPTURES[name](), CheckConfig()))
    by_id = {ex.id: ex for ex in _CAPTURES[name]()}
    path = tmp_path_factory.mktemp(name) / "live.db"
    assert _live(path, [[by_id[i] for i in ids] for ids in batches], Recent(), lambda _: None) == whole


def test_the_captures_hold_what_an_order_can_lose() -> None:
    # each capture has findings that a partner decides: the property above is not empty
    found = {name: _whole(check_exchanges(make(), CheckConfig())) for name, make in _CAPTURES.items()}
    assert ("t-stream", "stream-nonstream-mismatch") in {f[:2] for f in found["one"]}
    assert ("es", "stream-nonstream-mismatch") in {f[:2] for f in found["correlated"]}
    dual = {f[:2] for f in found["dual"]}
    assert {("c3", "gateway-retried"), ("c1", "gateway-tool-calls-changed")} <= dual
    assert any(f[0] == "e2" and "(reached the caller too)" in f[3] for f in found["dual"])


def _kinds_agree(recent: Recent) -> None:
    """What ``Recent.any_of`` answers is what the twins it keeps say."""
    kept = {(t[3], t[4]) for t in recent._twins.values() if t[3] is not None}
    for key in {k for k, _ in kept} | {("none", "kept")}:
        for streamed in (True, False):
            assert recent.any_of(key, streamed) == ((key, streamed) in kept)


def test_a_prompt_streamed_again_and_again_is_told_from_one_with_a_plain_twin(tmp_path: Path) -> None:
    """A load test's one prompt (``a``), streamed in batch after batch: no exchange around has a twin,
    and the batches end early, asking the keys only. Another request (``b``) sent once without
    streaming and then streamed pairs as in one check of the whole capture."""
    a, b = tool_req(temperature=0), tool_req(temperature=0, user="b")
    other = completion(message(None, tool_calls=[call(args='{"city": "Paris"}')]), "tool_calls")
    ids = ["a0", "a1", "b-plain", "a2", "b0", "b1", "a3", "a4"]
    capture = _spread(
        [
            wire.exchange(b, other, tap="caller", id=i)
            if i == "b-plain"
            else wire.streamed(a if i[0] == "a" else b, wire.k2_tool_stream(), tap="caller", id=i)
            for i in ids
        ]
    )
    whole = check_exchanges(capture, CheckConfig())
    assert whole.twins == 1 and "stream-nonstream-mismatch" in {f.rule for f in whole.findings}
    recent = Recent()
    got = _live(
        tmp_path / "load.db", [capture[:3], capture[3:6], capture[6:]], recent, lambda _: _kinds_agree(recent)
    )
    assert got == _whole(whole)


def test_a_row_written_again_is_read_again(tmp_path: Path) -> None:
    # the kept views are a cache of rows that do not change, except when an id is written again
    # (the store then checks it again): that check reads what was written last
    store = Store(tmp_path / "again.db")
    recent = Recent()
    good = completion(message(None, tool_calls=[call()]), "tool_calls")
    bad = completion(message(None, tool_calls=[call(args='{"city": Tokyo}')]), "tool_calls")
    good, bad = (wire.exchange(tool_req(), r, tap="caller", id="x") for r in (good, bad))
    for ex in (good, bad):
        ex.started_at = "2026-12-03T10:00:00.000+00:00"
    try:
        store.write_now([good])
        check_pending(store, settle_s=0, recent=recent)
        assert not store.findings(exchange_id="x")
        store.write_now([bad])
        assert check_pending(store, settle_s=0, recent=recent) == 1
        assert "tool-call-args-invalid-json" in {f["rule"] for f in store.findings(exchange_id="x")}
    finally:
        store.close()


def test_views_are_let_go_by_time_and_by_count() -> None:
    recent = Recent(limit=3)
    exs = dual_tap_capture()
    for ex in exs:
        recent.view(ex)
    assert len(recent) == 3 and recent.exchange(exs[-1].id) is exs[-1]  # the last kept stay
    assert recent.exchange(exs[0].id) is None
    recent.forget_before(float("inf"))
    assert len(recent) == 0
    # what is kept of a view let go (one tap) is bounded alike
    assert len(exs) > 3
    for ex in exs:
        recent.view(ex)
        recent.slim([ex.id])
    assert len(recent) == 0
    assert [ex.id for ex in exs if recent.known(ex.id) is not None] == [ex.id for ex in exs[-3:]]
    assert set(recent.taps()) == {ex.tap for ex in exs[-3:]}
    recent.forget_before(float("inf"))
    assert all(recent.known(ex.id) is None for ex in exs) and not recent.taps()


def _checker_nice(path: Path) -> int:
    store = Store(path, writer=True)
    checker = start_checker(store)
    try:
        proc = checker._proc
        assert proc is not None and proc.pid is not None
        deadline = time.monotonic() + 30  # a process start on a loaded machine, not a bound under test
        while time.monotonic() < deadline:  # the worker lowers its own priority once it runs
            nice = os.getpriority(os.PRIO_PROCESS, proc.pid)
            if nice != os.getpriority(os.PRIO_PROCESS, 0):
                return nice - os.getpriority(os.PRIO_PROCESS, 0)
            time.sleep(0.05)
        return 0
    finally:
        checker.stop()
        store.close()


def test_the_checker_runs_below_the_forwarding_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert CHECKER_NICE == 0  # by default the checker runs as the proxy does
    if os.getpriority(os.PRIO_PROCESS, 0) > 9:
        pytest.fail("this test needs a process niceness of at most 9 to see the checker's own")
    monkeypatch.setenv(CHECKER_NICE_ENV, "10")
    assert _checker_nice(tmp_path / "a.db") == 10
    monkeypatch.setenv(CHECKER_NICE_ENV, "3")
    assert _checker_nice(tmp_path / "b.db") == 3


def test_a_partner_let_go_as_one_taps_is_read_again_when_the_other_tap_comes(tmp_path: Path) -> None:
    # the engine side is checked alone (one tap: its view is let go); its caller side comes later
    # without a correlation id (a gateway that drops it) and pairs with it by fingerprint
    def found(path: Path, recent: Recent | None) -> list[tuple[Any, ...]]:
        by_id = {ex.id: ex for ex in dual_tap_capture()}
        for ex in by_id.values():
            ex.correlation = None
        store = Store(path)
        try:
            for ids in (["e1"], ["c1"]):
                store.write_now([by_id[i] for i in ids])
                assert check_pending(store, settle_s=0, recent=recent) == 1
            return sorted((f["exchange_id"], f["rule"], f["fault"], f["message"]) for f in store.findings())
        finally:
            store.close()

    kept = found(tmp_path / "kept.db", Recent())
    assert ("c1", "gateway-tool-calls-changed") in {(f[0], f[1]) for f in kept}, kept
    assert kept == found(tmp_path / "plain.db", None)


def test_the_checker_process_does_not_load_the_forwarding_side() -> None:
    """The worker is spawned from ``wirecheck.proxy._live``: what that import loads is the worker's
    resident memory before its first exchange. The forwarding side (the ASGI app, uvloop, httpx
    through the recording client) is not part of it."""
    code = (
        "import sys, wirecheck.proxy._live\n"
        "print(sorted(m for m in ('httpx', 'uvloop', 'wirecheck.proxy._app', 'wirecheck.record._client',"
        " 'wirecheck.record._serve') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout


def test_pieces_hold_at_most_their_bytes_and_at_least_one_exchange(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live, "PIECE_BYTES", 100)
    rows = [("a", None, 60), ("b", "c", 30), ("c", None, 20), ("d", None, 500), ("e", None, 1)]
    pieces = live._pieces(rows)
    assert [[r[0] for r in p] for p in pieces] == [["a", "b"], ["c"], ["d"], ["e"]]
    assert live._pieces([]) == []


def test_views_are_kept_within_their_bytes_those_kept_first_staying() -> None:
    exs = dual_tap_capture()
    sizes = [live.recorded_bytes(ex) for ex in exs]
    budget = sizes[0] + max(sizes[1:])  # the first and any other fit together, not all
    assert budget < sum(sizes)
    recent = Recent(limit_bytes=budget)
    for ex in exs:
        recent.view(ex)
        kept = [e for e in exs if recent.exchange(e.id) is not None]
        # within the bytes, or the one just kept alone; the one just kept always stays
        assert sum(live.recorded_bytes(e) for e in kept) <= budget or kept == [ex]
        assert recent.exchange(ex.id) is ex
    # the views kept first are of the exchanges whose batches come next: they stay, and the
    # later ones are let go (to be read again in their own batch)
    assert recent.exchange(exs[0].id) is exs[0]
    assert len(recent) < len(exs)


def test_small_pieces_and_a_small_byte_budget_give_the_same_findings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a claimed batch checked a piece at a time, neighbours read a page at a time, and views let go
    # past the bytes: what is held at once is bounded, and the findings do not change (dual taps)
    plain = _checked(tmp_path / "plain.db", None, [])
    monkeypatch.setattr(live, "PIECE_BYTES", 1)  # a piece an exchange
    monkeypatch.setattr(live, "NEIGHBOUR_FIRST_PAGE", 1)
    monkeypatch.setattr(live, "NEIGHBOUR_PAGE", 2)
    small = _checked(tmp_path / "small.db", Recent(limit_bytes=1), [])
    assert small == plain and {r[1] for r in small} >= {"gateway-tool-calls-changed", "tool-call-undeclared"}
    # and with one tap, against one check of the whole capture
    whole = check_exchanges(_single_tap_capture(), CheckConfig())
    by_id = {ex.id: ex for ex in _single_tap_capture()}
    store = Store(tmp_path / "one.db")
    try:
        for ids in (["s0", "t-plain", "s1"], ["o0", "s2"], ["t-stream", "o1", "s3", "o2"]):
            store.write_now([by_id[i] for i in ids])
            assert check_pending(store, settle_s=0, recent=Recent(limit_bytes=1)) == len(ids)
        got = sorted((f["exchange_id"], f["rule"], f["fault"], f["message"]) for f in store.findings())
    finally:
        store.close()
    assert got == sorted((f.exchange_id, f.rule, str(f.fault), f.message) for f in whole.findings)


def _counting(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str]]:
    """The ids whose views ``Recent`` builds in runs (``build_views``) and alone (``build_view``)."""
    in_runs: list[str] = []
    alone: list[str] = []

    def runs(exs: list[Exchange]) -> Any:
        in_runs.extend(ex.id for ex in exs)
        return build_views(exs)

    def one(ex: Exchange) -> Any:
        alone.append(ex.id)
        return build_view(ex)

    monkeypatch.setattr(live, "build_views", runs)
    monkeypatch.setattr(live, "build_view", one)
    return in_runs, alone


def test_views_announced_are_built_in_runs_and_one_that_raises_raises_when_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recent = Recent()
    exs = dual_tap_capture()
    bad = unreadable_exchange()
    in_runs, alone = _counting(monkeypatch)
    recent.prepare([*exs, bad])
    assert in_runs == []  # nothing is built before it is asked
    for ex in exs:
        assert recent.view(ex) == build_view(ex)
    assert in_runs == [ex.id for ex in [*exs, bad]] and alone == []
    with pytest.raises(TypeError):
        recent.view(bad)
    assert alone == [bad.id]
    assert [recent.view(ex) for ex in exs] == [build_view(ex) for ex in exs]  # kept: built no more
    assert in_runs == [ex.id for ex in [*exs, bad]]


def test_views_announced_are_built_once_however_few_bytes_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    # a run's views kept all at once pushed each other out of a full budget, and were built again
    # when asked: 10x the checker's CPU for streams of 400 frames (benchmarks/checker_memory.py)
    exs = dual_tap_capture()
    recent = Recent(limit_bytes=1)
    in_runs, alone = _counting(monkeypatch)
    recent.prepare(exs)
    for ex in exs:
        recent.twin(ex)
        assert recent.exchange(ex.id) is ex  # the one just asked is kept, whatever the budget
    assert sorted(in_runs) == sorted(ex.id for ex in exs) and alone == []
    assert len(recent) == 1


def test_long_exchanges_are_built_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    exs = dual_tap_capture()
    sizes = sorted(live.recorded_bytes(ex) for ex in exs)
    monkeypatch.setattr(live, "RUN_EXCHANGE_BYTES", sizes[len(sizes) // 2])
    long = {ex.id for ex in exs if live.recorded_bytes(ex) > live.RUN_EXCHANGE_BYTES}
    assert 0 < len(long) < len(exs)
    recent = Recent()
    in_runs, alone = _counting(monkeypatch)
    recent.prepare(exs)
    assert [recent.view(ex) for ex in exs] == [build_view(ex) for ex in exs]
    assert set(alone) == long and set(in_runs) == {ex.id for ex in exs} - long
