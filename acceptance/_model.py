"""The acceptance result model: checks, phases, the verdict and its evidence.

A ``Check`` is one judged statement with the evidence it was judged on. Its ``status`` is ``pass``,
``fail``, ``warn`` (recorded, does not block), ``missing`` (no evidence: it cannot pass), or ``info``.
A failed or missing check names the verdict it leads to in ``leads_to``: ``rework`` (environment),
``scale-up`` (resources) or ``limited`` (bounded, non-critical). Its title is the catalogue's
(``_catalogue``): a check never carries a title of its own.

A phase's result holds its typed facts (what it measured: :class:`Facts`), the checks its judges ruled
from them, and how the run went (when it started, how long it took, an error, or why it was blocked).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wirecheck.contracts import Exchange

from ._blocks import Block
from ._catalogue import consequence, declared

__all__ = ["Check", "Facts", "Limits", "PhaseResult", "Slo", "Verdict"]

VERDICTS = ("go", "limited", "rework", "scale-up")


@dataclass(slots=True)
class Check:
    id: str
    status: str
    detail: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    leads_to: str | None = None

    def __post_init__(self) -> None:
        spec = declared(self.id)
        if spec is None:
            # every id is declared in the catalogue (_catalogue.py), which the docs are generated from
            raise ValueError(f"check id {self.id!r} is not declared in the catalogue")
        self.leads_to = consequence(spec, self.status, self.leads_to)

    @property
    def title(self) -> str:
        spec = declared(self.id)
        assert spec is not None  # checked when the check was made
        return spec.title

    @property
    def blocking(self) -> bool:
        return self.status in ("fail", "missing")

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
            "evidence": self.evidence,
            "leads_to": self.leads_to,
        }


class Facts:
    """What a phase measured, typed: the judges read it, the report renders it, and its JSON is the
    phase's ``data`` in report.json. The defaults here are a phase with nothing more to say."""

    def to_json(self) -> dict[str, Any]:
        return {}

    def blocks(self) -> list[Block]:
        """What the report shows of these facts beyond the checks, in both formats."""
        return []

    def suggestions(self) -> dict[str, str]:
        """Next steps the measurements suggest (a rate limit, a caller policy), by name."""
        return {}

    def alert_thresholds(self) -> dict[str, float]:
        """Rollback thresholds the measurements set (the alert rules' defaults otherwise)."""
        return {}

    def evidence(self) -> dict[str, Any]:
        """What these facts add to the report's evidence section, by key."""
        return {}

    @classmethod
    def figures_of(cls, data: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """Key figures per row of a phase's ``data`` (ours, or another run's report.json): what a
        self-built image's run is compared with the official image's by."""
        return {}

    def simulated_sources(self) -> list[str]:
        """The evidence that came from the simulator, not a deployment."""
        return []

    def sent(self) -> list[Any]:
        """Every request the phase sent, measured (``load.Sample``), for samples.jsonl."""
        return []

    def recorded(self) -> list[Exchange]:
        """The exchanges the phase checked against the contracts, for interface.jsonl."""
        return []

    @property
    def stops_run(self) -> str | None:
        """Why the phases after this one cannot run (the engine died and did not come back)."""
        return None


@dataclass(slots=True)
class PhaseResult:
    """One phase: its facts (none when it could not measure), its checks, and how the run went."""

    name: str
    facts: Facts | None = None
    checks: list[Check] = field(default_factory=list)
    started_at: str = ""
    duration_s: float = 0.0
    error: str | None = None
    #: the phase did not run because the engine died before it: neither passed nor failed
    blocked: str | None = None

    @property
    def data(self) -> dict[str, Any]:
        return self.facts.to_json() if self.facts is not None else {}

    @property
    def status(self) -> str:
        if self.blocked is not None:
            return "blocked"
        if self.error is not None or any(c.status == "fail" for c in self.checks):
            return "fail"
        if any(c.status == "missing" for c in self.checks):
            return "missing"
        if any(c.status == "warn" for c in self.checks):
            return "warn"
        return "pass"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "started_at": self.started_at,
            "duration_s": round(self.duration_s, 3),
            "error": self.error,
            "blocked": self.blocked,
            "checks": [c.to_json() for c in self.checks],
            "data": self.data,
        }


@dataclass(slots=True)
class Slo:
    """Service levels the capacity phase holds each step to (seconds, fraction)."""

    ttft_p95_s: float = 2.0
    e2e_p95_s: float = 60.0
    itl_p95_s: float = 0.2
    max_error_rate: float = 0.01


@dataclass(slots=True)
class Limits:
    """What ``limited`` needs to be granted, and how much retry-fixed failure it may carry."""

    scope: str | None = None
    owner: str | None = None
    rollback: str | None = None
    #: at most this fraction of interface requests may need a retry for ``limited`` (else rework);
    #: 0.1 as documented for --max-retry-rate (the CLI said 0.1 while this said 0.05)
    max_retry_rate: float = 0.1

    def missing(self) -> list[str]:
        return [
            flag
            for flag, value in (
                ("--limit-scope", self.scope),
                ("--on-call", self.owner),
                ("--rollback", self.rollback),
            )
            if not value
        ]


@dataclass(slots=True)
class Verdict:
    decision: str
    granted: bool
    reasons: list[str]
    partial: bool = False
    missing_conditions: list[str] = field(default_factory=list)
    limits: dict[str, Any] = field(default_factory=dict)
    #: the OOM's evidence when the engine died of it (it leads the reasons)
    oom: dict[str, Any] | None = None
    #: the evidence came from the simulator, not a deployment: said in every format
    simulated_sources: list[str] = field(default_factory=list)

    @property
    def simulated(self) -> bool:
        return bool(self.simulated_sources)

    def __post_init__(self) -> None:
        if self.decision not in VERDICTS:
            raise ValueError(f"verdict {self.decision!r}")

    @property
    def label(self) -> str:
        if not self.granted:
            return f"{self.decision} (NOT GRANTED: " + ", ".join(self.missing_conditions) + " missing)"
        return self.decision + (" (partial: not every phase ran)" if self.partial else "")

    @property
    def accepted(self) -> bool:
        """May go to production: go, or limited with its conditions recorded, over every phase."""
        return self.granted and not self.partial and self.decision in ("go", "limited")

    def to_json(self) -> dict[str, Any]:
        return {
            "decision": self.decision,
            "granted": self.granted,
            "accepted": self.accepted,
            "label": self.label,
            "partial": self.partial,
            "reasons": self.reasons,
            "missing_conditions": self.missing_conditions,
            "limits": self.limits,
            "oom": self.oom,
            "simulated": self.simulated,
            "simulated_sources": self.simulated_sources,
        }
