"""The acceptance phases as units: one protocol, one list (:data:`PHASES`), in the order they run."""

from ._compat import OFFICIAL_IMAGE, RECIPE_FAMILY, SELF_BUILT_FIELDS, CompatInputs, run_compat
from ._interface import TapSource, interface_requests
from ._toolretry import failed_tool
from ._unit import PHASES, AcceptancePhase, RunContext

__all__ = [
    "OFFICIAL_IMAGE",
    "PHASES",
    "RECIPE_FAMILY",
    "SELF_BUILT_FIELDS",
    "AcceptancePhase",
    "CompatInputs",
    "RunContext",
    "TapSource",
    "failed_tool",
    "interface_requests",
    "run_compat",
]
