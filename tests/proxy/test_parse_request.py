"""The compiled twin's whole-request read (proxy/_heads_c.c, ``parse_request``) against the listener's
parser path: whatever request bytes it takes, httptools with the listener's callbacks reads the
same method, path, query, version, headers (names in lower case, values without the whitespace
around them), keep-alive and body from them, as one whole message with nothing after it; and it
takes the requests the SDKs send, so the listener's common case never makes a parser."""

from __future__ import annotations

from typing import Any

import httptools
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from wirecheck.contracts import native
from wirecheck.contracts._native import PURE_PYTHON
from wirecheck.proxy import _http

twin = native("wirecheck.proxy._heads_c")
needs_twin = pytest.mark.skipif(twin is None, reason="the compiled twin is off or not built")

Whole = tuple[str, bytes, bytes, str, list[tuple[bytes, bytes]], bool, bytes]


def test_the_twin_is_built_and_in_use() -> None:
    assert PURE_PYTHON or (twin is not None and _http._twin is twin and hasattr(twin, "parse_request"))


class _Callbacks:
    """What ``HttpConnection``'s callbacks make of a request, with its head bound (``max_head``)."""

    def __init__(self, max_head: int) -> None:
        self.max_head = max_head
        self.parser: Any = None
        self.begun = self.completed = 0
        self.url = b""
        self.counted = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.body = b""
        self.head: tuple[str, bytes, bytes, str, bool] | None = None

    def on_message_begin(self) -> None:
        self.begun += 1
        self.counted = 16

    def on_url(self, url: bytes) -> None:
        self.counted += len(url)
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.counted += len(name) + len(value) + 4
        if self.counted > self.max_head:
            raise ValueError("head over the bound")  # the listener's 431
        self.headers.append((name.lower(), value.rstrip(b" \t")))

    def on_headers_complete(self) -> None:
        version = self.parser.get_http_version()
        url = httptools.parse_url(self.url)
        keep = version != "1.0" and self.parser.should_keep_alive()
        self.head = (self.parser.get_method().decode("ascii"), url.path, url.query or b"", version, keep)

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        self.completed += 1


def by_parser(data: bytes, max_head: int) -> Whole | str:
    """The request httptools reads from ``data`` as the listener does, or why there is none whole."""
    seen = _Callbacks(max_head)
    parser = httptools.HttpRequestParser(seen)
    parser.set_dangerous_leniencies(lenient_data_after_close=True)
    seen.parser = parser
    try:
        parser.feed_data(data)
    except httptools.HttpParserUpgrade:
        return "upgrade"
    except httptools.HttpParserError:
        return "error"
    if seen.begun != 1 or seen.completed != 1 or seen.head is None:
        return f"{seen.begun} begun, {seen.completed} complete"
    method, path, query, version, keep = seen.head
    return (method, path, query, version, seen.headers, keep, seen.body)


def _same_or_declined(data: bytes, max_head: int) -> Whole | None:
    assert twin is not None
    got = twin.parse_request(data, max_head)
    if got is not None:
        assert got == by_parser(data, max_head)
        # nothing after the message: without its last byte it is not whole
        assert by_parser(data[:-1], max_head) != got
    return got


SDK_REQUESTS = [
    # proxy_overhead.py's callers
    b"POST /v1/chat/completions HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\n"
    b'content-length: 13\r\nconnection: close\r\n\r\n{"model":"m"}',
    # the openai SDK's (httpx) shape
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nAccept-Encoding: gzip, deflate\r\n"
    b"Connection: keep-alive\r\nAccept: application/json\r\nContent-Type: application/json\r\n"
    b"User-Agent: OpenAI/Python 1.99.0\r\nX-Stainless-Lang: python\r\nX-Stainless-Retry-Count: 0\r\n"
    b"Authorization: Bearer sk-test\r\nContent-Length: 2\r\n\r\n{}",
    # curl's, a GET without a body, a query
    b"GET /v1/models?limit=5 HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\n\r\n",
    # HTTP/1.0 (never kept alive), spaces and a tab around a value
    b"GET /metrics HTTP/1.0\r\nHost:x\r\nX-A: \t spaced \t\r\n\r\n",
]


@needs_twin
@pytest.mark.parametrize("data", SDK_REQUESTS)
def test_the_common_requests_are_taken_whole_as_the_parser_reads_them(data: bytes) -> None:
    assert _same_or_declined(data, 64 * 1024) is not None


@needs_twin
@pytest.mark.parametrize(
    "data",
    [
        b"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab",  # a body not all here
        b"POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\nabGET / HTTP/1.1\r\n\r\n",  # pipelined
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n",
        b"GET / HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nab",
        b"GET http://other/x HTTP/1.1\r\n\r\n",  # absolute-form: the proxy's own test of the host
        b"GET / HTTP/1.1\r\nX: caf\xc3\xa9\r\n\r\n",
        b"GET / HTTP/1.1\nHost: x\n\n",
        b"GET / HTTP/1.1\r\nHost: x\r\n",  # the head not all here
    ],
)
def test_what_it_does_not_take_is_left_to_the_parser(data: bytes) -> None:
    assert twin is not None
    assert twin.parse_request(data, 64 * 1024) is None


@needs_twin
def test_a_head_over_the_bound_as_the_listener_counts_it_is_left_to_the_parser() -> None:
    data = b"GET / HTTP/1.1\r\nX-Long:" + b"a" * 100 + b"\r\n\r\n"
    assert by_parser(data, 100) == "error"  # the listener answers 431
    assert twin is not None
    assert twin.parse_request(data, 100) is None
    assert _same_or_declined(data, 200) is not None


