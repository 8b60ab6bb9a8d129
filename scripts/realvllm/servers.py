"""The real_vllm tier's servers, started in the background: ``./dev test`` runs this at its beginning,
so that the install and the starts (minutes on a clean 2-core machine) overlap the tiers before it.

    python scripts/realvllm/servers.py --state DIR

``./dev vllm-install`` (a no-op when .venv-vllm's stamp is current; it waits on an install already
under way), then the fleet in .venv-vllm (fleet.py: one server per family, a few at a time, each
one's URL or why none in ``DIR/SLOT.json``), which stops its servers when this process's standard
input closes: ``./dev`` holds it, so the servers stop however ``./dev`` ends. An install that fails
is written to ``DIR/failed.json``, which the tier reports (tests/real_vllm/chain.py). Standard
library only: it runs before any venv exists.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--state", type=Path, required=True, help="the fleet's state folder")
    state: Path = parser.parse_args().state
    state.mkdir(parents=True, exist_ok=True)
    (state / "started").touch()
    install = subprocess.run([str(ROOT / "dev"), "vllm-install"], capture_output=True, text=True, check=False)
    if install.returncode != 0:
        error = (
            f"installing the CPU build of vLLM failed (rc {install.returncode}); the real_vllm tier "
            f"cannot run without it:\n{install.stdout[-3000:]}\n{install.stderr[-3000:]}"
        )
        (state / "failed.json").write_text(json.dumps({"error": error}))
        return 1
    python = str(ROOT / ".venv-vllm/bin/python")
    fleet = [python, str(ROOT / "scripts/realvllm/fleet.py"), "--state", str(state), "--stop-on-stdin-eof"]
    os.execv(python, fleet)


if __name__ == "__main__":
    sys.exit(main())
