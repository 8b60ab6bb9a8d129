"""The error tree of wirecheck, beside the front door (DESIGN.md).

Findings are data, never exceptions: a non-conformant stream is a result, not an error. Exceptions are
for the user's and the environment's mistakes only, in two shallow families split by layer, so that
the pure kernel (contracts) imports nothing from here::

    ValueError
    ├── ConfigError           a bad setting (env var, option value, fault spec)       } owned by
    └── InputError            unusable input data: names the source and the line       } contracts
    WirecheckError            the front door's own problems (base)
    ├── UsageError            a command line or API call that cannot work as given
    └── TransportError        a peer that could not be reached or broke the connection

``ConfigError`` and ``InputError`` are defined in ``wirecheck.contracts`` (every package may import it,
so every package can raise them) and re-exported here. ``ERRORS`` is the whole tree: what a caller
catches to handle every deliberate wirecheck error, and what the CLI prints as is and exits 2 on.
"""

from __future__ import annotations

from wirecheck.contracts import ConfigError, InputError

__all__ = ["ERRORS", "ConfigError", "InputError", "TransportError", "UsageError", "WirecheckError"]


class WirecheckError(Exception):
    """Base of the errors the front door (CLI, acceptance) raises on purpose."""


class UsageError(WirecheckError):
    """A command or call that cannot work as given."""


class TransportError(WirecheckError):
    """A peer could not be reached, or the connection broke."""


#: every error wirecheck raises on purpose (``except ERRORS``)
ERRORS: tuple[type[Exception], ...] = (WirecheckError, ConfigError, InputError)
