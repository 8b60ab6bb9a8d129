"""The acceptance report folder: Markdown, self-contained HTML with plots, JSON, and the first days'
Prometheus alerting rules and Grafana dashboard, whose thresholds are the rollback triggers."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from .._model import Slo
from ._alerts import more_rules
from ._sections import (
    details_html,
    evidence_html,
    evidence_md,
    fmt,
    gpu_curve_svg,
    gpu_md,
    lead_html,
    lead_md,
    oom_html,
    oom_md,
)

__all__ = ["alert_rules", "grafana_dashboard", "render_html", "render_markdown", "write_reports"]

TICK = {"done": "[x]", "open": "[ ]", "not run": "[-]"}


def _phase(report: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((p for p in report["phases"] if p["name"] == name), None)


# --- thresholds: one place, used by the alerts, the dashboard and the rollback text ---------------


def thresholds(report: dict[str, Any], slo: Slo) -> dict[str, float]:
    waiting = 1.0
    cap = _phase(report, "capacity")
    if cap is not None:
        good = [r for r in cap["data"].get("ramp", []) if not r.get("breaches")]
        seen = [r.get("waiting_max") or 0 for r in good]
        waiting = max([1.0, *(2 * float(x) for x in seen)])
    hit = 0.2
    cache = _phase(report, "cache")
    if cache is not None:
        wa = cache["data"].get("probes", {}).get("warm_a") or {}
        if wa.get("queries"):
            hit = round(max(min(0.5 * wa["hits"] / wa["queries"], 0.5), 0.05), 3)
    return {
        "kv_usage": 0.9,
        "waiting": waiting,
        "preemptions_10m": 0,
        "success_rate": round(1 - slo.max_error_rate, 4),
        "ttft_p95_s": slo.ttft_p95_s,
        "e2e_p95_s": slo.e2e_p95_s,
        "prefix_hit_rate": hit,
    }


def _rules(t: dict[str, float]) -> list[dict[str, str]]:
    ok = 'finished_reason=~"stop|length|repetition"'
    return [
        {
            "alert": "VllmKvCacheNearlyFull",
            "expr": f"max by (instance) (vllm:kv_cache_usage_perc) > {t['kv_usage']}",
            "for": "5m",
            "summary": f"KV cache above {t['kv_usage']:.0%} for 5 minutes",
        },
        {
            "alert": "VllmRequestsQueueing",
            "expr": f"sum by (instance) (vllm:num_requests_waiting) > {t['waiting']:g}",
            "for": "2m",
            "summary": f"more than {t['waiting']:g} requests waiting for 2 minutes (acceptance saw at most half that within the SLO)",
        },
        {
            "alert": "VllmPreempting",
            "expr": f"sum by (instance) (increase(vllm:num_preemptions_total[10m])) > {t['preemptions_10m']:g}",
            "for": "0m",
            "summary": "the engine preempted requests: the KV cache is too small for the load",
        },
        {
            "alert": "VllmSuccessRateLow",
            "expr": f"sum(rate(vllm:request_success_total{{{ok}}}[5m])) / sum(rate(vllm:request_success_total[5m])) < {t['success_rate']}",
            "for": "5m",
            "summary": f"success rate below {t['success_rate']:.2%}",
        },
        {
            "alert": "VllmTtftHigh",
            "expr": f"histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[5m]))) > {t['ttft_p95_s']}",
            "for": "5m",
            "summary": f"TTFT p95 above {t['ttft_p95_s']}s",
        },
        {
            "alert": "VllmE2eLatencyHigh",
            "expr": f"histogram_quantile(0.95, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket[5m]))) > {t['e2e_p95_s']}",
            "for": "5m",
            "summary": f"end-to-end p95 above {t['e2e_p95_s']}s",
        },
        {
            "alert": "VllmPrefixCacheHitsLow",
            "expr": f"sum(rate(vllm:prefix_cache_hits_total[15m])) / sum(rate(vllm:prefix_cache_queries_total[15m])) < {t['prefix_hit_rate']}",
            "for": "15m",
            "summary": f"prefix cache hit rate below {t['prefix_hit_rate']:.0%} (half of what the warm probe reached)",
        },
        {
            "alert": "VllmMetricsAbsent",
            "expr": "absent(vllm:num_requests_running)",
            "for": "5m",
            "summary": "no vLLM metrics scraped: the engine is down or the scrape points elsewhere",
        },
    ]


def _q(s: str) -> str:
    return json.dumps(s)  # a JSON string is a valid YAML double-quoted scalar


def alert_rules(report: dict[str, Any], slo: Slo) -> str:
    v = report["verdict"]
    lines = [
        "# Prometheus alerting rules for the first days after go-live, written by wirecheck accept.",
        f"# Verdict {v['decision']} at {report['evidence']['finished_at']}; each threshold is a rollback trigger.",
        "groups:",
        "  - name: wirecheck-golive",
        "    rules:",
    ]
    for r in _rules(thresholds(report, slo)) + more_rules():
        lines += [
            f"      - alert: {r['alert']}",
            f"        expr: {_q(r['expr'])}",
            f"        for: {r['for']}",
            "        labels:",
            "          severity: page",
            '          rollback: "true"',
            "        annotations:",
            f"          summary: {_q(r['summary'])}",
        ]
    return "\n".join(lines) + "\n"


def grafana_dashboard(report: dict[str, Any], slo: Slo) -> dict[str, Any]:
    t = thresholds(report, slo)
    ds = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
    specs = [
        ("KV cache usage", "max by (instance) (vllm:kv_cache_usage_perc)", t["kv_usage"], "percentunit"),
        ("Requests waiting", "sum by (instance) (vllm:num_requests_waiting)", t["waiting"], "short"),
        ("Preemptions (10m)", "sum by (instance) (increase(vllm:num_preemptions_total[10m]))", 0.5, "short"),
        (
            "Success rate",
            'sum(rate(vllm:request_success_total{finished_reason=~"stop|length|repetition"}[5m])) / sum(rate(vllm:request_success_total[5m]))',
            t["success_rate"],
            "percentunit",
        ),
        (
            "TTFT p95",
            "histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[5m])))",
            t["ttft_p95_s"],
            "s",
        ),
        (
            "E2E latency p95",
            "histogram_quantile(0.95, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket[5m])))",
            t["e2e_p95_s"],
            "s",
        ),
        (
            "Prefix cache hit rate",
            "sum(rate(vllm:prefix_cache_hits_total[15m])) / sum(rate(vllm:prefix_cache_queries_total[15m]))",
            t["prefix_hit_rate"],
            "percentunit",
        ),
    ]
    panels = []
    for i, (title, expr, limit, unit) in enumerate(specs):
        below_is_bad = title in ("Success rate", "Prefix cache hit rate")
        steps = (
            [{"color": "red", "value": None}, {"color": "green", "value": limit}]
            if below_is_bad
            else [{"color": "green", "value": None}, {"color": "red", "value": limit}]
        )
        panels.append(
            {
                "id": i + 1,
                "type": "timeseries",
                "title": title,
                "datasource": ds,
                "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
                "targets": [{"refId": "A", "expr": expr, "datasource": ds}],
                "fieldConfig": {
                    "defaults": {
                        "unit": unit,
                        "thresholds": {"mode": "absolute", "steps": steps},
                        "custom": {"thresholdsStyle": {"mode": "line"}},
                    },
                    "overrides": [],
                },
                "description": f"rollback threshold {limit:g} (from the acceptance run)",
            }
        )
    return {
        "title": "vLLM go-live (wirecheck)",
        "uid": "wirecheck-golive",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "time": {"from": "now-24h", "to": "now"},
        "refresh": "30s",
        "tags": ["vllm", "wirecheck", "go-live"],
        "templating": {
            "list": [
                {"name": "DS_PROMETHEUS", "type": "datasource", "query": "prometheus", "label": "Prometheus"}
            ]
        },
        "annotations": {"list": []},
        "panels": panels,
    }


# --- Markdown -------------------------------------------------------------------------------------


def render_markdown(report: dict[str, Any]) -> str:
    v, ev = report["verdict"], report["evidence"]
    out = [
        "# wirecheck go-live acceptance",
        "",
        *lead_md(report),
        f"**Verdict: {v['label']}**"
        + ("" if v["accepted"] else " — not accepted for production as it stands"),
        "",
    ]
    out += [f"- {r}" for r in v["reasons"]]
    out += oom_md(report)
    if v["decision"] == "limited":
        lim = v["limits"]
        out += [
            "",
            "Limited go-live conditions:",
            f"- scope: {lim.get('scope') or '(missing: --limit-scope)'}",
            f"- on-call owner: {lim.get('owner') or '(missing: --on-call)'}",
            f"- rollback: {lim.get('rollback') or '(missing: --rollback)'}",
        ]
    sug = v["limits"].get("suggested") or {}
    if sug:
        # the same title as report.html's section (tests/acceptance/test_report_parity.py)
        out += ["", "## Next steps suggested from the measurements", ""]
        out += [f"- {k}: {val}" for k, val in sug.items()]
    out += ["", "## Evidence", "", *evidence_md(report)]
    if ev["key_logs"]:
        out += ["- key log lines:"] + [f"  - `{line[:200]}`" for line in ev["key_logs"][:12]]
    out += ["", "## Checklist", ""]
    out += [f"- {TICK[i['state']]} {i['item']} — {i['evidence']}" for i in report["checklist"]]
    for ph in report["phases"]:
        out += ["", f"## {ph['name']}: {ph['status']} ({ph['duration_s']} s)", ""]
        if ph.get("error"):
            out.append(f"The phase could not finish: {ph['error']}")
        if ph.get("blocked"):
            out.append(f"Blocked, not failed: {ph['blocked']}")
        out += ["| check | status | detail |", "|---|---|---|"]
        for c in ph["checks"]:
            detail = str(c["detail"]).replace("|", "\\|").replace("\n", " ")
            lead = f" → {c['leads_to']}" if c["status"] in ("fail", "missing") else ""
            out.append(f"| {c['id']} | {c['status']}{lead} | {detail} |")
        data = ph["data"]
        if ph["name"] == "capacity" and data.get("ramp"):
            out += [
                "",
                "| step | conc. | req | err | TTFT p50 | TTFT p95 | ITL p95 | TPOT p50 | e2e p95 | KV max | waiting max | preempt |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|",
            ]
            for r in data["ramp"]:
                out.append(
                    f"| {r['label']} | {r.get('concurrency')} | {r['requests']} | {r['errors']} | {fmt(r['ttft_p50_s'])} | {fmt(r['ttft_p95_s'])} | "
                    f"{fmt(r['itl_p95_s'])} | {fmt(r['tpot_p50_s'])} | {fmt(r['e2e_p95_s'])} | {fmt(r['kv_max'])} | {fmt(r['waiting_max'])} | {fmt(r['preemptions'])} |"
                )
            out += gpu_md(report)
        if ph["name"] == "cache" and data.get("probes"):
            out += [
                "",
                "| probe | prompt | queries | hits | cached | computed | prefill s | usage cached |",
                "|---|---|---|---|---|---|---|---|",
            ]
            for name, r in data["probes"].items():
                out.append(
                    f"| {name} | {fmt(r['prompt_tokens'])} | {fmt(r['queries'])} | {fmt(r['hits'])} | {fmt(r['cached'])} | {fmt(r['computed_sum'])} | {fmt(r['prefill_s'])} | {fmt(r['usage_cached_tokens'])} |"
                )
            if data.get("hybrid_explanation"):
                out += ["", f"Hybrid cache: {data['hybrid_explanation']}."]
        if ph["name"] == "interface" and data.get("rows"):
            out += [
                "",
                f"Attribution from {data['attributed_from']}; errors by fault: {data['errors_by_fault'] or 'none'}.",
                "",
            ]
            bad = [r for r in data["rows"] if r["outcome"] != "clean"]
            if bad:
                out += [
                    "| request | kind | outcome | attempts | blamed | first errors |",
                    "|---|---|---|---|---|---|",
                ]
            out += [
                f"| {r['request']} | {r['kind']} | {r['outcome']} | {r['attempts']} | {', '.join(r['blamed'])} | {', '.join(r['first_errors'])} |"
                for r in bad
            ]
            scen = data.get("scenarios") or {}
            if scen.get("curl"):
                out += ["", "Shrunk scenario failure (reproduce):", "", "```sh", scen["curl"], "```"]
    diff = report.get("self_built_vs_official")
    if diff:
        out += [
            "",
            "## Self-built image vs the official image",
            "",
            "```json",
            json.dumps(diff, indent=2),
            "```",
        ]
    out += ["", "Files: " + ", ".join(f"`{Path(p).name}`" for p in report["files"].values())]
    return "\n".join(out) + "\n"


# --- HTML with inline SVG plots -------------------------------------------------------------------

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")


def _line_chart(
    title: str,
    xs: list[float],
    series: list[tuple[str, list[float | None]]],
    *,
    ylabel: str,
    ymax: float | None = None,
) -> str:
    w, h, pad = 460, 240, 44
    vals = [v for _, ys in series for v in ys if v is not None]
    if not xs or not vals:
        return f'<figure class="plot"><figcaption>{html.escape(title)}</figcaption><p>no data</p></figure>'
    top = ymax * 1.3 if ymax is not None else max(vals) * 1.45 or 1.0  # headroom for the legend
    xlo, xhi = min(xs), max(xs)
    span = (xhi - xlo) or 1.0

    def px(x: float) -> float:
        return pad + (x - xlo) / span * (w - 2 * pad)

    def py(y: float) -> float:
        return h - pad - (y / top) * (h - 2 * pad)

    parts = [
        f'<svg viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{html.escape(title)}">',
        f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="#888"/>',
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="#888"/>',
        f'<text x="{pad}" y="{pad - 8}" font-size="11">{html.escape(ylabel)} (highest {max(vals):.3g})</text>',
    ]
    for x in xs:
        parts.append(
            f'<text x="{px(x):.1f}" y="{h - pad + 16}" font-size="11" text-anchor="middle">{x:g}</text>'
        )
    for k, (name, ys) in enumerate(series):
        color = COLORS[k % len(COLORS)]
        pts = [(px(x), py(y)) for x, y in zip(xs, ys, strict=False) if y is not None]
        if pts:
            parts.append(
                f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{" ".join(f"{a:.1f},{b:.1f}" for a, b in pts)}"/>'
            )
            parts += [f'<circle cx="{a:.1f}" cy="{b:.1f}" r="3" fill="{color}"/>' for a, b in pts]
        parts.append(
            f'<text x="{w - pad - 110}" y="{pad + 14 * k}" font-size="11" fill="{color}">{html.escape(name)}</text>'
        )
    parts.append("</svg>")
    return f'<figure class="plot"><figcaption>{html.escape(title)}</figcaption>{"".join(parts)}</figure>'


def _bar_chart(title: str, groups: list[str], series: list[tuple[str, list[float]]]) -> str:
    w, h, pad = 460, 240, 44
    top = max([v for _, vs in series for v in vs] + [1.0]) * 1.45  # headroom for the legend
    gw = (w - 2 * pad) / max(len(groups), 1)
    bw = gw / (len(series) + 1)
    parts = [
        f'<svg viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{html.escape(title)}">',
        f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="#888"/>',
    ]
    for g, name in enumerate(groups):
        parts.append(
            f'<text x="{pad + g * gw + gw / 2:.1f}" y="{h - pad + 16}" font-size="11" text-anchor="middle">{html.escape(name)}</text>'
        )
        for k, (_, vs) in enumerate(series):
            v = vs[g]
            bh = v / top * (h - 2 * pad)
            parts.append(
                f'<rect x="{pad + g * gw + (k + 0.5) * bw:.1f}" y="{h - pad - bh:.1f}" width="{bw:.1f}" height="{bh:.1f}" fill="{COLORS[k % len(COLORS)]}"><title>{v:g}</title></rect>'
            )
    for k, (sname, _) in enumerate(series):
        parts.append(
            f'<text x="{w - pad - 110}" y="{pad + 14 * k}" font-size="11" fill="{COLORS[k % len(COLORS)]}">{html.escape(sname)}</text>'
        )
    parts.append("</svg>")
    return f'<figure class="plot"><figcaption>{html.escape(title)}</figcaption>{"".join(parts)}</figure>'


def _plots(report: dict[str, Any]) -> str:
    out = []
    cap = _phase(report, "capacity")
    if cap is not None and cap["data"].get("ramp"):
        ramp = cap["data"]["ramp"]
        xs = [float(r.get("concurrency") or 0) for r in ramp]
        out.append(
            _line_chart(
                "Latency against concurrency",
                xs,
                [
                    ("TTFT p50", [r["ttft_p50_s"] for r in ramp]),
                    ("TTFT p95", [r["ttft_p95_s"] for r in ramp]),
                    ("e2e p95", [r["e2e_p95_s"] for r in ramp]),
                ],
                ylabel="seconds",
            )
        )
        out.append(
            _line_chart(
                "KV cache usage against concurrency",
                xs,
                [("KV max", [r["kv_max"] for r in ramp]), ("KV mean", [r["kv_mean"] for r in ramp])],
                ylabel="fraction of the KV cache",
                ymax=1.0,
            )
        )
    if cap is not None and cap["data"].get("gpu"):
        out.append(gpu_curve_svg(report))
    cache = _phase(report, "cache")
    if cache is not None and cache["data"].get("probes"):
        probes = cache["data"]["probes"]
        names = list(probes)
        out.append(
            _bar_chart(
                "Prefix cache counter deltas per probe (tokens)",
                names,
                [
                    ("queries", [float(probes[n]["queries"] or 0) for n in names]),
                    ("hits", [float(probes[n]["hits"] or 0) for n in names]),
                    ("computed", [float(probes[n]["computed_sum"] or 0) for n in names]),
                ],
            )
        )
    return "".join(out)


CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}
.verdict{font-size:20px;padding:10px 14px;border-radius:6px;display:inline-block}
.v-go{background:#d9f2d9}.v-limited{background:#fff1c2}.v-rework{background:#f8d0d0}.v-scale-up{background:#d6e4ff}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
#checklist td:nth-child(2){min-width:340px}#evidence th{width:110px}td{overflow-wrap:anywhere}
.s-pass{color:#1a7f37}.s-fail,.s-missing{color:#c00;font-weight:600}.s-warn{color:#a36b00}.s-info{color:#555}
.plots{display:flex;flex-wrap:wrap;gap:16px}.plot{margin:0}figcaption{font-weight:600}
code,pre{background:#f5f5f5}pre{padding:8px;overflow-x:auto}
.banner{background:#ffe08a;border:2px solid #a36b00;padding:8px 12px;font-weight:700}.s-blocked{color:#555}
"""


