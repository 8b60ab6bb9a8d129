"""Driving and measuring load against the target: the measuring client (one chat completion, timed
from its recorded chunks), ``/metrics`` scrapes and the gauges sampled through a step, GPU memory
sources, the capacity plan with its closed- and open-loop steps (in process or on Locust workers),
the request specs every driver builds the same bodies from, and the team's own requests
(``--samples``)."""

from ._client import REQUEST_READ_TIMEOUT_S, Sample, measure, measure_sync, percentile, summarize, timed
from ._drive import (
    OOM_WORDS,
    CapacityPlan,
    LoadCtx,
    Progress,
    closed_loop,
    healthy,
    next_body,
    next_spec,
    oom_sign,
    open_loop,
    sample_spec,
    send_one,
)
from ._gpu import GPU_SOURCES, GpuSampler, GpuSource, make_gpu_source, memory_summary
from ._locust import LocustLoad, locustfile_path
from ._metrics import GAUGES, Metrics, MetricsSampler, Periodic, delta, pages, scrape
from ._samples import Workload, load_workload, size_summary, workload_data, workload_line
from ._step import Step, breaches, measure_step, resource_signs
from ._workload import capacity_body, spec

__all__ = [
    "GAUGES",
    "GPU_SOURCES",
    "OOM_WORDS",
    "REQUEST_READ_TIMEOUT_S",
    "CapacityPlan",
    "GpuSampler",
    "GpuSource",
    "LoadCtx",
    "LocustLoad",
    "Metrics",
    "MetricsSampler",
    "Periodic",
    "Progress",
    "Sample",
    "Step",
    "Workload",
    "breaches",
    "capacity_body",
    "closed_loop",
    "delta",
    "healthy",
    "load_workload",
    "locustfile_path",
    "make_gpu_source",
    "measure",
    "measure_step",
    "measure_sync",
    "memory_summary",
    "next_body",
    "next_spec",
    "oom_sign",
    "open_loop",
    "pages",
    "percentile",
    "resource_signs",
    "sample_spec",
    "scrape",
    "send_one",
    "size_summary",
    "spec",
    "summarize",
    "timed",
    "workload_data",
    "workload_line",
]
