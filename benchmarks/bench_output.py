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

#: the build options that move an interpreter's speed, by the name a result gives them
_BUILD_OPTIONS = (("--enable-optimizations", "pgo"), ("--with-lto", "lto"), ("--enable-shared", "shared"))


def python_build() -> str:
    """How this interpreter was built, as far as its speed goes: ``pgo``, ``lto`` and ``shared``
    joined by ``+`` (profile-guided and link-time optimization, and a shared library), ``plain``
    for none of them. The same Python runs a few per cent apart between such builds (docs/proxy.md),
    so a result names the one it was measured on."""
    args = sysconfig.get_config_var("CONFIG_ARGS") or ""
    return "+".join(name for flag, name in _BUILD_OPTIONS if flag in args) or "plain"


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
