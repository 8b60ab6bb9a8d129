"""The simulated deployment's environment evidence, as the real tools write it.

``write_environment`` writes what an operator collects on a real host for ``wirecheck accept``:
``nvidia-smi -q -x`` XML, plain ``nvidia-smi`` output, the container facts ``wirecheck probe`` prints
(JSON), and a vLLM startup log whose lines match the simulator's configuration (version, parallelism,
KV cache size, parser and prefix-caching flags). Written here from the simulator's side, with its own
formatting, so that the acceptance readers are tested against an independent writer.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from wirecheck.contracts import FAMILIES

from ._config import SimConfig

__all__ = ["SIM_MARKER", "Environment", "gpu_uuid", "write_environment"]

#: in every file written here, so that a verdict built on them says it is simulated; the
#: acceptance readers look for the same string (sim shares no code with acceptance)
SIM_MARKER = "wirecheck-simulated-evidence"


@dataclass(kw_only=True, slots=True)
class Environment:
    """What the simulated host and container are: change a field to make an environment fail."""

    driver: str = "580.65.06"
    #: the driver's maximum CUDA version, as nvidia-smi prints it
    driver_cuda: str = "13.0"
    cuda_runtime: str | None = "13.0"
    image: str = "vllm/vllm-openai:kimi-k3"
    torch: str = "2.9.0+cu130"
    nccl: str = "2.27.7"
    gpus: int = 8
    gpu_name: str = "NVIDIA H200"
    architecture: str = "Hopper"
    memory_total_mib: int = 143771
    memory_used_mib: int = 131072
    weight_load_s: float = 95.3
    warnings: list[str] = field(default_factory=list)
    #: the host's name: its GPUs' UUIDs derive from it, so two simulated hosts are two nodes
    hostname: str = "vllm-0"
    #: what NCCL_DEBUG=INFO says NCCL chose between nodes: "IB" or "Socket" (the fallback)
    nccl_transport: str = "IB"


def gpu_uuid(hostname: str, i: int) -> str:
    """A stable UUID per simulated host and GPU index, in nvidia-smi's GPU-xxxxxxxx-... form."""
    h = sum(hostname.encode()) * 7919 % 0xFFFF
    return f"GPU-5a1e{h:04x}-0000-4000-8000-00000000{i:04x}"


def _xml(env: Environment, stamp: str) -> str:
    gpus = "".join(
        f"""
  <gpu id="00000000:{0x18 + i:02X}:00.0">
    <product_name>{env.gpu_name}</product_name>
    <product_architecture>{env.architecture}</product_architecture>
    <uuid>{gpu_uuid(env.hostname, i)}</uuid>
    <fabric><state>N/A</state><status>N/A</status></fabric>
    <fb_memory_usage>
      <total>{env.memory_total_mib} MiB</total>
      <reserved>512 MiB</reserved>
      <used>{env.memory_used_mib} MiB</used>
      <free>{env.memory_total_mib - env.memory_used_mib - 512} MiB</free>
    </fb_memory_usage>
  </gpu>"""
        for i in range(env.gpus)
    )
    return f"""<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<!-- {SIM_MARKER}: written by wirecheck sim, not by nvidia-smi -->
<nvidia_smi_log>
  <timestamp>{stamp}</timestamp>
  <driver_version>{env.driver}</driver_version>
  <cuda_version>{env.driver_cuda}</cuda_version>
  <attached_gpus>{env.gpus}</attached_gpus>{gpus}
</nvidia_smi_log>
"""


def _plain(env: Environment, stamp: str) -> str:
    bar = "+-----------------------------------------+------------------------+----------------------+"
    head = (
        f"| NVIDIA-SMI {env.driver:<22} Driver Version: {env.driver:<14} CUDA Version: {env.driver_cuda:<9}|"
    )
    rows = [stamp, bar, head, bar]
    for i in range(env.gpus):
        rows.append(f"| {i:>3}  {env.gpu_name:<30} On  |   00000000:{0x18 + i:02X}:00.0 Off |   0 |")
        rows.append(
            f"| N/A   34C    P0     118W /  700W | {env.memory_used_mib:>7}MiB / {env.memory_total_mib}MiB |   0%   Default |"
        )
        rows.append(bar)
    rows.append(f"{SIM_MARKER}: written by wirecheck sim, not by nvidia-smi")
    return "\n".join(rows) + "\n"


def _topo(env: Environment) -> str:
    """``nvidia-smi topo -m``: NVLink (NV18) between every pair of GPUs, four InfiniBand NICs."""
    n = env.gpus
    nics = [f"NIC{k}" for k in range(4)]
    head = "\t" + "\t".join([f"GPU{i}" for i in range(n)] + nics) + "\tCPU Affinity\tNUMA Affinity"
    rows = [head]
    for i in range(n):
        cells = ["X" if i == j else "NV18" for j in range(n)] + [
            "PXB" if k == i // 2 else "SYS" for k in range(4)
        ]
        rows.append(f"GPU{i}\t" + "\t".join(cells) + f"\t0-55\t{i // 4}")
    for k in range(4):
        cells = ["PXB" if k == i // 2 else "SYS" for i in range(n)] + [
            "X" if k == m else "SYS" for m in range(4)
        ]
        rows.append(f"NIC{k}\t" + "\t".join(cells))
    rows += [
        "",
        "Legend:",
        "",
        "  X    = Self",
        "  NV#  = Connection traversing a bonded set of # NVLinks",
        "",
    ]
    rows += ["NIC Legend:", ""] + [f"  NIC{k}: mlx5_{k}" for k in range(4)]
    rows.append(f"{SIM_MARKER}: written by wirecheck sim, not by nvidia-smi")
    return "\n".join(rows) + "\n"


