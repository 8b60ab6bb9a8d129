"""Where every benchmark script leaves its figures: one indented JSON file (README, "Benchmarks print
a table and write JSON"), its folder made on the way."""

from __future__ import annotations

import json
import os
import platform
import sys
import sysconfig
from pathlib import Path
from typing import Any


def python_build() -> str:
    """How this interpreter was built, as far as its speed goes: ``pgo``, ``lto`` and ``shared``
    joined by ``+`` (profile-guided and link-time optimization, and a shared library), ``plain``
    for none of them. The same Python runs a few per cent apart between such builds (docs/proxy.md),
    so a result names the one it was measured on. Read from the flags the interpreter was compiled
    with and whether its library is shared, as its ``sysconfig`` keeps them (not from how configure
    was asked: ``--with-lto=no`` is no LTO). A distribution that builds its executable apart from
    its shared library (Debian's) keeps the library's, and reads as that build."""
    cflags = sysconfig.get_config_var("PY_CFLAGS_NODIST") or ""
    parts = {
        "pgo": "-fprofile-use" in cflags or "-fprofile-instr-use" in cflags,  # gcc's, clang's
        "lto": "-flto" in cflags,
        "shared": bool(sysconfig.get_config_var("Py_ENABLE_SHARED")),
    }
    return "+".join(name for name, on in parts.items() if on) or "plain"


def machine() -> dict[str, Any]:
    """What a result was measured on: the Python and its build, the platform, the CPUs."""
    return {
        "python": sys.version.split()[0],
        "python_build": python_build(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }


def write_json(out: str | Path, result: dict[str, Any]) -> Path:
    """Write ``result`` to ``out`` (indented, one trailing newline) and return the path."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    return path
