"""The ``wirecheck`` command line: one module per command.

Exit codes: 0 no error finding, 1 at least one error finding, 2 unusable input or usage; for
``accept``: 0 accepted (go, or limited with its conditions), 1 not accepted.

Each command module has ``register(sub)``, which adds its sub-commands with ``run`` set to the
function that runs them. Only the module of the command given is imported (``accept`` derives its
options from ``AcceptOptions``, which pulls in the whole acceptance package: ``wirecheck check``
should not pay for that); ``wirecheck --help`` or an unknown command imports them all.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from wirecheck._errors import ERRORS
from wirecheck._version import __version__
from wirecheck.contracts import printable

from ._common import scrub_secrets
from .check import EXAMPLE

__all__ = ["EXAMPLE", "main"]

#: command -> the module (in this package) that registers it, in the order `wirecheck --help` lists them
COMMANDS = {
    "check": "check",
    "rules": "check",
    "proxy": "proxy",
    "replay": "replay",
    "scenarios": "scenarios",
    "accept": "accept",
    "locustfile": "accept",
    "probe": "accept",
    "demo": "accept",
    "export": "check",
    "sim": "sim",
    "sim-gateway": "sim",
}


def _parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="wirecheck", description="Conformance checks for OpenAI-compatible agent traffic served by vLLM."
    )
    p.add_argument("--version", action="version", version=f"wirecheck {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    given = next((a for a in argv if not a.startswith("-")), None)
    modules = [COMMANDS[given]] if given in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for name in modules:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser(argv)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(args.run(args))
    except ERRORS as exc:
        # messages quote file names and wire data: escaped; and never a password or token this run
        # was given (a store URL quoted whole, a driver's message that repeats its connection string)
        print(f"wirecheck: error: {scrub_secrets(printable(exc), argv)}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
