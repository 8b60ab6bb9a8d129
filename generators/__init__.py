"""wirecheck.generators: hypothesis strategies for agent traffic, the agent-loop state machine, the
versioned sample sets, and ``run_scenarios`` (the conformance suite as a callable)."""

from ._machine import (
    ScenarioFailure,
    ScenarioReport,
    Taps,
    engine_tap_line,
    header_placeholder,
    header_variable,
    run_scenarios,
)
from ._strategies import (
    CITIES,
    SAMPLE_SET_VERSION,
    agent_sample_set,
    cache_probe_set,
    conversations,
    function_tool,
    json_schemas,
    structured_output_schemas,
    tool_definitions,
    tool_lists,
)

__all__ = [
    "CITIES",
    "SAMPLE_SET_VERSION",
    "ScenarioFailure",
    "ScenarioReport",
    "Taps",
    "agent_sample_set",
    "cache_probe_set",
    "conversations",
    "engine_tap_line",
    "function_tool",
    "header_placeholder",
    "header_variable",
    "json_schemas",
    "run_scenarios",
    "structured_output_schemas",
    "tool_definitions",
    "tool_lists",
]
