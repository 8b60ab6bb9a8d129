"""How long ``wirecheck demo`` takes on two cores, against its budget and a baseline in the same run.

The demo is the README's main command: simulator, faulty gateway, dual-tap proxy and
``accept --profile quick``, all on loopback. Target: under 90 seconds on 2 cores. Both runs
are pinned to the same CPUs (``--cpus``, default 2):

- baseline: ``wirecheck check --example``, the cheapest full command (interpreter start, imports, one
  check of a shipped capture): what any command costs before it does work;
- demo: ``wirecheck demo`` into a temporary folder.

Prints a table and writes JSON.

    python benchmarks/demo_time.py [--cpus 2] [--runs 1] [--out benchmarks/results/demo_time.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_output import write_json

BUDGET_S = 90.0


def _timed(cmd: list[str], cpus: set[int]) -> dict[str, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpus", type=int, default=2, help="pin both runs to this many CPUs (0: no pinning)")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument(
        "--phases", default="compat,capacity,cache,interface", help="demo phases (smoke runs use fewer)"
    )
    ap.add_argument("--out", default="benchmarks/results/demo_time.json")
    args = ap.parse_args()
    avail = sorted(os.sched_getaffinity(0))
    cpus = set(avail[: args.cpus]) if args.cpus else set()
    base = [sys.executable, "-m", "wirecheck"]
    rows: list[dict[str, Any]] = []
    for i in range(args.runs):
        baseline = _timed([*base, "check", "--example"], cpus)
        with tempfile.TemporaryDirectory(prefix="wc-demo-bench-") as tmp:
            demo = _timed([*base, "demo", "--out", tmp, "--phases", args.phases], cpus)
            verdict = json.loads((Path(tmp) / "report.json").read_text())["verdict"]["decision"]
        rows.append(
            {
                "run": i + 1,
                "baseline_wall_s": baseline["wall_s"],
                "demo_wall_s": demo["wall_s"],
                "demo_cpu_s": demo["cpu_s"],
                "demo_vs_baseline": round(demo["wall_s"] / baseline["wall_s"], 2),
                "demo_vs_budget": round(demo["wall_s"] / BUDGET_S, 3),
                "verdict": verdict,
            }
        )
    worst = max(r["demo_wall_s"] for r in rows)
    print(
        f"wirecheck demo on {len(cpus) or len(avail)} CPUs ({platform.processor() or platform.machine()}), phases {args.phases}"
    )
    print(
        f"{'run':>3} {'baseline s':>10} {'demo s':>8} {'demo CPU s':>10} {'x baseline':>10} {'of budget':>9}  verdict"
    )
    for r in rows:
        print(
            f"{r['run']:>3} {r['baseline_wall_s']:>10.2f} {r['demo_wall_s']:>8.2f} {r['demo_cpu_s']:>10.2f} "
            f"{r['demo_vs_baseline']:>10.1f} {r['demo_vs_budget']:>9.1%}  {r['verdict']}"
        )
    met = worst < BUDGET_S
    print(f"target: under {BUDGET_S:.0f} s on 2 cores: {'met' if met else 'NOT met'} (worst {worst:.1f} s)")
    write_json(
        args.out,
        {
            "budget_s": BUDGET_S,
            "cpus": len(cpus) or len(avail),
            "phases": args.phases,
            "rows": rows,
            "met": met,
        },
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
