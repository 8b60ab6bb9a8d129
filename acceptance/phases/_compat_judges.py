"""The compat judges: the recipe's environment, held to the evidence (:class:`CompatFacts`).

Rules (vllm-wire.md, the K3 recipe): CUDA 13 runtime *in the container* (nvidia-smi's "CUDA Version"
is the driver's maximum and is not accepted as the container's); host driver R580 or later and at least
580.65.06 (CUDA 13.0 GA); vLLM 0.27.1 or later; the recipe's flags (the family's tool and reasoning
parsers from the family table, auto tool choice, prefix caching). A self-built image is judged in its
own column: it must record its build commit, dependency sources, Dockerfile and lock files, patches
and a rollback image.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from wirecheck.contracts import FAMILIES

from .._catalogue import LIMITED, REWORK, Ruling, failed, info, judge, missing, passed, warned
from ..evidence import version_at_least
from ._compat import MIN_DRIVER, MIN_VLLM, OFFICIAL_IMAGE, SELF_BUILT_FIELDS, CompatFacts

__all__: list[str] = []

_HOSTS, _TOPOLOGY, _CONTAINER, _LOGS = (
    "Evidence: hosts",
    "Evidence: topology",
    "Evidence: container",
    "Key logs",
)


def _driver_tuple(v: str) -> tuple[int, ...] | None:
    try:
        return tuple(int(x) for x in v.split("."))
    except ValueError:
        return None


@judge("compat.driver", leads_to=(REWORK,), section=_HOSTS, needs_gpu_host=True)
def _driver(f: CompatFacts) -> Iterator[Ruling]:
    """Host driver R580+ and >= 580.65.06

    CUDA 13 needs the R580 driver branch, and 580.65.06 is the first driver of CUDA 13.0 GA: an older
    driver cannot run the cu130 image at all, or runs it through forward compatibility."""
    if not f.hosts:
        yield missing(
            "no host info: pass --host-info with `nvidia-smi -q -x` (or `nvidia-smi`) output from the host"
        )
        return
    h = f.hosts[0]
    ev: dict[str, Any] = {"driver": h.driver, "source": h.source, "kind": h.kind, "gpus": len(h.gpus)}
    have, need = _driver_tuple(h.driver or ""), _driver_tuple(MIN_DRIVER)
    if have is None or need is None:
        yield missing(f"{h.source}: no driver version", ev)
    elif have >= need:
        yield passed(f"driver {h.driver} (R{have[0]})", ev)
    elif have[0] < 580:
        yield failed(f"driver {h.driver} is branch R{have[0]}: CUDA 13 needs R580 or later", ev)
    else:
        yield failed(f"driver {h.driver} is older than {MIN_DRIVER}, the first driver for CUDA 13.0 GA", ev)


@judge("compat.driver-uniform", leads_to=(REWORK,), section=_HOSTS, needs_gpu_host=True)
def _driver_uniform(f: CompatFacts) -> Iterator[Ruling]:
    """One driver version on every host

    Ranks on hosts with different drivers fail in ways no single host shows; only a difference is
    listed."""
    drivers = sorted({x.driver for x in f.hosts if x.driver})
    if len(drivers) > 1:
        yield failed(f"drivers differ: {', '.join(drivers)}", {"drivers": drivers})


@judge("compat.gpus", leads_to=(REWORK,), section=_HOSTS, needs_gpu_host=True)
def _gpus(f: CompatFacts) -> Iterator[Ruling]:
    """GPU model and count recorded

    What the deployment runs on, as the first host file shows it (the topology check counts every
    node)."""
    if not f.hosts:
        return
    gpus = f.hosts[0].gpus
    archs = sorted({g.architecture for g in gpus if g.architecture})
    names = sorted({g.name for g in gpus})
    yield info(
        f"{len(gpus)} x {', '.join(names) or '?'}" + (f" ({', '.join(archs)})" if archs else ""),
        {"count": len(gpus), "names": names, "architectures": archs},
    )


@judge("compat.topology", leads_to=(REWORK,), section=_TOPOLOGY, needs_gpu_host=True)
def _topology(f: CompatFacts) -> Iterator[Ruling]:
    """TP x PP x DP matches the nodes' GPUs

    The parallelism the startup log (else the fingerprint) gives must use exactly the GPUs the host
    files show: more means a node's file is missing, fewer means idle GPUs or another instance."""
    facts = f.topology
    nodes, gpus, par = facts["nodes"], facts["gpu_count"], facts["parallel"]
    tp, pp, dp, need = par["tp"], par["pp"], par["dp"], par["gpus_needed"]
    if not nodes:
        yield missing("no host files: nodes and GPUs unknown", facts)
    elif need == gpus:
        yield passed(f"{len(nodes)} nodes, {gpus} GPUs = TP{tp} x PP{pp} x DP{dp}", facts)
    else:
        yield failed(
            f"TP{tp} x PP{pp} x DP{dp} = {need} GPUs, but the host files show {gpus} on {len(nodes)} nodes"
            + (": give every node's host file" if need > gpus else ": GPUs left idle, or another instance"),
            facts,
        )


