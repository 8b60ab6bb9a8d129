"""Rollback alerts added to the first days' rules: GPU memory, process restarts, and a rising
tool-call error rate (the go-live checklist's "after launch" list). Kept beside ``_report``'s own rules."""

from __future__ import annotations

__all__ = ["more_rules"]


def more_rules() -> list[dict[str, str]]:
    return [
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
