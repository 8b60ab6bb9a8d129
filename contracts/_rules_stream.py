"""Rules on SSE framing and stream assembly (vllm-wire.md section 2; gateway-faults.md).

Legal shapes that must pass: ``data:{...}`` without a space, CRLF, comments and keep-alives, several
``data:`` lines in one event, name-first tool deltas without ``arguments``, K3 whole-call deltas,
``continuous_usage_stats`` usage on every chunk, two entries of one index in one chunk.
"""

from __future__ import annotations

from collections.abc import Iterator

from ._assembly import AssembledStream, StreamAnomaly
from ._registry import (
    ALL_ENDPOINTS,
    ANOMALY,
    CHAT,
    ERROR_FRAMES,
    RESPONSES,
    CheckConfig,
    Fault,
    Hit,
    Severity,
    hit,
    rule,
)
from ._view import ExchangeView

_FRAMING = {
    "not-json": "data is not JSON (a frame split or joined mid-JSON?)",
    "not-object": "data is JSON but not an object",
    "bad-chunk-shape": "chunk does not have the chat.completion.chunk shape",
}
_SSE_FRAMING = {
    "unknown-field": "line with an unknown field (a frame without its 'data: ' prefix?)",
    "invalid-utf8": "bytes are not UTF-8",
    "bad-content-encoding": "the body does not decode by its Content-Encoding",
    "unterminated-event": "the last event has no closing blank line; a client drops it",
}


def _stream(view: ExchangeView) -> AssembledStream | None:
    """The assembled stream, or None when the response is not one (nothing for these rules)."""
    return view.stream if view.kind == "stream" else None


def _anomalies(view: ExchangeView, *kinds: str) -> list[StreamAnomaly]:
    """The assembler's anomalies of these kinds, in stream order; none when it is not a stream."""
    st = _stream(view)
    return [] if st is None else [a for a in st.anomalies if a.kind in kinds]


def _at_event(a: StreamAnomaly, message: str | None = None) -> Hit:
    """A finding on the event where the assembler saw the anomaly (its detail unless told)."""
    return hit(a.detail if message is None else message, f"/events/{a.event}{a.pointer}", event=a.event)


