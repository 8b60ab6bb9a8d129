"""Compat evidence: the readers (nvidia-smi XML and text, probe JSON, startup log) and the recipe rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wirecheck.acceptance import parse_fingerprint, probe, read_container, read_host, read_startup_log
from wirecheck.acceptance.evidence import parse_version, version_at_least
from wirecheck.acceptance.phases import CompatInputs, run_compat
from wirecheck.contracts import InputError
from wirecheck.sim import Environment, SimConfig, write_environment

K3 = SimConfig(family="kimi_k3")


def _env(tmp: Path, cfg: SimConfig = K3, **env: object) -> dict[str, Path]:
    return write_environment(tmp, cfg, Environment(**env))  # type: ignore[arg-type]


def _compat(paths: dict[str, Path], **kw: object) -> dict[str, str]:
    inputs = CompatInputs(
        host_files=[str(paths["host_xml"])],
        container_file=str(paths["container"]),
        startup_log=str(paths["startup_log"]),
        official_image=True,
        family="kimi_k3",
        version="0.33.0",
        fingerprint="vllm-0.33.0-tp8-1a2b3c4d",
    )
    for k, v in kw.items():
        setattr(inputs, k, v)
    ph = run_compat(inputs)
    return (
        {c.id: c.status for c in ph.checks}
        | {"_phase": ph.status}
        | {f"{c.id}/detail": c.detail for c in ph.checks}
    )


def test_nvidia_smi_xml_and_plain_text_give_the_same_driver_and_gpus(tmp_path: Path) -> None:
    paths = _env(tmp_path, gpus=4, driver="580.82.07")
    xml, text = read_host(paths["host_xml"]), read_host(paths["host_text"])
    assert (xml.kind, text.kind) == ("nvidia-smi-xml", "nvidia-smi")
    assert xml.driver == text.driver == "580.82.07"
    assert xml.driver_cuda == text.driver_cuda == "13.0"
    assert len(xml.gpus) == len(text.gpus) == 4
    assert xml.gpus[0].architecture == "Hopper" and xml.gpus[0].name == "NVIDIA H200"
    assert xml.memory_used_mib == text.memory_used_mib == 4 * 131072


def test_unreadable_evidence_is_a_clear_input_error(tmp_path: Path) -> None:
    bad = tmp_path / "smi.txt"
    bad.write_text("GPU 0: something else entirely\n")
    with pytest.raises(InputError, match="nvidia-smi"):
        read_host(bad)
    (tmp_path / "x.xml").write_text("<nvidia_smi_log><driver_version>58")
    with pytest.raises(InputError, match="XML does not parse"):
        read_host(tmp_path / "x.xml")
    with pytest.raises(InputError, match="no such file"):
        read_host(tmp_path / "missing.xml")
    (tmp_path / "c.json").write_text('{"image": "x"}')
    with pytest.raises(InputError, match="wirecheck probe"):
        read_container(tmp_path / "c.json")
    (tmp_path / "log").write_text("hello\nworld\n")
    with pytest.raises(InputError, match="no vLLM log lines"):
        read_startup_log(tmp_path / "log")


def test_the_startup_log_gives_flags_engine_config_kv_lines_timings_and_every_warning(tmp_path: Path) -> None:
    cfg = SimConfig(family="kimi_k3", num_gpu_blocks=4096, tensor_parallel_size=4)
    paths = _env(
        tmp_path, cfg, warnings=["Falling back to the Triton MoE kernel", "CUDA graph capture disabled"]
    )
    log = read_startup_log(paths["startup_log"])
    assert log.version == "0.33.0" and log.ready
    assert log.flag("tool_call_parser") == "kimi_k3" and log.flag("enable_prefix_caching") is True
    assert log.flag("tensor_parallel_size") == 4  # non-default args win over the config line
    assert log.engine_config["pipeline_parallel_size"] == "1"
    assert log.kv_cache_tokens == 4096 * 16 and log.max_concurrency == pytest.approx(0.5)
    assert log.weight_load_s == pytest.approx(95.3) and log.startup_s is not None and log.startup_s > 100
    assert len(log.warnings) == 2 and any("Triton" in w for w in log.warnings)
    assert any("nccl==2.27.7" in line for line in log.nccl)


def test_fingerprint_and_version_strings() -> None:
    assert parse_fingerprint("vllm-0.33.0-tp8-ep-1a2b3c4d") == {
        "version": "0.33.0",
        "hash": "1a2b3c4d",
        "ep": True,
        "tp": 8,
        "pp": 1,
        "dp": 1,
    }
    assert parse_fingerprint("vllm-0.33.0-tp4-pp2-dp2-deadbeef")["dp"] == 2  # type: ignore[index]
    assert parse_fingerprint("fp_44709d6fcb") is None
    assert parse_version("0.1.dev19262+gb6bbf29dd.d20260727") is None
    assert version_at_least("0.27.1", "0.27.1") and version_at_least("0.33.0", "0.27.1")
    assert version_at_least("0.27.0", "0.27.1") is False and version_at_least("0.9.2", "0.27.1") is False


def test_the_recipe_environment_passes(tmp_path: Path) -> None:
    got = _compat(_env(tmp_path))
    assert got["_phase"] == "pass", got
    for check in (
        "compat.driver",
        "compat.cuda-runtime",
        "compat.image",
        "compat.vllm-version",
        "compat.flags",
        "compat.fingerprint",
    ):
        assert got[check] == "pass", (check, got)


@pytest.mark.parametrize(
    ("driver", "why"), [("575.57.08", "R575"), ("580.65.05", "older than 580.65.06"), ("560.35.03", "R560")]
)
def test_a_host_driver_before_cuda_13_fails(tmp_path: Path, driver: str, why: str) -> None:
    got = _compat(_env(tmp_path, driver=driver))
    assert got["compat.driver"] == "fail" and why in got["compat.driver/detail"]


def test_the_container_runtime_is_judged_not_nvidia_smis_cuda_version(tmp_path: Path) -> None:
    got = _compat(_env(tmp_path, cuda_runtime="12.9"))
    assert got["compat.cuda-runtime"] == "fail" and "12.9" in got["compat.cuda-runtime/detail"]
    # no probe output: nvidia-smi says CUDA 13.0, and that is not accepted as the container's runtime
    got = _compat(_env(tmp_path / "b"), container_file=None)
    assert got["compat.cuda-runtime"] == "missing"
    assert "driver's maximum, not the container's runtime" in got["compat.cuda-runtime/detail"]


def test_versions_flags_and_images_against_the_recipe(tmp_path: Path) -> None:
    paths = _env(tmp_path)
    assert _compat(paths, version="0.26.3")["compat.vllm-version"] == "fail"
    dev = _compat(paths, version="0.1.dev19262+gb6bbf29dd.d20260727")
    assert dev["compat.vllm-version"] == "pass"  # the official kimi-k3 image reports a dev string
    assert dev["compat.same-instance"] == "fail"  # ... but the probe saw 0.33.0: two different instances
    k2 = _compat(_env(tmp_path / "k2", SimConfig(family="kimi_k2")))
    assert k2["compat.flags"] == "fail" and "tool_call_parser='kimi_k2'" in k2["compat.flags/detail"]
    off = _compat(_env(tmp_path / "off", SimConfig(family="kimi_k3", enable_prefix_caching=False)))
    assert off["compat.flags"] == "fail" and "enable_prefix_caching" in off["compat.flags/detail"]
    cu129 = _compat(_env(tmp_path / "img", image="vllm/vllm-openai:v0.11.0-cu129"))
    assert cu129["compat.image"] == "fail"
    assert _compat(paths, fingerprint="vllm-0.33.0-tp4-1a2b3c4d")["compat.fingerprint"] == "fail"


def test_a_self_built_image_gets_its_own_column_and_must_be_documented(tmp_path: Path) -> None:
    paths = _env(tmp_path, image="registry.local/vllm-k3:build-812")
    record = tmp_path / "build.json"
    record.write_text(json.dumps({"build_commit": "b6bbf29dd", "dockerfile": "docker/Dockerfile.k3"}))
    got = _compat(paths, official_image=False, self_built=str(record))
    assert got["compat.self-built"] == "fail"
    assert (
        "dependency_sources" in got["compat.self-built/detail"]
        and "rollback_image" in got["compat.self-built/detail"]
    )
    record.write_text(
        json.dumps(
            {
                "build_commit": "b6bbf29dd",
                "dependency_sources": ["pypi", "download.pytorch.org/whl/cu130"],
                "dockerfile": "docker/Dockerfile.k3",
                "lock_files": ["requirements/cuda.lock"],
                "patches": ["none"],
                "rollback_image": "vllm/vllm-openai:kimi-k3",
            }
        )
    )
    ph = run_compat(
        CompatInputs(container_file=str(paths["container"]), self_built=str(record), family="kimi_k3")
    )
    assert ph.data["image_column"] == "self-built"
    assert {c.id: c.status for c in ph.checks}["compat.self-built"] == "pass"
    # without either flag, an unknown image cannot pass
    assert _compat(paths, official_image=False)["compat.image"] == "missing"


def test_probe_reports_what_it_finds_without_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("wirecheck.acceptance.evidence._probe._cuda_toolkit", lambda: None)
    monkeypatch.setenv("CUDA_VERSION", "13.0.1")
    monkeypatch.setenv("VLLM_USE_RUST_FRONTEND", "1")
    facts = probe("vllm/vllm-openai:kimi-k3")
    assert facts["wirecheck_probe"] == 1 and facts["image"] == "vllm/vllm-openai:kimi-k3"
    assert facts["cuda_runtime"] == "13.0.1" and facts["cuda_runtime_source"] == "env CUDA_VERSION"
    assert facts["env"]["VLLM_USE_RUST_FRONTEND"] == "1"
    json.dumps(facts)  # it is printed as JSON
