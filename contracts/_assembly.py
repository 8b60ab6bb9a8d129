"""Stream assembly: turn chat-completion chunks into the message a client ends up with.

The accumulation follows what real clients do (the OpenAI Python SDK, vllm-wire.md section 2): for a
tool-call delta, ``index`` and ``type`` are replaced and every other string, ``id`` and
``function.name`` included, is concatenated; ``content`` and reasoning are concatenated.

Nothing is hidden: every departure from the contract is kept as a :class:`StreamAnomaly` with the event
it came from. Where a real client would be corrupted (an ``id`` repeated on every delta becomes
``call_1call_1`` in the SDK; two calls sent at one index merge into ``{..}{..}``), the anomaly records
that corruption and the assembled message keeps the *intended* call instead, so that one gateway fault
does not cascade into model findings on the same bytes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import orjson

from ._json import MAX_DEPTH, JsonLimitError, plain_numbers
from ._json import loads as bounded_loads
from ._native import native
from ._sse import SSEAnomaly, SSEEvent

__all__ = ["AssembledCall", "AssembledChoice", "AssembledStream", "StreamAnomaly", "assemble_stream"]

_MAX_EXCERPT = 200


@dataclass(slots=True)
class StreamAnomaly:
    kind: str
    detail: str
    event: int
    pointer: str = ""


@dataclass(slots=True)
class AssembledCall:
    index: int
    id: str | None = None
    type: str | None = None
    name: str = ""
    arguments: str = ""
    first_event: int = 0
    deltas: int = 0
    has_arguments_key: bool = False
    #: where the call sits on the wire when that is not a chat message (/v1/responses, /v1/messages)
    pointer: str = ""


@dataclass(slots=True)
class AssembledChoice:
    index: int
    role: str | None = None
    content: str | None = None
    reasoning: str | None = None
    reasoning_fields: set[str] = field(default_factory=set)
    extra_delta_keys: set[str] = field(default_factory=set)
    calls: list[AssembledCall] = field(default_factory=list)
    finish_reason: str | None = None
    finish_event: int | None = None
    stop_reason: Any = None
    #: the endpoint's own word for how the answer ended, where it is not a chat finish_reason:
    #: a Responses ``status``, a Messages ``stop_reason`` (``end_turn``, ``stop_sequence``, ...)
    native_finish: str | None = None
    #: streams only: the reasoning text of the last piece when only the end followed it (a chat
    #: finish chunk's reasoning; a Responses stream's last reasoning delta), else "". vLLM 0.32 may
    #: send it in one delta with the end of sequence, and its engine parsers then leave its tokens
    #: out of the streamed ``reasoning_tokens`` when the thinking never closed
    #: (``_translate.uncounted_reasoning``)
    reasoning_at_end: str = ""
    _by_index: dict[int, AssembledCall] = field(default_factory=dict)

    @property
    def tool_calls(self) -> list[AssembledCall]:
        return self.calls


@dataclass(slots=True)
class AssembledStream:
    events: int = 0
    frames: int = 0
    choices: dict[int, AssembledChoice] = field(default_factory=dict)
    usage: dict[str, Any] | None = None
    usage_chunks: int = 0
    usage_only_chunks: int = 0
    done: int = 0
    done_event: int | None = None
    after_done: int = 0
    error_frames: list[tuple[int, Any]] = field(default_factory=list)
    anomalies: list[StreamAnomaly] = field(default_factory=list)
    sse_anomalies: list[SSEAnomaly] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    model: str | None = None
    system_fingerprint: str | None = None
    first_event_ms: float | None = None
    first_token_ms: float | None = None
    last_token_ms: float | None = None
    token_events: int = 0
    token_times: list[float] = field(default_factory=list)

    def anomaly(self, kind: str) -> list[StreamAnomaly]:
        return [a for a in self.anomalies if a.kind == kind]


def _excerpt(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _MAX_EXCERPT else text[:_MAX_EXCERPT] + "…"


_STANDARD_DELTA_KEYS = frozenset(
    {"role", "content", "reasoning", "reasoning_content", "tool_calls", "function_call", "refusal", "audio"}
)


def frame_object(st: AssembledStream, data: str, n: int, *, plain: bool = False) -> dict[str, Any] | None:
    """One event's data as the JSON object every frame of chat, /v1/responses and /v1/messages
    streams is, counted as a frame; None, with the anomaly recorded, when it is not one. ``plain``:
    :func:`frames_plain` said so of its stream."""
    try:
        obj = bounded_loads(data, plain=plain)
    except JsonLimitError as exc:
        st.anomalies.append(StreamAnomaly("json-limit", str(exc), n))
        return None
    except ValueError as exc:
        st.anomalies.append(StreamAnomaly("not-json", f"{exc}: {_excerpt(data)}", n))
        return None
    if not isinstance(obj, dict):
        st.anomalies.append(StreamAnomaly("not-object", _excerpt(data), n))
        return None
    st.frames += 1
    return obj


def frames_plain(events: list[SSEEvent]) -> bool:
    """No event's data holds a number that orjson may read otherwise than json: asked once for the
    stream (``_json.plain_numbers``), not for each frame."""
    return plain_numbers([ev.data for ev in events])


def assemble_stream(events: list[SSEEvent], *, plain: bool | None = None) -> AssembledStream:
    """Assemble decoded SSE events into per-choice messages, recording every anomaly. ``plain``:
    what :func:`frames_plain` says of them, where the decoder knows it already.

    Written for the fewest calls per frame (a call costs about what a line of tests does): a short
    frame is read by orjson before it is searched for a ``[DONE]`` with spaces about it (an object
    never is one), the frames read so are counted at the end, and the first event's time is taken
    once."""
    if plain is None:
        plain = frames_plain(events)
    if plain and _WHOLE is not None and events.__class__ is list:
        # the whole stream at once where it is plain (``_assembly_c.assemble_plain``), else here
        whole = _WHOLE(
            events,
            SSEEvent,
            AssembledStream,
            AssembledChoice,
            orjson.loads,
            _BOUNDED,
            2 * MAX_DEPTH,
            TEMPLATE_MAX,
            _PROBE,
            _PROBED,
        )
        if whole is not None:
            return whole  # type: ignore[no-any-return]
    st = AssembledStream()
    st.events = len(events)
    # a frame this short goes to orjson here, as bounded loads sends it (it cannot nest past the
    # bound): the calls between cost as much as orjson's read; anything else goes the long way
    short = 2 * MAX_DEPTH if plain else -1
    by_index, token_times = st.choices, st.token_times
    # every event asks this first: the first time any of them has
    for ev in events:
        if ev.t_ms is not None:
            st.first_event_ms = ev.t_ms
            break
    # the stream's first id and model as _take_chunk has left them (neither changes once set); no
    # chunk is folded in before the first has gone through _take_chunk, which makes its choice
    id0: Any = _UNSET
    model0: Any = _UNSET
    loads, not_json = orjson.loads, orjson.JSONDecodeError
    read = tokens = 0  # frames read here as objects, and those of them folded in with text
    # the text around a text field's string in its plain chunks (``_Template``), one a field (an
    # answer's content; a thinking model's reasoning before it), each learned from its field's first
    # such chunk. The one that matched last, ``tpl``, is held in locals (the text before it and its
    # length, the text after it and its length, never empty, and the shortest chunk of it); the
    # others wait in ``spare`` (a stream of one text field has none)
    tpl: _Template | None = None
    spare: list[_Template] = []
    before, after, cut, tail, least = "", "", 0, 0, 0
    learn: set[str] | None = set() if plain else None  # the fields whose template was tried
    # the compiled twin folds a run of template-alike chunks in one call (``_assembly_c.c``): the
    # iterator is then moved past the run, ``at`` counting where it stands
    fold = _C.fold_text if _C is not None and events.__class__ is list else None
    it = iter(events)
    at = 0
    for ev in it:
        if fold is not None and tpl is not None and not st.done:
            run = None
            if tpl.usable():
                run = fold(events, at, before, after, least, TEMPLATE_MAX, SSEEvent)
            if run is None and spare:  # a chunk of another field: its template, if it has one
                for other in spare:
                    if other.usable():
                        run = fold(events, at, other.before, other.after, other.least, TEMPLATE_MAX, SSEEvent)
                        if run is not None:
                            spare[spare.index(other)] = tpl
                            tpl = other
                            before, after, cut, tail, least = tpl.parts()
                            break
            if run is not None:
                end, text, count, times = run
                _put(tpl.choice, tpl.field, tpl.call, text, end - at)
                if tpl.call is not None and count != end - at:
                    # each chunk of a call's arguments is a token, an empty one too
                    count = end - at
                    times = [t for e in events[at:end] if (t := e.t_ms) is not None]
                read += end - at
                tokens += count
                if times:
                    if st.first_token_ms is None:
                        st.first_token_ms = times[0]
                    st.last_token_ms = times[-1]
                    token_times.extend(times)
                it.__setstate__(end)  # type: ignore[attr-defined]  # a list's iterator: the next event read
                at = end
                continue
        at += 1
        data = ev.data
        if tpl is not None:
            alike = data.startswith(before) and data.endswith(after) and least <= len(data) <= TEMPLATE_MAX
            if not alike and spare:
                for other in spare:
                    if (
                        data.startswith(other.before)
                        and data.endswith(other.after)
                        and other.least <= len(data) <= TEMPLATE_MAX
                    ):
                        spare[spare.index(other)] = tpl
                        tpl = other
                        before, after, cut, tail, least = tpl.parts()
                        alike = True
                        break
            if alike:
                # the text of the same chunk, but for its text: only that string is read
                try:
                    text = loads(data[cut:-tail])
                except not_json:
                    text = None
                if text.__class__ is str and not st.done and tpl.usable():
                    read += 1
                    _put(tpl.choice, tpl.field, tpl.call, text, 1)
                    if text or tpl.call is not None:
                        tokens += 1
                        _stamp(st, ev.t_ms)
                    continue
        if st.done:
            n = ev.index
            if data.strip() == "[DONE]":
                st.done += 1
                st.anomalies.append(StreamAnomaly("done-repeated", "[DONE]", n))
            else:
                st.after_done += 1
                st.anomalies.append(StreamAnomaly("data-after-done", _excerpt(data), n))
            continue
        if data == "[DONE]":
            st.done = 1
            st.done_event = ev.index
            continue
        obj: Any
        if len(data) <= short:
            try:
                obj = loads(data)
            except not_json:
                obj = None
        else:
            obj = None
        if obj.__class__ is dict:
            read += 1
        else:  # not read, or not an object: [DONE] spaced, or as frame_object reads it, anomaly and all
            if "[DONE]" in data and data.strip() == "[DONE]":
                st.done = 1
                st.done_event = ev.index
                continue
            obj = frame_object(st, data, ev.index, plain=plain)
            if obj is None:
                continue
        choices = obj.get("choices")
        # nearly every chunk of an answer: the stream's id and model, one choice already under
        # way whose delta is one text field only (its content, or its reasoning) or one piece of a
        # begun call's arguments, no finish, usage or fingerprint; folded in as _take_chunk folds it
        # (no anomaly can arise), without its calls and tests
        if (
            choices.__class__ is list
            and len(choices) == 1
            and obj.get("id") == id0
            and obj.get("model") == model0
            and obj.get("usage") is None
            and obj.get("system_fingerprint") is None
        ):
            ch = choices[0]
            if ch.__class__ is dict and ch.get("finish_reason") is None:
                delta = ch.get("delta")
                idx = ch.get("index", 0)
                choice = by_index.get(idx) if idx.__class__ is int else None
                if (
                    delta.__class__ is dict
                    and len(delta) == 1
                    and choice is not None
                    and choice.finish_reason is None
                ):
                    # its one key, where that is a text field: the answer's, or a thinking model's
                    # reasoning under either of its names (vllm-wire.md: ``reasoning`` since vLLM
                    # 0.16, ``reasoning_content`` from other servers and gateways); or a piece of a
                    # begun call's arguments and nothing else (vLLM's every chunk of a call after
                    # its first). Any other key finds no string
                    tcs = delta.get("tool_calls")
                    call: AssembledCall | None = None
                    if tcs is None:
                        field = (
                            "content"
                            if "content" in delta
                            else "reasoning"
                            if "reasoning" in delta
                            else "reasoning_content"
                        )
                        text = delta.get(field)
                    elif (call := _arguments_call(choice, tcs)) is not None:
                        field, text = "arguments", tcs[0]["function"]["arguments"]
                    else:
                        text = None
                    if text.__class__ is str:
                        # the first such chunk of the field (of the call): the others are likely its
                        # text but for the text
                        key = field if call is None else f"arguments:{call.index}"
                        if learn is not None and key not in learn:
                            learn.add(key)
                            learned = _template(data, obj, text, choice, field=field, call=call)
                            if learned is not None:
                                if tpl is not None:
                                    spare.append(tpl)
                                tpl = learned
                                before, after, cut, tail, least = tpl.parts()
                        _put(choice, field, call, text, 1)
                        if text or call is not None:
                            tokens += 1
                            _stamp(st, ev.t_ms)
                        continue
        elif choices is None and "error" in obj and "choices" not in obj:
            st.error_frames.append((ev.index, obj["error"]))
            continue
        _take_chunk(st, obj, ev)
        # what a chunk must repeat to be folded in as above: the stream's id and model as the chunks
        # so far left them, None where none was a string (a server or gateway that writes no model
        # or id: _take_chunk reads a chunk without them as one that changes nothing)
        id0 = st.ids[0] if st.ids else None
        model0 = st.model
    st.frames += read
    st.token_events += tokens
    return st


#: the compiled twin of the template fold in :func:`assemble_stream` (``_assembly_c.c``), or None
_C = native("wirecheck.contracts._assembly_c")

#: the longest chunk read through its template: bounded loads reads anything longer (``MAX_BYTES``)
TEMPLATE_MAX = 1 << 20

#: how a frame of a plain stream past ``2 * MAX_DEPTH`` characters is read (``frame_object``'s read)
_BOUNDED = partial(bounded_loads, plain=True)

#: the compiled assembly of a plain stream whole (``_assembly_c.assemble_plain``), or None
_WHOLE = None if _C is None else _C.assemble_plain


def _stamp(st: AssembledStream, t: float | None) -> None:
    """A token's chunk arrived at ``t`` (its arrival offset, where it has one)."""
    if t is not None:
        if st.first_token_ms is None:
            st.first_token_ms = t
        st.last_token_ms = t
        st.token_times.append(t)


