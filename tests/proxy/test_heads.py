"""The tap's one pass over a request's and a response's headers (``proxy/_heads.py``) gives what
the separate steps it replaced gave: each header decoded, the record's copy redacted, the upgrade
test, the hop-by-hop filter, the correlation rule of both taps and the upstream request's header
lines, for any names in any case and any values. And the exchange's start time, formatted once a
second, reads as ``datetime`` wrote it."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wirecheck.contracts import DEFAULT_REDACTION, Redaction
from wirecheck.contracts._native import PURE_PYTHON
from wirecheck.proxy import _heads
from wirecheck.proxy._app import ProxyApp, TapConfig, _iso
from wirecheck.proxy._heads import HOP as _HOP
from wirecheck.proxy._heads import HeaderNames
from wirecheck.record import CORRELATION_HEADER, Correlator, mint_correlation

SECRET = b"k" * 32


def _is_upgrade(headers: list[tuple[str, str]]) -> bool:
    upgrade = connection = False
    for k, v in headers:
        low = k.lower()
        if low == "upgrade":
            upgrade = True
        elif low == "connection" and "upgrade" in (t.strip().lower() for t in v.split(",")):
            connection = True
    return upgrade and connection


class _Fixed(Correlator):
    """Mints the same id every time, so that two runs of the rule can be compared."""

    def mint(self, nonce: str | None = None) -> str:
        return "f" * 24 + "." + "0" * 32


def _reference(
    raw: list[tuple[bytes, bytes]], redact: Redaction, *, caller: bool, extra: dict[str, str]
) -> tuple[list[tuple[str, str]], bool, bytes, str | None]:
    """The steps as they were: decode, redact, upgrade test, hop filter, ``Correlator.stamp``, the
    extra headers, and each line encoded."""
    decoded = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in raw]
    recorded = redact.header_list(decoded)
    out = [(k, v) for k, v in decoded if k.lower() not in _HOP and k.lower() != "content-length"]
    out, corr = _Fixed(SECRET).stamp(out, caller=caller)
    out.extend(extra.items())
    lines = b"".join(f"{k}: {v}\r\n".encode("latin-1") for k, v in out)
    return recorded, _is_upgrade(decoded), lines, corr


def _new(
    names: HeaderNames, raw: list[tuple[bytes, bytes]], *, caller: bool, extra: dict[str, str]
) -> tuple[list[tuple[str, str]], bool, bytes, str | None]:
    heads = names.request(raw, keep_ids=not caller)
    out = heads.forwarded
    sent, corr = _Fixed(SECRET).take(heads.ids, caller=caller)
    if sent is not None:
        out.append((CORRELATION_HEADER.encode(), sent.encode("latin-1")))
    out += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in extra.items()]
    return heads.recorded, heads.upgrade, b"".join(k + b": " + v + b"\r\n" for k, v in out), corr


_NAMES = st.sampled_from(
    [
        *sorted(_HOP),
        "content-length",
        "Content-Length",
        "x-wirecheck-id",
        "X-Wirecheck-ID",
        "Upgrade",
        "Connection",
        "authorization",
        "Authorization",
        "x-acme-api-key",
        "cookie",
        "content-type",
        "accept",
        "x-custom",
    ]
).map(str.encode) | st.binary(min_size=1, max_size=12)
_VALUES = (
    st.sampled_from(
        [b"upgrade", b"keep-alive, Upgrade", b" UPGRADE ", b"close", b"websocket", b"chunked", b""]
    )
    | st.builds(lambda: mint_correlation(SECRET).encode())
    | st.builds(lambda: _Fixed(SECRET).mint().encode())
    | st.binary(max_size=30)
)


@settings(max_examples=400)
@given(
    st.lists(st.tuples(_NAMES, _VALUES), max_size=12),
    st.booleans(),
    st.dictionaries(st.sampled_from(["x-extra", "X-Route"]), st.text(st.characters(max_codepoint=255))),
    st.booleans(),
)
def test_a_request_s_headers_read_once_give_what_each_step_gave(
    raw: list[tuple[bytes, bytes]], caller: bool, extra: dict[str, str], policy_extended: bool
) -> None:
    redact = DEFAULT_REDACTION.extended(["x-custom"]) if policy_extended else DEFAULT_REDACTION
    names = HeaderNames(redact)
    expected = _reference(raw, redact, caller=caller, extra=extra)
    assert _new(names, raw, caller=caller, extra=extra) == expected
    assert _new(names, raw, caller=caller, extra=extra) == expected  # again, from the names kept


@settings(max_examples=200)
@given(st.lists(st.tuples(_NAMES, _VALUES), max_size=12))
def test_a_response_s_headers_read_once_give_the_record_and_the_hop_filter(
    raw: list[tuple[bytes, bytes]],
) -> None:
    names = HeaderNames(DEFAULT_REDACTION)
    recorded = DEFAULT_REDACTION.header_list([(k.decode("latin-1"), v.decode("latin-1")) for k, v in raw])
    forwarded = [(k, v) for k, v in raw if k.decode("latin-1").lower() not in _HOP]
    assert names.response(raw) == (recorded, forwarded)
    assert names.response(raw) == (recorded, forwarded)


@settings(max_examples=400)
@given(st.lists(st.tuples(_NAMES, _VALUES), max_size=12), st.booleans(), st.booleans())
def test_the_compiled_pass_over_kept_names_is_the_pythons(
    raw: list[tuple[bytes, bytes]], keep_ids: bool, learned: bool
) -> None:
    """The compiled twin (proxy/_heads_c.c) gives what the Python pass gives, or leaves it to it:
    for names all kept (``learned``: read once before) and for names not yet seen."""
    if _heads._twin is None:
        assert PURE_PYTHON
        return
    names = HeaderNames(DEFAULT_REDACTION.extended(["x-custom"]))
    if learned:
        names.request(raw, keep_ids=keep_ids)
    kept = all(k in names._names for k, _ in raw)
    twin = _heads._twin
    got = twin.request_heads(names._known, raw, keep_ids, "[redacted]")
    back = twin.response_heads(names._known, raw, "[redacted]")
    _heads._twin = None
    try:
        py, py_response = names.request(raw, keep_ids=keep_ids), names.response(raw)
    finally:
        _heads._twin = twin
    if got is not None:
        assert got == (py.recorded, py.forwarded, py.ids) and not py.upgrade
        assert back == py_response
    # taken whenever every name is kept, but for a connection header that may ask an upgrade
    maybe_upgrade = any(k.lower() == b"connection" and b"upgrade" in v.lower() for k, v in raw)
    assert (got is not None) == (kept and not maybe_upgrade)
    assert (back is not None) == kept


def test_names_past_the_bound_are_still_read_right() -> None:
    names = HeaderNames(DEFAULT_REDACTION)
    many = [(f"x-n{i}".encode(), b"v") for i in range(1500)] + [(b"x-late-token", b"s"), (b"te", b"x")]
    heads = names.request(many, keep_ids=False)
    assert heads.recorded[-2:] == [("x-late-token", "[redacted]"), ("te", "x")]
    assert heads.forwarded == many[:-1]
    assert len(names._names) <= 1024


def test_extra_headers_that_http_cannot_carry_are_refused_when_the_tap_is_made() -> None:
    with pytest.raises(ValueError, match="x-a"):
        ProxyApp(TapConfig(upstream="http://127.0.0.1:9", extra_headers={"x-a": "\u2603"}))


@given(st.integers(min_value=0, max_value=4_000_000_000 * 10**9))
def test_the_start_time_reads_as_datetime_writes_it(ns: int) -> None:
    """The exchange's ``started_at`` (``_iso``, with its second kept) is ``datetime.now(UTC).isoformat()``
    of the same clock reading: microseconds floored, and left out when 0."""
    sec, rest = divmod(ns, 10**9)
    expected = datetime.fromtimestamp(sec, UTC).replace(microsecond=rest // 1000).isoformat()
    assert _iso(ns) == expected
    assert _iso(ns) == expected  # again, from the second kept
    assert _iso(sec * 10**9) == datetime.fromtimestamp(sec, UTC).isoformat()


def test_the_start_time_is_now() -> None:
    before = datetime.now(UTC)
    got = datetime.fromisoformat(_iso(time.time_ns()))
    assert before <= got <= datetime.now(UTC)
