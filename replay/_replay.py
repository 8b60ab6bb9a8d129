"""Re-send captured requests to a target (or two side by side), record the answers, compare them.

What identifies a request is its method, path and body; what is sent is exactly that, to the target
named on the command line only (the captured host is never contacted). Credentials redacted in the
capture (``[redacted]``) are dropped, and ``--header`` values set in their place. Hop-by-hop and
framing headers are recomputed. Each answer is recorded with per-chunk timing, like a tap would.

A capture is untrusted input: its paths decide where the operator's ``--header``
credentials go. Every request path must be origin-form (one leading ``/``, no scheme or authority, no
``//``, no dot segments, no control characters, spaces or backslashes); anything else stops the run
with an :class:`InputError` naming the entry before a single request is sent. The URL is then built
by replacing the target's path, never by string joining or URL reference resolution (``httpx.URL.join``
treats ``//host/x`` as a network-path reference, and ``target + "@host/x"`` reads as userinfo), and
each built URL is checked to keep the target's scheme, host and port.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from wirecheck.contracts import (
    DEFAULT_REDACTION,
    REDACTED,
    AssembledChoice,
    CheckConfig,
    Exchange,
    Finding,
    HttpRequest,
    InputError,
    Redaction,
    bounded_loads,
    build_view,
    check_exchanges,
)
from wirecheck.record import HOP_HEADERS, record_async

__all__ = ["ReplayDiff", "ReplayResult", "compare_answers", "origin_form_problem", "replay", "target_url"]


@dataclass(slots=True)
class ReplayDiff:
    source_id: str
    what: str
    a: Any
    b: Any
    blamed: str  # "a" | "b" | "both" | "neither": the side(s) whose answer breaks the contract


@dataclass(slots=True)
class ReplayResult:
    sent: int = 0
    answers: list[Exchange] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    diffs: list[ReplayDiff] = field(default_factory=list)
    planned: list[Exchange] = field(default_factory=list)


def _headers(captured: list[tuple[str, str]], extra: dict[str, str]) -> list[tuple[str, str]]:
    out = [
        (k, v)
        for k, v in captured
        if k.lower() not in HOP_HEADERS and v != REDACTED and k.lower() not in {e.lower() for e in extra}
    ]
    out.extend(extra.items())
    return out


def origin_form_problem(path: str) -> str | None:
    """Why ``path`` is not a safe origin-form request target (RFC 9112 section 3.2.1), or None."""
    if not path.startswith("/"):
        return "does not start with '/' (a scheme, authority or '@host' would change where it goes)"
    if path.startswith("//"):
        return "starts with '//' (a network-path reference names another host)"
    bad = next((c for c in path if ord(c) <= 0x20 or ord(c) >= 0x7F or c in "\\#"), None)
    if bad is not None:
        return f"holds {bad!r} (control characters, spaces, non-ASCII, backslashes and fragments are not allowed)"
    if any(seg in (".", "..") for seg in path.split("?", 1)[0].split("/")):
        return "holds a '.' or '..' segment (it would climb out of the target's path)"
    return None


def _without_redacted_query(path: str) -> str:
    # a query credential redacted in the capture is dropped, like a redacted header; --header is the
    # way to authenticate a replay
    base, sep, query = path.partition("?")
    if not sep:
        return path
    kept = [p for p in query.split("&") if p.partition("=")[2] != REDACTED]
    return base + ("?" + "&".join(kept) if kept else "")


def target_url(target: str, path: str) -> httpx.URL:
    """``target`` with ``path`` appended to its path. Raises InputError if the result would leave the
    target's scheme, host or port (it cannot for an origin-form path; this is the second lock)."""
    base = httpx.URL(target)
    problem = origin_form_problem(path)
    if problem is not None:
        raise InputError(f"request path {path!r} {problem}")
    url = base.copy_with(raw_path=base.raw_path.rstrip(b"/") + path.encode("ascii", "strict"))
    if (url.scheme, url.host, url.port) != (base.scheme, base.host, base.port):
        raise InputError(f"request path {path!r} would leave the target {target}")
    return url


