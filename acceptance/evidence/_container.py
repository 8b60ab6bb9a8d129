"""The container's facts, from the JSON that ``wirecheck probe`` printed inside it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wirecheck.contracts import InputError

from ._files import SIM_MARKER, read_text

__all__ = ["ContainerFacts", "read_container"]


@dataclass(slots=True)
class ContainerFacts:
    source: str
    image: str | None = None
    cuda_runtime: str | None = None
    cuda_runtime_source: str | None = None
    torch: str | None = None
    vllm: str | None = None
    nccl: str | None = None
    python: str | None = None
    collected_at: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    image_digest: str | None = None
    simulated: bool = False


def read_container(path: str | Path) -> ContainerFacts:
    """Read the JSON that ``wirecheck probe`` printed inside the container."""
    text = read_text(path, "container info")
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise InputError(
            f"container info {path}: not JSON ({exc}); write it with `wirecheck probe`"
        ) from None
    if not isinstance(obj, dict) or "wirecheck_probe" not in obj:
        raise InputError(f"container info {path}: not `wirecheck probe` output (no wirecheck_probe key)")

    def s(key: str) -> str | None:
        v = obj.get(key)
        return str(v) if v not in (None, "") else None

    raw_env = obj.get("env")
    env: dict[str, Any] = raw_env if isinstance(raw_env, dict) else {}
    return ContainerFacts(
        str(path),
        image=s("image"),
        cuda_runtime=s("cuda_runtime"),
        cuda_runtime_source=s("cuda_runtime_source"),
        torch=s("torch"),
        vllm=s("vllm"),
        nccl=s("nccl"),
        python=s("python"),
        collected_at=s("collected_at"),
        env={str(k): str(v) for k, v in env.items()},
        image_digest=s("image_digest"),
        simulated=SIM_MARKER in text,
    )