@judge("compat.interconnect", leads_to=(REWORK,), section=_TOPOLOGY, needs_gpu_host=True)
def _interconnect(f: CompatFacts) -> Iterator[Ruling]:
    """NVLink / InfiniBand / Fabric Manager recorded

    Cross-node all-reduce over TCP sockets (no InfiniBand/RoCE in the container) is an environment
    fault; otherwise what the topology files, the Fabric Manager state and the NCCL lines show is
    recorded."""
    facts = f.topology
    link = facts["interconnect"]
    seen = []
    if link["nvlink_pairs"]:
        seen.append(f"NVLink ({link['nvlink_pairs']} GPU pairs)")
    if link["fabric_manager"]:
        seen.append(f"Fabric Manager {', '.join(link['fabric_manager'])}")
    if link["nics"]:
        seen.append(f"NICs {', '.join(link['nics'])}")
    if link["nccl_ib"]:
        seen.append("NCCL over InfiniBand")
    if link["nccl_nvlink"]:
        seen.append("NCCL P2P/NVLink")
    if link["nccl_socket"] and facts["node_count"] > 1:
        yield failed("NCCL uses sockets between nodes: no InfiniBand/RoCE in the container", link)
    elif seen:
        yield passed("; ".join(seen), link)
    else:
        yield missing(
            "no interconnect evidence: pass --topology with `nvidia-smi topo -m` output from each node "
            "(and NCCL_DEBUG=INFO lines in the startup logs)",
            link,
        )


@judge("compat.cuda-runtime", leads_to=(REWORK,), section=_CONTAINER, needs_gpu_host=True)
def _cuda_runtime(f: CompatFacts) -> Iterator[Ruling]:
    """CUDA 13 runtime inside the container

    The K3 image is a CUDA 13 (cu130) build only. nvidia-smi's "CUDA Version" is the driver's maximum,
    not what the container runs: only the probe inside the container says."""
    c = f.container
    if c is None or not c.cuda_runtime:
        smi = next((h.driver_cuda for h in f.hosts if h.driver_cuda), None)
        detail = (
            "no container CUDA runtime: run `wirecheck probe` inside the container and pass --container-info"
        )
        if smi:
            detail += (
                f"; nvidia-smi's CUDA Version {smi} is the driver's maximum, not the container's runtime"
            )
        yield missing(detail, {"nvidia_smi_cuda": smi})
        return
    ev = {"cuda_runtime": c.cuda_runtime, "source": c.cuda_runtime_source, "file": c.source}
    if c.cuda_runtime.split(".")[0] == "13":
        yield passed(f"CUDA {c.cuda_runtime} ({c.cuda_runtime_source or 'probe'})", ev)
    else:
        yield failed(
            f"container CUDA runtime {c.cuda_runtime}: the K3 image is a CUDA 13 (cu130) build only", ev
        )