async def _send(
    client: httpx.AsyncClient,
    src: Exchange,
    target: str,
    tap: str,
    headers: dict[str, str],
    *,
    redaction: Redaction,
) -> Exchange:
    req = src.request
    path = _without_redacted_query(req.path)
    sent_headers = _headers(req.headers, headers)
    # what is sent keeps the --header values; what is recorded (answers go to stores and reports)
    # has them redacted like any tap's record
    ex = Exchange(
        id=f"{tap}-{uuid.uuid4().hex[:12]}",
        tap=tap,
        correlation=src.id,  # the captured exchange this answers
        started_at=datetime.now(UTC).isoformat(),
        request=HttpRequest(
            req.method,
            redaction.target(path),
            redaction.header_list((k, REDACTED if k in headers else v) for k, v in sent_headers),
            req.body,
        ),
        extra={"replay_of": src.id, "target": redaction.url(target)},
    )
    await record_async(
        client, ex, target_url(target, path), headers=sent_headers, record_headers=redaction.header_list
    )
    return ex


def _summary(ch: AssembledChoice | None) -> dict[str, Any]:
    if ch is None:
        return {}
    calls = []
    for c in ch.calls:
        try:
            args: Any = bounded_loads(c.arguments)
        except ValueError:
            args = {"<not JSON>": c.arguments}
        calls.append((c.name, json.dumps(args, sort_keys=True)))
    content_json = None
    if ch.content:
        try:
            bounded_loads(ch.content)
            content_json = True
        except ValueError:
            content_json = False
    return {
        "tool_calls": calls,
        "finish_reason": ch.finish_reason,
        "reasoning_in": sorted(ch.reasoning_fields) if ch.reasoning else [],
        "content_is_json": content_json,
    }


def compare_answers(
    pairs: Iterable[tuple[Exchange, Exchange, Exchange]], findings: list[Finding]
) -> list[ReplayDiff]:
    """Differences in meaning between two targets' answers to the same captured request, each blamed
    on the side whose answer breaks the contract (error findings), when one does."""
    bad = {f.exchange_id for f in findings if f.severity == "error"}
    out: list[ReplayDiff] = []
    for src, a, b in pairs:
        va, vb = build_view(a), build_view(b)
        sa = _summary(va.choices[0] if va.choices else None)
        sb = _summary(vb.choices[0] if vb.choices else None)
        blamed = (
            "both"
            if a.id in bad and b.id in bad
            else "a"
            if a.id in bad
            else "b"
            if b.id in bad
            else "neither"
        )
        if (va.status, va.kind) != (vb.status, vb.kind):
            out.append(ReplayDiff(src.id, "status", va.status, vb.status, blamed))
            continue
        for key in ("tool_calls", "finish_reason", "reasoning_in", "content_is_json"):
            if sa.get(key) != sb.get(key):
                out.append(ReplayDiff(src.id, key, sa.get(key), sb.get(key), blamed))
    return out