def _arguments_call(choice: AssembledChoice, tcs: Any) -> AssembledCall | None:
    """The begun call a ``tool_calls`` delta goes to where it is one piece of that call's arguments
    and nothing else (``[{"index": i, "function": {"arguments": "..."}}]``), else None: such a piece
    changes nothing but the call's arguments and its count of deltas (``_take_tool_delta``)."""
    if tcs.__class__ is not list or len(tcs) != 1:
        return None
    tc = tcs[0]
    if tc.__class__ is not dict or len(tc) != 2:
        return None
    i, fn = tc.get("index"), tc.get("function")
    if i.__class__ is not int or fn.__class__ is not dict or len(fn) != 1:
        return None
    if fn.get("arguments").__class__ is not str:
        return None
    return choice._by_index.get(i)


def _put(choice: AssembledChoice, field: str, call: AssembledCall | None, text: str, pieces: int) -> None:
    """``pieces`` deltas of one text ``field`` alone, their strings joined ``text``, folded into
    their choice as ``_take_delta`` folds them; with ``call``, pieces of that call's arguments,
    folded into it as ``_take_tool_delta`` folds them."""
    if call is not None:
        call.arguments += text
        call.deltas += pieces
        call.has_arguments_key = True
    elif field == "content":
        choice.content = text if choice.content is None else choice.content + text
    else:
        choice.reasoning_fields.add(field)
        choice.reasoning = text if choice.reasoning is None else choice.reasoning + text


