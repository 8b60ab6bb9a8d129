"""The report of one acceptance run, typed: the verdict, the evidence, each phase's facts and checks,
the checklist, the self-built comparison and the files. Every format renders from it; report.json is
its JSON (``docs/acceptance-report.schema.json``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._model import PhaseResult, Slo, Verdict

__all__ = ["Report"]

#: the rollback thresholds a run without measurements of its own gets (the alert rules' defaults)
DEFAULT_THRESHOLDS = {"kv_usage": 0.9, "waiting": 1.0, "preemptions_10m": 0.0, "prefix_hit_rate": 0.2}


@dataclass(slots=True, kw_only=True)
class Report:
    verdict: Verdict
    #: when, what ran, who reviewed, the engine, topology, container, key logs, the workload, files
    evidence: dict[str, Any]
    phases: list[PhaseResult]
    selected: list[str]
    checklist: list[dict[str, Any]] = field(default_factory=list)
    self_built: dict[str, Any] | None = None
    files: dict[str, str] = field(default_factory=dict)
    #: what the capacity steps were held to: the alerts' latency and success thresholds
    slo: Slo = field(default_factory=Slo)

    def thresholds(self) -> dict[str, float]:
        """The rollback thresholds of the alert rules and the dashboard: the SLO's, and what the
        phases' measurements set (``Facts.alert_thresholds``)."""
        t: dict[str, float] = dict(DEFAULT_THRESHOLDS)
        for ph in self.phases:
            if ph.facts is not None:
                t.update(ph.facts.alert_thresholds())
        t.update(
            success_rate=round(1 - self.slo.max_error_rate, 4),
            ttft_p95_s=self.slo.ttft_p95_s,
            e2e_p95_s=self.slo.e2e_p95_s,
        )
        return t

    def to_json(self) -> dict[str, Any]:
        return {
            "wirecheck_acceptance": 1,
            "verdict": self.verdict.to_json(),
            "evidence": self.evidence,
            "phases": [p.to_json() for p in self.phases],
            "phases_selected": self.selected,
            "self_built_vs_official": self.self_built,
            "checklist": self.checklist,
            "files": self.files,
        }
