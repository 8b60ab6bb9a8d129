"""The errors the pure kernel raises: bad values it was given, never findings.

Findings are data, never exceptions: a non-conformant stream is a result, not an error. These two are
for a user's mistakes only, and they are plain ``ValueError`` subclasses owned here so that contracts
imports nothing from the front door (DESIGN.md: the error tree lives beside it, in
``wirecheck._errors``, which re-exports them). Every package below the front door may raise them, since
each may import contracts::

    ValueError
    ├── ConfigError           a bad setting (env var, option value, fault spec)
    └── InputError            unusable input data: names the source and, where known, the line

Every message names what was wrong and where, so a CLI can print it as is and exit 2.
"""

from __future__ import annotations

__all__ = ["ConfigError", "InputError"]


class ConfigError(ValueError):
    """A setting that does not parse or is out of range."""


class InputError(ValueError):
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
