"""report.md: the verdict first, then the evidence, the checklist, and each phase's checks with what
its facts show (``Facts.blocks``); plots are the HTML report's, their figures are in the tables."""

from __future__ import annotations

import json
from pathlib import Path

from .._blocks import Block, Code, Table, Text
from .._model import PhaseResult
from ._document import Report
from ._sections import banner, blocked_after_oom, evidence_rows, oom_rows

__all__ = ["render_markdown"]

TICK = {"done": "[x]", "open": "[ ]", "not run": "[-]"}


def _cell(v: object) -> str:
    return str(v).replace("|", "\\|").replace("\n", " ")


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        *("| " + " | ".join(_cell(c) for c in r) + " |" for r in rows),
    ]


def _block(b: Block) -> list[str]:
    if isinstance(b, Table):
        out = ["", f"### {b.heading}"] if b.heading else []
        out += ["", b.caption] if b.caption else []
        return [*out, "", *_table(b.head, b.rows)]
    if isinstance(b, Text):
        return ["", b.text]
    if isinstance(b, Code):
        out = ["", f"### {b.heading}"] if b.heading else []
        out += ["", b.caption] if b.caption else []
        return [*out, "", f"```{b.lang}", b.text, "```"]
    return []  # a plot: drawn in report.html, its figures are in the tables


def _verdict(report: Report) -> list[str]:
    v = report.verdict
    out = [
        f"**Verdict: {v.label}**" + ("" if v.accepted else " — not accepted for production as it stands"),
        "",
    ]
    out += [f"- {r}" for r in v.reasons]
    if v.oom:
        out += [
            "",
            "## Out of memory (leads the verdict)",
            "",
            *_table(["", ""], [[k, w] for k, w in oom_rows(v.oom)]),
        ]
        blocked = blocked_after_oom(report)
        out += ["", blocked] if blocked else []
    if v.decision == "limited":
        lim = v.limits
        out += [
            "",
            "Limited go-live conditions:",
            f"- scope: {lim.get('scope') or '(missing: --limit-scope)'}",
            f"- on-call owner: {lim.get('owner') or '(missing: --on-call)'}",
            f"- rollback: {lim.get('rollback') or '(missing: --rollback)'}",
        ]
    sug = v.limits.get("suggested") or {}
    if sug:
        out += ["", "## Next steps suggested from the measurements", ""]
        out += [f"- {k}: {val}" for k, val in sug.items()]
    return out


def _phase(ph: PhaseResult) -> list[str]:
    out = ["", f"## {ph.name}: {ph.status} ({round(ph.duration_s, 3)} s)", ""]
    if ph.error:
        out.append(f"The phase could not finish: {ph.error}")
    if ph.blocked:
        out.append(f"Blocked, not failed: {ph.blocked}")
    rows = [[c.id, c.status + (f" → {c.leads_to}" if c.blocking else ""), c.detail] for c in ph.checks]
    out += _table(["check", "status", "detail"], rows)
    for b in ph.facts.blocks() if ph.facts is not None else []:
        out += _block(b)
    return out


def render_markdown(report: Report) -> str:
    ev = report.evidence
    out = ["# wirecheck go-live acceptance", ""]
    if (b := banner(report)) is not None:
        out += [f"> **{b}**", ""]
    out += _verdict(report)
    out += ["", "## Evidence", "", *(f"- {k}: {v}" for k, v in evidence_rows(report))]
    if ev["key_logs"]:
        out += ["- key log lines:"] + [f"  - `{line[:200]}`" for line in ev["key_logs"][:12]]
    out += ["", "## Checklist", ""]
    out += [f"- {TICK[i['state']]} {i['item']} — {i['evidence']}" for i in report.checklist]
    for ph in report.phases:
        out += _phase(ph)
    if report.self_built:
        out += _block(
            Code(
                json.dumps(report.self_built, indent=2),
                heading="Self-built image vs the official image",
                lang="json",
            )
        )
    out += ["", "Files: " + ", ".join(f"`{Path(p).name}`" for p in report.files.values())]
    return "\n".join(out) + "\n"
