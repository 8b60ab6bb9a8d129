"""``accept``: run the phases in order, decide, and write the report folder."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import re
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import httpx

from wirecheck._errors import TransportError
from wirecheck._version import __version__
from wirecheck.contracts import (
    DEFAULT_REDACTION,
    ConfigError,
    Exchange,
    InputError,
    Redaction,
    detect_family,
    write_exchanges,
)
from wirecheck.generators import SAMPLE_SET_VERSION
from wirecheck.proxy import ProxyApp, TapConfig
from wirecheck.record import Store, free_port

from ._capacity import CapacityPlan
from ._client import measure
from ._compat import CompatInputs, run_compat
from ._evidence import HostFacts, parse_fingerprint, read_host
from ._gpu import GPU_SOURCES
from ._interface import TapSource
from ._model import Limits, PhaseResult, Slo, Verdict
from ._phases import PHASES, RunContext
from ._report import write_reports
from ._samples import load_workload, workload_data
from ._serving import serving
from ._verdict import ALL_PHASES, checklist, decide

__all__ = [
    "PROFILES",
    "AcceptOptions",
    "AcceptanceResult",
    "Progress",
    "accept",
    "run_acceptance",
    "via_taps",
]


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    capacity: CapacityPlan
    interface_requests: int
    retries: int
    scenario_examples: int


def _plan(**kw: Any) -> CapacityPlan:
    return CapacityPlan(**kw)


_STANDARD = _plan(
    ramp=[1, 2, 4, 8, 16, 32, 64],
    per_worker=4,
    min_requests=8,
    long_input_turns=[12, 48, 96, 192],
    soak_requests=240,
    soak_concurrency=8,
    soak_windows=6,
    recover_wait_s=120,
    sample_interval_s=0.5,
)
PROFILES: dict[str, Profile] = {
    "quick": Profile("quick", _plan(), interface_requests=28, retries=2, scenario_examples=6),
    "standard": Profile("standard", _STANDARD, interface_requests=84, retries=2, scenario_examples=50),
    # the standard run with a long soak: 3000 requests at 16 concurrent, in 12 windows
    "soak": Profile(
        "soak",
        dataclasses.replace(
            _STANDARD,
            soak_requests=3000,
            soak_concurrency=16,
            soak_windows=12,
            recover_wait_s=300,
            sample_interval_s=1.0,
        ),
        interface_requests=84,
        retries=2,
        scenario_examples=50,
    ),
}


class Progress:
    """Phase lines always; on a terminal, the running count on one rewritten line.

    ``every_s``: long runs (``scenarios``, ``replay``) also show their running count in a
    CI log with no terminal, as one plain line at most every ``every_s`` seconds (:meth:`tick`)."""

    def __init__(
        self, stream: TextIO | None = None, quiet: bool = False, every_s: float | None = None
    ) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._dirty = False
        self.every_s = every_s
        self._last_tick: float | None = None

    @staticmethod
    def eta(elapsed_s: float, done: int, total: int) -> str:
        """Time left at the pace so far: ``ETA 1m05s`` (``ETA ?`` before the first is done)."""
        if done <= 0:
            return "ETA ?"
        left = max(0.0, elapsed_s / done * max(0, total - done))
        return f"ETA {int(left // 60)}m{int(left % 60):02d}s" if left >= 60 else f"ETA {left:.0f}s"

    def tick(self, msg: str) -> None:
        """A running count: rewritten in place on a terminal; without one, printed when ``every_s``
        has passed since the previous line (the run's own summary line ends it)."""
        if self.quiet:
            return
        if self.tty:
            self.stream.write("\r\x1b[K" + msg)
            self._dirty = True
            self.stream.flush()
            return
        now = time.monotonic()
        if self._last_tick is None:
            self._last_tick = now  # the first line waits one period: a short run stays silent
        if self.every_s is None or now - self._last_tick < self.every_s:
            return
        self._last_tick = now
        self.stream.write(msg + "\n")
        self.stream.flush()

    def __call__(self, msg: str) -> None:
        if self.quiet:
            return
        tick = bool(re.search(r"\d+/\d+$|: \w+$", msg)) and "TTFT" not in msg
        if tick and not self.tty:
            return
        if self.tty:
            self.stream.write("\r\x1b[K" + msg + ("" if tick else "\n"))
            self._dirty = tick
        else:
            self.stream.write(msg + "\n")
        self.stream.flush()

    def done(self) -> None:
        if self.tty and self._dirty:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


@dataclass(kw_only=True, slots=True)
class AcceptOptions:
    target: str
    reviewer: str
    out: Path
    engine_url: str | None = None
    metrics_urls: list[str] = field(default_factory=list)
    #: DCGM exporters' /metrics; ``gpu_source`` auto: these, else NVML, else nvidia-smi
    gpu_metrics_urls: list[str] = field(default_factory=list)
    gpu_source: str = "auto"
    #: --ack-warning: regexes of startup warnings explained by the operator
    ack_warnings: list[str] = field(default_factory=list)
    #: the recipe as the operator read it: when, and the support status it gave
    recipe_accessed: str | None = None
    support_status: str | None = None
    host_files: list[str] = field(default_factory=list)
    container_file: str | None = None
    startup_log: str | None = None
    #: every other node's startup log, and `nvidia-smi topo -m` output per node
    more_startup_logs: list[str] = field(default_factory=list)
    topology_files: list[str] = field(default_factory=list)
    official_image: bool = False
    self_built: str | None = None
    profile: str = "quick"
    phases: list[str] = field(default_factory=lambda: list(ALL_PHASES))
    model: str | None = None
    family: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    #: what the report folder and stores hide; every --header name is added to it (written_redaction)
    redaction: Redaction = DEFAULT_REDACTION
    slo: Slo = field(default_factory=Slo)
    limits: Limits = field(default_factory=Limits)
    target_concurrency: int | None = None
    open_loop_rates: list[float] | None = None
    seed: int | None = 1
    #: how the request path is laid out, for the evidence (the taps add themselves)
    topology: dict[str, Any] = field(default_factory=dict)
    taps: TapSource | None = None
    plan: CapacityPlan | None = None
    #: "in-process" (default) or "locust": the capacity load on Locust workers
    load_engine: str = "in-process"
    locust_workers: int = 2
    locust_master: str | None = None
    locust_expect_workers: int | None = None
    interface_requests: int | None = None
    scenario_examples: int | None = None
    #: ``--samples FILE``: the team's chat requests (JSONL bodies or a capture) for the capacity
    #: phase's long-input and ramp stages; None: the synthetic agent sample set
    samples: str | None = None

    def written_redaction(self) -> Redaction:
        """The policy for everything this run writes: a header the operator sets with --header is a
        credential whatever its name (it landed in interface.jsonl in clear)."""
        return self.redaction.extended(self.headers)

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise ConfigError(f"profile {self.profile!r}: expected one of {', '.join(PROFILES)}")
        unknown = [p for p in self.phases if p not in ALL_PHASES]
        if unknown or not self.phases:
            raise ConfigError(
                f"phases {','.join(unknown) or '(none)'}: expected a comma list of {','.join(ALL_PHASES)}"
            )
        if not self.reviewer.strip():
            raise ConfigError("--reviewer NAME is required: a verdict carries who reviewed it")
        for pat in self.ack_warnings:
            try:
                re.compile(pat)
            except re.error as exc:
                raise ConfigError(f"--ack-warning {pat!r}: not a regular expression ({exc})") from exc
        if self.gpu_source not in GPU_SOURCES:
            raise ConfigError(f"--gpu-source {self.gpu_source!r}: expected one of {', '.join(GPU_SOURCES)}")
        if self.load_engine not in ("in-process", "locust"):
            raise ConfigError(f"load engine {self.load_engine!r}: expected in-process or locust")
        if self.official_image and self.self_built:
            raise ConfigError("--official-image and --self-built exclude each other")
        for f in [
            *self.host_files,
            *self.more_startup_logs,
            *self.topology_files,
            self.container_file,
            self.startup_log,
            self.self_built,
        ]:
            if f is not None and not Path(f).is_file():
                raise InputError(f"{f}: no such file")


@dataclass(slots=True)
class AcceptanceResult:
    verdict: Verdict
    phases: list[PhaseResult]
    report: dict[str, Any]
    files: dict[str, str]


async def _discover(client: httpx.AsyncClient, opts: AcceptOptions) -> dict[str, Any]:
    """The engine's version, model and fingerprint, by /version, /v1/models and one small request."""
    info: dict[str, Any] = {"version": None, "model": opts.model, "fingerprint": None, "reachable": False}
    base = (opts.engine_url or opts.target).rstrip("/")
    with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, TypeError):
        r = await client.get(base + "/version", timeout=10)
        if r.status_code == 200:
            info["version"] = r.json().get("version")
    if info["model"] is None:
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, TypeError, IndexError):
            r = await client.get(opts.target.rstrip("/") + "/v1/models", timeout=10, headers=opts.headers)
            if r.status_code == 200:
                info["model"] = r.json()["data"][0]["id"]
    body: dict[str, Any] = {"messages": [{"role": "user", "content": "ping"}], "max_tokens": 8}
    if info["model"]:
        body["model"] = info["model"]
    s = await measure(client, opts.target.rstrip("/") + "/v1/chat/completions", body, headers=opts.headers)
    info["reachable"] = s.status is not None
    info["fingerprint"] = s.fingerprint
    info["probe"] = s.to_json()
    if s.status is None:
        raise InputError(f"the target {opts.target} does not answer: {s.error}")
    return info


