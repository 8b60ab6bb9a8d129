"""Pairing: the caller and engine side of one request (dual tap), and a streamed and a non-streamed
exchange of the same request (twins).

One pairing for every checker (live worker, ``wirecheck check``, the demo, acceptance)
found the offline check pairing only by correlation while the live one paired by fingerprint, so the
two views of the same capture disagreed. :func:`pair_taps` tries, in order:

1. ``correlation``: the ``x-wirecheck-id`` the caller tap injects, when the gateway forwards it;
2. ``completion-id``: the chat completion ``id`` both sides carry (LiteLLM and nginx keep vLLM's id);
   unique per request even among identical concurrent requests, where a fingerprint cannot choose;
3. ``fingerprint``: the request with what gateways legitimately rewrite taken out (the model alias,
   fields at their default value such as ``"stream": false``, null fields, ``content: null`` in
   history, ``stream_options`` added upstream, tool call ``type``), scored against the engine side
   and bounded by time (the engine side starts after the caller side and before it ends).

A gateway may bridge APIs: LiteLLM answers ``/v1/messages`` by calling the engine's
``/v1/chat/completions`` or ``/v1/responses``, and ``/v1/responses`` by calling chat completions. Such
sides share no bytes: they are scored on the conversation they carry (``_translate``: roles, text,
calls and which call each result answers), below a side of the caller's own API with as good a score.

A gateway that retries sends one caller request to the engine several times: the attempt that answered
is the pair's engine side, the others are its ``retries``.

Every pairing is bounded in time: an engine side starts at most ``PAIR_WINDOW_S`` after its caller side
(whatever it is paired by: a correlation id an hour later is a reuse, not the same request), and a
twin starts at most ``TWIN_WINDOW_S`` after the other ended. That bound is what lets a check of any size
hold only the recent exchanges (``_stream_check``): :func:`kin_keys`, :func:`may_pair` and
:func:`partner_reach` say, for one exchange, which others may pair with it and until when.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import json
import math
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import orjson

from ._json import loads as bounded_loads
from ._translate import conversation, thinking_asked, token_limit, tool_choice_meaning, tools_meaning
from ._view import ExchangeView

__all__ = [
    "CALLER",
    "ENGINE",
    "PAIR_WINDOW_S",
    "TWIN_WINDOW_S",
    "TapPair",
    "TapSet",
    "TwinPair",
    "kin_keys",
    "may_pair",
    "pair_taps",
    "pair_twins",
    "partner_reach",
    "request_default",
    "request_fingerprint",
    "twin_key",
]

CALLER = "caller"
ENGINE = "engine"

#: how far apart the two taps' clocks may read for the same moment (both stamp wall-clock time; a
#: busy 2-core machine delayed LiteLLM's forward by up to 27 ms, gateway-litellm.md)
_SKEW_S = 1.0
#: how long after its caller side an engine side may start (a gateway that queues a request holds it
#: this long at most before it forwards it, or it is not the same request)
PAIR_WINDOW_S = 60.0
#: how long after one of them ended the other twin may start: a caller that sends a request streamed
#: and then plain sends the second when the first is answered (acceptance's twins, the scenarios')
TWIN_WINDOW_S = 60.0


@dataclass(slots=True)
class TapPair:
    caller: ExchangeView
    engine: ExchangeView
    by: str  # "correlation" | "completion-id" | "fingerprint"
    #: earlier engine attempts of the same caller request (a gateway retry), oldest first
    retries: list[ExchangeView] = field(default_factory=list)


@dataclass(slots=True)
class TapSet:
    """What the rules of scope ``set`` judge: a whole check in summary, which a check of any size can
    keep (``check_stream`` never holds every exchange): how many chat, Responses or Messages
    exchanges each tap recorded, the first of them at each tap in the capture's order, and how many
    caller/engine pairs were found."""

    #: tap -> chat, Responses and Messages exchanges recorded there
    agents: dict[str, int] = field(default_factory=dict)
    #: tap -> the first of them, in the capture's order
    first: dict[str, ExchangeView] = field(default_factory=dict)
    pairs: int = 0
    _first_at: dict[str, int] = field(default_factory=dict, repr=False)

    def add(self, view: ExchangeView, position: int) -> None:
        """Count ``view``, the exchange at ``position`` in the capture (views may come in any order)."""
        if not view.is_agent:
            return
        tap = view.tap
        self.agents[tap] = self.agents.get(tap, 0) + 1
        if tap not in self._first_at or position < self._first_at[tap]:
            self._first_at[tap] = position
            self.first[tap] = view


@dataclass(slots=True)
class TwinPair:
    streamed: ExchangeView
    plain: ExchangeView
    #: either side has a model error of its own: their values may differ for that reason alone
    model_fault: bool = False


# request fields that are the same request whatever their spelling: absent means the default
_DEFAULTS: dict[str, Any] = {
    "stream": False,
    "n": 1,
    "logprobs": False,
    "echo": False,
    "parallel_tool_calls": True,
}
# fields a gateway sets for its own transport or naming (LiteLLM renames the model to the
# deployment's name and adds stream_options.include_usage upstream)
_TRANSPORT = frozenset({"model", "stream", "stream_options"})


def request_default(req: dict[str, Any], key: str) -> Any:
    """``req[key]`` as the engine reads it: absent or null is the default value (or None), and null
    fields inside are left out."""
    value = req.get(key)
    return _DEFAULTS.get(key) if value is None else _drop_nulls(value)


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def _content(content: Any) -> Any:
    """Text parts and a plain string are the same message; null and empty text are no content."""
    if isinstance(content, list) and all(
        isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in content
    ):
        content = "".join(p["text"] for p in content)
    return None if content in (None, "") else content


def _message(m: Any) -> Any:
    if not isinstance(m, dict):
        return m
    for v in m.values():
        if type(v) is not str:
            break
    else:  # only text (the usual message): what follows keeps it all but an empty content
        if m.get("content") != "":
            return m  # hashed with sorted keys (``_hash``): where content stands does not count
    out = {k: v for k, v in m.items() if v is not None and k != "content"}
    content = _content(m.get("content"))
    if content is not None:
        out["content"] = content
    calls = m.get("tool_calls")
    if isinstance(calls, list):
        norm = []
        for raw in calls:
            tc = raw
            if isinstance(raw, dict):
                tc = {k: v for k, v in raw.items() if k not in ("type", "index") and v is not None}
                fn = tc.get("function")
                if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                    # the same JSON re-serialised with other spacing is the same call
                    with contextlib.suppress(ValueError):
                        tc["function"] = {
                            **fn,
                            "arguments": bounded_loads(fn["arguments"]),
                        }  # hostile depth
            norm.append(tc)
        out["tool_calls"] = norm
    return _drop_nulls(out)


def _normal(req: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in req.items():
        if k in _TRANSPORT or v is None or (k in _DEFAULTS and v == _DEFAULTS[k]):
            continue
        out[k] = [_message(m) for m in v] if k == "messages" and isinstance(v, list) else _drop_nulls(v)
    return out


def _path_tail(view: ExchangeView) -> str:
    """The endpoint without its mount point: a gateway may serve ``/chat/completions`` and call the
    engine's ``/v1/chat/completions``."""
    parts = [p for p in view.ex.request.path.split("?", 1)[0].split("/") if p]
    return "/".join(parts[-2:])


