"""The compat phase: is this the environment the Kimi K3 recipe asks for, shown by evidence?

Rules (vllm-wire.md, the K3 recipe): CUDA 13 runtime *in the container* (nvidia-smi's "CUDA Version"
is the driver's maximum and is not accepted as the container's); host driver R580 or later and at least
580.65.06 (CUDA 13.0 GA); vLLM 0.27.1 or later; the recipe's flags (the family's tool and reasoning
parsers from the family table, auto tool choice, prefix caching). A self-built image is judged in its
own column: it must record its build commit, dependency sources, Dockerfile and lock files, patches
and a rollback image.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wirecheck.contracts import FAMILIES, InputError, detect_family

from .._model import Check, CompatResult, PhaseResult
from ..evidence import (
    ContainerFacts,
    HostFacts,
    StartupLog,
    judge,
    parse_fingerprint,
    parse_version,
    read_container,
    read_host,
    read_startup_log,
    read_topo,
    topology_checks,
    version_at_least,
)

__all__ = ["OFFICIAL_IMAGE", "RECIPE_FAMILY", "SELF_BUILT_FIELDS", "CompatInputs", "run_compat"]

MIN_DRIVER = "580.65.06"
MIN_VLLM = "0.27.1"
OFFICIAL_IMAGE = "vllm/vllm-openai:kimi-k3"
#: the family the recipe (and the demo's simulator) is written for: the family table's row for the
#: model the official image's tag names, so that the family's name lives in the table
RECIPE_FAMILY = detect_family(OFFICIAL_IMAGE.rpartition(":")[2])
#: what a self-built image's record (--self-built FILE, JSON) must hold
SELF_BUILT_FIELDS = (
    "build_commit",
    "dependency_sources",
    "dockerfile",
    "lock_files",
    "patches",
    "rollback_image",
)


@dataclass(slots=True)
class CompatInputs:
    host_files: list[str] = field(default_factory=list)
    #: the host files already read (the run reads them once, before any load); else read here
    hosts: list[HostFacts] | None = None
    container_file: str | None = None
    startup_log: str | None = None
    official_image: bool = False
    self_built: str | None = None
    family: str = RECIPE_FAMILY
    #: every node's startup log after the first (multi-node), and `nvidia-smi topo -m` files
    more_startup_logs: list[str] = field(default_factory=list)
    topology_files: list[str] = field(default_factory=list)
    #: --ack-warning: regexes of startup-log warnings the operator has explained
    ack_warnings: list[str] = field(default_factory=list)
    #: what the engine said: GET /version, and system_fingerprint from an answer
    version: str | None = None
    fingerprint: str | None = None


def _driver_tuple(v: str) -> tuple[int, ...] | None:
    try:
        return tuple(int(x) for x in v.split("."))
    except ValueError:
        return None


def _host_checks(ph: PhaseResult, hosts: list[HostFacts]) -> None:
    if not hosts:
        ph.add(
            Check(
                "compat.driver",
                "Host driver R580+ and >= 580.65.06",
                "missing",
                "no host info: pass --host-info with `nvidia-smi -q -x` (or `nvidia-smi`) output from the host",
            )
        )
        return
    h = hosts[0]
    drivers = sorted({x.driver for x in hosts if x.driver})
    ev: dict[str, Any] = {"driver": h.driver, "source": h.source, "kind": h.kind, "gpus": len(h.gpus)}
    have = _driver_tuple(h.driver or "")
    need = _driver_tuple(MIN_DRIVER)
    if have is None or need is None:
        ph.add(
            Check(
                "compat.driver",
                "Host driver R580+ and >= 580.65.06",
                "missing",
                f"{h.source}: no driver version",
                ev,
            )
        )
    elif have >= need:
        ph.add(
            Check(
                "compat.driver",
                "Host driver R580+ and >= 580.65.06",
                "pass",
                f"driver {h.driver} (R{have[0]})",
                ev,
            )
        )
    else:
        why = (
            f"driver {h.driver} is branch R{have[0]}: CUDA 13 needs R580 or later"
            if have[0] < 580
            else f"driver {h.driver} is older than {MIN_DRIVER}, the first driver for CUDA 13.0 GA"
        )
        ph.add(Check("compat.driver", "Host driver R580+ and >= 580.65.06", "fail", why, ev))
    if len(drivers) > 1:
        ph.add(
            Check(
                "compat.driver-uniform",
                "One driver version on every host",
                "fail",
                f"drivers differ: {', '.join(drivers)}",
                {"drivers": drivers},
            )
        )
    gpus = [g for x in hosts[:1] for g in x.gpus]
    archs = sorted({g.architecture for g in gpus if g.architecture})
    names = sorted({g.name for g in gpus})
    ph.add(
        Check(
            "compat.gpus",
            "GPUs",
            "info",
            f"{len(gpus)} x {', '.join(names) or '?'}" + (f" ({', '.join(archs)})" if archs else ""),
            {"count": len(gpus), "names": names, "architectures": archs},
        )
    )


def _container_checks(ph: PhaseResult, c: ContainerFacts | None, hosts: list[HostFacts]) -> None:
    title = "CUDA 13 runtime in the container"
    if c is None or not c.cuda_runtime:
        smi = next((h.driver_cuda for h in hosts if h.driver_cuda), None)
        detail = (
            "no container CUDA runtime: run `wirecheck probe` inside the container and pass --container-info"
        )
        if smi:
            detail += (
                f"; nvidia-smi's CUDA Version {smi} is the driver's maximum, not the container's runtime"
            )
        ph.add(Check("compat.cuda-runtime", title, "missing", detail, {"nvidia_smi_cuda": smi}))
    else:
        major = c.cuda_runtime.split(".")[0]
        ev = {"cuda_runtime": c.cuda_runtime, "source": c.cuda_runtime_source, "file": c.source}
        if major == "13":
            ph.add(
                Check(
                    "compat.cuda-runtime",
                    title,
                    "pass",
                    f"CUDA {c.cuda_runtime} ({c.cuda_runtime_source or 'probe'})",
                    ev,
                )
            )
        else:
            ph.add(
                Check(
                    "compat.cuda-runtime",
                    title,
                    "fail",
                    f"container CUDA runtime {c.cuda_runtime}: the K3 image is a CUDA 13 (cu130) build only",
                    ev,
                )
            )
    if c is not None:
        ph.add(
            Check(
                "compat.container",
                "Container facts",
                "info",
                f"image {c.image or '?'}, torch {c.torch or '?'}, vLLM {c.vllm or '?'}, NCCL {c.nccl or '?'}",
                {
                    "image": c.image,
                    "torch": c.torch,
                    "vllm": c.vllm,
                    "nccl": c.nccl,
                    "python": c.python,
                    "env": c.env,
                },
            )
        )


def _version_checks(
    ph: PhaseResult, inp: CompatInputs, c: ContainerFacts | None, log: StartupLog | None, official: bool
) -> None:
    title = f"vLLM >= {MIN_VLLM}"
    version = inp.version or (c.vllm if c else None) or (log.version if log else None)
    if version is None:
        ph.add(
            Check(
                "compat.vllm-version",
                title,
                "missing",
                "no version: the engine's /version did not answer and no probe or log gave one",
            )
        )
        return
    ok = version_at_least(version, MIN_VLLM)
    ev = {
        "version": version,
        "from_endpoint": inp.version,
        "container": c.vllm if c else None,
        "log": log.version if log else None,
    }
    if ok is None:
        if official:
            ph.add(
                Check(
                    "compat.vllm-version",
                    title,
                    "pass",
                    f"{version}: a dev build string, as the official {OFFICIAL_IMAGE} image reports",
                    ev,
                )
            )
        else:
            ph.add(
                Check(
                    "compat.vllm-version",
                    title,
                    "warn",
                    f"{version}: a dev build string, not comparable; record the base commit in the self-built record",
                    ev,
                )
            )
    elif ok:
        ph.add(Check("compat.vllm-version", title, "pass", f"vLLM {version}", ev))
    else:
        ph.add(
            Check(
                "compat.vllm-version",
                title,
                "fail",
                f"vLLM {version} is older than {MIN_VLLM}, the first release with Kimi K3 support",
                ev,
            )
        )
    seen = {v for v in (inp.version, c.vllm if c else None) if v}
    if len(seen) > 1:
        ph.add(
            Check(
                "compat.same-instance",
                "The probed container is the serving engine",
                "fail",
                f"versions differ: endpoint {inp.version}, container {c.vllm if c else None}",
                ev,
            )
        )


def _fingerprint_checks(ph: PhaseResult, inp: CompatInputs, log: StartupLog | None) -> None:
    if not inp.fingerprint:
        ph.add(
            Check(
                "compat.fingerprint",
                "system_fingerprint",
                "warn",
                "no system_fingerprint seen in any answer (a gateway may strip it)",
            )
        )
        return
    fp = parse_fingerprint(inp.fingerprint)
    if fp is None:
        ph.add(
            Check(
                "compat.fingerprint",
                "system_fingerprint",
                "warn",
                f"{inp.fingerprint!r} is not vLLM's vllm-<version>-tp<N>-<hash> form",
                {"fingerprint": inp.fingerprint},
            )
        )
        return
    detail = f"{inp.fingerprint}: vLLM {fp['version']}, tp{fp['tp']} pp{fp['pp']} dp{fp['dp']}" + (
        " ep" if fp["ep"] else ""
    )
    status = "pass"
    if inp.version and fp["version"] != inp.version:
        status, detail = "fail", detail + f"; /version says {inp.version}: two different instances"
    if log is not None:
        tp = log.flag("tensor_parallel_size")
        if tp is not None and str(tp) != str(fp["tp"]):
            status, detail = "fail", detail + f"; the startup log says tensor_parallel_size={tp}"
    ph.add(
        Check(
            "compat.fingerprint",
            "system_fingerprint agrees with /version and the log",
            status,
            detail,
            {"fingerprint": inp.fingerprint, **fp},
        )
    )


def _log_checks(ph: PhaseResult, log: StartupLog | None, family: str, acks: list[str]) -> None:
    if log is None:
        ph.add(
            Check(
                "compat.flags",
                f"Recipe flags ({family} parsers, auto tool choice, prefix caching)",
                "missing",
                "no startup log: pass --startup-log with the server's log",
            )
        )
        return
    row = FAMILIES.get(family)
    # the family table's parser flags; an unknown family (generic) is held to none of them
    want: dict[str, object] = dict(row.recipe_flags) if row is not None else {}
    want["enable_prefix_caching"] = True
    got = {k: log.flag(k) for k in want}
    wrong = [f"{k}={got[k]!r} (want {v!r})" for k, v in want.items() if got[k] != v]
    status = "fail" if wrong else "pass"
    detail = "; ".join(wrong) if wrong else ", ".join(f"{k}={v}" for k, v in got.items())
    if row is None:
        parsers = {k: log.flag(k) for k in ("tool_call_parser", "reasoning_parser")}
        got |= parsers
        status = "fail" if wrong else "warn"
        detail = (
            "the model matches no family in the family table: its parser flags are not judged (pass "
            f"--family); seen {', '.join(f'{k}={v!r}' for k, v in parsers.items())}; {detail}"
        )
    ph.add(
        Check(
            "compat.flags",
            f"Recipe flags ({family} parsers, auto tool choice, prefix caching)",
            status,
            detail,
            {"flags": got, "source": log.source},
        )
    )
    ph.add(
        Check(
            "compat.engine",
            "Engine configuration and KV cache",
            "info" if log.kv_cache_tokens else "warn",
            f"vLLM {log.version}, tp={log.flag('tensor_parallel_size')} pp={log.flag('pipeline_parallel_size')} "
            f"dp={log.flag('data_parallel_size')}; KV cache {log.kv_cache_tokens or '?'} tokens"
            f" ({log.kv_cache_memory_gib or '?'} GiB), max concurrency {log.max_concurrency or '?'}x at {log.max_concurrency_len or '?'} tokens",
            {
                "kv_cache_tokens": log.kv_cache_tokens,
                "kv_cache_memory_gib": log.kv_cache_memory_gib,
                "max_concurrency": log.max_concurrency,
                "max_concurrency_len": log.max_concurrency_len,
                "nccl": log.nccl[:10],
                "cuda": log.cuda[:10],
                "dp": log.dp[:10],
            },
        )
    )
    _warning_checks(ph, log, acks)


def _warning_checks(ph: PhaseResult, log: StartupLog, acks: list[str]) -> None:
    """Known-dangerous lines block go by kind; every other one passes only when acknowledged."""
    for prefix, title, lines in (
        ("compat.log-warning", "Startup log warning or fallback", log.warnings),
        ("compat.log-error", "Startup log error", log.errors),
    ):
        for j in judge(lines, acks):
            # numbered across every node's log, so two logs never give two checks one id
            n = 1 + sum(1 for c in ph.checks if c.id.startswith(prefix + "."))
            ev: dict[str, Any] = {
                "line": j.line,
                "judged": j.verdict,
                "kind": j.kind,
                "ack": j.ack,
                "log": log.source,
            }
            if j.verdict == "danger":
                ph.add(
                    Check(
                        f"compat.log-danger.{len([c for c in ph.checks if c.id.startswith('compat.log-danger.')]) + 1}",
                        "Known-dangerous startup warning",
                        "fail",
                        f"{j.kind}: {j.why}: {j.line}",
                        ev,
                        leads_to=j.leads_to,
                    )
                )
            elif j.verdict == "acknowledged":
                ph.add(Check(f"{prefix}.{n}", title, "warn", f"acknowledged ({j.ack}): {j.line}", ev))
            else:
                ph.add(
                    Check(
                        f"{prefix}.{n}",
                        title,
                        "missing",
                        f"not acknowledged: explain it, then pass --ack-warning REGEX: {j.line}",
                        ev,
                        leads_to="rework",
                    )
                )


def _image_checks(ph: PhaseResult, inp: CompatInputs, c: ContainerFacts | None) -> dict[str, Any] | None:
    image = c.image if c else None
    if inp.self_built:
        try:
            record = json.loads(Path(inp.self_built).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError(f"self-built record {inp.self_built}: no such file") from None
        except ValueError as exc:
            raise InputError(f"self-built record {inp.self_built}: not JSON ({exc})") from None
        if not isinstance(record, dict):
            raise InputError(
                f"self-built record {inp.self_built}: expected a JSON object with {', '.join(SELF_BUILT_FIELDS)}"
            )
        absent = [k for k in SELF_BUILT_FIELDS if not record.get(k)]
        ph.add(
            Check(
                "compat.self-built",
                "Self-built image is documented (commit, sources, Dockerfile, locks, patches, rollback)",
                "fail" if absent else "pass",
                ("missing: " + ", ".join(absent))
                if absent
                else f"build {record['build_commit']}, rollback {record['rollback_image']}",
                {"record": record, "image": image},
            )
        )
        return record
    # one decision: the image is the official one, or why not (not said, not seen, another image)
    evidence: dict[str, Any] = {"image": image}
    if image is not None and image.split("@")[0] == OFFICIAL_IMAGE:
        status, detail = "pass", image
    elif not inp.official_image:
        status = "missing"
        detail = (
            f"image {image or 'unknown'}: say --official-image, or --self-built FILE with the build record"
        )
    elif image is None:
        status, evidence = "missing", {}
        detail = "--official-image given but no probe output names the image (wirecheck probe --image TAG)"
    else:
        status = "fail"
        detail = f"{image} is not {OFFICIAL_IMAGE} (the K3 image is a cu130 build; there is no cu129 tag)"
    ph.add(Check("compat.image", f"Official image {OFFICIAL_IMAGE}", status, detail, evidence))
    return None


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, int) or (isinstance(v, str) and v.isdigit()) else None


def _memory_flags(log: StartupLog) -> dict[str, Any]:
    """The flags an OOM's evidence names: context length, prefix caching, KV offload, parallelism."""
    offload = [
        f"{k}={log.flag(k)}"
        for k in ("kv_transfer_config", "kv_offloading_size", "kv_offloading_backend", "cpu_offload_gb")
        if log.flag(k) not in (None, 0, "0", "None")
    ]
    mml = log.flag("max_model_len") or log.flag("max_seq_len")
    return {
        "max_model_len": int(mml) if str(mml).isdigit() else mml,
        "enable_prefix_caching": log.flag("enable_prefix_caching"),
        "kv_offload": ", ".join(offload) or False,
        "prefix_cache_retention_interval": log.flag("prefix_cache_retention_interval"),
        "tensor_parallel_size": log.flag("tensor_parallel_size"),
        "pipeline_parallel_size": log.flag("pipeline_parallel_size"),
        "data_parallel_size": log.flag("data_parallel_size"),
    }