def _family(opts: AcceptOptions, model: str | None) -> str:
    # the one detector (contracts' family table): an unknown model is generic, never K3
    return opts.family or detect_family(model)


def _suggested(ctx: RunContext, slo: Slo) -> dict[str, Any]:
    out: dict[str, Any] = {}
    cap = ctx.capacity
    if cap is not None and cap.max_good_concurrency is not None:
        out["scope"] = f"rate-limit to at most {cap.max_good_concurrency} concurrent requests per engine"
    iface = ctx.interface
    if iface is not None and iface.outcomes.get("recovered"):
        out["caller_policy"] = (
            f"validate tool calls against their schema and retry up to {iface.retries} times"
        )
    out["rollback"] = (
        f"roll back when success rate < {1 - slo.max_error_rate:.1%} over 5m, TTFT p95 > {slo.ttft_p95_s}s, "
        f"e2e p95 > {slo.e2e_p95_s}s, any preemption in 10m, or KV cache > 90% for 5m (the alert rules)"
    )
    return out


def _evidence(
    opts: AcceptOptions, info: dict[str, Any], ctx: RunContext, started: float, finished: float
) -> dict[str, Any]:
    compat = ctx.compat
    container = compat.container if compat else {}
    startup = (compat.startup if compat else None) or {}
    fp = parse_fingerprint(info.get("fingerprint") or "") or {}
    return {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(finished)),
        "duration_s": round(finished - started, 2),
        "sample_set_version": SAMPLE_SET_VERSION,
        "wirecheck_version": __version__,
        "profile": opts.profile,
        "reviewer": opts.reviewer,
        "topology": {
            "target": opts.written_redaction().url(opts.target),
            "engine": opts.engine_url and opts.written_redaction().url(opts.engine_url),
            "metrics": [opts.written_redaction().url(u) for u in opts.metrics_urls],
            "tensor_parallel": fp.get("tp"),
            "pipeline_parallel": fp.get("pp"),
            "data_parallel": fp.get("dp"),
            "expert_parallel": fp.get("ep"),
            "nodes": ctx.compat_result.topology.get("node_count"),
            "gpus": ctx.compat_result.topology.get("gpu_count"),
            "interconnect": ctx.compat_result.topology.get("interconnect"),
            **opts.topology,
        },
        "engine": {
            "version": info.get("version"),
            "model": info.get("model"),
            "fingerprint": info.get("fingerprint"),
        },
        "container": container,
        "key_logs": (startup.get("key_lines") or []) + (startup.get("warnings") or []),
    }