#: ``json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str)`` with its encoder made once:
#: dumps builds one per call when given options (a fifth of a request fingerprint's time)
_encode = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str).encode


def _hash(obj: Any) -> str:
    """A short hash of a value read from JSON. orjson writes it with sorted keys in a tenth of
    json's time, where it takes the value (not integers past 64 bits) and writes no null (it
    writes NaN and the infinities as null; a value with a null of its own goes to json too); json
    writes the rest.
    Each text is tagged with its writer: one value always takes one writer, and two writers' texts
    are never the same."""
    try:
        text = orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # orjson.JSONEncodeError: what it does not write
        text = b""
    text = b"j" + _encode(obj).encode() if not text or b"null" in text else b"o" + text
    # BLAKE2b of 8 bytes, as long as the first 8 of SHA-256 were: a third less of a fingerprint's
    # time, without OpenSSL's context made for each
    return hashlib.blake2b(text, digest_size=8).hexdigest()


def request_fingerprint(view: ExchangeView) -> str:
    """A hash of the request as the engine would act on it: transport-only fields, the model alias,
    null and default-valued fields left out."""
    fp: str | None = view.memo.get("fingerprint")
    if fp is None:
        if view.req:
            fp = _hash(_normal(view.req))
        else:
            body = view.ex.request.body.decode("utf-8", "replace")
            fp = _hash([view.ex.request.method, _path_tail(view), body])
        view.memo["fingerprint"] = fp
    return fp