# What the report keeps of each piece of evidence (the compat section and evidence.json read these
# keys, in this order): attributes of the parsed facts, kept under their own names.
_HOST_KEYS = (
    "source",
    "kind",
    "timestamp",
    "driver",
    "driver_cuda",
    "gpus",
    "memory_used_mib",
    "memory_total_mib",
)
_CONTAINER_KEYS = ("image", "cuda_runtime", "torch", "vllm", "nccl", "image_digest")
_STARTUP_KEYS = (
    "version",
    "started",
    "startup_s",
    "weight_load_s",
    "model_load_s",
    "model_load_gib",
    "kv_cache_tokens",
    "max_concurrency",
    "warnings",
)


def _pick(facts: object, keys: tuple[str, ...], **instead: Any) -> dict[str, Any]:
    """``keys`` of ``facts`` by attribute, in order; ``instead`` gives some of them another value."""
    return {k: instead[k] if k in instead else getattr(facts, k) for k in keys}


def run_compat(inp: CompatInputs) -> CompatResult:
    ph = CompatResult("compat")
    hosts = inp.hosts if inp.hosts is not None else [read_host(p) for p in inp.host_files]
    container = read_container(inp.container_file) if inp.container_file else None
    log = read_startup_log(inp.startup_log) if inp.startup_log else None
    record = _image_checks(ph, inp, container)
    official = record is None and any(c.id == "compat.image" and c.status == "pass" for c in ph.checks)
    _host_checks(ph, hosts)
    _container_checks(ph, container, hosts)
    _version_checks(ph, inp, container, log, official)
    _fingerprint_checks(ph, inp, log)
    _log_checks(ph, log, inp.family, inp.ack_warnings)
    more = [read_startup_log(p) for p in inp.more_startup_logs]
    for extra in more:
        _warning_checks(ph, extra, inp.ack_warnings)
    fp = parse_fingerprint(inp.fingerprint or "") or {}
    parallel = {
        k: _int(log.flag(flag) if log else None) or fp.get(k)
        for k, flag in (
            ("tp", "tensor_parallel_size"),
            ("pp", "pipeline_parallel_size"),
            ("dp", "data_parallel_size"),
        )
    }
    topos = [read_topo(p) for p in inp.topology_files]
    topo = topology_checks(ph, hosts, topos, [x for x in [log, *more] if x], parallel)
    ph.data = {
        "image_column": "self-built" if record is not None else "official",
        "self_built": record,
        "hosts": [_pick(h, _HOST_KEYS, gpus=len(h.gpus)) for h in hosts],
        "container": None if container is None else _pick(container, _CONTAINER_KEYS),
        "startup": None
        if log is None
        else {
            **_pick(log, _STARTUP_KEYS),
            "key_lines": (log.nccl[:3] + log.cuda[:3] + log.dp[:3]),
            "flags": _memory_flags(log),
        },
        "topology": topo,
        "version": inp.version,
        "fingerprint": inp.fingerprint,
        "parsed_version": list(parse_version(inp.version) or []) if inp.version else None,
    }
    ph.container = ph.data["container"] or {}
    ph.simulated = [
        src
        for src, sim in [
            *((h.source, h.simulated) for h in hosts),
            *([(container.source, container.simulated)] if container else []),
            *([(log.source, log.simulated)] if log else []),
            *((x.source, x.simulated) for x in more),
            *((t.source, t.simulated) for t in topos),
        ]
        if sim
    ]
    ph.startup = ph.data["startup"]
    ph.self_built = record
    ph.topology = topo
    return ph
