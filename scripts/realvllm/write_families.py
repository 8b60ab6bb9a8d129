"""Write families.json, the family facts the real tier's scripts read.

Runs in .venv (Python 3.12, wirecheck installed), unlike the other scripts here: build_model.py,
serve.py and script_lp.py run in .venv-vllm (Python 3.11) without wirecheck, so they cannot import
the family table; they read this file instead. Run after changing a tiny model
(``wirecheck.sim``'s ``_tiny_model``) or its row; tests/sim/test_tiny_model.py fails while the
file is stale.

    .venv/bin/python scripts/realvllm/write_families.py
"""

from __future__ import annotations

import json
from pathlib import Path

from wirecheck.sim._families import tiny_model_facts

OUT = Path(__file__).resolve().parent / "families.json"


def render() -> str:
    return json.dumps(tiny_model_facts(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    OUT.write_text(render(), encoding="utf-8")
