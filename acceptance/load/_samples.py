"""``accept --samples FILE``: the team's own chat requests as the capacity phase's workload.

The checklist's common mistake is "short prompts only": the synthetic agent sample set is one shape of
request, and the KV cache a deployment needs depends on the context lengths its callers really send.
FILE is either a JSONL of chat-completion request bodies (one ``{"messages": [...], ...}`` per line), or
a capture that ``wirecheck replay`` reads (exchange JSONL as ``wirecheck export`` writes it, HAR,
mitmproxy flows, a wirecheck store): the requests are those replay would re-send (POSTs to
``/chat/completions``, the caller's side when both taps recorded one), read as replay reads any
capture (``read_capture``, with its limits).

Everything is read and checked before any request is sent: a file that cannot be read, is empty, or
holds no chat request is an :class:`InputError` (exit 2). A capture's exchanges that are not chat
requests are left out and counted; a line of a bodies file that is not a chat request is an error, since
the whole file claims to be chat requests.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wirecheck.contracts import DEFAULT_REDACTION, Exchange, InputError, Redaction, build_view
from wirecheck.record import is_store
from wirecheck.replay import detect_format, read_capture, replay

from ._client import Sample, percentile

__all__ = ["Workload", "load_workload", "size_summary", "workload_data", "workload_line"]


@dataclass(slots=True)
class Workload:
    source: str
    #: "chat-jsonl" (request bodies) or a capture format replay names: jsonl, har, mitm, store
    format: str
    bodies: list[dict[str, Any]]
    #: per body: characters of its messages and tools as JSON (what the chat template is fed)
    chars: list[int] = field(default_factory=list)
    #: per body: the prompt tokens the captured answer's usage reported (None: no usage captured)
    captured_tokens: list[int | None] = field(default_factory=list)
    #: capture exchanges that were not usable chat requests, by reason
    skipped: dict[str, int] = field(default_factory=dict)
    #: the file's sha256: the report names the exact file without copying the team's traffic into it
    sha256: str | None = None

    def longest(self, n: int) -> list[int]:
        """Indices of the ``n`` largest requests (by captured prompt tokens, else characters), smallest
        first: the long-input stage sends what the team really sends at its longest."""

        def size(i: int) -> tuple[int, int]:
            return (self.captured_tokens[i] or 0, self.chars[i])

        return sorted(sorted(range(len(self.bodies)), key=size, reverse=True)[: max(n, 0)], key=size)

    def describe(self) -> dict[str, Any]:
        captured = [t for t in self.captured_tokens if t is not None]
        return {
            "source": self.source,
            "format": self.format,
            "sha256": self.sha256,
            "requests": len(self.bodies),
            "skipped": dict(self.skipped),
            "captured_prompt_tokens": size_summary(captured) if captured else None,
            "chars": size_summary(self.chars),
        }


def size_summary(values: Iterable[int | float]) -> dict[str, Any]:
    xs = [float(v) for v in values]
    p50, p95 = percentile(xs, 50), percentile(xs, 95)
    return {
        "n": len(xs),
        "p50": None if p50 is None else round(p50),
        "p95": None if p95 is None else round(p95),
        "max": round(max(xs)) if xs else None,
    }


def _problem(body: Any) -> str | None:
    """Why ``body`` is not a chat-completion request body (None when it is one)."""
    if not isinstance(body, dict):
        return f"a JSON {type(body).__name__}, not an object"
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        return "no messages list"
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            return f"messages[{i}] has no role"
    if "tools" in body and not isinstance(body["tools"], list | None):
        return "tools is not a list"
    return None


def _chars(body: dict[str, Any]) -> int:
    return len(
        json.dumps({"messages": body["messages"], "tools": body.get("tools") or []}, ensure_ascii=False)
    )


def _first_object(path: Path) -> Any:
    try:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    try:
                        return json.loads(line)
                    except (json.JSONDecodeError, RecursionError):
                        return None
    except UnicodeDecodeError:
        raise InputError(
            "not UTF-8 text: expected chat requests as JSONL or a capture", source=str(path)
        ) from None
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror or exc}", source=str(path)) from None
    raise InputError("empty: expected chat requests as JSONL or a capture", source=str(path))


def _read_bodies(path: Path) -> Workload:
    w = Workload(str(path), "chat-jsonl", [])
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                body = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(
                    f"not JSON ({exc.msg} at column {exc.colno})", source=str(path), line=lineno
                ) from None
            except RecursionError:
                raise InputError("JSON nested too deep to read", source=str(path), line=lineno) from None
            problem = _problem(body)
            if problem is not None:
                raise InputError(
                    f"not a chat-completion request body: {problem}", source=str(path), line=lineno
                )
            w.bodies.append(body)
            w.chars.append(_chars(body))
            w.captured_tokens.append(None)
    return w


def _from_exchanges(source: str, fmt: str, exchanges: list[Exchange], target: str) -> Workload:
    # the requests replay would re-send, chosen by replay itself (dry run: nothing is sent)
    planned = replay(exchanges, target, dry_run=True, source=source).planned
    w = Workload(source, fmt, [])
    other = len(exchanges) - len(planned)
    if other:
        w.skipped["not a chat request (or the engine side of a caller's request)"] = other
    for ex in planned:
        try:
            body = json.loads(ex.request.body)
        except (ValueError, RecursionError):
            body = None
        problem = _problem(body) if body is not None else "its body is not JSON"
        if problem is not None:
            w.skipped[problem] = w.skipped.get(problem, 0) + 1
            continue
        usage = build_view(ex).usage or {}
        tokens = usage.get("prompt_tokens")
        w.bodies.append(body)
        w.chars.append(_chars(body))
        w.captured_tokens.append(tokens if isinstance(tokens, int) and tokens >= 0 else None)
    return w


def load_workload(path: str, target: str, *, redaction: Redaction = DEFAULT_REDACTION) -> Workload:
    """The chat requests of ``path``; ``target`` is the acceptance target (replay's dry run checks it).
    A PostgreSQL store's URL is shown with ``redaction`` (no password in the report)."""
    if is_store(path):
        shown = redaction.url(path) if "://" in path else path
        w = _from_exchanges(shown, "store", list(read_capture(path)), target)
    else:
        p = Path(path)
        if not p.is_file():
            raise InputError("no such file", source=path)
        fmt = detect_format(p)
        first = _first_object(p) if fmt == "jsonl" else None
        if fmt == "jsonl" and isinstance(first, dict) and "messages" in first:
            w = _read_bodies(p)
        elif fmt == "jsonl" and isinstance(first, dict) and "request" not in first:
            raise InputError(
                "line 1 is neither a chat-completion request body (no messages list) nor an exchange "
                "(no request): expected chat requests as JSONL or a capture",
                source=path,
            )
        else:
            w = _from_exchanges(path, fmt, list(read_capture(p)), target)
    if Path(path).is_file():
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        w.sha256 = digest.hexdigest()
    if not w.bodies:
        left = "; ".join(f"{n} {why}" for why, n in w.skipped.items())
        raise InputError(
            f"no chat-completion requests to send{f' ({left})' if left else ''}", source=w.source
        )
    return w


def workload_data(w: Workload | None, stage: list[Sample], sent: list[int]) -> dict[str, Any]:
    """Where the long-input and ramp requests (``stage``) came from, and how large they were: the
    prompt tokens the engine's usage reported for them, else (no answer carried usage) the
    characters of the team's requests that were sent (``sent``: their indices)."""
    out: dict[str, Any] = (
        {"source": "synthetic", "sample_set": "wirecheck agent sample set"} if w is None else w.describe()
    )
    if w is not None:
        # the ramp cycles through the file: a request sent twice may be served from the prefix cache
        out.update(sent=len(sent), distinct_sent=len(set(sent)), cycled=len(sent) > len(set(sent)))
    tokens = [s.prompt_tokens for s in stage if s.prompt_tokens is not None]
    if tokens:
        out["input_size"] = {"unit": "prompt tokens", "from": "engine usage", **size_summary(tokens)}
    elif w is not None:
        sizes = [w.chars[i] for i in sent] or w.chars
        out["input_size"] = {
            "unit": "characters",
            "from": "the requests (no answer reported usage)",
            **size_summary(sizes),
        }
    else:
        out["input_size"] = None
    return out


def workload_line(data: dict[str, Any]) -> str:
    """The workload in one line, for report.md and report.html alike."""
    size = data.get("input_size")
    dist = (
        f"input size p50/p95/max {size['p50']}/{size['p95']}/{size['max']} {size['unit']} "
        f"({size['from']}, {size['n']} requests)"
        if size
        else "input size unknown (no request answered)"
    )
    if data.get("source") == "synthetic":
        return (
            f"synthetic: {data.get('sample_set')} (give --samples FILE for the team's own requests); {dist}"
        )
    skipped = sum((data.get("skipped") or {}).values())
    cyc = ""
    if "sent" in data:
        cyc = f"; {data['sent']} sent, {data['distinct_sent']} distinct" + (
            " (cycled: repeats may hit the prefix cache)" if data.get("cycled") else ""
        )
    return (
        f"--samples {data['source']} ({data['format']}): {data['requests']} chat requests"
        + (f", {skipped} capture entries left out" if skipped else "")
        + f"{cyc}; {dist}"
    )
