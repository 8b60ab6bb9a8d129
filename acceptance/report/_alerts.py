"""The first days' Prometheus alerting rules and Grafana dashboard, whose thresholds are the rollback
triggers: the SLO's, and what the acceptance run measured (``Report.thresholds``). Besides the engine's
own gauges: GPU memory, process restarts, and a rising tool-call error rate (the go-live checklist's
"after launch" list)."""

from __future__ import annotations

import json
from typing import Any

from ._document import Report

__all__ = ["alert_rules", "grafana_dashboard"]

#: GPU memory, restarts and tool-call errors, beside the engine's own rules
_MORE_RULES: list[dict[str, str]] = [
    {
        # DCGM exporter series (the source accept samples): used over used+free, per GPU
        "alert": "GpuMemoryNearlyFull",
        "expr": "max by (Hostname, gpu) (DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE)) > 0.97",
        "for": "5m",
        "summary": "a GPU's memory above 97% for 5 minutes: an OOM is near",
    },
    {
        # a counter that resets is a process that restarted (vLLM has no restart counter of its own)
        "alert": "VllmProcessRestarted",
        "expr": "sum by (instance) (resets(vllm:prompt_tokens_total[15m])) > 0",
        "for": "0m",
        "summary": "the vLLM process restarted (its counters reset) in the last 15 minutes",
    },
    {
        # wirecheck's proxy counts findings by rule; tool-call rules rising against the hour before
        "alert": "ToolCallErrorsRising",
        "expr": (
            'sum(rate(wirecheck_findings_total{severity="error",rule=~".*tool.*"}[15m])) > 0.01 and '
            'sum(rate(wirecheck_findings_total{severity="error",rule=~".*tool.*"}[15m])) > '
            '2 * sum(rate(wirecheck_findings_total{severity="error",rule=~".*tool.*"}[15m] offset 1h))'
        ),
        "for": "10m",
        "summary": "tool-call protocol errors rising: more than twice the hour before",
    },
]


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


def alert_rules(report: Report) -> str:
    lines = [
        "# Prometheus alerting rules for the first days after go-live, written by wirecheck accept.",
        f"# Verdict {report.verdict.decision} at {report.evidence['finished_at']}; each threshold is a rollback trigger.",
        "groups:",
        "  - name: wirecheck-golive",
        "    rules:",
    ]
    for r in _rules(report.thresholds()) + _MORE_RULES:
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


def grafana_dashboard(report: Report) -> dict[str, Any]:
    t = report.thresholds()
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
