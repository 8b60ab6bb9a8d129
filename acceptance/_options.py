"""What a reviewer asks of an acceptance run (``AcceptOptions``: the CLI's options, one field each),
checked when made, and the profiles that size the phases (quick, standard, soak)."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wirecheck.contracts import DEFAULT_REDACTION, ConfigError, InputError, Redaction, detect_family

from ._catalogue import PHASE_NAMES
from ._model import Limits, Slo
from .load import GPU_SOURCES, CapacityPlan
from .phases import TapSource

__all__ = ["PROFILES", "AcceptOptions", "Profile"]


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    capacity: CapacityPlan
    interface_requests: int
    retries: int
    scenario_examples: int


def _plan(**kw: Any) -> CapacityPlan:
    return CapacityPlan(**kw)


_STANDARD = _plan(
    ramp=[1, 2, 4, 8, 16, 32, 64],
    per_worker=4,
    min_requests=8,
    long_input_turns=[12, 48, 96, 192],
    soak_requests=240,
    soak_concurrency=8,
    soak_windows=6,
    recover_wait_s=120,
    sample_interval_s=0.5,
)
PROFILES: dict[str, Profile] = {
    "quick": Profile("quick", _plan(), interface_requests=28, retries=2, scenario_examples=6),
    "standard": Profile("standard", _STANDARD, interface_requests=84, retries=2, scenario_examples=50),
    # the standard run with a long soak: 3000 requests at 16 concurrent, in 12 windows
    "soak": Profile(
        "soak",
        dataclasses.replace(
            _STANDARD,
            soak_requests=3000,
            soak_concurrency=16,
            soak_windows=12,
            recover_wait_s=300,
            sample_interval_s=1.0,
        ),
        interface_requests=84,
        retries=2,
        scenario_examples=50,
    ),
}


@dataclass(kw_only=True, slots=True)
class AcceptOptions:
    target: str
    reviewer: str
    out: Path
    engine_url: str | None = None
    metrics_urls: list[str] = field(default_factory=list)
    #: DCGM exporters' /metrics; ``gpu_source`` auto: these, else NVML, else nvidia-smi
    gpu_metrics_urls: list[str] = field(default_factory=list)
    gpu_source: str = "auto"
    #: --ack-warning: regexes of startup warnings explained by the operator
    ack_warnings: list[str] = field(default_factory=list)
    #: the recipe as the operator read it: when, and the support status it gave
    recipe_accessed: str | None = None
    support_status: str | None = None
    host_files: list[str] = field(default_factory=list)
    container_file: str | None = None
    startup_log: str | None = None
    #: every other node's startup log, and `nvidia-smi topo -m` output per node
    more_startup_logs: list[str] = field(default_factory=list)
    topology_files: list[str] = field(default_factory=list)
    official_image: bool = False
    self_built: str | None = None
    profile: str = "quick"
    phases: list[str] = field(default_factory=lambda: list(PHASE_NAMES))
    model: str | None = None
    family: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    #: what the report folder and stores hide; every --header name is added to it (written_redaction)
    redaction: Redaction = DEFAULT_REDACTION
    slo: Slo = field(default_factory=Slo)
    limits: Limits = field(default_factory=Limits)
    target_concurrency: int | None = None
    open_loop_rates: list[float] | None = None
    seed: int | None = 1
    #: how the request path is laid out, for the evidence (the taps add themselves)
    topology: dict[str, Any] = field(default_factory=dict)
    taps: TapSource | None = None
    plan: CapacityPlan | None = None
    #: "in-process" (default) or "locust": the capacity load on Locust workers
    load_engine: str = "in-process"
    locust_workers: int = 2
    locust_master: str | None = None
    locust_expect_workers: int | None = None
    interface_requests: int | None = None
    scenario_examples: int | None = None
    #: ``--samples FILE``: the team's chat requests (JSONL bodies or a capture) for the capacity
    #: phase's long-input and ramp stages; None: the synthetic agent sample set
    samples: str | None = None

    def written_redaction(self) -> Redaction:
        """The policy for everything this run writes: a header the operator sets with --header is a
        credential whatever its name (it landed in interface.jsonl in clear)."""
        return self.redaction.extended(self.headers)

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise ConfigError(f"profile {self.profile!r}: expected one of {', '.join(PROFILES)}")
        unknown = [p for p in self.phases if p not in PHASE_NAMES]
        if unknown or not self.phases:
            raise ConfigError(
                f"phases {','.join(unknown) or '(none)'}: expected a comma list of {','.join(PHASE_NAMES)}"
            )
        if not self.reviewer.strip():
            raise ConfigError("--reviewer NAME is required: a verdict carries who reviewed it")
        for pat in self.ack_warnings:
            try:
                re.compile(pat)
            except re.error as exc:
                raise ConfigError(f"--ack-warning {pat!r}: not a regular expression ({exc})") from exc
        if self.gpu_source not in GPU_SOURCES:
            raise ConfigError(f"--gpu-source {self.gpu_source!r}: expected one of {', '.join(GPU_SOURCES)}")
        if self.load_engine not in ("in-process", "locust"):
            raise ConfigError(f"load engine {self.load_engine!r}: expected in-process or locust")
        if self.official_image and self.self_built:
            raise ConfigError("--official-image and --self-built exclude each other")
        for f in [
            *self.host_files,
            *self.more_startup_logs,
            *self.topology_files,
            self.container_file,
            self.startup_log,
            self.self_built,
        ]:
            if f is not None and not Path(f).is_file():
                raise InputError(f"{f}: no such file")

    def family_of(self, model: str | None) -> str:
        """The family to hold the deployment to: --family, else the family table's detector (an
        unknown model is generic, never K3)."""
        return self.family or detect_family(model)
