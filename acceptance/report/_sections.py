"""Report sections for Markdown and HTML alike: the simulated-evidence banner, the OOM
with its evidence, blocked phases, and the per-GPU memory curve through the capacity steps.

Kept out of ``_report`` (no module over 600 lines); ``_report`` calls these at fixed places.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from ..load import workload_line

__all__ = [
    "details_html",
    "evidence_html",
    "evidence_md",
    "fmt",
    "gpu_curve_svg",
    "gpu_md",
    "lead_html",
    "lead_md",
    "oom_html",
    "oom_md",
]


def fmt(v: Any, unit: str = "") -> str:
    """A figure as both report formats print it (three decimals below 100, none above)."""
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.3f}{unit}" if abs(v) < 100 else f"{v:.0f}{unit}"
    return f"{v}{unit}"


_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def _banner(report: dict[str, Any]) -> str | None:
    v = report["verdict"]
    if not v.get("simulated"):
        return None
    return (
        "SIMULATED EVIDENCE: this verdict was built on the wirecheck simulator's evidence ("
        + ", ".join(v.get("simulated_sources") or ["simulator"])
        + "). It says nothing about a real deployment."
    )


def _oom_rows(oom: dict[str, Any]) -> list[tuple[str, str]]:
    def mem(m: Any) -> str:
        if not m:
            return "not measured"
        return f"{m['used_mib_max']} MiB of {m['total_mib']} MiB (max of {m['gpus']} GPUs)"

    return [
        ("step", str(oom.get("step"))),
        ("concurrency", str(oom.get("concurrency"))),
        ("input tokens (max / mean)", f"{oom.get('input_tokens_max')} / {oom.get('input_tokens_mean')}"),
        ("max output tokens", str(oom.get("max_output_tokens"))),
        ("max_model_len", str(oom.get("max_model_len"))),
        ("prefix caching", str(oom.get("prefix_caching"))),
        ("KV offload", str(oom.get("kv_offload"))),
        ("KV usage before / after", f"{oom.get('kv_usage_before')} / {oom.get('kv_usage_after')}"),
        ("GPU memory before", mem(oom.get("gpu_memory_before"))),
        ("GPU memory after", mem(oom.get("gpu_memory_after"))),
        ("GPU memory peak (MiB)", str(oom.get("gpu_memory_peak_mib"))),
        ("loading had finished", str(oom.get("loading_finished"))),
        ("engine afterwards", f"{oom.get('state')} (waited {oom.get('recover_wait_s')} s)"),
        ("error lines", "; ".join(oom.get("errors") or []) or "none"),
    ]


def lead_md(report: dict[str, Any]) -> list[str]:
    """Lines that go right under the title, before the verdict: the banner."""
    b = _banner(report)
    return [f"> **{b}**", ""] if b else []


def oom_md(report: dict[str, Any]) -> list[str]:
    oom = report["verdict"].get("oom")
    if not oom:
        return []
    out = ["", "## Out of memory (leads the verdict)", "", "| | |", "|---|---|"]
    out += [f"| {k} | {v.replace('|', '/')} |" for k, v in _oom_rows(oom)]
    blocked = [p for p in report["phases"] if p.get("blocked")]
    if blocked:
        out += [
            "",
            "Blocked (not failed) after the engine died: " + ", ".join(p["name"] for p in blocked) + ".",
        ]
    return out


def lead_html(report: dict[str, Any]) -> str:
    b = _banner(report)
    return f'<p id="simulated" class="banner">{html.escape(b)}</p>' if b else ""


def oom_html(report: dict[str, Any]) -> str:
    oom = report["verdict"].get("oom")
    if not oom:
        return ""
    e = html.escape
    rows = "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in _oom_rows(oom))
    blocked = [p["name"] for p in report["phases"] if p.get("blocked")]
    tail = f"<p>Blocked (not failed) after the engine died: {e(', '.join(blocked))}.</p>" if blocked else ""
    return f'<h2 id="oom">Out of memory (leads the verdict)</h2><table id="oom-evidence">{rows}</table>{tail}'


def _capacity(report: dict[str, Any]) -> dict[str, Any] | None:
    return next((p["data"] for p in report["phases"] if p["name"] == "capacity"), None)


def _curves(
    data: dict[str, Any],
) -> tuple[dict[str, list[tuple[float, float]]], list[tuple[float, str]], float | None]:
    """Per GPU, (t, MiB) over the steps laid end to end; each step's start; where the OOM struck."""
    curves: dict[str, list[tuple[float, float]]] = {}
    marks: list[tuple[float, str]] = []
    oom_at = None
    offset = 0.0
    oom_step = (data.get("oom") or {}).get("step")
    steps = [*data.get("ramp", []), *([data["soak"]] if data.get("soak") else [])]
    for r in steps:
        series = r.get("gpu_series") or []
        marks.append((offset, str(r.get("label"))))
        if r.get("label") == oom_step:
            oom_at = offset + (series[-1]["t"] if series else 0.0)
        for snap in series:
            for g in snap["gpus"]:
                curves.setdefault(g["gpu"], []).append((offset + snap["t"], g["used_mib"]))
        offset += max((s["t"] for s in series), default=0.0) + 0.5
    return curves, marks, oom_at