@dataclass(slots=True)
class _Side:
    view: ExchangeView
    start: float | None
    end: float | None
    full: str
    messages: str | None
    last_user: str | None
    endpoint: tuple[str, str]
    completion_id: str | None
    #: chat | responses | messages: the API, for pairing across a bridge
    api: str | None
    #: the conversation with ids as links (``_translate``): the same across APIs
    turns: str | None
    #: what else the request means (tools, tool choice, thinking, stream, token limit): of two
    #: engine requests with the caller's conversation, the one that shares more of these is its
    features: tuple[str, ...]


def _duration_s(view: ExchangeView) -> float:
    ms = 0.0
    resp = view.ex.response
    if resp is not None and (arrivals := resp.arrivals()):
        ms = max(arrivals)
    if view.ex.error is not None and view.ex.error.t_ms is not None:
        ms = max(ms, view.ex.error.t_ms)
    return ms / 1000.0


def _completion_id(view: ExchangeView) -> str | None:
    if view.stream is not None:
        return view.stream.ids[0] if view.stream.ids else None
    if isinstance(view.body, dict) and isinstance(view.body.get("id"), str) and view.body["id"]:
        return str(view.body["id"])
    return None


def _side(view: ExchangeView) -> _Side:
    side: _Side | None = view.memo.get("side")
    if side is None:
        side = view.memo["side"] = _make_side(view)
    return side


def _make_side(view: ExchangeView) -> _Side:
    start, end = _times(view)
    msgs = view.req.get("messages") if view.req else None
    last_user = None
    if isinstance(msgs, list):
        for m in reversed(msgs):
            if isinstance(m, dict) and m.get("role") == "user":
                last_user = json.dumps(_content(m.get("content")), sort_keys=True)
                break
    return _Side(
        view,
        start,
        end,
        request_fingerprint(view),
        _hash([_message(m) for m in msgs]) if isinstance(msgs, list) else None,
        last_user,
        (view.ex.request.method.upper(), _path_tail(view)),
        _completion_id(view),
        view.endpoint if view.is_agent else None,
        _hash([repr(t) for t in conversation(view, links=True)]) if view.req else None,
        _features(view),
    )


def _features(view: ExchangeView) -> tuple[str, ...]:
    if not view.req:
        return ()
    req = view.req
    return (
        repr(sorted(tools_meaning(view))),
        repr(tool_choice_meaning(req)),
        repr(thinking_asked(req)),
        repr(view.wants_stream),
        repr(token_limit(req)),
    )


def _closeness(c: _Side, e: _Side) -> int:
    return sum(1 for a, b in zip(c.features, e.features, strict=False) if a == b)


def _score(c: _Side, e: _Side) -> int:
    """3: the same request; 2: the same conversation (a gateway changed tools or options, or carried
    the conversation over to another API); 1: the same last user message (a gateway changed the
    history); 0: unrelated."""
    if not _same_api(c, e):
        if c.api is None or e.api is None:
            return 0
        if c.turns is not None and c.turns == e.turns:
            return 2
    elif c.full == e.full:
        return 3
    elif c.messages is not None and c.messages == e.messages:
        return 2
    return 1 if c.last_user is not None and c.last_user == e.last_user else 0


def _same_api(c: _Side, e: _Side) -> bool:
    """Both sides speak one API (a gateway may mount it elsewhere: ``/chat/completions`` in front of
    ``/v1/chat/completions``), or, off the three APIs, call one endpoint."""
    return c.api == e.api if c.api is not None and e.api is not None else c.endpoint == e.endpoint


