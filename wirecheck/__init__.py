"""wirecheck: a conformance test proxy for agent interfaces served by vLLM.

The front door: the command line (``wirecheck ...``), the version, the error tree (``_errors``), and
the public API re-exported from the packages behind it.
"""

from wirecheck._errors import ERRORS, ConfigError, InputError, TransportError, UsageError, WirecheckError
from wirecheck._version import __version__
from wirecheck.contracts import (
    CheckConfig,
    CheckResult,
    Exchange,
    Fault,
    Finding,
    Severity,
    check_exchanges,
    read_exchanges,
    write_exchanges,
)

__all__ = [
    "ERRORS",
    "CheckConfig",
    "CheckResult",
    "ConfigError",
    "Exchange",
    "Fault",
    "Finding",
    "InputError",
    "Severity",
    "TransportError",
    "UsageError",
    "WirecheckError",
    "__version__",
    "check_exchanges",
    "read_exchanges",
    "write_exchanges",
]