@judge("compat.container", leads_to=(REWORK,), section=_CONTAINER, needs_gpu_host=True)
def _container(f: CompatFacts) -> Iterator[Ruling]:
    """Container facts from wirecheck probe

    The image, torch, vLLM and NCCL versions and the vLLM/NCCL environment, as recorded."""
    c = f.container
    if c is not None:
        yield info(
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


@judge("compat.image", leads_to=(REWORK,), section="Compat")
def _image(f: CompatFacts) -> Iterator[Ruling]:
    """Official kimi-k3 image or a documented self-built one

    One decision: the image is the official one (said with --official-image and named by the probe),
    or why not. A self-built image is judged by ``compat.self-built`` instead."""
    if f.self_built is not None:
        return
    image = f.image
    if image is not None and image.split("@")[0] == OFFICIAL_IMAGE:
        yield passed(image, {"image": image})
    elif not f.official_said:
        yield missing(
            f"image {image or 'unknown'}: say --official-image, or --self-built FILE with the build record",
            {"image": image},
        )
    elif image is None:
        yield missing(
            "--official-image given but no probe output names the image (wirecheck probe --image TAG)"
        )
    else:
        yield failed(
            f"{image} is not {OFFICIAL_IMAGE} (the K3 image is a cu130 build; there is no cu129 tag)",
            {"image": image},
        )


@judge("compat.self-built", leads_to=(REWORK,), section="Self-built vs official")
def _self_built(f: CompatFacts) -> Iterator[Ruling]:
    """Self-built image record complete

    A self-built image can be rebuilt and rolled back only from its record: the build commit, the
    dependency sources, the Dockerfile and lock files, the patches and a rollback image."""
    record = f.self_built
    if record is None:
        return
    absent = [k for k in SELF_BUILT_FIELDS if not record.get(k)]
    ev = {"record": record, "image": f.image}
    if absent:
        yield failed("missing: " + ", ".join(absent), ev)
    else:
        yield passed(f"build {record['build_commit']}, rollback {record['rollback_image']}", ev)


@judge("compat.vllm-version", leads_to=(REWORK,), section="Compat")
def _vllm_version(f: CompatFacts) -> Iterator[Ruling]:
    """vLLM 0.27.1 or later

    The first release with Kimi K3 support. The version comes from the engine's /version, else the
    probe, else the log; the official image reports a dev build string, accepted for that image."""
    c, log = f.container, f.log
    version = f.version or (c.vllm if c else None) or (log.version if log else None)
    if version is None:
        yield missing("no version: the engine's /version did not answer and no probe or log gave one")
        return
    ok = version_at_least(version, MIN_VLLM)
    ev = {
        "version": version,
        "from_endpoint": f.version,
        "container": c.vllm if c else None,
        "log": log.version if log else None,
    }
    if ok is None and f.official:
        yield passed(f"{version}: a dev build string, as the official {OFFICIAL_IMAGE} image reports", ev)
    elif ok is None:
        yield warned(
            f"{version}: a dev build string, not comparable; record the base commit in the self-built record",
            ev,
        )
    elif ok:
        yield passed(f"vLLM {version}", ev)
    else:
        yield failed(f"vLLM {version} is older than {MIN_VLLM}, the first release with Kimi K3 support", ev)


@judge("compat.engine", leads_to=(REWORK,), section="Compat")
def _engine(f: CompatFacts) -> Iterator[Ruling]:
    """The engine's configuration and KV cache, from the startup log

    Parallelism, the KV cache's size and the concurrency vLLM computed for it: what capacity is later
    held against. A log without the KV cache line is a warning."""
    log = f.log
    if log is None:
        return
    detail = (
        f"vLLM {log.version}, tp={log.flag('tensor_parallel_size')} pp={log.flag('pipeline_parallel_size')} "
        f"dp={log.flag('data_parallel_size')}; KV cache {log.kv_cache_tokens or '?'} tokens"
        f" ({log.kv_cache_memory_gib or '?'} GiB), max concurrency {log.max_concurrency or '?'}x at "
        f"{log.max_concurrency_len or '?'} tokens"
    )
    ev = {
        "kv_cache_tokens": log.kv_cache_tokens,
        "kv_cache_memory_gib": log.kv_cache_memory_gib,
        "max_concurrency": log.max_concurrency,
        "max_concurrency_len": log.max_concurrency_len,
        "nccl": log.nccl[:10],
        "cuda": log.cuda[:10],
        "dp": log.dp[:10],
    }
    yield info(detail, ev) if log.kv_cache_tokens else warned(detail, ev)


@judge("compat.same-instance", leads_to=(REWORK,), section="Compat")
def _same_instance(f: CompatFacts) -> Iterator[Ruling]:
    """Probe, /version and log name one instance

    A container probed beside the serving engine proves nothing about it: the versions they report
    must agree. Only a difference is listed."""
    c = f.container
    seen = {v for v in (f.version, c.vllm if c else None) if v}
    if len(seen) > 1:
        yield failed(
            f"versions differ: endpoint {f.version}, container {c.vllm if c else None}",
            {"version": f.version, "container": c.vllm if c else None},
        )


@judge("compat.fingerprint", leads_to=(REWORK,), section="Compat")
def _fingerprint(f: CompatFacts) -> Iterator[Ruling]:
    """system_fingerprint agrees with the startup log

    vLLM's ``vllm-<version>-tp<N>-<hash>`` names the instance that answered: its version must be
    /version's and its TP the log's, or two instances are being described."""
    if not f.fingerprint:
        yield warned("no system_fingerprint seen in any answer (a gateway may strip it)")
        return
    fp = f.parsed_fingerprint
    if fp is None:
        yield warned(
            f"{f.fingerprint!r} is not vLLM's vllm-<version>-tp<N>-<hash> form",
            {"fingerprint": f.fingerprint},
        )
        return
    detail = f"{f.fingerprint}: vLLM {fp['version']}, tp{fp['tp']} pp{fp['pp']} dp{fp['dp']}" + (
        " ep" if fp["ep"] else ""
    )
    wrong = []
    if f.version and fp["version"] != f.version:
        wrong.append(f"/version says {f.version}: two different instances")
    tp = f.log.flag("tensor_parallel_size") if f.log is not None else None
    if tp is not None and str(tp) != str(fp["tp"]):
        wrong.append(f"the startup log says tensor_parallel_size={tp}")
    ev = {"fingerprint": f.fingerprint, **fp}
    yield failed("; ".join([detail, *wrong]), ev) if wrong else passed(detail, ev)


@judge("compat.flags", leads_to=(REWORK,), section="Compat", needs_gpu_host=True)
def _flags(f: CompatFacts) -> Iterator[Ruling]:
    """Recipe parser and prefix-caching flags

    The detected family's tool and reasoning parsers (the family table's), auto tool choice and
    prefix caching. A model no family matches is held to prefix caching only, with a warning."""
    log = f.log
    if log is None:
        yield missing("no startup log: pass --startup-log with the server's log")
        return
    row = FAMILIES.get(f.family)
    want: dict[str, object] = dict(row.recipe_flags) if row is not None else {}
    want["enable_prefix_caching"] = True
    got = {k: log.flag(k) for k in want}
    wrong = [f"{k}={got[k]!r} (want {v!r})" for k, v in want.items() if got[k] != v]
    detail = "; ".join(wrong) if wrong else ", ".join(f"{k}={v}" for k, v in got.items())
    ev = {"flags": got, "source": log.source}
    if row is None:
        parsers = {k: log.flag(k) for k in ("tool_call_parser", "reasoning_parser")}
        ev["flags"] = got | parsers
        detail = (
            "the model matches no family in the family table: its parser flags are not judged (pass "
            f"--family); seen {', '.join(f'{k}={v!r}' for k, v in parsers.items())}; {detail}"
        )
        yield failed(detail, ev) if wrong else warned(detail, ev)
        return
    yield (
        failed(f"{f.family} parsers: {detail}", ev) if wrong else passed(f"{f.family} parsers: {detail}", ev)
    )


def _line_evidence(line: Any) -> dict[str, Any]:
    j = line.judged
    return {"line": j.line, "judged": j.verdict, "kind": j.kind, "ack": j.ack, "log": line.log}


def _plain_lines(f: CompatFacts, level: str) -> Iterator[Ruling]:
    """The ``level`` lines no known danger explains, numbered across every node's log."""
    plain = [x for x in f.log_lines() if x.level == level and x.judged.verdict != "danger"]
    for n, line in enumerate(plain, 1):
        j, ev = line.judged, _line_evidence(line)
        if j.verdict == "acknowledged":
            yield warned(f"acknowledged ({j.ack}): {j.line}", ev, number=n)
        else:
            yield missing(
                f"not acknowledged: explain it, then pass --ack-warning REGEX: {j.line}", ev, number=n
            )


@judge("compat.log-warning.", leads_to=(REWORK,), section=_LOGS, needs_gpu_host=True)
def _log_warning(f: CompatFacts) -> Iterator[Ruling]:
    """Startup warning, acknowledged or not (one per line)

    An unexplained warning is not evidence of a good start: each passes only when the operator
    explains it (--ack-warning REGEX), and is listed then."""
    yield from _plain_lines(f, "warning")


@judge("compat.log-error.", leads_to=(REWORK,), section=_LOGS, needs_gpu_host=True)
def _log_error(f: CompatFacts) -> Iterator[Ruling]:
    """Startup error, acknowledged or not (one per line)

    Errors in the startup log are judged like warnings: each one needs an explanation."""
    yield from _plain_lines(f, "error")


@judge("compat.log-danger.", leads_to=(REWORK, LIMITED), section=_LOGS, needs_gpu_host=True)
def _log_danger(f: CompatFacts) -> Iterator[Ruling]:
    """Known-dangerous startup warning (NCCL socket, ...)

    By kind (``evidence/_warnings.py``): NCCL over sockets, a Fabric Manager/NVLink fault or a CUDA
    driver mismatch are environment faults (rework); CUDA graphs or custom all-reduce disabled cost
    throughput a rate limit can hold (limited). An acknowledgement never clears one."""
    dangers = [x for x in f.log_lines() if x.judged.verdict == "danger"]
    for n, line in enumerate(dangers, 1):
        j = line.judged
        yield failed(f"{j.kind}: {j.why}: {j.line}", _line_evidence(line), leads_to=j.leads_to, number=n)
