"""What a phase is given to measure with: the target, the compat facts read before any load, its own
settings, the clock and where progress goes. The run (``_run``) builds it from the options; a phase
reads nothing else."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from wirecheck.contracts import Exchange

from .._clock import SYSTEM_CLOCK, Clock
from .._model import Slo
from ..load import CapacityPlan, Workload
from ._compat import CompatFacts

__all__ = ["CapacitySettings", "InterfaceSettings", "RunContext", "TapSource", "Target"]


@dataclass(frozen=True, slots=True)
class TapSource:
    """wirecheck's taps on both sides of the gateway (``--via-proxy``), as the interface phase reads
    them: its agent requests and its scenarios are judged over both sides."""

    #: given the correlation ids the client sent, both taps' exchanges for them
    read: Callable[[list[str]], Coroutine[Any, Any, list[Exchange]]]
    #: the gateway the caller tap fronts: a reproduce line names it, since the taps end with the run
    gateway: str
    #: the command that brings back the engine tap the gateway forwards to, for the same reason
    engine_tap: str


@dataclass(slots=True, kw_only=True)
class Target:
    """Where callers' requests go (``url``: the engine, or a gateway in front of it) and the engine
    itself, for /version, /tokenize, /health and /metrics."""

    url: str
    engine_url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    model: str | None = None
    #: the model family (the family table's detector, or --family)
    family: str = "auto"
    metrics_urls: list[str] = field(default_factory=list)

    @property
    def base(self) -> str:
        return self.url.rstrip("/")

    @property
    def chat_url(self) -> str:
        return self.base + "/v1/chat/completions"

    @property
    def health_url(self) -> str:
        return (self.engine_url or self.url).rstrip("/") + "/health"

    @property
    def through_gateway(self) -> bool:
        """The target is not the engine: a gateway or proxy sits between."""
        return self.engine_url is not None and self.base != self.engine_url.rstrip("/")


@dataclass(slots=True, kw_only=True)
class CapacitySettings:
    plan: CapacityPlan = field(default_factory=CapacityPlan)
    #: what each ramp step is held to (the ramp stops at the first step that breaks it)
    slo: Slo = field(default_factory=Slo)
    #: "in-process", or "locust" (the load on Locust workers: local ones, or at ``locust_master``)
    load_engine: str = "in-process"
    locust_workers: int = 2
    locust_master: str | None = None
    locust_expect_workers: int | None = None
    #: where GPU memory is read through every step (``load.make_gpu_source``)
    gpu_source: str = "auto"
    gpu_metrics_urls: list[str] = field(default_factory=list)
    #: ``--samples``: the team's requests for the long-input and ramp stages
    workload: Workload | None = None


@dataclass(slots=True, kw_only=True)
class InterfaceSettings:
    requests: int = 28
    #: a careful caller's retries of an answer that breaks a contract
    retries: int = 2
    scenario_examples: int = 6
    seed: int | None = 1
    #: the share of requests that may need a retry for ``limited`` (else rework)
    max_retry_rate: float = 0.1
    #: both taps' exchanges (``--via-proxy``); None: only what the caller saw
    taps: TapSource | None = None


@dataclass(slots=True, kw_only=True)
class RunContext:
    target: Target
    #: read before any load (it also checks the evidence files when compat is not run)
    compat: CompatFacts
    capacity: CapacitySettings = field(default_factory=CapacitySettings)
    interface: InterfaceSettings = field(default_factory=InterfaceSettings)
    clock: Clock = SYSTEM_CLOCK
    progress: Callable[[str], None] = lambda _msg: None
