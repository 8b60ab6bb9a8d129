"""``check_stream`` (a capture read once, in time order, a window of it held) finds exactly what
``check_exchanges`` finds over the whole capture, and holds only what may still pair.

The captures are the rule catalogue's cases (single exchanges, dual-tap pairs, twins, the Responses and
Messages framing) and the corpus (bridged pairs across APIs, gateways, parsers), each alone and all of
them laid out on one timeline: far apart (every group closes on time), close together (groups of
different cases join), shuffled (read out of time order), and with a window smaller than a group.
"""

from __future__ import annotations

import dataclasses
import random
import weakref
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.contracts.rule_cases import SINGLE
from tests.contracts.rule_cases_pairs import PAIRS
from tests.corpus import load_cases
from tests.support.wire import completion, exchange, req
from wirecheck.contracts import CheckConfig, CheckResult, Exchange, check_exchanges, check_stream, render_text
from wirecheck.replay import in_time_order

BASE = datetime(2026, 3, 1, tzinfo=UTC).timestamp()
RULE_CASES = {
    f"{rule}-{side}": make
    for rule, (bad, good, _) in {**SINGLE, **PAIRS}.items()
    for side, make in (("bad", bad), ("good", good))
}
CORPUS = load_cases()


def _found(result: CheckResult) -> list[dict[str, Any]]:
    return [f.to_dict() for f in result.findings]


def _same(exs: list[Exchange], config: CheckConfig, **window: int) -> CheckResult:
    """Check ``exs`` both ways and hold the findings and counts equal; the streamed result."""
    whole = check_exchanges(exs, config)
    streamed = check_stream(in_time_order(exs), config, **window)
    assert _found(streamed) == _found(whole)
    assert (streamed.exchanges, streamed.pairs, streamed.paired_by, streamed.retries, streamed.twins) == (
        whole.exchanges,
        whole.pairs,
        whole.paired_by,
        whole.retries,
        whole.twins,
    )
    assert streamed.taps == whole.taps
    return streamed


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat()


def _placed(k: int, exs: list[Exchange], at: float) -> list[Exchange]:
    """Case ``k``'s exchanges moved to start at ``at`` (their spacing kept; one without a time is given
    one, a millisecond after the one before), ids made unique across cases."""
    times = [e.started_epoch for e in exs]
    first = min((t for t in times if t is not None), default=0.0)
    out = []
    for j, (e, t) in enumerate(zip(exs, times, strict=True)):
        start = at + (t - first if t is not None else j / 1000)
        out.append(dataclasses.replace(e, id=f"c{k}-{e.id}", started_at=_iso(start)))
    return out


def _timeline(cases: Iterable[list[Exchange]], spacing_s: float) -> list[Exchange]:
    out: list[Exchange] = []
    for k, exs in enumerate(cases):
        out.extend(_placed(k, exs, BASE + k * spacing_s))
    return out


def _rule_config() -> CheckConfig:
    return CheckConfig(direct=True)  # as the rule cases are judged (rule_cases.run)


@pytest.mark.parametrize("name", sorted(RULE_CASES))
def test_each_rule_case_alone_gets_the_same_findings(name: str) -> None:
    _same(RULE_CASES[name](), _rule_config())
    _same(RULE_CASES[name](), CheckConfig())  # no --direct: the caller tap's attribution


@pytest.mark.parametrize("case", CORPUS, ids=[c.id for c in CORPUS])
def test_each_corpus_case_alone_gets_the_same_findings(case: Any) -> None:
    _same(list(case.exchanges), CheckConfig(**case.config))


@pytest.mark.parametrize("spacing_s", [600.0, 30.0, 0.25], ids=["apart", "overlapping", "crowded"])
def test_all_rule_cases_on_one_timeline_get_the_same_findings(spacing_s: float) -> None:
    exs = _timeline((RULE_CASES[n]() for n in sorted(RULE_CASES)), spacing_s)
    result = _same(exs, _rule_config())
    assert result.pairs and result.twins and result.findings
    assert (result.cut, result.late) == (0, 0)