def _self_built_diff(ctx: RunContext) -> dict[str, Any] | None:
    compat = ctx.compat
    if compat is None or not compat.self_built:
        return None
    ref = compat.self_built.get("official_results")
    if not ref:
        return {"note": "no official_results in the self-built record: nothing to compare against"}
    try:
        official = json.loads(Path(ref).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return {"note": f"official results {ref}: cannot be read ({exc})"}
    theirs = {c["id"]: c["status"] for ph in official.get("phases", []) for c in ph.get("checks", [])}
    ours = {c.id: c.status for ph in ctx.results.values() for c in ph.checks}
    checks = [
        {"check": k, "official": theirs.get(k), "self_built": ours.get(k)}
        for k in sorted(set(theirs) | set(ours))
        if theirs.get(k) != ours.get(k)
    ]
    figures = []
    o_ramp = {
        r["label"]: r
        for ph in official.get("phases", [])
        if ph["name"] == "capacity"
        for r in ph["data"].get("ramp", [])
    }
    cap = ctx.capacity
    for r in cap.ramp if cap else []:
        o = o_ramp.get(r["label"])
        if o:
            figures.append(
                {
                    "step": r["label"],
                    **{
                        k: {"official": o.get(k), "self_built": r.get(k)}
                        for k in ("ttft_p95_s", "e2e_p95_s", "error_rate", "kv_max")
                    },
                }
            )
    return {
        "official_results": ref,
        "official_verdict": official.get("verdict", {}).get("decision"),
        "checks": checks,
        "figures": figures,
    }


async def run_acceptance(
    opts: AcceptOptions, progress: Callable[[str], None] | None = None
) -> AcceptanceResult:
    prog = progress or Progress()
    profile = PROFILES[opts.profile]
    # a copy: the options below must not change the profile for the next run in this process
    plan = dataclasses.replace(opts.plan or profile.capacity)
    if opts.target_concurrency:
        plan.target_concurrency = opts.target_concurrency
    if opts.open_loop_rates:
        plan.open_loop_rates = opts.open_loop_rates
    metrics = opts.metrics_urls or ([opts.engine_url.rstrip("/") + "/metrics"] if opts.engine_url else [])
    opts.metrics_urls = metrics
    started = time.time()
    # read every evidence file first: a bad file stops the run before any load is sent
    hosts: list[HostFacts] = [read_host(p) for p in opts.host_files]
    workload = (
        load_workload(opts.samples, opts.target, redaction=opts.written_redaction()) if opts.samples else None
    )
    async with httpx.AsyncClient(timeout=httpx.Timeout(60, connect=10)) as client:
        info = await _discover(client, opts)
    model = info["model"]
    family = _family(opts, model)
    compat_inputs = CompatInputs(
        host_files=opts.host_files,
        hosts=hosts,
        container_file=opts.container_file,
        startup_log=opts.startup_log,
        official_image=opts.official_image,
        self_built=opts.self_built,
        family=family,
        version=info["version"],
        fingerprint=info["fingerprint"],
        ack_warnings=opts.ack_warnings,
        more_startup_logs=opts.more_startup_logs,
        topology_files=opts.topology_files,
    )
    ctx = RunContext(
        opts=opts,
        plan=plan,
        model=model,
        family=family,
        hosts=hosts,
        compat_inputs=compat_inputs,
        compat_result=run_compat(compat_inputs),  # also validates the files when compat is not selected
        health_url=(opts.engine_url or opts.target).rstrip("/") + "/health",
        metrics_urls=metrics,
        interface_requests=opts.interface_requests or profile.interface_requests,
        retries=profile.retries,
        scenario_examples=profile.scenario_examples
        if opts.scenario_examples is None
        else opts.scenario_examples,
        progress=prog,
        workload=workload,
    )
    for unit in PHASES:
        name = unit.name
        if name not in opts.phases:
            continue
        prog(f"phase {name} ...")
        t0 = time.monotonic()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        dead = ctx.capacity.engine_dead if ctx.capacity is not None else None
        try:
            # after an engine death the later phases would only fail against a dead engine: blocked
            ph = PhaseResult(name, blocked=dead) if dead else await unit.run(ctx)
        except (httpx.HTTPError, OSError, TransportError) as exc:
            ph = PhaseResult(name, error=f"{type(exc).__name__}: {exc}")
        ph.started_at = stamp
        ph.duration_s = time.monotonic() - t0
        ctx.results[name] = ph
        if hasattr(prog, "done"):
            prog.done()
        prog(f"phase {name}: {ph.status} ({ph.duration_s:.1f}s)")
    finished = time.time()
    ordered = [ctx.results[p.name] for p in PHASES if p.name in ctx.results]
    verdict = decide(ordered, opts.phases, opts.limits, _suggested(ctx, opts.slo))
    verdict.simulated_sources = list(ctx.compat_result.simulated)
    cap = ctx.capacity
    if cap is not None and (cap.data.get("gpu") or {}).get("simulated"):
        verdict.simulated_sources.append("GPU metrics from the simulated DCGM exporter")
    evidence = _evidence(opts, info, ctx, started, finished)
    evidence["recipe"] = {"accessed": opts.recipe_accessed, "support_status": opts.support_status}
    evidence["evidence_files"] = _copy_evidence(opts, ctx.compat_result.simulated)
    # where the capacity load came from: as the phase measured it, else as the file reads
    measured = cap.data.get("workload") if cap is not None else None
    evidence["workload"] = measured or (workload_data(workload, [], []) if workload else None)
    report: dict[str, Any] = {
        "wirecheck_acceptance": 1,
        "verdict": verdict.to_json(),
        "evidence": evidence,
        "phases": [p.to_json() for p in ordered],
        "phases_selected": opts.phases,
        "self_built_vs_official": _self_built_diff(ctx),
    }
    opts.out.mkdir(parents=True, exist_ok=True)
    files = {
        "markdown": str(opts.out / "report.md"),
        "html": str(opts.out / "report.html"),
        "json": str(opts.out / "report.json"),
        "alerts": str(opts.out / "alerts.yml"),
        "dashboard": str(opts.out / "grafana-dashboard.json"),
        "samples": str(opts.out / "samples.jsonl"),
    }
    if ctx.exchanges:
        files["exchanges"] = str(opts.out / "interface.jsonl")
        with open(files["exchanges"], "w", encoding="utf-8") as fh:
            write_exchanges(ctx.exchanges, fh, redaction=opts.written_redaction())
    report["checklist"] = checklist(ordered, opts.reviewer, verdict, files)
    report["files"] = files
    with open(files["samples"], "w", encoding="utf-8") as fh:
        for s in ctx.samples:
            fh.write(json.dumps(s.to_json()) + "\n")
    write_reports(report, opts.slo, files)
    return AcceptanceResult(verdict, ordered, report, files)


def _copy_evidence(opts: AcceptOptions, simulated: list[str]) -> list[dict[str, Any]]:
    """Each evidence file copied into DIR/evidence/ with its sha256: the report folder alone
    shows what the verdict was judged on, and the hash shows the copy is the file that was read."""
    out = []
    sources = [
        *opts.host_files,
        *opts.topology_files,
        opts.container_file,
        opts.startup_log,
        *opts.more_startup_logs,
        opts.self_built,
    ]
    folder = opts.out / "evidence"
    for i, src in enumerate(f for f in sources if f):
        data = Path(src).read_bytes()
        folder.mkdir(parents=True, exist_ok=True)
        # a number first: two hosts' files are often both called nvidia-smi.xml
        dest = folder / f"{i + 1:02d}-{Path(src).name}"
        dest.write_bytes(data)
        out.append(
            {
                "source": str(src),
                "copy": str(dest),
                "sha256": hashlib.sha256(data).hexdigest(),
                "bytes": len(data),
                "simulated": str(src) in simulated,
            }
        )
    return out


@contextlib.asynccontextmanager
async def via_taps(
    gateway: str,
    engine: str,
    engine_port: int,
    store: Store,
    *,
    redaction: Redaction = DEFAULT_REDACTION,
) -> AsyncIterator[tuple[str, TapSource]]:
    """Caller tap -> ``gateway`` and engine tap on ``engine_port`` -> ``engine``, in this event loop,
    recording into ``store`` with ``redaction``. Yields the caller tap's URL and the interface phase's
    tap source."""
    caller_port = free_port()
    caller = ProxyApp(TapConfig(upstream=gateway, tap="caller", redact=redaction), store)
    engine_app = ProxyApp(
        TapConfig(upstream=engine, tap="engine", inject_correlation=False, redact=redaction), store
    )

    async def source(correlations: list[str]) -> list[Exchange]:
        # the caller tap records a response a moment after the client has it: wait for both taps
        deadline = time.monotonic() + 10
        want = set(correlations)
        while True:
            await asyncio.to_thread(store.flush)
            found = await asyncio.to_thread(store.exchanges_for, [], sorted(want))
            per = Counter(ex.correlation or "" for ex in found)
            if all(per[c] >= 2 for c in want) or time.monotonic() > deadline:
                return found
            await asyncio.sleep(0.1)

    apps = [(engine_app, engine_port), (caller, caller_port)]
    async with serving(apps, f"a tap could not listen (engine tap port {engine_port} in use?)"):
        yield f"http://127.0.0.1:{caller_port}", source


def accept(opts: AcceptOptions, progress: Callable[[str], None] | None = None) -> AcceptanceResult:
    return asyncio.run(run_acceptance(opts, progress))
