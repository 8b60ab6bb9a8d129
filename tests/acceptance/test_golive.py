"""Verdicts an SRE can sign, each reached from the evidence that should cause it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from tests.acceptance.runs import FAST, accept_ci, checks, run_accept
from tests.support.servers import running
from wirecheck.acceptance import ALL_PHASES, Limits, read_startup_log
from wirecheck.acceptance._verdict import checklist, decide
from wirecheck.acceptance.phases import OFFICIAL_IMAGE, RECIPE_FAMILY, CompatInputs, run_compat
from wirecheck.cli import main
from wirecheck.contracts import FAMILIES
from wirecheck.record import serve
from wirecheck.sim import (
    Environment,
    GatewayConfig,
    SimConfig,
    create_app,
    create_gateway,
    parse_gateway_faults,
    write_environment,
)


def test_an_oom_without_recovery_is_scale_up_led_by_the_oom_and_later_phases_are_blocked(
    tmp_path: Path,
) -> None:
    cfg = SimConfig(**FAST, oom_at_tokens=6000)  # type: ignore[arg-type]  # never recovers
    res = run_accept(tmp_path, cfg, phases=("capacity", "cache", "interface"), interface_requests=4)
    v = res.verdict
    assert v.decision == "scale-up", v.reasons
    assert v.reasons[0].startswith("OOM at ramp c="), v.reasons
    status = {p.name: p.status for p in res.phases}
    assert status["cache"] == status["interface"] == "blocked", status
    assert not [c for p in res.phases if p.name != "capacity" for c in p.checks]
    oom = res.report["verdict"]["oom"]
    assert oom["recovered"] is False and oom["state"].startswith("dead")
    assert oom["concurrency"] >= 2 and oom["input_tokens_max"] > 1000 and oom["max_output_tokens"] == 256
    assert oom["max_model_len"] == cfg.max_model_len and oom["prefix_caching"] is True
    assert oom["kv_offload"] is False
    # GPU memory measured by the simulated DCGM exporter: up before, freed after the process died
    assert oom["gpu_memory_before"]["gpus"] == 8 and oom["gpu_memory_before"]["used_mib_max"] > 70000
    assert oom["gpu_memory_after"]["used_mib_max"] == 512
    md = Path(res.files["markdown"]).read_text()
    html = Path(res.files["html"]).read_text()
    for text in (md, html):
        assert "Out of memory (leads the verdict)" in text and "max_model_len" in text
        assert text.index("OOM at ramp") < text.index("Checklist")
    assert 'class="oom"' in html, "the OOM is marked on the GPU memory curve"
    items = {i["item"]: i for i in res.report["checklist"]}
    cache_item = next(i for t, i in items.items() if t.startswith("Prefix cache"))
    assert cache_item["state"] == "not run" and "blocked" in cache_item["evidence"]


def test_the_capacity_phase_has_a_memory_curve_per_gpu_from_the_simulated_dcgm_exporter(
    tmp_path: Path,
) -> None:
    res = run_accept(tmp_path, SimConfig(**FAST), phases=("capacity",))  # type: ignore[arg-type]
    cap = next(p for p in res.phases if p.name == "capacity")
    assert checks(res)["capacity.gpu-memory"].status == "pass"
    assert cap.data["gpu"]["source"] == "dcgm" and cap.data["gpu"]["at_load"]["gpus"] == 8
    for r in cap.data["ramp"]:
        gpus = {g["gpu"] for snap in r["gpu_series"] for g in snap["gpus"]}
        assert gpus == {f"vllm-0/{i}" for i in range(8)}, gpus
        assert (
            r["gpu_before"]["total_mib"] == 143771
            and r["gpu_used_max_mib"] >= r["gpu_before"]["used_mib_max"]
        )
    alerts = Path(res.files["alerts"]).read_text()
    for name in ("GpuMemoryNearlyFull", "VllmProcessRestarted", "ToolCallErrorsRising"):
        assert f"alert: {name}" in alerts
    html = Path(res.files["html"]).read_text()
    assert html.count('class="gpu"') == 8 and "seconds through the steps" in html
    assert "GPU memory (dcgm)" in Path(res.files["markdown"]).read_text()


def test_without_a_gpu_source_the_memory_item_stays_open_and_the_verdict_is_not_go(tmp_path: Path) -> None:
    res = run_accept(
        tmp_path,
        SimConfig(**FAST),
        phases=("capacity",),
        gpu_metrics_urls=[],
        gpu_source="none",  # type: ignore[arg-type]
    )
    c = checks(res)["capacity.gpu-memory"]
    assert c.status == "missing" and "--gpu-metrics-url" in c.detail
    assert res.verdict.decision != "go"
    item = next(i for i in res.report["checklist"] if "per-GPU memory curve" in i["item"])
    assert item["state"] == "open"


WORKER_LOG = (
    "INFO 12-02 10:00:00 [api_server.py:1905] vLLM API server version 0.33.0\n"
    "INFO 12-02 10:00:00 [utils.py:328] non-default args: {'tool_call_parser': 'kimi_k3', "
    "'reasoning_parser': 'kimi_k3', 'enable_auto_tool_choice': True, 'enable_prefix_caching': True}\n"
    "\x1b[1;36m(VllmWorker TP1 pid=2345)\x1b[0;0m WARNING 12-02 10:00:05 [custom_all_reduce.py:140] "
    "Custom allreduce is disabled because your platform lacks GPU P2P capability\n"
    "(Worker_TP1 pid=2346) INFO 12-02 10:00:05 [pynccl.py:70] vLLM is using nccl==2.27.7\n"
    "vllm-0:2346:2400 [1] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.2<0>\n"
    "\x1b[1;33m(EngineCore_DP0 pid=2300)\x1b[0m WARNING 12-02 10:00:06 [topology.py:88] "
    "Tokenizer has no chat template override\n"
    "INFO:     Application startup complete.\n"
)


def _compat_over(tmp_path: Path, log: str, acks: list[str]) -> tuple[Any, Any]:
    p = tmp_path / "startup.log"
    p.write_text(log, encoding="utf-8")
    ph = run_compat(CompatInputs(startup_log=str(p), ack_warnings=acks, official_image=True))
    return ph, decide([ph], ["compat"], Limits(), {})


def test_nccl_socket_fallback_and_worker_prefixed_warnings_are_read_and_block_go(tmp_path: Path) -> None:
    log = read_startup_log_text(tmp_path, WORKER_LOG)
    assert len(log.warnings) == 3 and not any("\x1b" in w or "pid=" in w for w in log.warnings)
    ph, v = _compat_over(tmp_path, WORKER_LOG, ["chat template"])
    danger = {c.evidence["kind"]: c for c in ph.checks if c.id.startswith("compat.log-danger.")}
    assert danger["nccl-socket"].leads_to == "rework" and danger["no-custom-allreduce"].leads_to == "limited"
    assert v.decision == "rework" and any("nccl-socket" in r for r in v.reasons), v.reasons
    acked = [c for c in ph.checks if c.id.startswith("compat.log-warning.")]
    assert [c.status for c in acked] == ["warn"] and "chat template" in acked[0].detail


def test_an_unknown_warning_needs_an_acknowledgement_to_pass(tmp_path: Path) -> None:
    clean = "\n".join(
        line for line in WORKER_LOG.splitlines() if "allreduce" not in line and "NET/Socket" not in line
    )
    ph, v = _compat_over(tmp_path, clean + "\n", [])
    (w,) = [c for c in ph.checks if c.id.startswith("compat.log-warning.")]
    assert w.status == "missing" and "--ack-warning" in w.detail and v.decision == "rework"
    item = next(i for i in checklist([ph], "ci", v, {}) if i["item"].startswith("Startup log"))
    assert item["state"] == "open"
    ph, v = _compat_over(tmp_path, clean + "\n", ["no chat template"])
    item = next(i for i in checklist([ph], "ci", v, {}) if i["item"].startswith("Startup log"))
    assert item["state"] == "done" and "acknowledged" in item["evidence"]


def read_startup_log_text(tmp_path: Path, text: str) -> Any:
    p = tmp_path / "read.log"
    p.write_text(text, encoding="utf-8")
    return read_startup_log(p)


def test_a_single_tap_run_through_a_faulty_gateway_blames_nothing_on_the_model(tmp_path: Path) -> None:
    cfg = SimConfig(**FAST)  # type: ignore[arg-type]
    with serve(create_app(cfg)) as engine:
        gw = create_gateway(
            GatewayConfig(upstream=engine, faults=parse_gateway_faults("reasoning_merged,tool_index_zero"))
        )
        with serve(gw) as gateway:
            res = accept_ci(
                gateway,
                tmp_path / "out",
                ["interface"],
                engine_url=engine,
                interface_requests=7,
                scenario_examples=0,
            )
    iface = next(p for p in res.phases if p.name == "interface")
    assert iface.data["errors_by_fault"], "the gateway's faults were seen by the caller"
    assert not {"model", "parser", "engine"} & set(iface.data["errors_by_fault"]), iface.data[
        "errors_by_fault"
    ]
    assert not any(f["fault"] == "model" for f in iface.data["findings"])
    gw_check = checks(res)["interface.gateway"]
    assert gw_check.status == "missing" and "unverified" in gw_check.detail
    assert res.verdict.decision == "rework" and not res.verdict.accepted
    assert not any("model" in r.split(":")[0] for r in res.verdict.reasons)
    item = next(i for i in res.report["checklist"] if i["item"].startswith("Gateway forwards"))
    assert item["state"] == "open"


def test_two_hosts_of_8_gpus_are_2_nodes_and_16_gpus_and_tp8_alone_does_not_fit_them(tmp_path: Path) -> None:
    cfg = SimConfig(family="kimi_k3")
    a = write_environment(tmp_path / "a", cfg, Environment(hostname="node-a"))
    b = write_environment(tmp_path / "b", cfg, Environment(hostname="node-b"))
    hosts = [str(a["host_xml"]), str(a["host_text"]), str(b["host_xml"])]
    ph = run_compat(
        CompatInputs(
            host_files=hosts,
            startup_log=str(a["startup_log"]),
            more_startup_logs=[str(b["startup_log"])],
            topology_files=[str(a["topology"]), str(b["topology"])],
            official_image=True,
        )
    )
    topo = ph.data["topology"]
    assert (topo["node_count"], topo["gpu_count"]) == (2, 16), topo["nodes"]
    assert [len(n["sources"]) for n in topo["nodes"]] == [2, 1]  # the plain file joins node-a
    c = {x.id: x for x in ph.checks}
    assert c["compat.topology"].status == "fail" and "TP8 x PP1 x DP1 = 8 GPUs" in c["compat.topology"].detail
    link = c["compat.interconnect"]
    assert link.status == "pass" and "NVLink (56 GPU pairs)" in link.detail and "InfiniBand" in link.detail
    one = run_compat(
        CompatInputs(
            host_files=hosts[:2], topology_files=[str(a["topology"])], startup_log=str(a["startup_log"])
        )
    )
    assert {x.id: x.status for x in one.checks}["compat.topology"] == "pass"


def test_nccl_over_sockets_between_nodes_is_rework(tmp_path: Path) -> None:
    cfg = SimConfig(family="kimi_k3")
    a = write_environment(tmp_path / "a", cfg, Environment(hostname="node-a", nccl_transport="Socket"))
    b = write_environment(tmp_path / "b", cfg, Environment(hostname="node-b", nccl_transport="Socket"))
    ph = run_compat(
        CompatInputs(
            host_files=[str(a["host_xml"]), str(b["host_xml"])],
            startup_log=str(a["startup_log"]),
            more_startup_logs=[str(b["startup_log"])],
            official_image=True,
        )
    )
    v = decide([ph], ["compat"], Limits(), {})
    assert v.decision == "rework" and any("nccl-socket" in r for r in v.reasons)
    assert {x.id: x.status for x in ph.checks}["compat.interconnect"] == "fail"


def test_go_needs_a_monitoring_owner_and_check_output_makes_its_folder(tmp_path: Path) -> None:
    bare = decide([], list(ALL_PHASES), Limits(), {})
    assert (bare.decision, bare.granted, bare.accepted) == ("go", False, False)
    assert bare.missing_conditions == ["--on-call"] and "NOT GRANTED" in bare.label
    owned = decide([], list(ALL_PHASES), Limits(owner="sre-oncall"), {})
    assert (owned.decision, owned.granted, owned.accepted) == ("go", True, True)
    out = tmp_path / "made" / "here" / "report.txt"
    main(["check", "--example", "-o", str(out)])
    assert out.is_file() and out.read_text()


def test_the_k3_hybrid_cache_is_judged_from_the_family_when_metrics_carry_no_hybrid_label(
    tmp_path: Path,
) -> None:
    """Real vLLM has no hybrid_kv_cache label: a /metrics without vllm:cache_config_info still explains
    warm B on a K3 model instead of failing it."""
    cfg = SimConfig(**FAST, hybrid_cache=True)  # type: ignore[arg-type]
    app = create_app(cfg)

    async def real_metrics(request: Request) -> PlainTextResponse:
        text = app.state.sim.metrics.render().decode()
        return PlainTextResponse(
            "\n".join(ln for ln in text.splitlines() if "cache_config_info" not in ln) + "\n"
        )

    with serve(Starlette(routes=[Route("/metrics", real_metrics)])) as plain:
        paths = write_environment(tmp_path / "evidence", cfg)
        with serve(app) as url:
            res = accept_ci(
                url,
                tmp_path / "out",
                ["cache"],
                metrics_urls=[plain + "/metrics"],
                startup_log=str(paths["startup_log"]),
            )
    cache = next(p for p in res.phases if p.name == "cache")
    assert cache.data["cache_config"] == {} and cache.data["hybrid_from"] == "model family kimi_k3"
    c = checks(res)
    assert c["cache.warm-a"].status == "pass" and c["cache.warm-b"].status == "warn", c["cache.warm-b"].detail
    assert "prompt ends" in c["cache.warm-b"].detail


def test_the_recipe_family_is_the_family_tables_row_for_the_official_images_model() -> None:
    """Compat names no family itself: the K3 recipe's family comes from the table."""
    assert RECIPE_FAMILY == "kimi_k3" and OFFICIAL_IMAGE.endswith(":kimi-k3")
    row = FAMILIES[RECIPE_FAMILY]
    assert row.hybrid_kv_cache and row.recipe_flags["tool_call_parser"] == "kimi_k3"


