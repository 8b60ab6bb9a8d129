"""wirecheck.sim: a vLLM-faithful simulator and a fault-injecting gateway, for tests and the demo.

Shares nothing with the checker's rules (DESIGN.md): its own markup writers and parsers produce the
wire fields, and the checker judges them.
"""

from ._app import SimState, create_app
from ._config import FAULTS, FaultSpec, SimConfig, parse_faults

__all__ = ["FAULTS", "FaultSpec", "SimConfig", "SimState", "create_app", "parse_faults"]