def _log(cfg: SimConfig, env: Environment) -> str:
    t0 = time.time() - 600

    def stamp(dt: float) -> str:
        return time.strftime("%m-%d %H:%M:%S", time.localtime(t0 + dt))

    family = FAMILIES[cfg.family]  # the parser names the family table gives (its recipe flags)
    args: dict[str, object] = {"model": cfg.model, "tensor_parallel_size": cfg.tensor_parallel_size}
    if cfg.tool_parser:
        args.update(tool_call_parser=family.tool_parser, enable_auto_tool_choice=True)
    if cfg.reasoning_parser_on and family.reasoning_parser is not None:
        args["reasoning_parser"] = family.reasoning_parser
    if cfg.enable_prefix_caching:
        args["enable_prefix_caching"] = True
    if cfg.hybrid_cache:
        args["prefix_cache_retention_interval"] = cfg.prefix_cache_retention_interval
    kv_tokens = cfg.num_gpu_blocks * cfg.block_size
    lines = [
        (0, "INFO", "api_server.py:1905", f"vLLM API server version {cfg.version}"),
        (0, "INFO", "utils.py:328", f"non-default args: {args!r}"),
        (
            4,
            "INFO",
            "core.py:93",
            f"Initializing a V1 LLM engine (v{cfg.version}) with config: model='{cfg.model}', "
            f"tokenizer='{cfg.model}', dtype=torch.bfloat16, max_seq_len={cfg.max_model_len}, "
            f"tensor_parallel_size={cfg.tensor_parallel_size}, pipeline_parallel_size=1, "
            f"data_parallel_size=1, enable_prefix_caching={cfg.enable_prefix_caching}, "
            f"block_size={cfg.block_size}, max_num_seqs={cfg.max_num_seqs}",
        ),
        (9, "INFO", "pynccl.py:70", f"vLLM is using nccl=={env.nccl}"),
        (10, "INFO", "cuda_communicator.py:66", "Using NCCL as the communication backend (all_reduce)"),
        (
            10 + env.weight_load_s,
            "INFO",
            "default_loader.py:268",
            f"Loading weights took {env.weight_load_s:.2f} seconds",
        ),
        (
            12 + env.weight_load_s,
            "INFO",
            "gpu_model_runner.py:2371",
            f"Model loading took 118.4 GiB and {env.weight_load_s + 2:.2f} seconds",
        ),
        (
            40 + env.weight_load_s,
            "INFO",
            "gpu_worker.py:298",
            f"Available KV cache memory: {kv_tokens * 70 / 2**20:.2f} GiB",
        ),
        (
            40 + env.weight_load_s,
            "INFO",
            "kv_cache_utils.py:1087",
            f"GPU KV cache size: {kv_tokens:,} tokens, Maximum concurrency for {cfg.max_model_len:,} "
            f"tokens per request: {kv_tokens / cfg.max_model_len:.2f}x",
        ),
    ]
    lines += [(41 + env.weight_load_s, "WARNING", "config.py:410", w) for w in env.warnings]
    lines.append(
        (
            55 + env.weight_load_s,
            "INFO",
            "api_server.py:1971",
            "Starting vLLM API server 0 on http://0.0.0.0:8000",
        )
    )
    out = [f"# {SIM_MARKER}: written by wirecheck sim, not by vLLM"]
    out += [f"{level} {stamp(dt)} [{where}] {msg}" for dt, level, where, msg in lines]
    # what NCCL_DEBUG=INFO prints (no vLLM stamp): the transport it chose
    net = (
        "IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0"
        if env.nccl_transport == "IB"
        else "Socket : Using [0]eth0"
    )
    out.insert(6, f"{env.hostname}:2346:2400 [0] NCCL INFO NET/{net}")
    out.append("INFO:     Application startup complete.")
    return "\n".join(out) + "\n"


def write_environment(
    directory: str | Path, cfg: SimConfig, env: Environment | None = None
) -> dict[str, Path]:
    """Write nvidia-smi.xml, nvidia-smi.txt, container.json and startup.log into ``directory``."""
    env = env or Environment()
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%a %b %d %H:%M:%S %Y")
    container = {
        "wirecheck_probe": 1,
        "wirecheck_simulated": SIM_MARKER,
        "collected_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "hostname": env.hostname,
        "image": env.image,
        "image_digest": "sha256:" + "5" * 64,
        "cuda_runtime": env.cuda_runtime,
        "cuda_runtime_source": "torch.version.cuda" if env.cuda_runtime else None,
        "torch": env.torch,
        "vllm": cfg.version,
        "nccl": env.nccl,
        "python": "3.12.11",
        "env": {"VLLM_USE_RUST_FRONTEND": "1"} if env.architecture in ("Hopper", "Blackwell") else {},
    }
    paths = {
        "host_xml": d / "nvidia-smi.xml",
        "host_text": d / "nvidia-smi.txt",
        "container": d / "container.json",
        "startup_log": d / "startup.log",
        "topology": d / "nvidia-smi-topo.txt",
    }
    paths["host_xml"].write_text(_xml(env, stamp), encoding="utf-8")
    paths["host_text"].write_text(_plain(env, stamp), encoding="utf-8")
    paths["container"].write_text(json.dumps(container, indent=2) + "\n", encoding="utf-8")
    paths["startup_log"].write_text(_log(cfg, env), encoding="utf-8")
    paths["topology"].write_text(_topo(env), encoding="utf-8")
    return paths
