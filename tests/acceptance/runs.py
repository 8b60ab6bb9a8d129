"""What the acceptance tests share: an acceptance run as a reviewer starts it, in process, against
the simulator with its simulated evidence files and DCGM exporter, or against a given target.

These runs measure; they are held to an SLO no loaded machine can break (``UNTIMED``) and a soak drift
bound no scheduler can cross, so that their verdicts never depend on how busy the machine is. Whether
measured times keep an SLO is judged on recorded facts (test_verdicts.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.acceptance.facts import UNTIMED
from wirecheck.acceptance import ALL_PHASES, AcceptanceResult, AcceptOptions, CapacityPlan, Progress, accept
from wirecheck.record import serve
from wirecheck.sim import Environment, SimConfig, create_app, create_dcgm_app, write_environment

ROOT = Path(__file__).resolve().parents[2]
FAST = {"family": "kimi_k3", "time_scale": 0.02}


#: a loopback port nothing answers on
DEAD = "http://127.0.0.1:9"


def accept_argv(target: str, out: Path | None, *more: str) -> list[str]:
    """``wirecheck accept``'s arguments for a run against ``target``, reviewed by ci, with its
    report in ``out`` (none: the option left out), and ``more``."""
    where = ["--out", str(out)] if out is not None else []
    return ["accept", "--target", target, "--reviewer", "ci", *where, *more]


def small_plan(**kw: Any) -> CapacityPlan:
    return CapacityPlan(
        **{
            "ramp": [1, 2, 4],
            "long_input_turns": [12],
            "soak_requests": 16,
            "soak_windows": 2,
            # a busy machine once read a drift of 1.61x from a healthy simulator: drift is judged on
            # recorded facts, not here
            "soak_drift_max": float("inf"),
            "recover_wait_s": 3,
            **kw,
        }
    )


def run_accept(
    tmp: Path,
    cfg: SimConfig,
    env: Environment | None = None,
    *,
    phases: tuple[str, ...] = ALL_PHASES,
    metrics_from: str | None = None,
    **kw: Any,
) -> AcceptanceResult:
    paths = write_environment(tmp / "evidence", cfg, env)
    app = create_app(cfg)
    # the simulated DCGM exporter beside the engine: its memory follows the simulated KV use
    with serve(app) as url, serve(create_dcgm_app(app, env)) as dcgm:
        opts = AcceptOptions(
            target=url,
            engine_url=url,
            gpu_metrics_urls=kw.pop("gpu_metrics_urls", [dcgm + "/metrics"]),
            metrics_urls=[metrics_from + "/metrics"] if metrics_from else [],
            reviewer="ci",
            out=tmp / "out",
            host_files=[str(paths["host_xml"]), str(paths["host_text"])],
            container_file=str(paths["container"]),
            startup_log=str(paths["startup_log"]),
            topology_files=[str(paths["topology"])],
            official_image=kw.pop("official_image", True),
            phases=list(phases),
            plan=kw.pop("plan", None) or small_plan(),
            slo=kw.pop("slo", UNTIMED),
            interface_requests=kw.pop("interface_requests", 14),
            scenario_examples=kw.pop("scenario_examples", 3),
            **kw,
        )
        return accept(opts, Progress(quiet=True))


def checks(result: AcceptanceResult) -> dict[str, Any]:
    return {c.id: c for ph in result.phases for c in ph.checks}


def accept_ci(
    target: str, out: Path, phases: list[str], *, engine_url: str | None = None, **options: Any
) -> AcceptanceResult:
    """``accept`` of ``target`` by reviewer ``ci`` into ``out``, quietly; the engine is the target
    itself unless ``engine_url`` says where (a gateway in between), other options as given."""
    options.setdefault("slo", UNTIMED)
    opts = AcceptOptions(
        target=target,
        engine_url=engine_url or target,
        reviewer="ci",
        out=out,
        phases=phases,
        **options,
    )
    return accept(opts, Progress(quiet=True))