@dataclass(slots=True)
class _Template:
    """The text of a stream's plain chunk around the string of its one text field: a server writes
    every such chunk of a stream alike (its id, model, time, choice and the rest the same), so a
    chunk that is this text around one JSON string is that chunk with that string for the field.
    Only the string is read (a tenth of the chunk), and the chunk is folded in as the plain chunk
    it is."""

    before: str
    after: str
    #: the shortest such chunk (with the string's two quotes)
    least: int
    choice: AssembledChoice
    #: the delta's field: ``content``, ``reasoning`` or ``reasoning_content``; ``arguments`` for a
    #: piece of a call's arguments
    field: str = "content"
    #: the lengths of ``before`` and ``after``: the string is ``text[cut:-tail]``
    cut: int = 0
    tail: int = 0
    #: the call whose arguments the string is a piece of (``field`` is then ``arguments``), or None
    call: AssembledCall | None = None

    def usable(self) -> bool:
        """Whether a chunk alike may be folded in now: its choice is under way and, for a call's
        arguments, its index still holds that call (a second call sent at one index takes it)."""
        choice = self.choice
        if choice.finish_reason is not None:
            return False
        call = self.call
        return call is None or choice._by_index.get(call.index) is call

    def parts(self) -> tuple[str, str, int, int, int]:
        """``before``, ``after``, ``cut``, ``tail`` and ``least``: what the assembler's loop holds
        in locals of the template that matched last."""
        return self.before, self.after, self.cut, self.tail, self.least


