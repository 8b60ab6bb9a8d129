"""A simulated NVIDIA DCGM exporter: ``/metrics`` as dcgm-exporter writes it, following the simulated KV use.

dcgm-exporter (the way most clusters export GPU memory, port 9400 by default) writes one gauge line per
GPU per field, labelled ``gpu`` (index), ``UUID``, ``device``, ``modelName`` and ``Hostname``:
``DCGM_FI_DEV_FB_USED`` and ``DCGM_FI_DEV_FB_FREE`` in MiB, ``DCGM_FI_DEV_GPU_UTIL`` in percent. Here the
memory of each GPU is the weights' share plus the KV cache's share times the simulated KV usage, so an
acceptance run sees memory climb with concurrency, and fall to what a dead process leaves when the
simulated engine dies of OOM (``wirecheck sim --dcgm-port P``). Every sample carries the
``wirecheck_simulated`` label, so a report built on it cannot pass for a real GPU host.
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from ._environment import Environment, gpu_uuid

__all__ = ["create_dcgm_app", "dcgm_text"]

#: of each GPU's memory: the weights and activations, and the KV cache vLLM would preallocate
_WEIGHTS = 0.55
_KV = 0.35


def dcgm_text(state: Any, env: Environment, hostname: str = "vllm-0") -> str:
    """The exporter's page for the simulator ``state`` (``app.state.sim``) on the host ``env`` describes."""
    eng = state.engine
    total = env.memory_total_mib
    if eng.dead:
        used = [512] * env.gpus  # the engine process is gone: only the driver's reservation is left
        util = [0] * env.gpus
    else:
        kv = eng.in_use() / max(eng.cfg.num_gpu_blocks, 1)
        busy = 1.0 if eng.running else 0.0
        # tensor parallel ranks hold equal shards; a small per-rank skew keeps the curves apart
        used = [int(total * (_WEIGHTS + _KV * kv)) + 64 * i for i in range(env.gpus)]
        util = [int(busy * (85 + i % 3)) for i in range(env.gpus)]
    lines: list[str] = []
    for name, help_, values in (
        ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", used),
        ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", [total - u for u in used]),
        ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", util),
    ):
        lines += [f"# HELP {name} {help_}", f"# TYPE {name} gauge"]
        for i, v in enumerate(values):
            labels = (
                f'gpu="{i}",UUID="{gpu_uuid(hostname, i)}",device="nvidia{i}",'
                f'modelName="{env.gpu_name}",Hostname="{hostname}",wirecheck_simulated="true"'
            )
            lines.append(f"{name}{{{labels}}} {v}")
    return "\n".join(lines) + "\n"


def create_dcgm_app(
    sim_app: Starlette, env: Environment | None = None, hostname: str | None = None
) -> Starlette:
    """The exporter for the simulator app ``sim_app`` (from :func:`create_app`)."""
    host = env or Environment()

    async def metrics(request: Request) -> PlainTextResponse:
        return PlainTextResponse(
            dcgm_text(sim_app.state.sim, host, hostname or host.hostname),
            media_type="text/plain; version=0.0.4",
        )

    return Starlette(routes=[Route("/metrics", metrics)])
