"""The compiled twin of a message head's header lines (proxy/_heads_c.c) against the Python path:
a response head written by ``_Cycle._start`` with the twin and without it is the same bytes, the
same framing state and the same error, for headers of every shape (the framing's own, characters
refused in a name or a value, cases, bytes past ASCII); a request head's lines are the loop's."""

from __future__ import annotations

import tracemalloc
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wirecheck.contracts import native
from wirecheck.contracts._native import PURE_PYTHON
from wirecheck.proxy import _http
from wirecheck.proxy._http import _Cycle

twin = native("wirecheck.proxy._heads_c")
needs_twin = pytest.mark.skipif(twin is None, reason="the compiled twin is off or not built")


def test_the_twin_is_built_and_in_use() -> None:
    # a silent fall back to Python (no compiler at install, a build that broke) would hide here
    assert PURE_PYTHON or (twin is not None and _http._twin is twin)


_names = st.sampled_from(
    [
        b"content-type",
        b"Content-Type",
        b"X-Request-ID",
        b"content-length",
        b"Content-Length",
        b"transfer-encoding",
        b"TRANSFER-Encoding",
        b"connection",
        b"Connection",
        b"bad name",
        b"x:y",
        b"",
        b"\xc3\xa9t\xc3\xa9",
        b"x\x7f",
    ]
) | st.binary(max_size=8)
_values = st.sampled_from(
    [
        b"text/event-stream",
        b"12",
        b"chunked",
        b"close",
        b"keep-alive, Close",
        b"a\tb",
        b"a\r\nb",
        b" 5 ",
        b"\xff",
    ]
) | st.binary(max_size=8)
_headers = st.lists(st.tuples(_names, _values), max_size=6)


def _start(status: int, headers: Any, method: str, keep_alive: bool, use_twin: bool) -> Any:
    """What ``_Cycle._start`` writes and leaves, or the error it raises."""
    written: list[bytes] = []
    conn: Any = SimpleNamespace(transport=SimpleNamespace(write=written.append))
    cycle = _Cycle.made(conn, {"method": method}, keep_alive=keep_alive, expect_100=False)
    held = _http._twin
    _http._twin = twin if use_twin else None
    try:
        cycle._start(conn, status, headers)
    except Exception as exc:
        return type(exc), str(exc)
    finally:
        _http._twin = held
    return written, cycle.chunked, cycle.left, cycle.keep_alive


@needs_twin
@given(
    st.sampled_from([200, 204, 304, 404, 99]),
    _headers,
    st.sampled_from(["GET", "POST", "HEAD"]),
    st.booleans(),
)
def test_a_response_head_is_the_python_paths(
    status: int, headers: Any, method: str, keep_alive: bool
) -> None:
    assert _start(status, headers, method, keep_alive, True) == _start(
        status, headers, method, keep_alive, False
    )


@needs_twin
@given(_headers)
def test_request_lines_are_the_loops(headers: list[tuple[bytes, bytes]]) -> None:
    assert twin is not None
    assert twin.request_lines(headers) == b"".join(k + b": " + v + b"\r\n" for k, v in headers)


@needs_twin
def test_other_shapes_are_left_to_the_python_path() -> None:
    assert twin is not None
    for lines in (twin.request_lines, twin.response_lines):
        assert lines([]) == b""
        for odd in (
            ((b"a", b"b"),),  # a tuple of pairs, not a list
            [[b"a", b"b"]],
            [(b"a", b"b", b"c")],
            [(b"a",)],
            [("a", b"b")],
            [(b"a", "b")],
            [(bytearray(b"a"), b"b")],
            [(b"a", memoryview(b"b"))],
            [(b"a", b"b"), None],
            None,
        ):
            assert lines(odd) is None  # type: ignore[arg-type]
    assert twin.response_lines([(b"content-type", b"a\r\nb")]) is None
    assert twin.request_lines([(b"content-type", b"a\r\nb")]) == b"content-type: a\r\nb\r\n"
    assert twin.response_lines([(b"X-A", b"1"), (b"b", b"")]) == b"x-a: 1\r\nb: \r\n"


@needs_twin
def test_the_twin_holds_no_memory_after_a_hundred_thousand_calls() -> None:
    assert twin is not None
    headers = [(b"Content-Type", b"text/event-stream"), (b"date", b"Sat, 05 Dec 2026 10:00:00 GMT")]
    odd = [(b"content-length", b"5")]
    tracemalloc.start()
    try:
        for _ in range(10_000):  # warm up under tracing
            twin.response_lines(headers), twin.request_lines(headers), twin.response_lines(odd)
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(100_000):
            twin.response_lines(headers), twin.request_lines(headers), twin.response_lines(odd)
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after - before < 64 * 1024  # a leak of one object a call would be megabytes


@needs_twin
def test_the_head_readers_hold_no_memory_after_a_hundred_thousand_calls() -> None:
    """``parse_request``, ``parse_response``, ``request_heads`` and ``response_heads``, each taking
    its input, declining it half way (after it made the first headers) and refusing its type."""
    assert twin is not None
    request = b"POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}"
    declined = b"POST / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\nTransfer-Encoding: chunked\r\n\r\n"
    response = b"HTTP/1.1 200 OK\r\nserver: s\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n"
    odd_response = b"HTTP/1.1 200 OK\r\nserver: s\r\ncontent-length: 3\r\n\r\n"
    known = {
        b"Host": ("Host", 2),
        b"authorization": ("authorization", 1),
        b"x-wirecheck-id": ("x-wirecheck-id", 8),
    }
    headers = [(b"Host", b"h"), (b"authorization", b"Bearer k"), (b"x-wirecheck-id", b"i")]
    unknown = [*headers, (b"x-new", b"v")]

    def calls() -> None:
        twin.parse_request(request, 65536), twin.parse_request(declined, 65536)
        twin.parse_request(bytearray(request), 65536)  # type: ignore[arg-type]
        twin.parse_response(response, 65536), twin.parse_response(odd_response, 65536)
        twin.request_heads(known, headers, True, "[redacted]"), twin.request_heads(known, unknown, False, "r")
        twin.response_heads(known, headers, "[redacted]"), twin.response_heads(known, unknown, "r")

    tracemalloc.start()
    try:
        for _ in range(10_000):  # warm up under tracing
            calls()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(100_000):
            calls()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after - before < 64 * 1024  # a leak of one object a call would be megabytes