def _started_near(c: _Side, e: _Side, window_s: float) -> bool:
    """The engine side started within ``window_s`` after the caller side (by the clocks as they read)."""
    if c.start is None or e.start is None:
        return True
    return c.start - _SKEW_S <= e.start and e.start - c.start <= window_s


def _in_time(c: _Side, e: _Side, window_s: float) -> bool:
    """The engine side starts after the caller side started and before it ended."""
    if not _started_near(c, e, window_s):
        return False
    return c.start is None or e.start is None or c.end is None or e.start <= c.end + _SKEW_S


def _inside(c: _Side, e: _Side) -> bool:
    """The engine side started while the caller waited, by the clocks as they read: of two engine
    sides within the skew allowed, the one inside belongs to this caller, the one outside most
    likely to the request before or after it."""
    if c.start is None or e.start is None:
        return True
    return c.start <= e.start and (c.end is None or e.start <= c.end)


def _dt(c: _Side, e: _Side) -> float:
    return abs(e.start - c.start) if c.start is not None and e.start is not None else 0.0


def _other_request(c: _Side, e: _Side) -> bool:
    """Both sides carry a correlation id, and not the same one: two requests, however alike (the
    caller tap's id travels with the request, a gateway's retry included)."""
    a, b = c.view.ex.correlation, e.view.ex.correlation
    return bool(a) and bool(b) and a != b


def _best(c: _Side, cands: list[_Side], used: set[int], window_s: float, min_score: int) -> _Side | None:
    """The attempt that answered the caller: highest score, then one that started while the caller
    waited (not only within the clocks' skew), then the caller's own API, then the most request
    features shared, then the same status as the caller got and the nearest in time. Of several
    attempts of one request (a gateway's retries) the last one answered: :func:`_answered`."""
    best: tuple[Any, ...] | None = None
    pick: _Side | None = None
    for e in cands:
        if id(e.view) in used or not _in_time(c, e, window_s) or _other_request(c, e):
            continue
        s = _score(c, e)
        if s < min_score:
            continue
        key = (
            s,
            _inside(c, e),
            _same_api(c, e),
            _closeness(c, e),
            e.view.status == c.view.status,
            -_dt(c, e),
        )
        if best is None or key > best:
            best, pick = key, e
    return pick


def _near(engines: list[_Side], starts: list[float], c: _Side, window_s: float) -> list[_Side]:
    """The engine sides that started in the caller's time (sorted by start, so bisect keeps a large
    capture linear rather than quadratic); all of them when a time is missing."""
    if c.start is None:
        return engines
    lo = bisect.bisect_left(starts, c.start - _SKEW_S)
    hi = bisect.bisect_right(starts, c.start + window_s)
    return engines[lo:hi] + [e for e in engines if e.start is None]


