"""``accept`` end to end against the simulator: each verdict from a configuration made for it."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from tests.acceptance.runs import DEAD, FAST, ROOT, accept_argv, checks, run_accept, small_plan
from tests.support.chromium import count_color, render
from tests.support.cli_batch import wirecheck_batch
from tests.support.servers import run_wirecheck
from wirecheck.acceptance import (
    ALL_PHASES,
    AcceptanceResult,
    CapacityPlan,
    Limits,
    Progress,
)
from wirecheck.acceptance._verdict import decide
from wirecheck.record import serve
from wirecheck.sim import (
    Environment,
    SimConfig,
    create_app,
    parse_faults,
    write_environment,
)


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> AcceptanceResult:
    # a go is granted only with a monitoring owner named
    return run_accept(tmp_path_factory.mktemp("clean"), SimConfig(**FAST), limits=Limits(owner="ci-oncall"))  # type: ignore[arg-type]


def test_a_clean_deployment_is_go_with_every_checklist_item_ticked_from_evidence(
    clean: AcceptanceResult,
) -> None:
    v = clean.verdict
    assert (v.decision, v.granted, v.accepted, v.partial) == ("go", True, True, False), v.reasons
    assert [p.name for p in clean.phases] == list(ALL_PHASES)
    assert all(p.status in ("pass", "warn") for p in clean.phases), [(p.name, p.status) for p in clean.phases]
    items = clean.report["checklist"]
    assert items and all(i["state"] == "done" for i in items), [i for i in items if i["state"] != "done"]
    ev = clean.report["evidence"]
    assert ev["reviewer"] == "ci" and ev["sample_set_version"] and ev["topology"]["tensor_parallel"] == 8
    assert ev["container"]["image"] == "vllm/vllm-openai:kimi-k3" and ev["engine"]["version"] == "0.33.0"
    ramp = clean.report["phases"][1]["data"]["ramp"]
    assert [r["concurrency"] for r in ramp] == [1, 2, 4]
    for r in ramp:
        assert r["errors"] == 0 and r["ttft_p50_s"] <= r["e2e_p50_s"] and r["kv_max"] is not None
        assert r["series"], "the KV and queue gauges were sampled while the step ran"


def test_a_run_on_simulated_evidence_says_so_and_keeps_hashed_copies_of_its_evidence(
    clean: AcceptanceResult,
) -> None:
    v = clean.report["verdict"]
    assert v["simulated"] is True and len(v["simulated_sources"]) == 6, v["simulated_sources"]
    for fmt in ("markdown", "html"):
        text = Path(clean.files[fmt]).read_text()
        assert text.index("SIMULATED EVIDENCE: this verdict") < text.index("Verdict:")
    files = clean.report["evidence"]["evidence_files"]
    assert len(files) == 5 and all(f["simulated"] for f in files)
    for f in files:
        assert hashlib.sha256(Path(f["copy"]).read_bytes()).hexdigest() == f["sha256"]
        assert Path(f["copy"]).parent == Path(clean.files["json"]).parent / "evidence"
    assert clean.report["evidence"]["container"]["image_digest"].startswith("sha256:")
    # the HTML report carries what report.md does beyond the checks
    page = Path(clean.files["html"]).read_text()
    for marker in (
        'id="next-steps"',
        "rate-limit to at most",
        "roll back when",
        'id="cache-probes"',
        "Attribution",
        'id="gpu-steps"',
    ):
        assert marker in page, marker


def test_the_report_json_follows_the_documented_schema(clean: AcceptanceResult) -> None:
    schema = json.loads((ROOT / "docs" / "acceptance-report.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    report = json.loads(Path(clean.files["json"]).read_text())
    errors = sorted(Draft202012Validator(schema).iter_errors(report), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]


def test_the_html_report_renders_in_headless_chromium_with_verdict_checklist_and_plots(
    clean: AcceptanceResult,
) -> None:
    page = Path(clean.files["html"])
    text = page.read_text()
    assert "<script" not in text and "<link" not in text and 'src="http' not in text  # nothing to load
    dom, img = render(page, "1200,900")
    assert 'id="verdict"' in dom and "Verdict: <b>go</b>" in dom
    assert 'id="checklist"' in dom and dom.count("&#9745;") + dom.count("\u2611") >= 10
    assert dom.count("<polyline") >= 4 and "Prefix cache counter deltas" in dom and "<rect" in dom
    green = count_color(img, (0xD9, 0xF2, 0xD9), top_fraction=1 / 3)
    assert green > 300, f"the go verdict banner is not on screen ({green} pixels)"


def test_a_driver_before_r580_in_the_host_files_gives_rework(tmp_path: Path) -> None:
    res = run_accept(
        tmp_path,
        SimConfig(**FAST),
        Environment(driver="575.57.08"),
        interface_requests=7,
        scenario_examples=0,
    )  # type: ignore[arg-type]
    assert res.verdict.decision == "rework" and not res.verdict.accepted
    assert any(r.startswith("compat.driver:") and "R575" in r for r in res.verdict.reasons)
    # the other phases ran and passed: the environment alone is the reason
    assert {p.name: p.status for p in res.phases}["capacity"] == "pass"
    item = next(i for i in res.report["checklist"] if i["item"].startswith("Host driver"))
    assert item["state"] == "open"


def test_a_cuda_12_container_gives_rework(tmp_path: Path) -> None:
    res = run_accept(
        tmp_path, SimConfig(**FAST), Environment(cuda_runtime="12.9", torch="2.8.0+cu129"), phases=("compat",)
    )  # type: ignore[arg-type]
    assert res.verdict.decision == "rework" and res.verdict.partial
    assert checks(res)["compat.cuda-runtime"].status == "fail"


def test_a_small_kv_budget_gives_scale_up(tmp_path: Path) -> None:
    res = run_accept(
        tmp_path, SimConfig(**FAST, num_gpu_blocks=400), interface_requests=7, scenario_examples=0
    )  # type: ignore[arg-type]
    assert res.verdict.decision == "scale-up", res.verdict.reasons
    ramp = next(p for p in res.phases if p.name == "capacity").data["ramp"]
    # The preemption counter is the evidence: it only ever grows, so no step can miss it. KV usage is a
    # gauge sampled every sample_interval_s and the engine frees a preempted request's blocks at once: what
    # a sample shows depends on when the machine let the sampler run (0.77 at the peak on a loaded CI
    # machine, 0.0 in every sample of another), so the test asks only that the gauge was read each step.
    assert any((r["preemptions"] or 0) > 0 for r in ramp)
    assert all(r["kv_max"] is not None for r in ramp)
    assert any("preemption" in why for why in res.verdict.reasons), res.verdict.reasons
    assert all(not c.blocking for c in checks(res).values() if c.id.startswith(("compat.", "interface.")))


def test_a_low_rate_parser_fault_fixed_by_retry_gives_limited_and_only_with_its_conditions(
    tmp_path: Path,
) -> None:
    cfg = SimConfig(**FAST, faults=parse_faults("parser.markup_in_content=0.08", seed=5))  # type: ignore[arg-type]
    limits = Limits(
        "10% of tenant traffic, at most 4 concurrent",
        "oncall-llm@team",
        "the alert rules in alerts.yml",
        max_retry_rate=0.25,
    )
    res = run_accept(tmp_path, cfg, limits=limits, interface_requests=21)
    v = res.verdict
    assert (v.decision, v.granted, v.accepted) == ("limited", True, True), v.reasons
    iface = next(p for p in res.phases if p.name == "interface")
    assert iface.data["outcomes"].get("recovered", 0) >= 1 and not iface.data["outcomes"].get("failed")
    assert iface.data["errors_by_fault"] == {"parser": iface.data["errors_by_fault"]["parser"]}
    assert v.limits["owner"] == "oncall-llm@team"
    # the same evidence without scope, owner and rollback: limited is not granted
    bare = decide(res.phases, list(ALL_PHASES), Limits(max_retry_rate=0.25), {})
    assert (bare.decision, bare.granted, bare.accepted) == ("limited", False, False)
    assert (
        bare.missing_conditions == ["--limit-scope", "--on-call", "--rollback"]
        and "NOT GRANTED" in bare.label
    )


def test_the_cache_phase_fails_with_prefix_caching_off_and_passes_with_it_on(
    tmp_path: Path, clean: AcceptanceResult
) -> None:
    res = run_accept(tmp_path, SimConfig(**FAST, enable_prefix_caching=False), phases=("cache",))  # type: ignore[arg-type]
    cache = res.phases[0]
    assert cache.status == "fail" and checks(res)["cache.enabled"].status == "fail"
    assert "--enable-prefix-caching" in checks(res)["cache.enabled"].detail
    on = next(p for p in clean.phases if p.name == "cache")
    assert on.status == "pass", [(c.id, c.status, c.detail) for c in on.checks]
    probes = on.data["probes"]
    assert probes["cold"]["hits"] <= 16 and probes["warm_a"]["hits"] > 0.9 * probes["warm_a"]["queries"]
    assert (
        probes["control"]["hits"] <= 16
        and probes["warm_b"]["hits"] > 0.9 * on.data["shared_prefix_tokens_warm_b"]
    )
    assert probes["warm_a"]["computed_sum"] < probes["cold"]["computed_sum"]


def test_the_hybrid_cache_explains_low_warm_b_hits(tmp_path: Path) -> None:
    res = run_accept(tmp_path, SimConfig(**FAST, hybrid_cache=True), phases=("cache",))  # type: ignore[arg-type]
    c = checks(res)
    assert c["cache.warm-a"].status == "pass" and c["cache.warm-b"].status == "warn"
    assert (
        "prompt ends" in c["cache.warm-b"].detail
        and "--prefix-cache-retention-interval" in c["cache.warm-b"].detail
    )


def test_counters_that_do_not_move_mean_the_wrong_instance_was_scraped(tmp_path: Path) -> None:
    with serve(create_app(SimConfig(**FAST))) as other:  # type: ignore[arg-type]
        res = run_accept(tmp_path, SimConfig(**FAST), phases=("cache",), metrics_from=other)  # type: ignore[arg-type]
    c = checks(res)["cache.instance"]
    assert c.status == "fail" and "not of the serving instance" in c.detail


def test_oom_is_scale_up_with_its_evidence_and_whether_the_engine_recovered(tmp_path: Path) -> None:
    cfg = SimConfig(**FAST, oom_at_tokens=6000, oom_recover_s=20)  # type: ignore[arg-type]
    # the engine serves again 0.4 s after the OOM; the wait ends then, and bounds a loaded machine
    res = run_accept(tmp_path, cfg, phases=("capacity",), plan=small_plan(recover_wait_s=60))
    assert res.verdict.decision == "scale-up"
    oom = next(p for p in res.phases if p.name == "capacity").data["oom"]
    assert oom["recovered"] is True and oom["concurrency"] >= 2 and oom["request_prompt_tokens_max"] > 1000
    assert any("out of memory" in e for e in oom["errors"])


def test_open_loop_steps_report_their_schedule(tmp_path: Path) -> None:
    plan = CapacityPlan(
        ramp=[1], open_loop_rates=[20.0, 80.0], open_loop_requests=8, long_input_turns=[12], soak_requests=4
    )
    res = run_accept(tmp_path, SimConfig(**FAST), phases=("capacity",), plan=plan)  # type: ignore[arg-type]
    ramp = res.phases[0].data["ramp"]
    assert [r["rate_rps"] for r in ramp] == [20.0, 80.0]
    for r in ramp:
        assert r["requests"] == 8 and r["interval_s"] == pytest.approx(1 / r["rate_rps"])
        assert r["fell_behind"] == (r["late_sends"] > 0) and r["peak_in_flight"] >= 1


def test_the_cli_gives_exit_codes_and_clear_errors(tmp_path: Path) -> None:
    cfg = SimConfig(**FAST)  # type: ignore[arg-type]
    paths = write_environment(tmp_path / "ev", cfg, Environment(driver="570.86.15"))
    with serve(create_app(cfg)) as url:
        args = accept_argv(url, None, "--engine-url", url, "--official-image")
        base = [sys.executable, "-m", "wirecheck", *args]
        proc = subprocess.run(
            [
                *base,
                "--out",
                str(tmp_path / "out"),
                "--phases",
                "compat",
                "--host-info",
                str(paths["host_xml"]),
                "--container-info",
                str(paths["container"]),
                "--startup-log",
                str(paths["startup_log"]),
                "--quiet",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 1, proc.stderr
        assert "verdict: rework (partial" in proc.stdout and "compat.driver" in proc.stdout
        assert json.loads((tmp_path / "out" / "report.json").read_text())["verdict"]["decision"] == "rework"
        # the usage errors and the probe run in one process (tests/support/cli_batch.py: ~2-3 s of imports per
        # start); the run above is the installed entry point's exit code
        logs = tmp_path / "logs"
        logs.mkdir()
        out = tmp_path / "probe.json"
        rcs = wirecheck_batch(
            logs,
            {
                "missing": [
                    *args,
                    "--out",
                    str(tmp_path / "o2"),
                    "--host-info",
                    str(tmp_path / "nope.xml"),
                ],
                "bad": [*args, "--out", str(tmp_path / "o3"), "--phases", "compat,speed"],
                "dead": accept_argv(DEAD, tmp_path / "o4"),
                "probe": ["probe", "--image", "vllm/vllm-openai:kimi-k3", "--out", str(out)],
                # for a container without wirecheck: the probe as a stdlib-only script, run by a bare python3
                "script": ["probe", "--script"],
            },
            timeout=180,
        )
    said = {name: (logs / f"{name}.stderr").read_text() for name in rcs}
    assert rcs["missing"] == 2 and "nope.xml: no such file" in said["missing"], said
    assert rcs["bad"] == 2 and "speed" in said["bad"], said
    assert rcs["dead"] == 2 and "does not answer" in said["dead"], said
    assert rcs["probe"] == 0 and json.loads(out.read_text())["image"] == "vllm/vllm-openai:kimi-k3"
    assert rcs["script"] == 0, said
    bare = subprocess.run(
        [sys.executable, "-I", "-", "--image", "img:1"],
        input=(logs / "script.stdout").read_text(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(bare.stdout)["image"] == "img:1"


def test_one_running_sequence_makes_requests_queue_with_room_in_the_kv_cache(tmp_path: Path) -> None:
    """What the queueing verdict is judged from, measured: with one running sequence, requests wait
    while the KV cache has room and nothing is preempted. The verdict on such a step (limited, with a
    suggested rate limit) is test_verdicts.py's, on recorded times.

    The waiting gauge is sampled, so the queue must outlast the samples' spacing by far: at the
    fast time scale the widest step lasted about 0.13 s and the 50 ms sampler took one reading inside
    it, which on a busy machine could fall where the queue had drained (every step then read 0).
    Simulated requests 2.5 times as slow and a reading every 10 ms put dozens of readings in it."""
    cfg = SimConfig(**{**FAST, "time_scale": 0.05}, max_num_seqs=1)  # type: ignore[arg-type]
    plan = small_plan(sample_interval_s=0.01, soak_requests=4)
    res = run_accept(tmp_path, cfg, phases=("capacity",), plan=plan)
    ramp = res.phases[0].data["ramp"]
    queued = [r for r in ramp if (r["waiting_max"] or 0) > 0]
    assert queued, [(r["label"], r["waiting_max"]) for r in ramp]
    assert all((r["kv_max"] or 0) < 0.95 and not r["preemptions"] for r in queued)


def test_a_self_built_image_is_compared_with_the_official_images_results(
    tmp_path: Path, clean: AcceptanceResult
) -> None:
    record = tmp_path / "build.json"
    record.write_text(
        json.dumps(
            {
                "build_commit": "b6bbf29dd",
                "dependency_sources": ["pypi"],
                "dockerfile": "Dockerfile",
                "lock_files": ["uv.lock"],
                "patches": ["0001-k3-parser.patch"],
                "rollback_image": "vllm/vllm-openai:kimi-k3",
                "official_results": clean.files["json"],
            }
        )
    )
    res = run_accept(
        tmp_path,
        SimConfig(**FAST),
        Environment(image="registry.local/k3:812"),
        phases=("compat",),
        official_image=False,
        self_built=str(record),
    )  # type: ignore[arg-type]
    diff = res.report["self_built_vs_official"]
    assert diff["official_verdict"] == "go"
    changed = {d["check"]: d for d in diff["checks"]}
    assert changed["compat.self-built"] == {
        "check": "compat.self-built",
        "official": None,
        "self_built": "pass",
    }
    assert changed["compat.image"]["official"] == "pass" and changed["compat.image"]["self_built"] is None
    assert res.report["phases"][0]["data"]["image_column"] == "self-built"


def test_progress_rewrites_one_line_on_a_terminal_and_prints_only_milestones_elsewhere() -> None:
    import io

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty, pipe = Tty(), io.StringIO()
    for stream in (tty, pipe):
        p = Progress(stream)
        p("phase capacity ...")
        p("ramp c=4: 3/8")
        p("ramp c=4: 8/8")
        p("ramp c=4: TTFT p95 0.1, e2e p95 0.3, errors 0, KV max 0.2, waiting max 0")
    assert "\r\x1b[K" in tty.getvalue() and "ramp c=4: 3/8" in tty.getvalue()
    assert "3/8" not in pipe.getvalue() and pipe.getvalue().count("\n") == 2


def test_the_cli_puts_taps_around_a_gateway_and_blames_it(tmp_path: Path, pg_url: str) -> None:
    from wirecheck.record import free_port
    from wirecheck.sim import GatewayConfig, create_gateway, parse_gateway_faults

    engine_port = free_port()
    cfg = SimConfig(**FAST)  # type: ignore[arg-type]
    with serve(create_app(cfg)) as sim_url:
        gw = create_gateway(
            GatewayConfig(
                upstream=f"http://127.0.0.1:{engine_port}",
                faults=parse_gateway_faults("finish_reason_changed"),
            )
        )
        with serve(gw) as gw_url:
            proc = run_wirecheck(
                "accept",
                "--target",
                gw_url,
                "--engine-url",
                sim_url,
                "--via-proxy",
                "--engine-listen",
                f"127.0.0.1:{engine_port}",
                "--reviewer",
                "ci",
                "--phases",
                "interface",
                "--interface-requests",
                "7",
                "--scenario-examples",
                "0",
                "--store",
                pg_url,
                "--out",
                str(tmp_path / "out"),
                "--quiet",
                timeout=180,
            )
    assert proc.returncode == 1, proc.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    iface = report["phases"][0]["data"]
    assert iface["attributed_from"].startswith("both taps") and set(iface["errors_by_fault"]) == {"gateway"}
    assert "attribution (both taps" in proc.stdout and "gateway" in proc.stdout
    # the taps recorded into the shared PostgreSQL store: both sides of every interface request
    from wirecheck.record import open_store

    store = open_store(pg_url)
    try:
        taps = {e.tap for e in store.exchanges()}
        assert taps == {"caller", "engine"} and store.count() >= 14
    finally:
        store.close()
    assert report["evidence"]["topology"]["store"].startswith("postgresql://wirecheck@")


def test_an_unreachable_metrics_url_is_missing_evidence_not_a_silent_pass(tmp_path: Path) -> None:
    res = run_accept(
        tmp_path,
        SimConfig(**FAST),
        phases=("capacity",),
        metrics_from="http://127.0.0.1:9",
        plan=CapacityPlan(ramp=[1], long_input_turns=[12], soak_requests=2),
    )  # type: ignore[arg-type]
    c = checks(res)["capacity.metrics"]
    assert c.status == "missing" and "127.0.0.1:9/metrics" in c.detail
    assert res.verdict.decision == "rework"
