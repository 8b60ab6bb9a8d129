"""GPU memory and utilisation, measured while the capacity steps run.

The go-live checklist asks for a per-GPU memory curve through loading, the ramp and an OOM; nvidia-smi's
one snapshot in a host file is not that. Three sources a GPU host really has, in the order ``auto`` tries
them:

- a DCGM exporter's ``/metrics`` (``--gpu-metrics-url``; ``DCGM_FI_DEV_FB_USED`` / ``_FB_FREE`` in MiB,
  ``DCGM_FI_DEV_GPU_UTIL`` in percent, one series per GPU labelled ``gpu``, ``UUID`` and ``Hostname``):
  the way most clusters already export it, and the only one that sees several nodes;
- NVML on this host through nvidia-ml-py (the binding NVIDIA keeps; imported only when present);
- ``nvidia-smi --query-gpu=... --format=csv,noheader,nounits`` in a loop.

A reading is a list of per-GPU rows keyed ``host/gpu``. Without any source the checklist's memory item
stays open and the verdict cannot be go.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import shutil
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from wirecheck.contracts import ConfigError

from .._clock import SYSTEM_CLOCK, Clock
from ._metrics import Periodic, pages

__all__ = ["GPU_SOURCES", "GpuSampler", "GpuSource", "make_gpu_source", "memory_summary"]

GPU_SOURCES = ("auto", "dcgm", "nvml", "nvidia-smi", "none")


@dataclass(slots=True)
class GpuRow:
    """One GPU's reading; its JSON (the series' ``gpus`` items) is its fields, in this order."""

    #: ``host/index``
    gpu: str
    used_mib: float
    total_mib: float | None
    util_pct: float | None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class GpuSource(Protocol):
    name: str
    #: True when the readings come from the simulator's exporter (its samples carry a marker label)
    simulated: bool

    async def read(self, client: httpx.AsyncClient) -> list[GpuRow] | None: ...


@dataclass(slots=True)
class DcgmSource:
    urls: list[str]
    name: str = "dcgm"
    simulated: bool = False

    async def read(self, client: httpx.AsyncClient) -> list[GpuRow] | None:
        rows: list[GpuRow] = []
        for m in await pages(client, self.urls, timeout=5):
            per: dict[str, dict[str, float]] = {}
            for name, labels, value in m.samples:
                if not name.startswith("DCGM_FI_DEV_"):
                    continue
                if labels.get("wirecheck_simulated") == "true":
                    self.simulated = True
                host = labels.get("Hostname") or m.source.split("/")[2]
                key = f"{host}/{labels.get('gpu') or labels.get('UUID') or '?'}"
                per.setdefault(key, {})[name] = value
            for key, f in sorted(per.items()):
                used = f.get("DCGM_FI_DEV_FB_USED")
                if used is None:
                    continue
                free = f.get("DCGM_FI_DEV_FB_FREE")
                reserved = f.get("DCGM_FI_DEV_FB_RESERVED", 0.0)
                total = used + free + reserved if free is not None else None
                rows.append(GpuRow(key, used, total, f.get("DCGM_FI_DEV_GPU_UTIL")))
        return rows or None


@dataclass(slots=True, kw_only=True)
class _ThisHost:
    """A source that reads this machine's own GPUs (rows keyed ``host/index``): real devices, never
    the simulator's exporter."""

    simulated: bool = False
    host: str = "localhost"


@dataclass(slots=True)
class NvmlSource(_ThisHost):
    nvml: Any
    name: str = "nvml"

    async def read(self, client: httpx.AsyncClient) -> list[GpuRow] | None:
        return await asyncio.to_thread(self._read)

    def _read(self) -> list[GpuRow] | None:
        n = self.nvml
        try:
            rows = []
            for i in range(n.nvmlDeviceGetCount()):
                h = n.nvmlDeviceGetHandleByIndex(i)
                mem = n.nvmlDeviceGetMemoryInfo(h)
                util = n.nvmlDeviceGetUtilizationRates(h)
                rows.append(GpuRow(f"{self.host}/{i}", mem.used / 2**20, mem.total / 2**20, float(util.gpu)))
            return rows or None
        except n.NVMLError:
            return None


