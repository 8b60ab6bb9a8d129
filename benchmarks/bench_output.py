"""Where every benchmark script leaves its figures: one indented JSON file (README, "Benchmarks print
a table and write JSON"), its folder made on the way."""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    """What a result was measured on: the Python, the platform, the CPUs."""
    return {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count()}


def write_json(out: str | Path, result: dict[str, Any]) -> Path:
    """Write ``result`` to ``out`` (indented, one trailing newline) and return the path."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    return path
