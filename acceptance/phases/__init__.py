"""The acceptance phases, each a unit: it measures into typed facts (``measure``), and its registered
judges rule on those facts, one check each (``judge_facts``). :data:`PHASES` is the one list, in the
order they run: compat (the environment's evidence), capacity (load, long input, the ramp, the soak),
cache (the prefix-cache probes) and interface (agent requests, attribution, scenarios)."""

from ._cache import PROBES, CacheFacts, measure_cache
from ._capacity import CapacityFacts, GpuCurve, LoadStage, Soak, measure_capacity
from ._compat import (
    MIN_DRIVER,
    MIN_VLLM,
    OFFICIAL_IMAGE,
    RECIPE_FAMILY,
    SELF_BUILT_FIELDS,
    CompatFacts,
    CompatInputs,
    LogLine,
    measure_compat,
)
from ._context import CapacitySettings, InterfaceSettings, RunContext, TapSource, Target
from ._interface import Attempt, InterfaceFacts, ToolRetry, measure_interface
from ._interface_set import KINDS, failed_tool, interface_requests
from ._unit import PHASES, AcceptancePhase, judge_facts, judged, run_compat

__all__ = [
    "KINDS",
    "MIN_DRIVER",
    "MIN_VLLM",
    "OFFICIAL_IMAGE",
    "PHASES",
    "PROBES",
    "RECIPE_FAMILY",
    "SELF_BUILT_FIELDS",
    "AcceptancePhase",
    "Attempt",
    "CacheFacts",
    "CapacityFacts",
    "CapacitySettings",
    "CompatFacts",
    "CompatInputs",
    "GpuCurve",
    "InterfaceFacts",
    "InterfaceSettings",
    "LoadStage",
    "LogLine",
    "RunContext",
    "Soak",
    "TapSource",
    "Target",
    "ToolRetry",
    "failed_tool",
    "interface_requests",
    "judge_facts",
    "judged",
    "measure_cache",
    "measure_capacity",
    "measure_compat",
    "measure_interface",
    "run_compat",
]
