"""Where every benchmark script leaves its figures: one indented JSON file (README, "Benchmarks print
a table and write JSON"), its folder made on the way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_json(out: str | Path, result: dict[str, Any]) -> Path:
    """Write ``result`` to ``out`` (indented, one trailing newline) and return the path."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    return path