def gpu_md(report: dict[str, Any]) -> list[str]:
    data = _capacity(report)
    if not data or not data.get("gpu"):
        return []
    out = ["", gpu_caption(data), ""]
    out += ["| step | before | peak | after | GPUs |", "|---|---|---|---|---|"]
    out += [f"| {' | '.join(map(str, row))} |" for row in gpu_rows(data)]
    return out


def gpu_caption(data: dict[str, Any]) -> str:
    g = data["gpu"]
    return f"GPU memory ({g.get('source') or 'no source'}): per step, the most used GPU before / peak / after (MiB)"


def gpu_rows(data: dict[str, Any]) -> list[list[Any]]:
    """Per capacity step: the most used GPU before, at peak and after (MiB), and how many GPUs."""
    rows = []
    for r in [*data.get("ramp", []), *([data["soak"]] if data.get("soak") else [])]:
        b, a = r.get("gpu_before") or {}, r.get("gpu_after") or {}
        rows.append(
            [
                r.get("label"),
                b.get("used_mib_max", "–"),
                r.get("gpu_used_max_mib") or "–",
                a.get("used_mib_max", "–"),
                a.get("gpus") or b.get("gpus") or "–",
            ]
        )
    return rows


def gpu_curve_svg(report: dict[str, Any]) -> str:
    """One line per GPU, memory used against time through the steps, the OOM marked."""
    data = _capacity(report)
    if not data:
        return ""
    curves, marks, oom_at = _curves(data)
    title = "GPU memory used per GPU through the capacity steps (MiB)"
    if not curves:
        return f'<figure class="plot" id="gpu-memory"><figcaption>{title}</figcaption><p>not measured: no GPU source</p></figure>'
    w, h, pad, legend = 680, 280, 54, 90
    pts = [p for c in curves.values() for p in c]
    xmax = max(t for t, _ in pts) or 1.0
    top = max(v for _, v in pts) * 1.15 or 1.0

    def px(t: float) -> float:
        return pad + t / xmax * (w - 2 * pad - legend)

    def py(v: float) -> float:
        return h - pad - v / top * (h - 2 * pad)

    e = html.escape
    parts = [
        f'<svg viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{e(title)}">',
        f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad - legend}" y2="{h - pad}" stroke="#888"/>',
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="#888"/>',
        f'<text x="{pad}" y="{pad - 10}" font-size="11">MiB used (highest {max(v for _, v in pts):.0f})</text>',
        f'<text x="{w / 2}" y="{h - 8}" font-size="11" text-anchor="middle">seconds through the steps</text>',
        f'<text x="{pad - 4}" y="{py(0):.1f}" font-size="10" text-anchor="end">0</text>',
        f'<text x="{pad - 4}" y="{py(top / 1.15):.1f}" font-size="10" text-anchor="end">{top / 1.15:.0f}</text>',
    ]
    for t, label in marks:
        parts.append(
            f'<line x1="{px(t):.1f}" y1="{pad}" x2="{px(t):.1f}" y2="{h - pad}" stroke="#ddd"/>'
            f'<text x="{px(t) + 2:.1f}" y="{h - pad + 14}" font-size="9">{e(label)}</text>'
        )
    if oom_at is not None:
        parts.append(
            f'<line class="oom" x1="{px(oom_at):.1f}" y1="{pad}" x2="{px(oom_at):.1f}" y2="{h - pad}" stroke="#c00" stroke-width="2"/>'
            f'<text x="{px(oom_at) + 3:.1f}" y="{pad + 12}" font-size="11" fill="#c00">OOM</text>'
        )
    for k, (gpu, c) in enumerate(sorted(curves.items())):
        color = _COLORS[k % len(_COLORS)]
        line = " ".join(f"{px(t):.1f},{py(v):.1f}" for t, v in c)
        parts.append(
            f'<polyline class="gpu" fill="none" stroke="{color}" stroke-width="1.5" points="{line}"><title>{e(gpu)}</title></polyline>'
        )
        parts.append(
            f'<text x="{w - pad - legend + 6}" y="{pad + 11 * k}" font-size="9" fill="{color}">{e(gpu)}</text>'
        )
    parts.append("</svg>")
    return f'<figure class="plot" id="gpu-memory"><figcaption>{title}</figcaption>{"".join(parts)}</figure>'