def test_wirecheck_sim_dcgm_port_serves_the_simulated_exporter() -> None:
    from wirecheck.record import free_port

    port, dcgm = free_port(), free_port()
    sim = ("sim", "--family", "kimi_k3", "--port", str(port), "--dcgm-port", str(dcgm))
    with running(*sim, ready=f"http://127.0.0.1:{dcgm}/metrics", ready_s=30):
        text = httpx.get(f"http://127.0.0.1:{dcgm}/metrics", timeout=2).text
    lines = [ln for ln in text.splitlines() if ln.startswith("DCGM_FI_DEV_FB_USED{")]
    assert len(lines) == 8 and all('wirecheck_simulated="true"' in ln for ln in lines), text[:500]


def test_several_metrics_urls_are_never_summed_and_name_the_instance_that_answered(tmp_path: Path) -> None:
    cfg = SimConfig(**FAST)  # type: ignore[arg-type]
    with serve(create_app(cfg)) as url, serve(create_app(cfg)) as other:
        # the other instance has served traffic of its own: its counters must not leak into the probes
        for _ in range(2):
            httpx.post(
                other + "/v1/chat/completions",
                json={"messages": [{"role": "user", "content": "hi " * 200}]},
                timeout=30,
            )
        res = accept_ci(url, tmp_path / "out", ["cache"], metrics_urls=[other + "/metrics", url + "/metrics"])
    cache = next(p for p in res.phases if p.name == "cache")
    assert {r["instance"] for r in cache.data["probes"].values()} == {url + "/metrics"}
    assert all(r["instances_moved"] == [url + "/metrics"] for r in cache.data["probes"].values())
    c = checks(res)
    assert c["cache.instances"].status == "pass" and c["cache.warm-a"].status == "pass"
