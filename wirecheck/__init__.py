"""wirecheck: a conformance test proxy for agent interfaces served by vLLM.

The front door: the command line (``wirecheck ...``), the version, and the public API re-exported
from the packages behind it.
"""

from wirecheck._version import __version__
from wirecheck.contracts import (
    CheckConfig,
    CheckResult,
    Exchange,
    Fault,
    Finding,
    InputError,
    Severity,
    WirecheckError,
    check_exchanges,
    read_exchanges,
    write_exchanges,
)

__all__ = [
    "CheckConfig",
    "CheckResult",
    "Exchange",
    "Fault",
    "Finding",
    "InputError",
    "Severity",
    "WirecheckError",
    "__version__",
    "check_exchanges",
    "read_exchanges",
    "write_exchanges",
]
