"""A self-contained HTML report: the findings table, and per exchange its raw frames and the message
a client assembles from them. No scripts, no external resources: one file to attach to a ticket.

Every string that came off the wire (model output above all) is escaped with ``html.escape``; the
report never interprets what it shows.
"""

from __future__ import annotations

import contextlib
import html
import json
from collections import Counter

from ._check import CheckResult
from ._exchange import Exchange
from ._json import loads as bounded_loads
from ._redact import DEFAULT_REDACTION, Redaction
from ._report import known_bug_line
from ._text import printable
from ._view import build_view

__all__ = ["render_html"]

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1b1b1b;background:#fff}
h1{font-size:22px;margin:0 0 8px} h2{font-size:17px;margin:28px 0 8px}
table{border-collapse:collapse;width:100%;margin:8px 0}
th{background:#1f4e79;color:#fff;text-align:left;padding:6px 8px}
td{border-bottom:1px solid #ddd;padding:5px 8px;vertical-align:top}
tr.error td:first-child{border-left:4px solid #c0392b} tr.warning td:first-child{border-left:4px solid #d68910}
tr.info td:first-child{border-left:4px solid #5d6d7e}
code,pre{font:12px/1.35 ui-monospace,monospace} pre{background:#f6f8fa;padding:8px;overflow:auto;white-space:pre-wrap;word-break:break-all}
.summary span{display:inline-block;margin-right:14px;padding:2px 8px;background:#eef3f8;border-radius:4px}
details{margin:6px 0} summary{cursor:pointer}
"""


def _e(value: object) -> str:
    # controls and lone surrogates as visible escapes first: a browser shows them as nothing, and a
    # lone surrogate cannot be written to the file at all
    return html.escape(printable(value, keep="\n\t"), quote=True)


def _label(tap: str, exchange_id: str) -> str:
    return exchange_id if exchange_id.startswith(tap) else f"{tap}:{exchange_id}"


def render_html(
    result: CheckResult,
    exchanges: list[Exchange],
    *,
    title: str = "wirecheck report",
    redaction: Redaction = DEFAULT_REDACTION,
) -> str:
    by_ex: dict[str, list[str]] = {}
    rows = []
    for f in result.findings:
        by_ex.setdefault(f.exchange_id, []).append(f.rule)
        excerpt = f.evidence.get("excerpt", "")
        bug = ""
        if f.known_bug is not None:
            bug = (
                f'<br>known bug <a href="{_e(f.known_bug["url"])}">{_e(f.known_bug["id"])}</a>: '
                f"{_e(known_bug_line(f.known_bug))}"
            )
        rows.append(
            f'<tr class="{_e(f.severity)}"><td>{_e(f.severity)}</td><td><code>{_e(f.rule)}</code></td><td>{_e(f.fault)}</td>'
            f'<td><a href="#ex-{_e(f.exchange_id)}">{_e(_label(f.tap, f.exchange_id))}</a></td><td>{_e(f.message)}'
            f"{'<br><code>' + _e(excerpt) + '</code>' if excerpt else ''}{bug}</td><td><code>{_e(f.evidence.get('pointer', ''))}</code></td></tr>"
        )
    faults = Counter(str(f.fault) for f in result.findings)
    summary = "".join(f"<span>{_e(k)}: {v}</span>" for k, v in sorted(faults.items()))
    parts = [
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="summary"><span>{result.exchanges} exchanges</span><span>{len(result.findings)} findings</span>'
        f"<span>{result.pairs} tap pairs</span>{summary}</p>",
        "<h2>Findings</h2>",
        '<table id="findings"><thead><tr><th>severity</th><th>rule</th><th>fault</th><th>exchange</th><th>message</th><th>where</th></tr></thead><tbody>',
        "".join(rows) or '<tr><td colspan="6">no findings</td></tr>',
        "</tbody></table>",
        "<h2>Exchanges</h2>",
    ]
    for ex in exchanges:
        view = build_view(ex)
        rules = by_ex.get(ex.id, [])
        head = f"{ex.tap}:{ex.id} {ex.request.method} {redaction.target(ex.request.path)} -> {ex.response.status if ex.response else ex.error.kind if ex.error else '-'}"
        body = ex.request.body.decode("utf-8", "replace")
        with contextlib.suppress(ValueError):
            body = json.dumps(bounded_loads(body), indent=1, ensure_ascii=False)
        assembled = [
            {
                "index": ch.index,
                "content": ch.content,
                "reasoning": ch.reasoning,
                "reasoning_fields": sorted(ch.reasoning_fields),
                "tool_calls": [
                    {"index": c.index, "id": c.id, "name": c.name, "arguments": c.arguments} for c in ch.calls
                ],
                "finish_reason": ch.finish_reason,
            }
            for ch in view.choices
        ]
        frames = ""
        if ex.response is not None and ex.response.chunks is not None:
            frames = "\n".join(
                f"+{c.t_ms:9.1f} ms  {c.data.decode('utf-8', 'replace')!r}" for c in ex.response.chunks
            )
        elif ex.response is not None:
            frames = ex.response.content.decode("utf-8", "replace")
        parts.append(
            f'<details id="ex-{_e(ex.id)}"{" open" if rules else ""}><summary>{_e(head)}'
            f"{' - ' + _e(', '.join(sorted(set(rules)))) if rules else ''}</summary>"
            f"<p>request</p><pre>{_e(body)}</pre>"
            f"<p>assembled message</p><pre>{_e(json.dumps(assembled, indent=1, ensure_ascii=False))}</pre>"
            f"<p>raw frames as they arrived</p><pre>{_e(frames)}</pre></details>"
        )
    parts.append("</body></html>\n")
    return "".join(parts)