#: a JSON string, from its opening quote to its closing one
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
#: what the template is tried with: a string no chunk holds (a NUL, an escape of each kind)
_PROBE = '"\\u0000\\n\\"probe"'
_PROBED = orjson.loads(_PROBE)


def _template(
    data: str,
    obj: dict[str, Any],
    text: str,
    choice: AssembledChoice,
    *,
    field: str = "content",
    call: AssembledCall | None = None,
) -> _Template | None:
    """The template of this plain chunk (``obj`` read from ``data``, ``text`` its delta's one
    ``field``, or with ``call`` the one piece of that call's ``arguments`` its delta holds), or None
    where it cannot be told with certainty: the one ``"<field>":`` key of the chunk's text must be
    followed by a JSON string, and the text with another string in its place must read as ``obj``
    with that string for the field (so the string cut out is the delta's, not an equal one
    elsewhere)."""
    if text == _PROBED:  # then the probe would not tell where the text is
        return None
    key = f'"{field}":'
    at = data.find(key)
    if at < 0 or data.find(key, at + 1) >= 0:
        return None
    start = at + len(key)
    while start < len(data) and data[start] in " \t\n\r":
        start += 1
    m = _JSON_STRING.match(data, start)
    if m is None:
        return None
    before, after = data[:start], data[m.end() :]
    if not after:  # not an object closed after it (never one that reads as one)
        return None
    try:
        probe = orjson.loads(before + _PROBE + after)
    except orjson.JSONDecodeError:
        return None
    # the probe where the text was, and nowhere else (``obj`` is the caller's: not changed)
    try:
        holder = probe["choices"][0]["delta"]
        if call is not None:
            holder = holder["tool_calls"][0]["function"]
        if holder[field] != _PROBED:
            return None
        holder[field] = text
    except (KeyError, IndexError, TypeError):
        return None
    if probe != obj:
        return None
    cut, tail = len(before), len(after)
    return _Template(before, after, cut + tail + 2, choice, field, cut, tail, call)