def pair_taps(views: list[ExchangeView], *, window_s: float = PAIR_WINDOW_S) -> list[TapPair]:
    """Caller/engine pairs by correlation, then completion id, then fingerprint and time; an engine
    exchange left over that repeats a paired caller request inside its time is a retry of it."""
    if not any(v.tap == ENGINE for v in views) or not any(v.tap == CALLER for v in views):
        return []  # one tap only (a single-tap capture): nothing to pair, and no side worked out
    callers = sorted((_side(v) for v in views if v.tap == CALLER), key=lambda s: s.start or 0.0)
    timed = sorted((_side(v) for v in views if v.tap == ENGINE), key=lambda s: s.start or 0.0)
    engines = [e for e in timed if e.start is not None] + [e for e in timed if e.start is None]
    starts = [e.start for e in engines if e.start is not None]
    used: set[int] = set()
    pairs: list[TapPair] = []
    left: list[_Side] = []

    by_corr: dict[str, list[_Side]] = {}
    for e in engines:
        if e.view.ex.correlation:
            by_corr.setdefault(e.view.ex.correlation, []).append(e)
    for c in callers:
        corr = c.view.ex.correlation
        cands = [
            e for e in by_corr.get(corr or "", []) if id(e.view) not in used and _started_near(c, e, window_s)
        ]
        if corr and cands:
            # several attempts under one correlation id are a gateway retry: the last one answered
            *earlier, last = cands
            for e in cands:
                used.add(id(e.view))
            pairs.append(TapPair(c.view, last.view, "correlation", [e.view for e in earlier]))
        else:
            left.append(c)

    by_id: dict[str, list[_Side]] = {}
    for e in engines:
        if e.completion_id and id(e.view) not in used:
            by_id.setdefault(e.completion_id, []).append(e)
    rest: list[_Side] = []
    for c in left:
        pick = _best(c, by_id.get(c.completion_id or "", []), used, window_s, 0) if c.completion_id else None
        if pick is None:
            rest.append(c)
            continue
        used.add(id(pick.view))
        pairs.append(TapPair(c.view, pick.view, "completion-id"))

    for c in rest:
        pick = _best(c, _near(engines, starts, c, window_s), used, window_s, 1)
        if pick is not None:
            used.add(id(pick.view))
            pairs.append(TapPair(c.view, pick.view, "fingerprint"))

    # retries: an unpaired engine exchange of the same request, inside the caller's time
    sides = {id(s.view): s for s in callers + engines}
    pair_of = {id(p.caller): p for p in pairs}
    paired = sorted((sides[id(p.caller)] for p in pairs), key=lambda s: s.start or 0.0)
    for e in engines:
        if id(e.view) in used:
            continue
        owner: TapPair | None = None
        best_key: tuple[Any, ...] | None = None
        for c in paired:
            p = pair_of[id(c.view)]
            answered = sides[id(p.engine)]
            s = _score(c, e)
            if s < 2 or not _in_time(c, e, window_s) or _other_request(c, e):
                continue
            later = e.start is not None and answered.start is not None and e.start > answered.start
            if later and c.end is not None and e.start is not None and e.start > c.end:
                continue  # after the caller had its answer: another request's, not a retry
            key = (s, _inside(c, e), _closeness(c, e), -_dt(c, e))
            if best_key is None or key > best_key:
                best_key, owner = key, p
        if owner is not None:
            used.add(id(e.view))
            owner.retries.append(e.view)
    for p in pairs:
        if p.retries:
            _answered(p)
    return pairs


def _answered(p: TapPair) -> None:
    """Of a gateway's attempts at one request, the one the caller's answer came from: the last
    attempt with the status the caller got, else the last (a gateway that gave up after its
    retries, LiteLLM's 500 after answers it could not translate)."""
    attempts = sorted([p.engine, *p.retries], key=lambda v: v.ex.started_epoch or 0.0)
    same = [v for v in attempts if v.status == p.caller.status]
    answer = (same or attempts)[-1]
    p.engine = answer
    p.retries = [v for v in attempts if v is not answer]


def twin_key(view: ExchangeView) -> tuple[str, str] | None:
    """What a view's twin shares with it (its tap, endpoint and request fingerprint), or None when it
    can have no twin: :func:`pair_twins` pairs only views of one key."""
    if not view.ok or not view.req:
        return None
    key: tuple[str, str] | None = view.memo.get("twin_key")
    if key is None:
        # the endpoint is part of the key: a Responses call is no twin of the same chat request
        key = view.memo["twin_key"] = (view.tap, f"{view.endpoint}:{request_fingerprint(view)}")
    return key


def _times(view: ExchangeView) -> tuple[float | None, float | None]:
    """When the exchange started and when its last byte (or its error) came, in POSIX seconds."""
    got: tuple[float | None, float | None] | None = view.memo.get("times")
    if got is None:
        start = view.ex.started_epoch
        got = view.memo["times"] = (start, None if start is None else start + _duration_s(view))
    return got


def _twins_near(first: ExchangeView, then: ExchangeView) -> bool:
    """``then`` (which started no earlier) started at most ``TWIN_WINDOW_S`` after ``first`` ended."""
    (_, end), (start, _) = _times(first), _times(then)
    return end is None or start is None or start - end <= TWIN_WINDOW_S