@rule("stream-malformed-frame", fault=Fault.ENGINE, area="stream", endpoints=ALL_ENDPOINTS)
def _malformed(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """An SSE frame that a client cannot decode: not JSON, wrong shape, no data: prefix, bad UTF-8, unterminated.

    Each event's data is one chunk object. Split or joined frames (litellm #30224, envoy #45437),
    a missing ``data: `` prefix (opik PR #5149) and cut streams all land here. At most three findings
    per kind, with the count."""
    st = _stream(view)
    if st is None:
        return
    counts: dict[str, int] = {}
    for a in st.anomalies:
        if a.kind in _FRAMING:
            counts[a.kind] = counts.get(a.kind, 0) + 1
            if counts[a.kind] <= 3:
                yield hit(
                    f"event {a.event}: {_FRAMING[a.kind]}",
                    f"/events/{a.event}{a.pointer}",
                    a.detail,
                    event=a.event,
                )
    for s in view.sse_anomalies:
        if s.kind in _SSE_FRAMING:
            if s.kind == "unterminated-event" and view.ex.error is not None:
                continue  # the transport cut it; transport-error says so
            counts[s.kind] = counts.get(s.kind, 0) + 1
            if counts[s.kind] <= 3:
                yield hit(_SSE_FRAMING[s.kind], f"/events/{s.event_index}", s.detail, event=s.event_index)
    extra = {k: n for k, n in counts.items() if n > 3}
    if extra:
        yield hit("more malformed frames: " + ", ".join(f"{n} {k}" for k, n in extra.items()), "/events")


@rule("stream-done-missing", fault=Fault.ENGINE, area="stream", endpoints=(CHAT,))
def _done_missing(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """The stream ended without data: [DONE].

    vLLM always ends with ``data: [DONE]``, also after an in-band error (one-api #1628). A stream
    cut by the transport is reported by ``transport-error``."""
    st = _stream(view)
    if st is not None and not st.done and view.ex.error is None:
        yield hit("no data: [DONE] at the end of the stream", f"/events/{st.events}")


@rule(
    "stream-done-repeated",
    fault=Fault.ENGINE,
    area="stream",
    endpoints=(CHAT,),
    needs=(ANOMALY + "done-repeated",),
)
def _done_repeated(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """data: [DONE] sent more than once.

    A second ``[DONE]`` (litellm #1255) confuses clients that read past the first."""
    st = _stream(view)
    if st is not None and st.done > 1:
        first = st.anomaly("done-repeated")[0]
        yield hit(f"[DONE] sent {st.done} times", f"/events/{first.event}", event=first.event)


@rule(
    "stream-data-after-done",
    fault=Fault.ENGINE,
    area="stream",
    endpoints=(CHAT,),
    needs=(ANOMALY + "data-after-done",),
)
def _after_done(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """Events after data: [DONE].

    Nothing follows ``[DONE]``; clients stop reading there and lose it."""
    st = _stream(view)
    if st is not None and st.after_done:
        first = st.anomaly("data-after-done")[0]
        yield hit(
            f"{st.after_done} event(s) after [DONE]",
            f"/events/{first.event}",
            first.detail,
            event=first.event,
        )


@rule("stream-error-frame", fault=Fault.ENGINE, area="stream", endpoints=ALL_ENDPOINTS, needs=(ERROR_FRAMES,))
def _error_frame(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """An in-band error frame data: {"error": ...} inside a 200 stream.

    How vLLM reports an engine failure after the stream started."""
    st = _stream(view)
    if st is None:
        return
    for n, err in st.error_frames:
        msg = err.get("message") if isinstance(err, dict) else err
        yield hit(f"error inside the stream: {msg}", f"/events/{n}/error", err, event=n)


@rule(
    "stream-tool-index-gap",
    fault=Fault.PARSER,
    area="stream",
    endpoints=(CHAT,),
    needs=(
        ANOMALY + "tool-index-gap",
        ANOMALY + "tool-index-missing",
    ),
)
def _index_gap(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """Streamed tool call indexes are not dense from 0, or missing.

    Clients index calls by ``index``: the first call is 0, the next 1 (agentgateway #2965)."""
    for a in _anomalies(view, "tool-index-gap", "tool-index-missing"):
        yield _at_event(a)


@rule(
    "stream-tool-index-reuse",
    fault=Fault.PARSER,
    area="stream",
    endpoints=(CHAT,),
    needs=(ANOMALY + "tool-index-reuse",),
)
def _index_reuse(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """Two tool calls streamed at one index (a client merges them).

    Every call at ``index: 0`` merges parallel calls into ``{..}{..}`` on the client (litellm #33678)."""
    for a in _anomalies(view, "tool-index-reuse"):
        yield _at_event(a)


@rule(
    "stream-tool-id-repeated",
    fault=Fault.PARSER,
    area="stream",
    endpoints=(CHAT,),
    needs=(
        ANOMALY + "tool-id-repeated",
        ANOMALY + "tool-name-repeated",
        ANOMALY + "tool-call-repeated",
    ),
)
def _id_repeated(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """A tool call's id or name is sent again on a later delta, or the whole call repeated.

    Clients concatenate ``id`` and ``function.name`` across deltas, so each is sent once per call
    (litellm #20480). A summary chunk repeating the whole call makes the client append it twice."""
    seen: set[str] = set()
    for a in _anomalies(view, "tool-id-repeated", "tool-name-repeated", "tool-call-repeated"):
        if a.kind + a.pointer not in seen:
            seen.add(a.kind + a.pointer)
            yield _at_event(a)


@rule("stream-usage-missing", fault=Fault.ENGINE, area="stream", endpoints=(CHAT,))
def _usage_missing(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """stream_options.include_usage was asked and no usage chunk came.

    With ``include_usage`` the last chunk before ``[DONE]`` has ``"choices": []`` and ``usage``
    (dropped by some gateways: OmniRoute #9750)."""
    st = _stream(view)
    if st is None or not view.ok:
        return
    so = view.req.get("stream_options")
    if isinstance(so, dict) and so.get("include_usage") is True and st.usage is None:
        yield hit("include_usage was asked but no chunk carried usage", "/events")


@rule(
    "stream-output-after-finish",
    fault=Fault.ENGINE,
    area="stream",
    endpoints=(CHAT,),
    needs=(
        ANOMALY + "output-after-finish",
        ANOMALY + "finish-reason-repeated",
    ),
)
def _after_finish(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """Output deltas for a choice after its finish_reason.

    A choice ends with its finish chunk; later text, reasoning or calls are output of a second
    attempt (a gateway's mid-stream retry: nuguard #455) or a framing bug."""
    for a in _anomalies(view, "output-after-finish")[:1]:
        yield _at_event(a, f"output after the choice finished ({a.detail})")
    for a in _anomalies(view, "finish-reason-repeated")[:1]:
        yield _at_event(a, f"finish_reason changed within the stream: {a.detail}")


@rule(
    "stream-inconsistent",
    fault=Fault.ENGINE,
    severity=Severity.WARNING,
    area="stream",
    endpoints=(CHAT, RESPONSES),
    needs=(
        ANOMALY + "chunk-id-changed",
        ANOMALY + "model-changed",
    ),
)
def _inconsistent(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """Chunk id or model changes within one stream.

    All chunks of a stream share ``id`` and ``model``; a change means two streams were spliced."""
    for kind in ("chunk-id-changed", "model-changed"):
        for a in _anomalies(view, kind)[:1]:
            yield _at_event(a)


@rule(
    "stream-content-type",
    fault=Fault.ENGINE,
    severity=Severity.WARNING,
    area="stream",
    endpoints=ALL_ENDPOINTS,
)
def _content_type(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """A streamed response without Content-Type text/event-stream.

    vLLM sends ``text/event-stream``; proxies decide whether to buffer by it."""
    if _stream(view) is not None and not view.content_type.lower().startswith("text/event-stream"):
        yield hit(f"Content-Type is {view.content_type or 'absent'!r}", "/response/headers/content-type")


@rule("stream-not-streamed", fault=Fault.ENGINE, area="stream", endpoints=ALL_ENDPOINTS)
def _not_streamed(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """The request asked stream: true and the response is one JSON body.

    A gateway that turns a stream into one body hides every token's timing."""
    if view.wants_stream and view.kind == "json":
        yield hit("stream was asked but the response is a single JSON body", "/response")
