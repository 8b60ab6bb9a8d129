"""The acceptance result model: checks, phases, the verdict and its evidence.

A ``Check`` is one judged statement with the evidence it was judged on. Its ``status`` is ``pass``,
``fail``, ``warn`` (recorded, does not block), ``missing`` (no evidence: it cannot pass), or ``info``.
A failed or missing check names the verdict it leads to in ``leads_to``: ``rework`` (environment),
``scale-up`` (resources) or ``limited`` (bounded, non-critical).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ._catalogue import declared

__all__ = [
    "CacheResult",
    "CapacityResult",
    "Check",
    "CompatResult",
    "InterfaceResult",
    "Limits",
    "PhaseResult",
    "Slo",
    "Verdict",
]

STATUSES = ("pass", "fail", "warn", "missing", "info")
VERDICTS = ("go", "limited", "rework", "scale-up")


@dataclass(slots=True)
class Check:
    id: str
    title: str
    status: str
    detail: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    leads_to: str | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"check status {self.status!r}")
        spec = declared(self.id)
        if spec is None:
            # every id is declared in the catalogue (_catalogue.py), which the docs are generated from
            raise ValueError(f"check id {self.id!r} is not declared in acceptance/_catalogue.py")
        if self.status in ("fail", "missing") and self.leads_to is None:
            self.leads_to = "rework"
        if self.blocking and self.leads_to not in spec.leads_to:
            raise ValueError(f"check {self.id}: leads to {self.leads_to}, declared {spec.leads_to}")

    @property
    def blocking(self) -> bool:
        return self.status in ("fail", "missing")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class PhaseResult:
    """What one phase found: its checks, its record for report.json (``data``), and, in the typed
    subclasses below, the figures later phases and the verdict read (never ``data`` by key)."""

    name: str
    started_at: str = ""
    duration_s: float = 0.0
    checks: list[Check] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    #: the phase did not run because the engine died before it: neither passed nor failed
    blocked: str | None = None

    def add(self, check: Check) -> Check:
        self.checks.append(check)
        return check

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
class CompatResult(PhaseResult):
    container: dict[str, Any] = field(default_factory=dict)
    startup: dict[str, Any] | None = None
    self_built: dict[str, Any] | None = None
    #: nodes, GPUs, interconnect and parallelism
    topology: dict[str, Any] = field(default_factory=dict)
    #: the evidence files that carry the simulator's marker
    simulated: list[str] = field(default_factory=list)


@dataclass(slots=True)
class CapacityResult(PhaseResult):
    max_good_concurrency: int | None = None
    ramp: list[dict[str, Any]] = field(default_factory=list)
    oom: dict[str, Any] | None = None

    @property
    def engine_dead(self) -> str | None:
        """Why later phases cannot run: the engine died of OOM in this phase and did not come back."""
        if self.oom is None or self.oom.get("recovered"):
            return None
        return f"the engine died at {self.oom.get('step')} and did not recover within {self.oom.get('recover_wait_s')}s"


@dataclass(slots=True)
class CacheResult(PhaseResult):
    pass


@dataclass(slots=True)
class InterfaceResult(PhaseResult):
    retries: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    errors_by_fault: dict[str, int] = field(default_factory=dict)
    attributed_from: str = ""


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
