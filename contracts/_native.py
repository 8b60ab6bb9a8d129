"""Where a compiled twin of a hot path is used, and how to turn them all off.

A few per-read and per-frame paths have a C twin (setup.py lists them). The Python code beside each
is the reference: tests hold the twin to it, and it runs wherever the twin is absent (no compiler at
install time) or turned off with ``WIRECHECK_PURE_PYTHON=1`` (read once, at import). It lives in
``contracts``, which every other package may import (DESIGN.md's import rules).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["PURE_PYTHON", "native", "native_status", "native_summary"]

#: set in the environment to run every path in pure Python
PURE_PYTHON = os.environ.get("WIRECHECK_PURE_PYTHON", "").strip() not in ("", "0")

_tried: dict[str, bool] = {}


def native(name: str) -> ModuleType | None:
    """The compiled module ``name`` (full import name), or None where it is off or not built."""
    if PURE_PYTHON:
        _tried[name] = False
        return None
    try:
        mod = importlib.import_module(name)
    except ImportError:
        _tried[name] = False
        return None
    _tried[name] = True
    return mod


def native_status() -> dict[str, bool]:
    """Each compiled module asked for so far, and whether it is in use."""
    return dict(_tried)


def native_summary() -> str:
    """One line on whether the compiled twins asked for so far run (a process that fell back to their
    Python costs more CPU an event: the proxy says so when it starts)."""
    status = native_status()
    off = sorted(name.rsplit(".", 1)[1] for name, on in status.items() if not on)
    if not off:
        return f"compiled twins in use ({len(status)})"
    why = "WIRECHECK_PURE_PYTHON is set" if PURE_PYTHON else "not built: no C compiler at install?"
    return f"compiled twins off for {', '.join(off)} ({why}): their Python runs"
