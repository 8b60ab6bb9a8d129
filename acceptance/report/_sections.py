"""What report.md and report.html both show outside the phases, as rows both render: the
simulated-evidence banner, the OOM that leads the verdict, and the evidence section."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..load import workload_line
from ._document import Report

__all__ = ["banner", "blocked_after_oom", "evidence_rows", "oom_rows"]


def banner(report: Report) -> str | None:
    v = report.verdict
    if not v.simulated:
        return None
    return (
        "SIMULATED EVIDENCE: this verdict was built on the wirecheck simulator's evidence ("
        + ", ".join(v.simulated_sources or ["simulator"])
        + "). It says nothing about a real deployment."
    )


def _mem(m: Any) -> str:
    if not m:
        return "not measured"
    return f"{m['used_mib_max']} MiB of {m['total_mib']} MiB (max of {m['gpus']} GPUs)"


def oom_rows(oom: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        ("step", str(oom.get("step"))),
        ("concurrency", str(oom.get("concurrency"))),
        ("input tokens (max / mean)", f"{oom.get('input_tokens_max')} / {oom.get('input_tokens_mean')}"),
        ("max output tokens", str(oom.get("max_output_tokens"))),
        ("max_model_len", str(oom.get("max_model_len"))),
        ("prefix caching", str(oom.get("prefix_caching"))),
        ("KV offload", str(oom.get("kv_offload"))),
        ("KV usage before / after", f"{oom.get('kv_usage_before')} / {oom.get('kv_usage_after')}"),
        ("GPU memory before", _mem(oom.get("gpu_memory_before"))),
        ("GPU memory after", _mem(oom.get("gpu_memory_after"))),
        ("GPU memory peak (MiB)", str(oom.get("gpu_memory_peak_mib"))),
        ("loading had finished", str(oom.get("loading_finished"))),
        ("engine afterwards", f"{oom.get('state')} (waited {oom.get('recover_wait_s')} s)"),
        ("error lines", "; ".join(oom.get("errors") or []) or "none"),
    ]


def blocked_after_oom(report: Report) -> str | None:
    blocked = [p.name for p in report.phases if p.blocked]
    return f"Blocked (not failed) after the engine died: {', '.join(blocked)}." if blocked else None


def evidence_rows(report: Report) -> list[tuple[str, str]]:
    """The evidence section's rows: when, what ran, who reviewed, the engine, topology and
    container, the recipe as the operator read it, the capacity workload, and the evidence files
    copied with their hashes."""
    ev = report.evidence
    rec = ev.get("recipe") or {}
    eng = ev["engine"]
    rows = [
        ("time", f"{ev['started_at']} to {ev['finished_at']} ({ev['duration_s']} s)"),
        ("profile", str(ev["profile"])),
        ("sample set version", str(ev["sample_set_version"])),
        ("wirecheck", str(ev["wirecheck_version"])),
        ("reviewer", str(ev["reviewer"])),
        ("engine", f"{eng.get('model')} on vLLM {eng.get('version')}, fingerprint {eng.get('fingerprint')}"),
        ("topology", ", ".join(f"{k}={v}" for k, v in ev["topology"].items() if v not in (None, [], ""))),
        ("container", ", ".join(f"{k}={v}" for k, v in ev["container"].items() if v) or "(no probe output)"),
        (
            "recipe",
            f"accessed {rec.get('accessed') or '(not given: --recipe-accessed)'}; support status "
            f"{rec.get('support_status') or '(not given: --support-status)'}",
        ),
    ]
    if ev.get("workload"):
        # where the capacity load came from ("short synthetic prompts only" is a known mistake)
        rows.append(("workload", workload_line(ev["workload"])))
    rows += [
        (
            "evidence file",
            f"{Path(f['copy']).name} sha256 {f['sha256']}" + (" (SIMULATED)" if f.get("simulated") else ""),
        )
        for f in ev.get("evidence_files") or []
    ]
    return rows
