"""wirecheck.acceptance: the go-live acceptance of a vLLM deployment (DESIGN.md).

Four phases over one target: **compat** (nvidia-smi, ``wirecheck probe`` container facts, ``/version``,
``system_fingerprint`` and the startup log against the Kimi K3 recipe), **capacity** (load, long input,
a concurrency ramp held to an SLO, a soak, OOM evidence, ``/metrics`` sampled throughout), **cache**
(cold / warm A / warm B / changed-prefix control, judged by counter deltas) and **interface** (agent
requests through the taps with a caller's retry, then hypothesis scenarios, with attribution). They end
in one verdict, go / limited / rework / scale-up, with its evidence, and a report folder: Markdown, HTML
with plots, JSON (docs/acceptance.md), Prometheus alerting rules and a Grafana dashboard.

Only ``wirecheck/cli.py`` (and the demo it runs) imports this package.
"""

from ._capacity import CapacityPlan
from ._demo import run_demo
from ._evidence import parse_fingerprint, read_container, read_host, read_startup_log
from ._locust import LocustLoad, locustfile_path
from ._model import Check, Limits, Phase, Slo, Verdict
from ._probe import probe, probe_script
from ._run import PROFILES, AcceptanceResult, AcceptOptions, Progress, accept, run_acceptance, via_taps
from ._verdict import ALL_PHASES

__all__ = [
    "ALL_PHASES",
    "PROFILES",
    "AcceptOptions",
    "AcceptanceResult",
    "CapacityPlan",
    "Check",
    "Limits",
    "LocustLoad",
    "Phase",
    "Progress",
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