def pair_twins(views: list[ExchangeView]) -> list[TwinPair]:
    """Streamed/non-streamed pairs of the same request at the same tap. In the order they started
    (those without a time first, then in the order given), each view pairs with the first view of the
    other kind still unpaired, unless that one ended over ``TWIN_WINDOW_S`` before it started; the
    first streamed one of a request pairs with the first plain one."""
    starts = [v.ex.started_epoch for v in views]  # what _times starts with: its end is asked of twins only
    order = sorted(range(len(views)), key=lambda i: (starts[i] is not None, starts[i] or 0.0, i))
    # per key: the unpaired streamed views, the unpaired plain ones
    waiting: dict[tuple[str, str], tuple[deque[ExchangeView], deque[ExchangeView]]] = {}
    out = []
    for i in order:
        v = views[i]
        key = twin_key(v)
        if key is None:
            continue
        streamed, plain = waiting.setdefault(key, (deque(), deque()))
        mine, other = (streamed, plain) if v.kind == "stream" else (plain, streamed)
        # in this order a view too old for this one is too old for every later one: let it go
        while other and not _twins_near(other[0], v):
            other.popleft()
        if not other:
            mine.append(v)
            continue
        u = other.popleft()
        out.append(TwinPair(v, u) if v.kind == "stream" else TwinPair(u, v))
    return out


def kin_keys(view: ExchangeView) -> tuple[list[Hashable], list[Hashable]]:
    """The keys this view is found by, and the keys under which every view that may pair with it
    (:func:`may_pair`) is found: a caller and an engine side that :func:`pair_taps` may weigh against
    each other share a correlation id, a completion id or a part of their request (whole, messages,
    last user message, conversation); twins share their :func:`twin_key`."""
    own: list[Hashable] = []
    wanted: list[Hashable] = []
    if view.tap in (CALLER, ENGINE):
        other = ENGINE if view.tap == CALLER else CALLER
        s = _side(view)
        for name, value in (
            ("correlation", view.ex.correlation),
            ("completion", s.completion_id),
            ("request", s.full),
            ("messages", s.messages),
            ("last-user", s.last_user),
            ("turns", s.turns),
        ):
            if value:
                own.append((name, value, view.tap))
                wanted.append((name, value, other))
    key = twin_key(view)
    if key is not None:
        stream = view.kind == "stream"
        own.append(("twin", key, stream))
        wanted.append(("twin", key, not stream))
    return own, wanted


def may_pair(a: ExchangeView, b: ExchangeView) -> bool:
    """Whether :func:`pair_taps` or :func:`pair_twins` may put ``a`` and ``b`` together, or weigh one
    against the other when it pairs either (views that share none of :func:`kin_keys` never do)."""
    key = twin_key(a)
    if key is not None and key == twin_key(b) and (a.kind == "stream") != (b.kind == "stream"):
        first, then = (a, b) if (_times(a)[0] or 0.0) <= (_times(b)[0] or 0.0) else (b, a)
        if _twins_near(first, then):
            return True
    if {a.tap, b.tap} != {CALLER, ENGINE}:
        return False
    c, e = (_side(a), _side(b)) if a.tap == CALLER else (_side(b), _side(a))
    corr = c.view.ex.correlation
    if corr and corr == e.view.ex.correlation and _started_near(c, e, PAIR_WINDOW_S):
        return True
    if not _in_time(c, e, PAIR_WINDOW_S):
        return False
    return bool(c.completion_id and c.completion_id == e.completion_id) or _score(c, e) >= 1


def partner_reach(view: ExchangeView) -> float:
    """The latest start time of an exchange that may still pair with this one (:func:`may_pair`):
    an engine side starts at most ``PAIR_WINDOW_S`` after its caller side (and no earlier than the
    clocks' skew allows), a twin at most ``TWIN_WINDOW_S`` after the other ended. Infinite for a view
    without a time (it may pair with any), minus infinity for one nothing pairs with."""
    start, end = _times(view)
    if start is None or end is None:
        return math.inf
    reach = -math.inf
    if view.tap == CALLER:
        reach = start + PAIR_WINDOW_S
    elif view.tap == ENGINE:
        reach = start + _SKEW_S
    if twin_key(view) is not None:
        reach = max(reach, end + TWIN_WINDOW_S)
    return reach
