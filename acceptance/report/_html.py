"""report.html: one self-contained page (no script, no link, nothing to load), the same sections as
report.md in the same order, and the plots (inline SVG) gathered in one section above the phases."""

from __future__ import annotations

import html
import json
from pathlib import Path

from .._blocks import BarPlot, Block, Code, LinePlot, Table, Text, TimePlot
from .._model import PhaseResult
from ._document import Report
from ._sections import banner, blocked_after_oom, evidence_rows, oom_rows
from ._svg import svg

__all__ = ["render_html"]

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}h3{font-size:15px}
.verdict{font-size:20px;padding:10px 14px;border-radius:6px;display:inline-block}
.v-go{background:#d9f2d9}.v-limited{background:#fff1c2}.v-rework{background:#f8d0d0}.v-scale-up{background:#d6e4ff}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
#checklist td:nth-child(2){min-width:340px}#evidence th{width:110px}td{overflow-wrap:anywhere}
.s-pass{color:#1a7f37}.s-fail,.s-missing{color:#c00;font-weight:600}.s-warn{color:#a36b00}.s-info{color:#555}
.plots{display:flex;flex-wrap:wrap;gap:16px}.plot{margin:0}figcaption{font-weight:600}
code,pre{background:#f5f5f5}pre{padding:8px;overflow-x:auto}
.banner{background:#ffe08a;border:2px solid #a36b00;padding:8px 12px;font-weight:700}.s-blocked{color:#555}
"""

e = html.escape


def _rows(pairs: list[tuple[str, str]], ident: str) -> str:
    return (
        f"<table id={ident}>"
        + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in pairs)
        + "</table>"
    )


def _table(b: Table) -> str:
    return (
        f'<table id="{e(b.id)}"><tr>'
        + "".join(f"<th>{e(h)}</th>" for h in b.head)
        + "</tr>"
        + "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in b.rows)
        + "</table>"
    )


def _block(b: Block) -> str:
    if isinstance(b, Table | Code):
        out = f"<h3>{e(b.heading)}</h3>" if b.heading else ""
        out += f"<p>{e(b.caption)}</p>" if b.caption else ""
        return out + (_table(b) if isinstance(b, Table) else f"<pre>{e(b.text)}</pre>")
    if isinstance(b, Text):
        return f"<p>{e(b.text)}</p>"
    return ""  # a plot: in the plots section


def _verdict(report: Report) -> list[str]:
    v = report.verdict
    parts = [
        f'<p id="verdict" class="verdict v-{e(v.decision)}">Verdict: <b>{e(v.label)}</b>'
        + ("" if v.accepted else " — not accepted for production as it stands")
        + "</p>",
        "<ul>" + "".join(f"<li>{e(r)}</li>" for r in v.reasons) + "</ul>",
    ]
    if v.oom:
        parts.append(
            '<h2 id="oom">Out of memory (leads the verdict)</h2>' + _rows(oom_rows(v.oom), '"oom-evidence"')
        )
        blocked = blocked_after_oom(report)
        parts.append(f"<p>{e(blocked)}</p>" if blocked else "")
    if v.decision == "limited":
        lim = v.limits
        conditions = [
            (k, str(lim.get(key) or f"(missing {flag})"))
            for k, key, flag in (
                ("scope", "scope", "--limit-scope"),
                ("on-call owner", "owner", "--on-call"),
                ("rollback", "rollback", "--rollback"),
            )
        ]
        parts.append("<p>Limited go-live conditions:</p>" + _rows(conditions, "limits"))
    sug = v.limits.get("suggested") or {}
    if sug:
        parts.append(
            '<h2 id="next-steps">Next steps suggested from the measurements</h2><ul>'
            + "".join(f"<li><b>{e(k)}</b>: {e(str(val))}</li>" for k, val in sug.items())
            + "</ul>"
        )
    return parts


def _phase(ph: PhaseResult) -> str:
    parts = [
        f'<h2 id="phase-{e(ph.name)}">{e(ph.name)}: <span class="s-{e(ph.status)}">{e(ph.status)}</span> ({round(ph.duration_s, 3)} s)</h2>'
    ]
    if ph.error:
        parts.append(f"<p class=s-fail>The phase could not finish: {e(ph.error)}</p>")
    if ph.blocked:
        parts.append(f"<p class=s-blocked>Blocked, not failed: {e(ph.blocked)}</p>")
    parts.append("<table><tr><th>check</th><th>status</th><th>detail</th></tr>")
    for c in ph.checks:
        lead = f" → {c.leads_to}" if c.blocking else ""
        parts.append(
            f'<tr><td>{e(c.id)}</td><td class="s-{e(c.status)}">{e(c.status + lead)}</td><td>{e(c.detail)}</td></tr>'
        )
    parts.append("</table>")
    parts += [_block(b) for b in (ph.facts.blocks() if ph.facts is not None else [])]
    return "".join(parts)


def _plots(report: Report) -> str:
    plots = [
        b
        for ph in report.phases
        if ph.facts is not None
        for b in ph.facts.blocks()
        if isinstance(b, LinePlot | BarPlot | TimePlot)
    ]
    return (
        f'<h2>Plots</h2><div class="plots" id="plots">{"".join(svg(p) for p in plots)}</div>' if plots else ""
    )


def render_html(report: Report) -> str:
    ev = report.evidence
    b = banner(report)
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>wirecheck acceptance</title>",
        f"<style>{CSS}</style></head><body>",
        "<h1>wirecheck go-live acceptance</h1>",
        f'<p id="simulated" class="banner">{e(b)}</p>' if b else "",
        *_verdict(report),
        "<h2>Evidence</h2>" + _rows(evidence_rows(report), "evidence"),
    ]
    if ev["key_logs"]:
        parts.append(
            "<details><summary>key log lines</summary><pre>"
            + e("\n".join(ev["key_logs"]))
            + "</pre></details>"
        )
    parts.append('<h2>Checklist</h2><table id="checklist"><tr><th></th><th>item</th><th>evidence</th></tr>')
    for i in report.checklist:
        mark = {"done": "&#9745;", "open": "&#9744;", "not run": "&#8212;"}[i["state"]]
        parts.append(
            f'<tr class="c-{e(i["state"].replace(" ", "-"))}"><td>{mark}</td><td>{e(i["item"])}</td><td>{e(i["evidence"])}</td></tr>'
        )
    parts.append("</table>")
    parts.append(_plots(report))
    parts += [_phase(ph) for ph in report.phases]
    if report.self_built:
        parts.append(
            '<h2 id="self-built">Self-built image vs the official image</h2><pre>'
            + e(json.dumps(report.self_built, indent=2))
            + "</pre>"
        )
    parts.append(
        "<h2>Files</h2><ul>" + "".join(f"<li>{e(Path(p).name)}</li>" for p in report.files.values()) + "</ul>"
    )
    parts.append("</body></html>")
    return "".join(parts)