@pytest.mark.parametrize("spacing_s", [600.0, 0.25], ids=["apart", "crowded"])
def test_the_corpus_on_one_timeline_gets_the_same_findings(spacing_s: float) -> None:
    # one timeline per configuration the cases are judged under (--direct, --family, ...)
    by_config: dict[str, tuple[dict[str, Any], list[list[Exchange]]]] = {}
    for c in CORPUS:
        by_config.setdefault(repr(sorted(c.config.items())), (c.config, []))[1].append(list(c.exchanges))
    paired_by: set[str] = set()
    for config, groups in by_config.values():
        result = _same(_timeline(groups, spacing_s), CheckConfig(**config))
        paired_by |= set(result.paired_by)
    # the corpus pairs taps every way pair_taps knows (bridged pairs across APIs by fingerprint)
    assert {"correlation", "fingerprint"} <= paired_by


def test_a_shuffled_capture_sorted_first_gets_the_same_findings() -> None:
    exs = _timeline((RULE_CASES[n]() for n in sorted(RULE_CASES)), 20.0)
    random.Random(7).shuffle(exs)
    result = _same(exs, _rule_config())
    assert (result.cut, result.late) == (0, 0)


def test_a_capture_read_out_of_order_says_how_many_came_late() -> None:
    exs = _timeline((RULE_CASES[n]() for n in sorted(RULE_CASES)), 600.0)
    exs.reverse()  # the latest case first: every case after it starts before groups already let go
    result = check_stream(enumerate(exs), _rule_config())
    assert result.late > 0
    assert "read out of time order" in render_text(result)
    assert result.summary()["window"]["late"] == result.late


def test_a_window_smaller_than_the_capture_finds_the_same_when_groups_close_on_time() -> None:
    # far apart in time, every group is let go long before the window fills
    exs = _timeline((RULE_CASES[n]() for n in sorted(RULE_CASES)), 600.0)
    result = _same(exs, _rule_config(), window=8)
    assert result.cut == 0


def test_a_capture_denser_than_the_window_says_how_many_were_cut() -> None:
    # a hundred exchanges at one instant, a window of ten: the oldest are judged before their time
    exs = [
        dataclasses.replace(exchange(req(), completion()), id=f"x{i}", started_at=_iso(BASE))
        for i in range(100)
    ]
    result = check_stream(enumerate(exs), _rule_config(), window=10)
    assert result.exchanges == 100
    assert 0 < result.cut <= 100
    assert "judged before every exchange that might pair" in render_text(result)
    assert result.summary()["window"]["cut"] == result.cut
    # legal traffic stays clean, cut or not
    assert not result.findings


class _Tracked(Exchange):
    """An exchange that can be watched for when it is let go (the slotted dataclass takes no weakref)."""


def _generated(n: int, spacing_s: float, alive: list[int], peak: list[int]) -> Iterator[tuple[int, Exchange]]:
    """``n`` exchanges, made one at a time, ``spacing_s`` apart: caller and engine sides of one request
    each, and every fifth request a streamed/plain twin; ``peak`` records the most alive at once."""

    def gone() -> None:
        alive[0] -= 1

    for i in range(n):
        base = exchange(req(), completion(), id=f"x{i}", tap="caller" if i % 2 == 0 else "engine")
        t = BASE + (i // 2) * spacing_s
        ex = _Tracked(**{f.name: getattr(base, f.name) for f in dataclasses.fields(Exchange)})
        ex.correlation = f"corr-{i // 2}"
        ex.started_at = _iso(t)
        weakref.finalize(ex, gone)
        alive[0] += 1
        peak[0] = max(peak[0], alive[0])
        yield i, ex
        del ex, base


def test_memory_is_held_by_time_not_by_the_capture_size() -> None:
    # 2000 exchanges, a request every 5 s: a caller side is let go a minute after it started (its
    # engine side may start that late), so about 13 requests' sides are alive at once, whatever the
    # capture's length; and each is freed as it is let go, not at the next full collection
    alive, peak = [0], [0]
    result = check_stream(_generated(2000, 5.0, alive, peak), CheckConfig())
    assert result.exchanges == 2000 and result.pairs == 1000
    assert (result.cut, result.late) == (0, 0)
    assert peak[0] <= 2 * (60 // 5 + 2) + 2, peak[0]
    assert alive[0] == 0


def test_the_window_caps_what_is_held_in_a_dense_capture() -> None:
    alive, peak = [0], [0]
    result = check_stream(_generated(2000, 0.0, alive, peak), CheckConfig(), window=50)
    assert result.exchanges == 2000
    assert result.cut > 0
    # the window, the one being added, and the one before it that the reading loop still names
    assert peak[0] <= 50 + 3, peak[0]
