"""False alarms are defects: every legal shape in the references passes with no error finding.

The three ``data/vllm033-*`` files are the exact frames of vllm-wire.md (vLLM 0.33.0); the rest are
the legal shapes listed in gateway-faults.md, each written out as a server sends it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import wire
from tests.support.wire import (
    call,
    call_delta,
    chunk,
    completion,
    exchange,
    message,
    req,
    role_chunk,
    tool_req,
)
from wirecheck.contracts import CheckConfig, Exchange, check_exchanges

DATA = Path(__file__).with_name("data")
WEATHER_REQ = tool_req(model=wire.K2)


def errors(exs: list[Exchange], **cfg: Any) -> list[tuple[str, str]]:
    cfg.setdefault("direct", True)
    res = check_exchanges(exs, CheckConfig(**cfg))
    return [(f.rule, f.message) for f in res.findings if f.severity == "error"]


def sse_exchange(request: dict[str, Any], raw: bytes) -> Exchange:
    return exchange({**request, "stream": True}, raw, stream=True)


def test_reference_nonstream_k2_tool_call() -> None:
    body = json.loads((DATA / "vllm033-nonstream-k2-tool.json").read_text())
    ex = exchange(WEATHER_REQ, body)
    assert errors([ex]) == []
    res = check_exchanges([ex], CheckConfig(direct=True))
    assert res.findings == []


def test_reference_stream_reasoning_then_content() -> None:
    raw = (DATA / "vllm033-stream-reasoning-content.sse").read_bytes()
    res = check_exchanges(
        [sse_exchange(req(stream_options={"include_usage": True}), raw)], CheckConfig(direct=True)
    )
    assert res.findings == []


def test_reference_stream_k2_tool_call() -> None:
    raw = (DATA / "vllm033-stream-k2-tool.sse").read_bytes()
    res = check_exchanges([sse_exchange(WEATHER_REQ, raw)], CheckConfig(direct=True))
    assert res.findings == []


def test_reference_frames_split_byte_by_byte() -> None:
    raw = (DATA / "vllm033-stream-k2-tool.sse").read_bytes()
    ex = exchange(
        {**WEATHER_REQ, "stream": True}, None, stream=True, pieces=[raw[i : i + 1] for i in range(len(raw))]
    )
    assert check_exchanges([ex], CheckConfig(direct=True)).findings == []


NAME_FIRST = [  # hermes and the 0.15 Kimi parser: name first with no arguments key, content null
    role_chunk(),
    chunk({"content": None, "tool_calls": [call_delta(args=None, id="chatcmpl-tool-a1b2c3d4e5f60718")]}),
    chunk({"content": None, "tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}),
    chunk({"content": None, "tool_calls": [{"index": 0, "function": {"arguments": '"Tokyo"}'}}]}),
    chunk({}, "tool_calls"),
]
SAME_INDEX_TWICE = [
    role_chunk(),
    chunk(
        {
            "content": None,
            "tool_calls": [
                call_delta(args=None, id="chatcmpl-tool-a1b2c3d4e5f60718"),
                {"index": 0, "function": {"arguments": '{"city": "Tokyo"}'}},
            ],
        }
    ),
    chunk({}, "tool_calls"),
]
K3_WHOLE = [
    role_chunk(wire.K3),
    chunk({"reasoning": "Weather and a search."}, model=wire.K3),
    chunk({"tool_calls": [call_delta(id="chatcmpl-tool-0123456789abcdef")]}, model=wire.K3),
    chunk(
        {
            "tool_calls": [
                call_delta("search", '{"q": "Tokyo"}', id="chatcmpl-tool-fedcba9876543210", index=1)
            ]
        },
        model=wire.K3,
    ),
    chunk({}, "tool_calls", model=wire.K3),
]


def _continuous_usage() -> list[dict[str, Any]]:
    objs = []
    for i, o in enumerate(wire.text_stream("a", "b", "c")):
        o["usage"] = {"prompt_tokens": 12, "completion_tokens": i, "total_tokens": 12 + i}
        objs.append(o)
    objs.append(wire.usage_chunk(12, 3))
    return objs


def _drop_nulls(o: Any) -> Any:  # the Rust frontend drops every null from stream chunks
    if isinstance(o, dict):
        return {k: _drop_nulls(v) for k, v in o.items() if v is not None}
    if isinstance(o, list):
        return [_drop_nulls(v) for v in o]
    return o


LEGAL_STREAMS: dict[str, tuple[dict[str, Any], bytes]] = {
    "name-first-without-arguments": (WEATHER_REQ, wire.frames(*NAME_FIRST)),
    "two-entries-one-index-in-one-chunk": (WEATHER_REQ, wire.frames(*SAME_INDEX_TWICE)),
    "k3-whole-call-deltas": (tool_req(model=wire.K3), wire.frames(*K3_WHOLE)),
    "data-without-space": (req(), wire.frames(*wire.text_stream("hi"), prefix="data:")),
    "crlf-line-ends": (req(), wire.frames(*wire.text_stream("hi"), sep="\r\n\r\n")),
    "cr-line-ends": (req(), wire.frames(*wire.text_stream("hi"), sep="\r\r")),
    "keep-alive-comments": (
        req(),
        b": keep-alive\n\n"
        + wire.frames(wire.role_chunk(), done=False)
        + b": keep-alive\n\n"
        + wire.frames(*wire.text_stream("hi")[1:]),
    ),
    "several-data-lines-in-one-event": (
        req(),
        b"data: "
        + json.dumps(wire.role_chunk(), indent=1).replace("\n", "\ndata: ").encode()
        + b"\n\n"
        + wire.frames(*wire.text_stream("hi")[1:]),
    ),
    "continuous-usage-stats": (
        req(stream_options={"include_usage": True, "continuous_usage_stats": True}),
        wire.frames(*_continuous_usage()),
    ),
    "rust-frontend-no-nulls": (WEATHER_REQ, wire.frames(*[_drop_nulls(o) for o in wire.k2_tool_stream()])),
    "vllm-015-both-reasoning-names": (
        req(),
        wire.frames(
            role_chunk(),
            chunk({"reasoning": "r", "reasoning_content": "r"}),
            chunk({"content": "x"}),
            chunk({}, "stop"),
        ),
    ),
    "reasoning-content-dialect": (
        req(),
        wire.frames(
            role_chunk(), chunk({"reasoning_content": "r"}), chunk({"content": "x"}), chunk({}, "stop")
        ),
    ),
    "length-with-partial-call": (
        tool_req(max_tokens=8),
        wire.frames(*wire.k2_tool_stream(args='{"city": "Tok', finish="length")[:-2], chunk({}, "length")),
    ),
    "bom-at-start": (req(), b"\xef\xbb\xbf" + wire.frames(*wire.text_stream("hi"))),
}


@pytest.mark.parametrize("name", sorted(LEGAL_STREAMS))
def test_legal_stream_shape_has_no_error(name: str) -> None:
    request, raw = LEGAL_STREAMS[name]
    assert errors([sse_exchange(request, raw)]) == []


def test_legal_stream_shapes_survive_any_chunking() -> None:
    for request, raw in LEGAL_STREAMS.values():
        for size in (1, 7, 64):
            pieces = [raw[i : i + size] for i in range(0, len(raw), size)]
            ex = exchange({**request, "stream": True}, None, stream=True, pieces=pieces)
            assert errors([ex]) == []


def test_named_tool_choice_with_stop_is_legal() -> None:
    r = tool_req(tool_choice={"type": "function", "function": {"name": "get_weather"}})
    assert (
        check_exchanges(
            [exchange(r, completion(message(None, tool_calls=[call()]), "stop"))], CheckConfig(direct=True)
        ).findings
        == []
    )


def test_tool_calls_with_stop_from_another_upstream_is_only_a_warning() -> None:
    res = check_exchanges(
        [exchange(tool_req(), completion(message(None, tool_calls=[call()]), "stop"))],
        CheckConfig(direct=True),
    )
    assert [(f.rule, str(f.severity)) for f in res.findings] == [("finish-reason-mismatch", "warning")]


def test_k3_ids_are_not_judged_by_k2_rules() -> None:
    body = completion(
        message(None, tool_calls=[call(id="chatcmpl-tool-0123456789abcdef")]), "tool_calls", model=wire.K3
    )
    assert check_exchanges([exchange(tool_req(model=wire.K3), body)], CheckConfig(direct=True)).findings == []


def test_vllm_401_body_is_a_string() -> None:
    res = check_exchanges([exchange(req(), {"error": "Unauthorized"}, status=401)], CheckConfig(direct=True))
    assert [f.rule for f in res.findings] == ["http-client-error"]


def test_gzip_encoded_stream_is_decoded_chunk_by_chunk() -> None:
    import zlib

    raw = (DATA / "vllm033-stream-k2-tool.sse").read_bytes()
    comp = zlib.compressobj(wbits=31)
    gz = comp.compress(raw) + comp.flush()
    pieces = [gz[i : i + 50] for i in range(0, len(gz), 50)]
    ex = exchange({**WEATHER_REQ, "stream": True}, None, stream=True, pieces=pieces)
    assert ex.response is not None
    ex.response.headers.append(("content-encoding", "gzip"))
    assert check_exchanges([ex], CheckConfig(direct=True)).findings == []
    broken = exchange({**WEATHER_REQ, "stream": True}, None, stream=True, pieces=[b"not gzip at all"])
    assert broken.response is not None
    broken.response.headers.append(("content-encoding", "gzip"))
    rules = {f.rule for f in check_exchanges([broken], CheckConfig(direct=True)).findings}
    assert "stream-malformed-frame" in rules
