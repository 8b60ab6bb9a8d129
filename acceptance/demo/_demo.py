"""``wirecheck demo``: the whole tool on loopback, with faults on every side, ending in a verdict.

    caller (accept) -> [caller tap] -> faulty gateway -> [engine tap] -> simulator (faulty model,
    parser and engine)

The simulator (Kimi K3, with the environment evidence a real host would give, and its DCGM exporter
for the GPU memory curves) and the gateway inject faults at fixed rates from a seed; the dual-tap proxy records both sides into a store; ``accept
--profile quick`` runs compat, capacity, cache and interface through it and decides. The report goes to
``--out`` (default ``./wirecheck-demo/``): the acceptance report (HTML, Markdown, JSON, alerts,
dashboard), the findings over every recorded exchange (JSON, JUnit, HTML), the capture and the store.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from html import escape
from pathlib import Path

from wirecheck.contracts import (
    CheckConfig,
    check_exchanges,
    render_html,
    render_json,
    render_junit,
    write_exchanges,
)
from wirecheck.record import Store, free_port
from wirecheck.sim import (
    Environment,
    GatewayConfig,
    GroundTruth,
    SimConfig,
    create_app,
    create_dcgm_app,
    create_gateway,
    parse_faults,
    parse_gateway_faults,
    read_truth,
    write_environment,
)

from .._conclude import AcceptanceResult
from .._options import AcceptOptions
from .._progress import Progress
from .._run import run_acceptance
from .._serving import serving
from .._taps import via_taps
from .._verdict import ALL_PHASES
from ..phases import RECIPE_FAMILY
from ._groundtruth import TruthScore, score_truth

__all__ = ["DEMO_GATEWAY_FAULTS", "DEMO_SIM_FAULTS", "TRUTH_FILE", "run_demo"]

#: what the simulator and the gateway injected, one JSON line per changed exchange
TRUTH_FILE = "ground-truth.jsonl"

DEMO_SIM_FAULTS = "model.invalid_json=0.12,model.undeclared_tool=0.08,parser.markup_in_content=0.1,engine.error_mid_stream=0.06"
DEMO_GATEWAY_FAULTS = "reasoning_dropped=0.2,finish_reason_changed=0.3,stream_buffered=0.15"


async def _run(
    out: Path,
    *,
    requests: int,
    seed: int,
    time_scale: float,
    phases: list[str],
    scenario_examples: int | None,
    quiet: bool,
) -> tuple[AcceptanceResult, float]:
    sim_port, gw_port, engine_port, dcgm_port = (free_port() for _ in range(4))
    cfg = SimConfig(
        family=RECIPE_FAMILY,
        faults=parse_faults(DEMO_SIM_FAULTS, seed=seed),
        seed=seed,
        time_scale=time_scale,
        decode_tokens_per_s=60.0,  # with the time scale, a few ms a token: streams spread out
    )
    # both fault injectors write what they really did: the findings are scored against it
    truth = GroundTruth(out / TRUTH_FILE)
    sim = create_app(cfg, truth=truth)
    gateway = create_gateway(
        GatewayConfig(
            upstream=f"http://127.0.0.1:{engine_port}",
            faults=parse_gateway_faults(DEMO_GATEWAY_FAULTS, seed=seed),
            truth=truth,
        )
    )
    sim_url, gw_url = f"http://127.0.0.1:{sim_port}", f"http://127.0.0.1:{gw_port}"
    host = Environment()
    # the simulated host's GPUs as a DCGM exporter shows them: memory follows the simulated KV use
    dcgm = create_dcgm_app(sim, host)
    servers = [(sim, sim_port), (gateway, gw_port), (dcgm, dcgm_port)]
    async with serving(servers, "a demo server failed to start"):
        env = write_environment(out / "evidence", cfg, host)
        store = Store(out / "wirecheck.db", writer=True)
        t0 = time.monotonic()
        try:
            async with via_taps(gw_url, sim_url, engine_port, store) as (caller_url, source):
                opts = AcceptOptions(
                    target=caller_url,
                    engine_url=sim_url,
                    reviewer="wirecheck demo (simulated deployment)",
                    out=out,
                    host_files=[str(env["host_xml"]), str(env["host_text"])],
                    container_file=str(env["container"]),
                    gpu_metrics_urls=[f"http://127.0.0.1:{dcgm_port}/metrics"],
                    startup_log=str(env["startup_log"]),
                    official_image=True,
                    profile="quick",
                    phases=phases,
                    taps=source,
                    seed=seed,
                    interface_requests=requests,
                    scenario_examples=scenario_examples,
                    topology={
                        "gateway": f"{gw_url} (simulated, faults {DEMO_GATEWAY_FAULTS})",
                        "taps": f"caller tap {caller_url}, engine tap :{engine_port}",
                        "simulator": f"{sim_url} (faults {DEMO_SIM_FAULTS})",
                        "gpu_metrics": f"simulated DCGM exporter :{dcgm_port}",
                    },
                )
                result = await run_acceptance(opts, Progress(quiet=quiet))
        finally:
            elapsed = time.monotonic() - t0
            store.close()
    truth.close()
    return result, elapsed


def run_demo(
    out: str | Path = "wirecheck-demo",
    *,
    requests: int = 28,
    seed: int = 7,
    time_scale: float = 0.1,
    phases: list[str] | tuple[str, ...] = ALL_PHASES,
    scenario_examples: int | None = None,
    quiet: bool = False,
) -> int:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("wirecheck.db", "wirecheck.db-wal", "wirecheck.db-shm"):
        (out / stale).unlink(missing_ok=True)
    print(
        "wirecheck demo: simulator + faulty gateway + dual-tap proxy on loopback, accept --profile quick ...",
        flush=True,
    )
    result, elapsed = asyncio.run(
        _run(
            out,
            requests=requests,
            seed=seed,
            time_scale=time_scale,
            phases=list(phases),
            scenario_examples=scenario_examples,
            quiet=quiet,
        )
    )
    store = Store(out / "wirecheck.db")
    exchanges = list(store.exchanges())
    store.close()
    # every exchange both taps recorded, judged together: attribution over the whole run
    checked = check_exchanges(exchanges, CheckConfig())
    (out / "findings.json").write_text(render_json(checked), encoding="utf-8")
    (out / "findings.xml").write_text(
        render_junit(checked, exchange_ids=[e.id for e in exchanges]), encoding="utf-8"
    )
    (out / "findings.html").write_text(
        render_html(checked, exchanges, title="wirecheck demo: every finding"), encoding="utf-8"
    )
    with (out / "capture.jsonl").open("w", encoding="utf-8") as fh:
        write_exchanges(exchanges, fh)
    score = score_truth(exchanges, checked.findings, read_truth(out / TRUTH_FILE))
    (out / "ground-truth-score.json").write_text(json.dumps(score.to_dict(), indent=2), encoding="utf-8")
    _append_to_report(out, score)
    v = result.verdict
    print(
        f"\nverdict: {v.label}  ({elapsed:.1f} s, {checked.exchanges} exchanges, {checked.pairs} caller/engine pairs)"
    )
    for r in v.reasons[:8]:
        print(f"  - {r[:220]}")
    print("\nwhere each fault was attributed (every recorded exchange, both taps):")
    by: dict[str, Counter[str]] = {}
    for f in checked.findings:
        if f.severity == "error":
            by.setdefault(str(f.fault), Counter())[f.rule] += 1
    for fault in sorted(by):
        rules = ", ".join(f"{rule} x{n}" for rule, n in by[fault].most_common())
        print(f"  {fault:8} {sum(by[fault].values()):4}  {rules}")
    print(f"\ninjected: simulator {DEMO_SIM_FAULTS}; gateway {DEMO_GATEWAY_FAULTS}")
    print(f"\nagainst the ground truth ({TRUTH_FILE}): precision and recall per fault class, over exchanges")
    for line in score.table():
        print("  " + line)
    print(
        "  all 1.00: every finding explained, every observable fault found"
        if score.perfect
        else "  NOT all 1.00: see ground-truth-score.json"
    )
    print(
        f"report: {out / 'report.html'} and {out / 'report.md'} (also report.json, alerts.yml, grafana-dashboard.json,"
    )
    print(
        f"        findings.json/.xml/.html, capture.jsonl, wirecheck.db, {TRUTH_FILE}, ground-truth-score.json)"
    )
    return 0


def _append_to_report(out: Path, score: TruthScore) -> None:
    """The demo's report shows how its findings score against what was injected."""
    hidden = [
        f"- `{c.fault}`: {c.hidden} exchange(s) not observable: "
        + "; ".join(c.to_dict()["not_observable_why"])
        for c in score.classes
        if c.hidden
    ]
    section = [
        "",
        "## Ground truth (demo only)",
        "",
        f"The simulator and the gateway wrote every fault they injected to `{TRUTH_FILE}`; every error "
        "and warning finding over both taps is scored against it, per fault class, over exchanges "
        "(`ground-truth-score.json`).",
        "",
        *score.table(),
        "",
        *hidden,
        "",
    ]
    with (out / "report.md").open("a", encoding="utf-8") as fh:
        fh.write("\n".join(section))
    html = out / "report.html"
    if html.exists():
        rows = "".join(
            "<tr>"
            + "".join(f"<td>{escape(cell.strip().strip('`'))}</td>" for cell in line.strip("|").split("|"))
            + "</tr>"
            for line in score.table()[2:]
        )
        head = "".join(f"<th>{escape(h.strip())}</th>" for h in score.table()[0].strip("|").split("|"))
        block = f'<section id="ground-truth"><h2>Ground truth (demo only)</h2><table><tr>{head}</tr>{rows}</table></section>'
        text = html.read_text(encoding="utf-8")
        at = text.rfind("</body>")
        html.write_text(text[:at] + block + text[at:] if at >= 0 else text + block, encoding="utf-8")