def evidence_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    """The evidence section's rows, one list for report.md and report.html alike (the two
    drifted): when, what ran, who reviewed, the engine, topology and container, the recipe as the
    operator read it, the capacity workload, and the evidence files copied with their hashes."""
    ev = report["evidence"]
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
        (
            "container",
            ", ".join(f"{k}={v}" for k, v in ev["container"].items() if v) or "(no probe output)",
        ),
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


def evidence_md(report: dict[str, Any]) -> list[str]:
    return [f"- {k}: {v}" for k, v in evidence_rows(report)]


def evidence_html(report: dict[str, Any]) -> str:
    e = html.escape
    return "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in evidence_rows(report))


def _table(head: list[str], rows: list[list[Any]], ident: str) -> str:
    e = html.escape
    return (
        f'<table id="{ident}"><tr>'
        + "".join(f"<th>{e(h)}</th>" for h in head)
        + "</tr>"
        + "".join("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in r) + "</tr>" for r in rows)
        + "</table>"
    )


def details_html(report: dict[str, Any]) -> str:
    """What report.md carries beyond the checks, so the HTML report carries it too: the
    suggested limits and rollback, the cache probes, the attribution table, GPU memory per step and
    the self-built comparison."""
    e = html.escape
    parts = []
    sug = report["verdict"]["limits"].get("suggested") or {}
    if sug:
        parts.append(
            '<h2 id="next-steps">Next steps suggested from the measurements</h2><ul>'
            + "".join(f"<li><b>{e(k)}</b>: {e(str(v))}</li>" for k, v in sug.items())
            + "</ul>"
        )
    phases = {p["name"]: p["data"] for p in report["phases"]}
    cache = phases.get("cache") or {}
    if cache.get("probes"):
        cols = [
            "prompt_tokens",
            "queries",
            "hits",
            "cached",
            "computed_sum",
            "prefill_s",
            "usage_cached_tokens",
        ]
        rows = [[n, *(fmt(r.get(c)) for c in cols)] for n, r in cache["probes"].items()]
        parts.append("<h2>Cache probes</h2>" + _table(["probe", *cols], rows, "cache-probes"))
        if cache.get("hybrid_explanation"):
            parts.append(f"<p>Hybrid cache: {e(cache['hybrid_explanation'])}.</p>")
    iface = phases.get("interface") or {}
    if iface.get("rows"):
        parts.append(
            f"<h2>Attribution</h2><p>Attribution from {e(iface['attributed_from'])}; errors by fault: "
            f"{e(str(iface['errors_by_fault'] or 'none'))}.</p>"
        )
        bad = [r for r in iface["rows"] if r["outcome"] != "clean"]
        if bad:
            rows = [
                [
                    r["request"],
                    r["kind"],
                    r["outcome"],
                    r["attempts"],
                    ", ".join(r["blamed"]),
                    ", ".join(r["first_errors"]),
                ]
                for r in bad
            ]
            parts.append(
                _table(
                    ["request", "kind", "outcome", "attempts", "blamed", "first errors"], rows, "attribution"
                )
            )
    cap = phases.get("capacity") or {}
    if cap.get("gpu"):
        parts.append(
            f"<h2>GPU memory per step ({e(str(cap['gpu'].get('source') or 'no source'))})</h2>"
            f"<p>{e(gpu_caption(cap))}</p>"
            + _table(["step", "before MiB", "peak MiB", "after MiB", "GPUs"], gpu_rows(cap), "gpu-steps")
        )
    diff = report.get("self_built_vs_official")
    if diff:
        parts.append(
            '<h2 id="self-built">Self-built image vs the official image</h2><pre>'
            + e(json.dumps(diff, indent=2))
            + "</pre>"
        )
    return "".join(parts)
