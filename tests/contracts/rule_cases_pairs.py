"""The rule catalogue's cases that need two taps, twins, the /v1/responses and /v1/messages framing, or
usage held against the wire (the builders and the one-exchange cases are in rule_cases.py)."""

from __future__ import annotations

import json

from tests.contracts.rule_cases import (
    K2_ERR,
    OK_TOOL,
    REASONING,
    Case,
    api_stream,
    buffered_pair,
    pair,
    stream_pair,
    taps,
    tool_msg,
    twins,
)
from tests.support import apiwire as aw
from tests.support import wire
from tests.support.wire import (
    call,
    chunk,
    completion,
    exchange,
    message,
    req,
    role_chunk,
    tool_req,
    usage_counts,
)

# rule id -> (failing case, passing case, fault of the failing case)
PAIRS: dict[str, tuple[Case, Case, str]] = {
    # --- dual tap
    "gateway-request-changed": (
        pair(
            req(response_format={"type": "json_object"}),
            completion(message("{}")),
            req(),
            completion(message("{}")),
        ),
        pair(req(), completion()),
        "gateway",
    ),
    "gateway-status-changed": (
        lambda: taps(exchange(req(), K2_ERR, status=502), exchange(req(), completion())),
        pair(req(), completion()),
        "gateway",
    ),
    "gateway-reasoning-dropped": (
        stream_pair(wire.text_stream("Hello"), REASONING),
        stream_pair(REASONING, REASONING),
        "gateway",
    ),
    "gateway-reasoning-merged": (
        stream_pair(wire.text_stream("The user", "Hello"), REASONING),
        stream_pair(REASONING, REASONING),
        "gateway",
    ),
    "gateway-reasoning-reshaped": (
        pair(
            req(),
            completion(message("Hello", reasoning=None, reasoning_details=[{"text": "x"}])),
            req(),
            completion(message("Hello", reasoning="x")),
        ),
        pair(req(), completion(message("Hello", reasoning="x"))),
        "gateway",
    ),
    "gateway-reasoning-renamed": (
        pair(
            req(),
            completion(message("Hello", reasoning=None, reasoning_content="x")),
            req(),
            completion(message("Hello", reasoning="x")),
        ),
        pair(req(), completion(message("Hello", reasoning="x"))),
        "gateway",
    ),
    "gateway-content-changed": (
        pair(req(), completion(message("Hello Hello")), req(), completion()),
        pair(req(), completion()),
        "gateway",
    ),
    "gateway-tool-calls-changed": (
        pair(tool_req(), tool_msg(call(args=json.dumps('{"city": "Tokyo"}'))), tool_req(), tool_msg(call())),
        pair(tool_req(), tool_msg(call(args='{"city":"Tokyo"}')), tool_req(), tool_msg(call())),
        "gateway",
    ),
    "gateway-finish-reason-changed": (
        pair(tool_req(), tool_msg(call(), finish="stop"), tool_req(), tool_msg(call())),
        OK_TOOL,
        "gateway",
    ),
    "gateway-usage-changed": (
        stream_pair(
            wire.text_stream("hi"),
            wire.text_stream("hi", usage=True),
            req(stream_options={"include_usage": True}),
        ),
        stream_pair(wire.text_stream("hi", usage=True), wire.text_stream("hi", usage=True)),
        "gateway",
    ),
    "gateway-error-hidden": (
        stream_pair(wire.text_stream("He"), [role_chunk(), chunk({"content": "He"}), K2_ERR]),
        stream_pair(wire.text_stream("He"), wire.text_stream("He")),
        "gateway",
    ),
    "gateway-stream-buffered": (lambda: buffered_pair(True), lambda: buffered_pair(False), "gateway"),
    "gateway-retried": (
        lambda: [
            exchange(req(), completion(), tap="caller", correlation="k"),
            exchange(req(), K2_ERR, status=500, tap="engine", correlation="k"),
            exchange(req(), completion(), tap="engine", correlation="k"),
        ],
        pair(req(), completion()),
        "gateway",
    ),
    "taps-unpaired": (
        lambda: [
            exchange(req(), {**completion(), "id": "chatcmpl-a"}, tap="caller"),
            exchange(
                req(messages=[{"role": "user", "content": "another"}]),
                {**completion(), "id": "chatcmpl-b"},
                tap="engine",
            ),
        ],
        pair(req(), completion()),
        "unknown",
    ),
    # --- stream vs non-stream
    "stream-nonstream-mismatch": (
        twins(wire.k2_tool_stream(args='{"city": "Osaka"}'), tool_msg(call()), tool_req(temperature=0)),
        twins(wire.k2_tool_stream(), tool_msg(call()), tool_req(temperature=0)),
        "parser",
    ),
    # --- token accounting: a call of ~200 tokens dropped from an answer of one short sentence
    "output-tokens-vanished": (
        lambda: [
            exchange(
                tool_req(),
                completion(message("Let me check.", reasoning="Call the tool."), usage=usage_counts(90, 240)),
            )
        ],
        lambda: [
            exchange(
                tool_req(),
                completion(message("Let me check.", reasoning="Call the tool."), usage=usage_counts(90, 9)),
            )
        ],
        "parser",
    ),
    # --- /v1/responses and /v1/messages framing (more in test_apis.py)
    "api-stream-order": (
        lambda: [api_stream("/v1/responses", aw.responses_events()[1:])],
        lambda: [api_stream("/v1/responses", aw.responses_events())],
        "engine",
    ),
    "api-stream-sequence": (
        lambda: [api_stream("/v1/responses", [e | {"sequence_number": 0} for e in aw.responses_events()])],
        lambda: [api_stream("/v1/responses", aw.responses_events())],
        "engine",
    ),
    "api-block-index": (
        lambda: [
            api_stream(
                "/v1/messages", [e | {"index": 3} if e.get("index") == 1 else e for e in aw.messages_events()]
            )
        ],
        lambda: [api_stream("/v1/messages", aw.messages_events())],
        "engine",
    ),
    "api-stream-disagrees": (
        lambda: [
            api_stream(
                "/v1/responses",
                [
                    *aw.responses_events()[:-1],
                    {
                        "type": "response.completed",
                        "sequence_number": len(aw.responses_events()) - 1,
                        "response": aw.response_object([]),
                    },
                ],
            )
        ],
        lambda: [api_stream("/v1/responses", aw.responses_events())],
        "engine",
    ),
}
