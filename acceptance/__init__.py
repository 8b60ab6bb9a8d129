"""wirecheck.acceptance: the go-live acceptance of a vLLM deployment (DESIGN.md).

Four phases over one target: **compat** (nvidia-smi, ``wirecheck probe`` container facts, ``/version``,
``system_fingerprint`` and the startup log against the Kimi K3 recipe), **capacity** (load, long input,
a concurrency ramp held to an SLO, a soak, OOM evidence, ``/metrics`` sampled throughout), **cache**
(cold / warm A / warm B / changed-prefix control, judged by counter deltas) and **interface** (agent
requests through the taps with a caller's retry, then hypothesis scenarios, with attribution). They end
in one verdict, go / limited / rework / scale-up, with its evidence, and a report folder: Markdown, HTML
with plots, JSON (docs/acceptance.md), Prometheus alerting rules and a Grafana dashboard.

Only the CLI (``wirecheck/cli/``, and the demo it runs) imports this package.
"""

from ._catalogue import CHECKS, CheckSpec
from ._model import (
    CacheResult,
    CapacityResult,
    Check,
    CompatResult,
    InterfaceResult,
    Limits,
    PhaseResult,
    Slo,
    Verdict,
)
from ._run import PROFILES, AcceptanceResult, AcceptOptions, Progress, accept, run_acceptance, via_taps
from ._verdict import ALL_PHASES
from .demo import run_demo
from .evidence import parse_fingerprint, probe, probe_script, read_container, read_host, read_startup_log
from .load import CapacityPlan, LocustLoad, locustfile_path
from .phases import PHASES, AcceptancePhase, RunContext

__all__ = [
    "ALL_PHASES",
    "CHECKS",
    "PHASES",
    "PROFILES",
    "AcceptOptions",
    "AcceptancePhase",
    "AcceptanceResult",
    "CacheResult",
    "CapacityPlan",
    "CapacityResult",
    "Check",
    "CheckSpec",
    "CompatResult",
    "InterfaceResult",
    "Limits",
    "LocustLoad",
    "PhaseResult",
    "Progress",
    "RunContext",
    "Slo",
    "Verdict",
    "accept",
    "locustfile_path",
    "parse_fingerprint",
    "probe",
    "probe_script",
    "read_container",
    "read_host",
    "read_startup_log",
    "run_acceptance",
    "run_demo",
    "via_taps",
]