#: no value a frame may hold (equal to nothing but itself)
_UNSET = object()


def _take_chunk(st: AssembledStream, obj: dict[str, Any], ev: SSEEvent) -> None:
    n = ev.index
    cid = obj.get("id")
    if isinstance(cid, str):
        if not st.ids:
            st.ids.append(cid)
        elif cid != st.ids[0]:
            if cid not in st.ids:
                st.ids.append(cid)
            st.anomalies.append(StreamAnomaly("chunk-id-changed", f"{st.ids[0]} -> {cid}", n, "/id"))
    model = obj.get("model")
    if isinstance(model, str):
        if st.model is None:
            st.model = model
        elif model != st.model:
            st.anomalies.append(StreamAnomaly("model-changed", f"{st.model} -> {model}", n, "/model"))
    fp = obj.get("system_fingerprint")
    if isinstance(fp, str):
        st.system_fingerprint = fp
    usage = obj.get("usage")
    choices = obj.get("choices")
    if usage is not None:
        if isinstance(usage, dict):
            st.usage = usage
            st.usage_chunks += 1
            if choices == []:
                st.usage_only_chunks += 1
        else:
            st.anomalies.append(StreamAnomaly("bad-chunk-shape", f"usage is {_excerpt(usage)}", n, "/usage"))
    if not isinstance(choices, list):
        st.anomalies.append(StreamAnomaly("bad-chunk-shape", "chunk has no choices list", n, "/choices"))
        return
    token = False
    for ci, ch in enumerate(choices):
        if not isinstance(ch, dict):
            st.anomalies.append(
                StreamAnomaly("bad-chunk-shape", "choice is not an object", n, f"/choices/{ci}")
            )
            continue
        idx = ch.get("index", 0)
        if not isinstance(idx, int):
            st.anomalies.append(
                StreamAnomaly("bad-chunk-shape", f"choice index {idx!r}", n, f"/choices/{ci}/index")
            )
            idx = 0
        choice = st.choices.get(idx)
        if choice is None:
            choice = st.choices[idx] = AssembledChoice(idx)
        delta = ch.get("delta")
        if delta is None:
            delta = {}
            if "message" in ch:
                st.anomalies.append(
                    StreamAnomaly(
                        "bad-chunk-shape", "stream choice carries message, not delta", n, f"/choices/{ci}"
                    )
                )
            else:
                st.anomalies.append(
                    StreamAnomaly("bad-chunk-shape", "choice has no delta", n, f"/choices/{ci}")
                )
        elif not isinstance(delta, dict):
            st.anomalies.append(
                StreamAnomaly("bad-chunk-shape", f"delta is {_excerpt(delta)}", n, f"/choices/{ci}/delta")
            )
            delta = {}
        if delta and _take_delta(st, choice, delta, n, ci):
            token = True
        fr = ch.get("finish_reason")
        if fr is not None:
            if choice.finish_reason is None:
                choice.finish_reason = fr
                choice.finish_event = n
                choice.stop_reason = ch.get("stop_reason")
                piece = delta.get("reasoning", delta.get("reasoning_content"))
                choice.reasoning_at_end = piece if isinstance(piece, str) else ""
            elif fr != choice.finish_reason:
                st.anomalies.append(
                    StreamAnomaly(
                        "finish-reason-repeated", f"{choice.finish_reason} then {fr}", n, f"/choices/{ci}"
                    )
                )
    if token:
        st.token_events += 1
        if ev.t_ms is not None:
            if st.first_token_ms is None:
                st.first_token_ms = ev.t_ms
            st.last_token_ms = ev.t_ms
            st.token_times.append(ev.t_ms)


