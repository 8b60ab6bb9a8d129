"""Views built a step at a time across many exchanges (``build_views``) are the views built one by one.

The live checker builds a page of views at once; what it finds must not depend on that. The spread is
the one the rules' needs are held to (the corpus, every rule's cases, streams, hostile exchanges),
with an exchange whose view cannot be built among them.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.contracts.test_rule_needs import _exchanges
from wirecheck.contracts import Exchange, HttpRequest, HttpResponse, build_view, build_views


def _spread() -> list[Exchange]:
    exs = [ex for _, ex, _ in _exchanges()]
    first = exs[0]
    # no answer (the upstream refused), an answer without a body, a path that is no agent API's
    empty = HttpResponse(204, [], b"")
    models = HttpResponse(200, [("content-type", "application/json")], b'{"data": []}')
    other = replace(first, id="models", request=HttpRequest("GET", "/v1/models", [], b""), response=models)
    return [
        *exs,
        replace(first, id="refused", response=None),
        replace(first, id="empty", response=empty),
        other,
    ]


EXCHANGES = _spread()


def unreadable_exchange() -> Exchange:
    """An exchange whose view raises: a status that is not a number."""
    ex = EXCHANGES[0]
    assert ex.response is not None
    response = HttpResponse.__new__(HttpResponse)
    response.status, response.headers = "200", ex.response.headers  # type: ignore[assignment]
    response.body, response.chunks = ex.response.body, ex.response.chunks
    return replace(ex, id="unreadable", response=response)


def _one_by_one(exs: list[Exchange]) -> list[object]:
    out: list[object] = []
    for ex in exs:
        try:
            out.append(build_view(ex))
        except Exception as exc:
            out.append(type(exc))
    return out


def test_the_spread_is_wide_and_has_every_kind_of_view() -> None:
    views = [v for v in build_views(EXCHANGES) if v is not None]
    assert len(EXCHANGES) > 300
    assert {v.kind for v in views} >= {"stream", "json", "error", "none", "other"}
    assert {v.endpoint for v in views} >= {"chat", "responses", "messages", None}


def test_the_views_are_those_built_one_by_one() -> None:
    got = build_views(EXCHANGES)
    assert len(got) == len(EXCHANGES)
    for ex, view, alone in zip(EXCHANGES, got, _one_by_one(EXCHANGES), strict=True):
        if view is None:
            assert isinstance(alone, type), ex.id
        else:
            assert view == alone, ex.id
            assert view.ex is ex


def test_a_view_that_raises_is_none_and_leaves_the_others_whole() -> None:
    bad = unreadable_exchange()
    try:
        build_view(bad)
    except TypeError:
        pass
    else:
        raise AssertionError("the unreadable exchange was read")
    exs = [EXCHANGES[1], bad, EXCHANGES[2], bad]
    got = build_views(exs)
    assert got[1] is None and got[3] is None
    assert got[0] == build_view(EXCHANGES[1]) and got[2] == build_view(EXCHANGES[2])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, len(EXCHANGES)), min_size=0, max_size=12))
def test_any_order_and_any_mix_gives_each_exchange_its_own_view(picks: list[int]) -> None:
    bad = unreadable_exchange()
    exs = [EXCHANGES[i] if i < len(EXCHANGES) else bad for i in picks]
    got = build_views(exs)
    for ex, view, alone in zip(exs, got, _one_by_one(exs), strict=True):
        assert (view is None and isinstance(alone, type)) or view == alone, ex.id