def replay(
    captured: Iterable[Exchange],
    target: str,
    *,
    compare: str | None = None,
    concurrency: int = 4,
    rate: float | None = None,
    headers: dict[str, str] | None = None,
    dry_run: bool = False,
    only_chat: bool = True,
    progress: Callable[[int, int, int], None] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    compare_transport: httpx.AsyncBaseTransport | None = None,
    timeout_s: float = 600.0,
    redaction: Redaction = DEFAULT_REDACTION,
    source: str | None = None,
    lines: list[int] | None = None,
) -> ReplayResult:
    """Re-send each captured request (one per request: the caller side when both taps were captured).

    Every request that would be sent is checked first (:func:`origin_form_problem`); one bad path is
    an :class:`InputError` naming ``source`` and the entry (its line in ``lines``, when given), and
    nothing is sent. ``redaction`` applies to the recorded answers.
    """
    all_ex = list(captured)
    sources = _requests(all_ex, only_chat=only_chat)
    _check_paths(all_ex, set(map(id, sources)), source, lines, redaction)
    for t in (target, compare):
        if t is not None:
            _check_target(t)
    result = ReplayResult(planned=sources)
    if dry_run:
        return result
    extra = headers or {}

    async def run() -> None:
        sem = asyncio.Semaphore(max(1, concurrency))
        interval = 1.0 / rate if rate else 0.0
        start = time.monotonic()
        done = 0
        failed = [0]  # requests whose answer was a transport error or an HTTP error status
        async with (
            httpx.AsyncClient(timeout=timeout_s, transport=transport) as ca,
            httpx.AsyncClient(timeout=timeout_s, transport=compare_transport) as cb,
        ):
            cb.headers = ca.headers = httpx.Headers()

            async def one(i: int, src: Exchange) -> None:
                nonlocal done
                if interval:
                    # open loop: request i leaves at its scheduled time, whatever the answers do
                    await asyncio.sleep(max(0.0, start + i * interval - time.monotonic()))
                async with sem:
                    jobs = [_send(ca, src, target, "target", extra, redaction=redaction)]
                    if compare:
                        jobs.append(_send(cb, src, compare, "compare", extra, redaction=redaction))
                    answers = await asyncio.gather(*jobs)
                result.answers.extend(answers)
                result.sent += 1
                done += 1
                failed[0] += any(
                    a.error is not None or (a.response and a.response.status >= 400) for a in answers
                )
                if progress:
                    progress(done, len(sources), failed[0])  # sent, of, failed so far

            await asyncio.gather(*(one(i, s) for i, s in enumerate(sources)))

    asyncio.run(run())
    # the replayer talks straight to each target: single-tap findings keep their fault
    res = check_exchanges(result.answers, CheckConfig(direct=True))
    result.findings = res.findings
    if compare:
        by_src: dict[str, dict[str, Exchange]] = {}
        for a in result.answers:
            by_src.setdefault(str(a.extra.get("replay_of")), {})[a.tap] = a
        src_by_id = {s.id: s for s in sources}
        pairs = [
            (src_by_id[k], v["target"], v["compare"])
            for k, v in by_src.items()
            if "target" in v and "compare" in v
        ]
        result.diffs = compare_answers(pairs, result.findings)
    return result


def _check_paths(
    captured: list[Exchange],
    planned: set[int],
    source: str | None,
    lines: list[int] | None,
    redaction: Redaction,
) -> None:
    for i, ex in enumerate(captured):
        if id(ex) not in planned:
            continue
        problem = origin_form_problem(ex.request.path)
        if problem is None:
            continue
        line = lines[i] if lines is not None and i < len(lines) else None
        where = f"exchange {ex.id}" if line is not None else f"entry {i + 1}, exchange {ex.id}"
        raise InputError(
            f"{where}: request path {redaction.target(ex.request.path)!r} {problem}; nothing was sent",
            source=source,
            line=line,
        )


def _check_target(target: str) -> None:
    try:
        url = httpx.URL(target)
    except httpx.InvalidURL as exc:
        raise InputError(f"target {target!r} is not a URL ({exc})") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise InputError(f"target {target!r} is not an http(s) URL")


def _requests(captured: Iterable[Exchange], *, only_chat: bool) -> list[Exchange]:
    """One source per captured request: with two taps, the caller side (what the caller sent)."""
    all_ex = list(captured)
    caller_corr = {e.correlation for e in all_ex if e.tap == "caller" and e.correlation}
    out = []
    for e in all_ex:
        if e.tap == "engine" and e.correlation in caller_corr:
            continue
        if only_chat and not (
            e.request.method == "POST"
            and e.request.path.split("?")[0].rstrip("/").endswith("/chat/completions")
        ):
            continue
        out.append(e)
    return out