def _take_delta(st: AssembledStream, choice: AssembledChoice, delta: dict[str, Any], n: int, ci: int) -> bool:
    """Fold one delta into its choice (at ``/choices/ci/delta``); True when it carried output (not
    just the role)."""
    content = delta.get("content")
    if len(delta) == 1 and isinstance(content, str):  # nearly every delta of an answer: its text only
        choice.content = content if choice.content is None else choice.content + content
        if content and choice.finish_reason is not None:
            _after_finish(st, choice, n, f"/choices/{ci}/delta")
        return bool(content)
    ptr = f"/choices/{ci}/delta"
    token = False
    after_finish = choice.finish_reason is not None
    role = delta.get("role")
    if role is not None:
        choice.role = role if choice.role is None else choice.role
    if content is not None:
        if isinstance(content, str):
            choice.content = content if choice.content is None else choice.content + content
            token = token or bool(content)
        else:
            st.anomalies.append(
                StreamAnomaly("bad-chunk-shape", f"content is {_excerpt(content)}", n, ptr + "/content")
            )
    r1 = delta.get("reasoning")
    r2 = delta.get("reasoning_content")
    if r1 is not None or r2 is not None:
        if r1 is not None:
            choice.reasoning_fields.add("reasoning")
        if r2 is not None:
            choice.reasoning_fields.add("reasoning_content")
        if r1 is not None and r2 is not None and r1 != r2:
            st.anomalies.append(
                StreamAnomaly(
                    "reasoning-conflict", f"reasoning={_excerpt(r1)} reasoning_content={_excerpt(r2)}", n, ptr
                )
            )
        piece = r1 if r1 is not None else r2
        if isinstance(piece, str):
            choice.reasoning = piece if choice.reasoning is None else choice.reasoning + piece
            token = token or bool(piece)
        else:
            st.anomalies.append(
                StreamAnomaly(
                    "reasoning-not-string",
                    _excerpt(piece),
                    n,
                    ptr + ("/reasoning" if r1 is not None else "/reasoning_content"),
                )
            )
            token = True
    if not _STANDARD_DELTA_KEYS.issuperset(delta):
        for key, value in delta.items():
            if key not in _STANDARD_DELTA_KEYS:
                choice.extra_delta_keys.add(key)
                if value not in (None, "", [], {}):
                    token = True
    tcs = delta.get("tool_calls")
    if tcs is not None:
        if not isinstance(tcs, list):
            st.anomalies.append(
                StreamAnomaly("bad-chunk-shape", f"tool_calls is {_excerpt(tcs)}", n, ptr + "/tool_calls")
            )
        else:
            for ti, tc in enumerate(tcs):
                if isinstance(tc, dict):
                    _take_tool_delta(st, choice, tc, n, f"{ptr}/tool_calls/{ti}")
                    token = True
                else:
                    st.anomalies.append(
                        StreamAnomaly(
                            "bad-chunk-shape", "tool call delta is not an object", n, f"{ptr}/tool_calls/{ti}"
                        )
                    )
    if token and after_finish:
        _after_finish(st, choice, n, ptr)
    return token