def render_html(report: dict[str, Any]) -> str:
    v, ev = report["verdict"], report["evidence"]
    e = html.escape
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>wirecheck acceptance</title>",
        f"<style>{CSS}</style></head><body>",
        "<h1>wirecheck go-live acceptance</h1>",
        lead_html(report),
        f'<p id="verdict" class="verdict v-{e(v["decision"])}">Verdict: <b>{e(v["label"])}</b>'
        + ("" if v["accepted"] else " — not accepted for production as it stands")
        + "</p>",
        "<ul>" + "".join(f"<li>{e(r)}</li>" for r in v["reasons"]) + "</ul>",
        oom_html(report),
    ]
    if v["decision"] == "limited":
        lim = v["limits"]
        parts.append(
            "<table id=limits>"
            + "".join(
                f"<tr><th>{e(k)}</th><td>{e(str(lim.get(key) or '(missing ' + flag + ')'))}</td></tr>"
                for k, key, flag in (
                    ("scope", "scope", "--limit-scope"),
                    ("on-call owner", "owner", "--on-call"),
                    ("rollback", "rollback", "--rollback"),
                )
            )
            + "</table>"
        )
    parts.append("<h2>Evidence</h2><table id=evidence>" + evidence_html(report) + "</table>")
    if ev["key_logs"]:
        parts.append(
            "<details><summary>key log lines</summary><pre>"
            + e("\n".join(ev["key_logs"]))
            + "</pre></details>"
        )
    parts.append('<h2>Checklist</h2><table id="checklist"><tr><th></th><th>item</th><th>evidence</th></tr>')
    for i in report["checklist"]:
        mark = {"done": "&#9745;", "open": "&#9744;", "not run": "&#8212;"}[i["state"]]
        parts.append(
            f'<tr class="c-{e(i["state"].replace(" ", "-"))}"><td>{mark}</td><td>{e(i["item"])}</td><td>{e(i["evidence"])}</td></tr>'
        )
    parts.append("</table>")
    plots = _plots(report)
    if plots:
        parts.append(f'<h2>Plots</h2><div class="plots" id="plots">{plots}</div>')
    for ph in report["phases"]:
        parts.append(
            f'<h2 id="phase-{e(ph["name"])}">{e(ph["name"])}: <span class="s-{e(ph["status"])}">{e(ph["status"])}</span> ({ph["duration_s"]} s)</h2>'
        )
        if ph.get("error"):
            parts.append(f"<p class=s-fail>{e(ph['error'])}</p>")
        if ph.get("blocked"):
            parts.append(f"<p class=s-blocked>Blocked, not failed: {e(ph['blocked'])}</p>")
        parts.append("<table><tr><th>check</th><th>status</th><th>detail</th></tr>")
        for c in ph["checks"]:
            lead = f" → {c['leads_to']}" if c["status"] in ("fail", "missing") else ""
            parts.append(
                f'<tr><td>{e(c["id"])}</td><td class="s-{e(c["status"])}">{e(c["status"] + lead)}</td><td>{e(str(c["detail"]))}</td></tr>'
            )
        parts.append("</table>")
        data = ph["data"]
        if ph["name"] == "capacity" and data.get("ramp"):
            cols = (
                "label",
                "concurrency",
                "requests",
                "errors",
                "ttft_p50_s",
                "ttft_p95_s",
                "itl_p95_s",
                "tpot_p50_s",
                "e2e_p95_s",
                "kv_max",
                "waiting_max",
                "preemptions",
            )
            parts.append("<table class=ramp><tr>" + "".join(f"<th>{c}</th>" for c in cols) + "</tr>")
            for r in data["ramp"]:
                parts.append("<tr>" + "".join(f"<td>{e(fmt(r.get(c)))}</td>" for c in cols) + "</tr>")
            parts.append("</table>")
        if ph["name"] == "interface" and data.get("scenarios", {}).get("curl"):
            parts.append("<p>Shrunk scenario failure:</p><pre>" + e(data["scenarios"]["curl"]) + "</pre>")
    parts.append(details_html(report))
    parts.append(
        "<h2>Files</h2><ul>"
        + "".join(f"<li>{e(Path(p).name)}</li>" for p in report["files"].values())
        + "</ul>"
    )
    parts.append("</body></html>")
    return "".join(parts)


def write_reports(report: dict[str, Any], slo: Slo, files: dict[str, str]) -> None:
    Path(files["json"]).write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    Path(files["markdown"]).write_text(render_markdown(report), encoding="utf-8")
    Path(files["html"]).write_text(render_html(report), encoding="utf-8")
    Path(files["alerts"]).write_text(alert_rules(report, slo), encoding="utf-8")
    Path(files["dashboard"]).write_text(
        json.dumps(grafana_dashboard(report, slo), indent=2) + "\n", encoding="utf-8"
    )
