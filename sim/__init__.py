"""wirecheck.sim: a vLLM-faithful simulator and a fault-injecting gateway, for tests and the demo.

Shares nothing with the checker's rules (DESIGN.md): its own markup writers and parsers produce the
wire fields, and the checker judges them.
"""

from ._app import SimState, create_app
from ._config import FAULTS, FaultSpec, SimConfig, parse_faults
from ._dcgm import create_dcgm_app, dcgm_text
from ._environment import Environment, write_environment
from ._families import DEFAULT_FAMILY, SIM_FAMILIES, SimFamily
from ._gateway import GATEWAY_FAULTS, GatewayConfig, create_gateway, parse_gateway_faults
from ._truth import GroundTruth, Injected, read_truth

__all__ = [
    "DEFAULT_FAMILY",
    "FAULTS",
    "GATEWAY_FAULTS",
    "SIM_FAMILIES",
    "Environment",
    "FaultSpec",
    "GatewayConfig",
    "GroundTruth",
    "Injected",
    "SimConfig",
    "SimFamily",
    "SimState",
    "create_app",
    "create_dcgm_app",
    "create_gateway",
    "dcgm_text",
    "parse_faults",
    "parse_gateway_faults",
    "read_truth",
    "write_environment",
]
