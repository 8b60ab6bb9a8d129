"""wirecheck.acceptance: the go-live acceptance of a vLLM deployment (DESIGN.md).

Four phases over one target: **compat** (nvidia-smi, ``wirecheck probe`` container facts, ``/version``,
``system_fingerprint`` and the startup log against the Kimi K3 recipe), **capacity** (load, long input,
a concurrency ramp held to an SLO, a soak, OOM evidence, ``/metrics`` sampled throughout), **cache**
(cold / warm A / warm B / changed-prefix control, judged by counter deltas) and **interface** (agent
requests through the taps with a caller's retry, then hypothesis scenarios, with attribution). They end
in one verdict, go / limited / rework / scale-up, with its evidence, and a report folder: Markdown, HTML
with plots, JSON (docs/acceptance.md), Prometheus alerting rules and a Grafana dashboard.

The layout shows the flow: ``evidence/`` reads the files a reviewer hands in, ``load/`` drives and
measures requests, ``phases/`` measures each phase into typed facts and holds the judges that rule on
them (each check declared once, in the catalogue: ``_catalogue``), ``_verdict`` decides, ``report/``
renders. Only the CLI (``wirecheck/cli/``, and the demo it runs) imports this package.
"""

from ._catalogue import CheckSpec, Ruling, checks, judge
from ._clock import SYSTEM_CLOCK, Clock
from ._conclude import AcceptanceResult, report_run
from ._discover import EngineInfo
from ._model import Check, Facts, Limits, PhaseResult, Slo, Verdict
from ._options import PROFILES, AcceptOptions
from ._progress import Progress
from ._run import accept, run_acceptance
from ._taps import via_taps
from ._verdict import ALL_PHASES, decide
from .demo import run_demo
from .evidence import parse_fingerprint, probe, probe_script, read_container, read_host, read_startup_log
from .load import CapacityPlan, LocustLoad, locustfile_path
from .phases import (
    PHASES,
    AcceptancePhase,
    CacheFacts,
    CapacityFacts,
    CompatFacts,
    InterfaceFacts,
    RunContext,
    judged,
)

#: every declared check, in catalogue order
CHECKS: tuple[CheckSpec, ...] = tuple(checks())

__all__ = [
    "ALL_PHASES",
    "CHECKS",
    "PHASES",
    "PROFILES",
    "SYSTEM_CLOCK",
    "AcceptOptions",
    "AcceptancePhase",
    "AcceptanceResult",
    "CacheFacts",
    "CapacityFacts",
    "CapacityPlan",
    "Check",
    "CheckSpec",
    "Clock",
    "CompatFacts",
    "EngineInfo",
    "Facts",
    "InterfaceFacts",
    "Limits",
    "LocustLoad",
    "PhaseResult",
    "Progress",
    "Ruling",
    "RunContext",
    "Slo",
    "Verdict",
    "accept",
    "checks",
    "decide",
    "judge",
    "judged",
    "locustfile_path",
    "parse_fingerprint",
    "probe",
    "probe_script",
    "read_container",
    "read_host",
    "read_startup_log",
    "report_run",
    "run_acceptance",
    "run_demo",
    "via_taps",
]
