"""The one error family of wirecheck.

Findings are data, never exceptions: a non-conformant stream is a result, not an error. Exceptions are
for the user's and the environment's mistakes only::

    WirecheckError            usage, config, input and transport problems (base)
    ├── UsageError            a command line or API call that cannot work as given
    ├── ConfigError           a bad setting (env var, option value, fault spec)
    ├── InputError            unusable input data: names the source and, where known, the line
    └── TransportError        a peer that could not be reached or broke the connection

Every message names what was wrong and where, so a CLI can print it as is and exit 2.
"""

from __future__ import annotations


class WirecheckError(Exception):
    """Base of every error wirecheck raises on purpose."""


class UsageError(WirecheckError):
    """A command or call that cannot work as given."""


class ConfigError(WirecheckError):
    """A setting that does not parse or is out of range."""


class InputError(WirecheckError):
    """Input data that cannot be used: names the source and, where known, the line."""

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None) -> None:
        self.source = source
        self.line = line
        self.reason = message
        where = ""
        if source is not None:
            where = source if line is None else f"{source}:{line}"
            where += ": "
        super().__init__(f"{where}{message}")


class TransportError(WirecheckError):
    """A peer could not be reached, or the connection broke."""