def _mostly(plain: st.SearchStrategy[Any], odd: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``plain`` seven times in eight, else ``odd``: requests near the common shape, where the twin's
    decisions are, with every way off it still drawn."""
    return st.integers(0, 7).flatmap(lambda k: odd if k == 0 else plain)


_methods = _mostly(
    st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]),
    st.sampled_from(["get", "PRI", "M-SEARCH", "CONNECT", "POSTX", ""]),
)
_target = _mostly(
    st.text(alphabet="abc/-._~!$&'()*+,;=:@?%09", max_size=12).map(lambda t: "/" + t),
    st.text(alphabet=[chr(c) for c in range(0x20, 0x7F)], max_size=12).map(lambda t: "/" + t)
    | st.sampled_from(["/", "*", "//a/b", "/a?b?c", "/a#f", "/%41?q=%20", "http://h/x", "/a b", ""]),
)
_versions = _mostly(
    st.sampled_from([b"HTTP/1.1", b"HTTP/1.0"]),
    st.sampled_from([b"HTTP/2.0", b"HTTP/1.1 ", b"http/1.1", b"HTTP/1.12", b"HTTP/1"]),
)
_names = _mostly(
    st.sampled_from(
        [b"Host", b"content-type", b"Connection", b"connection", b"X-Stainless-Lang", b"x!#$%&'*+-.^_`|~"]
    )
    | st.text(alphabet="abcXYZ019-_.", min_size=1, max_size=6).map(str.encode),
    st.sampled_from(
        [
            b"Content-Length",
            b"transfer-encoding",
            b"Expect",
            b"Upgrade",
            b"bad name",
            b"",
            b"x\x7f",
            b"\xc3\xa9",
        ]
    )
    | st.binary(min_size=1, max_size=6),
)
_values = _mostly(
    st.sampled_from(
        [
            b"application/json",
            b"close",
            b"Close",
            b"keep-alive",
            b"keep-alive, close",
            b" close ,keep-alive ",
            b"",
            b" \t ",
            b"a\tb",
            b"a,b",
        ]
    )
    | st.text(alphabet="ab ,;=\t/-", max_size=8).map(str.encode),
    st.sampled_from([b"close;x", b"closed", b"upgrade", b"0", b"02", b"-1", b"a\rb", b"\x7f", b"\x80"])
    | st.binary(max_size=8),
)
_separators = _mostly(
    st.sampled_from([b": ", b":", b":  ", b":\t", b": \t"]), st.sampled_from([b" :", b"::"])
)
_line_ends = _mostly(st.just(b"\r\n"), st.sampled_from([b"\n", b"\r", b"\r\r\n"]))


@st.composite
def requests(draw: st.DrawFn) -> bytes:
    line = b"%s %s %s\r\n" % (draw(_methods).encode(), draw(_target).encode("latin-1"), draw(_versions))
    body = draw(st.binary(max_size=6))
    lines = [
        draw(_names) + draw(_separators) + draw(_values) + draw(_line_ends)
        for _ in range(draw(st.integers(0, 4)))
    ]
    if draw(st.booleans()):
        shown = draw(_mostly(st.just(len(body)), st.sampled_from([len(body) + 1, max(len(body) - 1, 0)])))
        lines.insert(draw(st.integers(0, len(lines))), b"Content-Length: %d\r\n" % shown)
    elif draw(st.booleans()):
        body = b""
    data = line + b"".join(lines) + b"\r\n" + body
    tail = draw(_mostly(st.just(b""), st.sampled_from([b"x", b"GET / HTTP/1.1\r\n\r\n"])))
    cut = draw(_mostly(st.just(0), st.integers(1, 3)))
    return (data + tail)[: len(data + tail) - cut] if cut else data + tail


@needs_twin
@settings(max_examples=3000, deadline=None)
@given(requests(), st.sampled_from([40, 120, 64 * 1024]))
@example(SDK_REQUESTS[0], 64 * 1024)
def test_whatever_it_takes_the_parser_reads_the_same(data: bytes, max_head: int) -> None:
    _same_or_declined(data, max_head)


@needs_twin
@settings(max_examples=1000, deadline=None)
@given(st.binary(max_size=80), st.sampled_from([40, 64 * 1024]))
def test_on_any_bytes_it_declines_or_agrees_and_never_fails(data: bytes, max_head: int) -> None:
    _same_or_declined(b"POST /x HTTP/1.1\r\n" + data, max_head)
    _same_or_declined(data, max_head)


@needs_twin
def test_arguments_of_another_type_are_declined() -> None:
    assert twin is not None
    assert twin.parse_request(bytearray(SDK_REQUESTS[0]), 1000) is None  # type: ignore[arg-type]
    assert twin.parse_request(SDK_REQUESTS[0], 2**70) is None
    assert twin.parse_request(SDK_REQUESTS[0], "x") is None  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        twin.parse_request(SDK_REQUESTS[0])  # type: ignore[call-arg]


@needs_twin
def test_a_one_letter_name_is_lowered_without_touching_the_interpreters_shared_bytes() -> None:
    """CPython shares one bytes object per character: a name lowered in place in it would change
    every ``b"Q"`` of the process (the proxy's and its libraries')."""
    assert twin is not None
    got = twin.parse_request(b"GET / HTTP/1.1\r\nQ: 1\r\nN:2\r\n\r\n", 1000)
    assert got is not None and got[4] == [(b"q", b"1"), (b"n", b"2")]
    assert bytes((81,)) == b"Q" and bytes((78,)) == b"N" and b"Q".lower() == b"q"
