"""Several ``wirecheck`` commands run in one process: each start of ``python -m wirecheck`` costs
~2-3 s of CPU in imports on a 2-core CI machine, which tests that run many commands paid again and
again. The commands run through ``wirecheck.cli.main``, the function ``python -m wirecheck`` calls,
with its return value (or SystemExit code) as the exit code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

#: one command after the other, each with its stdout and stderr (the file descriptors, so logging
#: and anything else written there is caught too) in its own files
_BATCH = """
import json, os, sys
from wirecheck.cli import main
jobs, rcs = json.loads(sys.argv[1]), {}
for name, out, err, argv in jobs:
    sys.stdout.flush(); sys.stderr.flush()
    saved, sys.argv = (os.dup(1), os.dup(2)), ["wirecheck", *argv]
    with open(out, "wb") as o, open(err, "wb") as e:
        os.dup2(o.fileno(), 1); os.dup2(e.fileno(), 2)
        try:
            rcs[name] = main(argv)
        except SystemExit as exc:
            rcs[name] = exc.code if isinstance(exc.code, int) else 1
        finally:
            sys.stdout.flush(); sys.stderr.flush()
            os.dup2(saved[0], 1); os.dup2(saved[1], 2)
            os.close(saved[0]); os.close(saved[1])
print(json.dumps(rcs))
"""


def wirecheck_batch(logs: Path, jobs: dict[str, list[str]], timeout: float) -> dict[str, int]:
    """Run ``wirecheck ARGS`` for each named job, in order, in one process; their exit codes by name.
    Each job's output is kept as ``logs/NAME.stdout`` and ``.stderr``."""
    spec = [
        [name, str(logs / f"{name}.stdout"), str(logs / f"{name}.stderr"), args]
        for name, args in jobs.items()
    ]
    done = subprocess.run(
        [sys.executable, "-c", _BATCH, json.dumps(spec)], capture_output=True, timeout=timeout, check=False
    )
    (logs / "batch.stdout").write_bytes(done.stdout)
    (logs / "batch.stderr").write_bytes(done.stderr)
    assert done.returncode == 0, done.stderr[-3000:]
    rcs: dict[str, int] = json.loads(done.stdout)
    assert list(rcs) == list(jobs), (rcs, done.stderr[-3000:])
    return rcs