@dataclass(slots=True)
class SmiSource(_ThisHost):
    binary: str
    name: str = "nvidia-smi"

    async def read(self, client: httpx.AsyncClient) -> list[GpuRow] | None:
        try:
            proc = await asyncio.create_subprocess_exec(
                self.binary,
                "--query-gpu=index,memory.used,memory.total,utilization.gpu",
                "--format=csv,noheader,nounits",
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
            )
            out, _ = await asyncio.wait_for(proc.communicate(), timeout=10)
        except (OSError, TimeoutError):
            return None
        rows = []
        for line in out.decode(errors="replace").splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) < 4:
                continue
            with contextlib.suppress(ValueError):
                util = None if parts[3] in ("[N/A]", "N/A") else float(parts[3])
                rows.append(GpuRow(f"{self.host}/{parts[0]}", float(parts[1]), float(parts[2]), util))
        return rows or None


def _nvml() -> Any:
    try:
        import pynvml  # type: ignore[import-not-found,import-untyped,unused-ignore]  # nvidia-ml-py
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # NVMLError_LibraryNotFound and friends: no driver on this host
        return None
    return pynvml


def make_gpu_source(kind: str, urls: list[str]) -> GpuSource | None:
    """The source ``kind`` asks for; ``auto``: DCGM when URLs are given, else NVML, else nvidia-smi."""
    if kind not in GPU_SOURCES:
        raise ConfigError(f"--gpu-source {kind!r}: expected one of {', '.join(GPU_SOURCES)}")
    if kind == "none":
        return None
    if kind == "dcgm" or (kind == "auto" and urls):
        if not urls:
            raise ConfigError("--gpu-source dcgm needs --gpu-metrics-url URL (a DCGM exporter's /metrics)")
        return DcgmSource(list(urls))
    if kind in ("auto", "nvml"):
        nvml = _nvml()
        if nvml is not None:
            return NvmlSource(nvml)
        if kind == "nvml":
            raise ConfigError("--gpu-source nvml: nvidia-ml-py is not installed or no NVIDIA driver answers")
    binary = shutil.which("nvidia-smi")
    if binary is not None:
        return SmiSource(binary)
    if kind == "nvidia-smi":
        raise ConfigError("--gpu-source nvidia-smi: nvidia-smi is not on PATH")
    return None


@dataclass(slots=True)
class GpuSampler(Periodic[dict[str, Any]]):
    """Samples every GPU in the background while a step runs: ``[{t, gpus: [{gpu, used_mib, ...}]}]``."""

    client: httpx.AsyncClient
    source: GpuSource | None
    interval_s: float
    clock: Clock = SYSTEM_CLOCK
    series: list[dict[str, Any]] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None
    _t0: float | None = None

    @property
    def has_source(self) -> bool:
        return self.source is not None

    async def sample(self) -> list[dict[str, Any]] | None:
        if self.source is None:
            return None
        rows = await self.source.read(self.client)
        if rows is None:
            return None
        snap = [r.to_json() for r in rows]
        now = self.clock.monotonic()
        if self._t0 is None:
            self._t0 = now  # the first reading starts the series' time
        self.series.append({"t": round(now - self._t0, 3), "gpus": snap})
        return snap


def memory_summary(snap: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """One reading in short: GPUs, the most used, the total, and each GPU's use."""
    if not snap:
        return None
    totals = [g["total_mib"] for g in snap if g.get("total_mib")]
    return {
        "gpus": len(snap),
        "used_mib_max": round(max(g["used_mib"] for g in snap)),
        "used_mib_sum": round(sum(g["used_mib"] for g in snap)),
        "total_mib": round(max(totals)) if totals else None,
        "per_gpu": {g["gpu"]: round(g["used_mib"]) for g in snap},
    }