def _after_finish(st: AssembledStream, choice: AssembledChoice, n: int, ptr: str) -> None:
    st.anomalies.append(
        StreamAnomaly("output-after-finish", f"finish_reason was {choice.finish_reason}", n, ptr)
    )


def _take_tool_delta(
    st: AssembledStream, choice: AssembledChoice, tc: dict[str, Any], n: int, ptr: str
) -> None:
    idx = tc.get("index")
    tc_id = tc.get("id")
    fn = tc.get("function")
    if fn is not None and not isinstance(fn, dict):
        st.anomalies.append(
            StreamAnomaly("bad-chunk-shape", f"function is {_excerpt(fn)}", n, ptr + "/function")
        )
        fn = None
    name = fn.get("name") if fn else None
    args = fn.get("arguments") if fn else None
    has_args = fn is not None and "arguments" in fn
    if args is not None and not isinstance(args, str):
        st.anomalies.append(
            StreamAnomaly("arguments-not-string", _excerpt(args), n, ptr + "/function/arguments")
        )
        args = json.dumps(args, ensure_ascii=False)
    if not isinstance(idx, int) or isinstance(idx, bool):
        st.anomalies.append(StreamAnomaly("tool-index-missing", f"index is {idx!r}", n, ptr + "/index"))
        last = choice.calls[-1] if choice.calls else None
        if last is None or (tc_id and tc_id != last.id) or (name and name != last.name):
            idx = (max(choice._by_index) + 1) if choice._by_index else 0
        else:
            idx = last.index
    call = choice._by_index.get(idx)
    if call is not None and (
        (tc_id and call.id and tc_id != call.id) or (name and call.name and name != call.name)
    ):
        # A second call sent at an index already taken: the SDK would merge the two into one.
        st.anomalies.append(
            StreamAnomaly(
                "tool-index-reuse",
                f"index {idx} already holds {call.name or call.id!s}; new call {name or tc_id!s}",
                n,
                ptr + "/index",
            )
        )
        call = None
    if call is None:
        expected = len(choice.calls)
        if idx != expected and idx not in choice._by_index:
            st.anomalies.append(
                StreamAnomaly(
                    "tool-index-gap",
                    f"new call at index {idx}, expected {expected} (indexes are dense from 0)",
                    n,
                    ptr + "/index",
                )
            )
        call = AssembledCall(index=idx, id=tc_id, type=tc.get("type"), name=name or "", first_event=n)
        choice.calls.append(call)
        choice._by_index[idx] = call
        call.arguments = args or ""
        call.has_arguments_key = has_args
        call.deltas = 1
        return
    call.deltas += 1
    if tc_id and tc_id == call.id and args and args == call.arguments:
        # A summary chunk that repeats the whole call (litellm #20480): a client would append it again.
        st.anomalies.append(StreamAnomaly("tool-call-repeated", f"call {tc_id!r} sent again whole", n, ptr))
        return
    if tc_id:
        if call.id is None:
            call.id = tc_id
        else:
            st.anomalies.append(
                StreamAnomaly(
                    "tool-id-repeated",
                    f"id {tc_id!r} sent again; a client would hold {call.id + tc_id!r}",
                    n,
                    ptr + "/id",
                )
            )
    if tc.get("type") is not None:
        call.type = tc.get("type")
    if name:
        if not call.name:
            call.name = name
        else:
            st.anomalies.append(
                StreamAnomaly(
                    "tool-name-repeated",
                    f"name {name!r} sent again; a client would hold {call.name + name!r}",
                    n,
                    ptr + "/function/name",
                )
            )
    if args:
        call.arguments += args
    call.has_arguments_key = call.has_arguments_key or has_args
