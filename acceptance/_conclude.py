"""From the judged phases to the report folder: the verdict with its suggested next steps, the
evidence section, the evidence files copied with their hashes, a self-built image's comparison with the
official image's run, and every file written. Everything here reads the phases' facts through
``Facts``: no phase is looked up by name."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wirecheck._version import __version__
from wirecheck.contracts import write_exchanges
from wirecheck.generators import SAMPLE_SET_VERSION

from ._clock import stamp
from ._discover import EngineInfo
from ._model import PhaseResult, Slo, Verdict
from ._options import AcceptOptions
from ._verdict import checklist, decide
from .load import Workload, workload_data
from .phases import CompatFacts
from .report import Report, write_reports

__all__ = ["AcceptanceResult", "copy_evidence", "report_run", "self_built_diff", "suggestions"]


def _facts(phases: list[PhaseResult]) -> list[Any]:
    return [ph.facts for ph in phases if ph.facts is not None]


def suggestions(phases: list[PhaseResult], slo: Slo) -> dict[str, str]:
    """Next steps the measurements suggest, then the rollback conditions the alert rules carry."""
    out: dict[str, str] = {}
    for f in _facts(phases):
        out.update(f.suggestions())
    out["rollback"] = (
        f"roll back when success rate < {1 - slo.max_error_rate:.1%} over 5m, TTFT p95 > {slo.ttft_p95_s}s, "
        f"e2e p95 > {slo.e2e_p95_s}s, any preemption in 10m, or KV cache > 90% for 5m (the alert rules)"
    )
    return out


def _evidence(
    opts: AcceptOptions, engine: EngineInfo, compat: CompatFacts, metrics: list[str]
) -> dict[str, Any]:
    fp = compat.parsed_fingerprint or {}
    topo = compat.topology
    shown = opts.written_redaction()
    return {
        "sample_set_version": SAMPLE_SET_VERSION,
        "wirecheck_version": __version__,
        "profile": opts.profile,
        "reviewer": opts.reviewer,
        "topology": {
            "target": shown.url(opts.target),
            "engine": opts.engine_url and shown.url(opts.engine_url),
            "metrics": [shown.url(u) for u in metrics],
            "tensor_parallel": fp.get("tp"),
            "pipeline_parallel": fp.get("pp"),
            "data_parallel": fp.get("dp"),
            "expert_parallel": fp.get("ep"),
            "nodes": topo.get("node_count"),
            "gpus": topo.get("gpu_count"),
            "interconnect": topo.get("interconnect"),
            **opts.topology,
        },
        "engine": {"version": engine.version, "model": engine.model, "fingerprint": engine.fingerprint},
        "container": compat.container_json or {},
        "key_logs": compat.key_logs(),
        "recipe": {"accessed": opts.recipe_accessed, "support_status": opts.support_status},
    }


def copy_evidence(opts: AcceptOptions, simulated: list[str]) -> list[dict[str, Any]]:
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


def self_built_diff(compat: CompatFacts, phases: list[PhaseResult]) -> dict[str, Any] | None:
    """A self-built image's run beside the official image's (its record's ``official_results``):
    every check whose status differs, and the key figures of the phases both ran."""
    if not compat.self_built:
        return None
    ref = compat.self_built.get("official_results")
    if not ref:
        return {"note": "no official_results in the self-built record: nothing to compare against"}
    try:
        official = json.loads(Path(ref).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return {"note": f"official results {ref}: cannot be read ({exc})"}
    theirs = {c["id"]: c["status"] for ph in official.get("phases", []) for c in ph.get("checks", [])}
    ours = {c.id: c.status for ph in phases for c in ph.checks}
    checks = [
        {"check": k, "official": theirs.get(k), "self_built": ours.get(k)}
        for k in sorted(set(theirs) | set(ours))
        if theirs.get(k) != ours.get(k)
    ]
    their_data = {ph["name"]: ph.get("data") or {} for ph in official.get("phases", [])}
    figures = []
    for ph in phases:
        if ph.facts is None or ph.name not in their_data:
            continue
        other = type(ph.facts).figures_of(their_data[ph.name])
        for row, mine in type(ph.facts).figures_of(ph.data).items():
            if row in other:
                figures.append(
                    {
                        "step": row,
                        **{k: {"official": other[row].get(k), "self_built": v} for k, v in mine.items()},
                    }
                )
    return {
        "official_results": ref,
        "official_verdict": official.get("verdict", {}).get("decision"),
        "checks": checks,
        "figures": figures,
    }


@dataclass(slots=True)
class AcceptanceResult:
    verdict: Verdict
    phases: list[PhaseResult]
    #: report.json
    report: dict[str, Any]
    files: dict[str, str]
    document: Report


def _verdict(opts: AcceptOptions, compat: CompatFacts, phases: list[PhaseResult]) -> Verdict:
    verdict = decide(phases, opts.phases, opts.limits, suggestions(phases, opts.slo))
    verdict.simulated_sources = compat.simulated_sources() + [
        s for f in _facts(phases) if f is not compat for s in f.simulated_sources()
    ]
    return verdict


_FILES = {
    "markdown": "report.md",
    "html": "report.html",
    "json": "report.json",
    "alerts": "alerts.yml",
    "dashboard": "grafana-dashboard.json",
    "samples": "samples.jsonl",
}


def _write(opts: AcceptOptions, report: Report) -> None:
    """The report folder: every format, the requests sent (samples.jsonl) and the exchanges checked
    (interface.jsonl), with the checklist, which names the files it wrote."""
    out = opts.out
    out.mkdir(parents=True, exist_ok=True)
    report.files = {kind: str(out / name) for kind, name in _FILES.items()}
    exchanges = [x for f in _facts(report.phases) for x in f.recorded()]
    if exchanges:
        report.files["exchanges"] = str(out / "interface.jsonl")
        with open(report.files["exchanges"], "w", encoding="utf-8") as fh:
            write_exchanges(exchanges, fh, redaction=opts.written_redaction())
    with open(report.files["samples"], "w", encoding="utf-8") as fh:
        for s in (s for f in _facts(report.phases) for s in f.sent()):
            fh.write(json.dumps(s.to_json()) + "\n")
    report.checklist = checklist(report.phases, opts.reviewer, report.verdict, report.files)
    write_reports(report)


def report_run(
    opts: AcceptOptions,
    engine: EngineInfo,
    compat: CompatFacts,
    phases: list[PhaseResult],
    *,
    started: float,
    finished: float,
    metrics: list[str],
    workload: Workload | None = None,
) -> AcceptanceResult:
    """Decide from judged phases and write the report folder: a run's last step, and all a test of
    recorded facts needs (``started``, ``finished``: the run's clock, seconds since the epoch)."""
    evidence = {
        "started_at": stamp(started),
        "finished_at": stamp(finished),
        "duration_s": round(finished - started, 2),
        **_evidence(opts, engine, compat, metrics),
        "evidence_files": copy_evidence(opts, compat.simulated_sources()),
        # where the capacity load came from: as the file reads, unless a phase measured it
        "workload": workload_data(workload, [], []) if workload is not None else None,
    }
    for f in _facts(phases):
        evidence.update({k: v for k, v in f.evidence().items() if v})
    report = Report(
        verdict=_verdict(opts, compat, phases),
        evidence=evidence,
        phases=phases,
        selected=list(opts.phases),
        self_built=self_built_diff(compat, phases),
        slo=opts.slo,
    )
    _write(opts, report)
    return AcceptanceResult(report.verdict, phases, report.to_json(), report.files, report)
