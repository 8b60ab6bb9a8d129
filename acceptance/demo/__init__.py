"""``wirecheck demo``: the whole tool on loopback with faults on every side, scored against the faults
the simulator and its gateway say they injected."""

from ._demo import DEMO_GATEWAY_FAULTS, DEMO_SIM_FAULTS, TRUTH_FILE, run_demo
from ._groundtruth import CONSEQUENCES, RULES, ClassScore, TruthScore, score_truth

__all__ = [
    "CONSEQUENCES",
    "DEMO_GATEWAY_FAULTS",
    "DEMO_SIM_FAULTS",
    "RULES",
    "TRUTH_FILE",
    "ClassScore",
    "TruthScore",
    "run_demo",
    "score_truth",
]
