"""The host's GPUs and driver, from ``nvidia-smi -q -x`` (XML) or plain ``nvidia-smi`` output, told apart
by content. ``nvidia-smi``'s "CUDA Version" is the driver's maximum, kept apart from the container's
runtime (``compat.cuda-runtime`` never accepts it)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from wirecheck.contracts import InputError

from ._files import SIM_MARKER, read_text

__all__ = ["GpuFacts", "HostFacts", "read_host"]


@dataclass(slots=True)
class GpuFacts:
    name: str
    architecture: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    #: nvidia-smi -q -x only: the GPU's UUID (tells hosts apart) and its Fabric Manager state
    uuid: str | None = None
    fabric: str | None = None


@dataclass(slots=True)
class HostFacts:
    source: str
    kind: str  # "nvidia-smi-xml" | "nvidia-smi"
    timestamp: str | None = None
    driver: str | None = None
    driver_cuda: str | None = None  # the driver's maximum CUDA version: not the container's runtime
    gpus: list[GpuFacts] = field(default_factory=list)
    simulated: bool = False

    @property
    def memory_used_mib(self) -> int | None:
        used = [g.memory_used_mib for g in self.gpus if g.memory_used_mib is not None]
        return sum(used) if used else None

    @property
    def memory_total_mib(self) -> int | None:
        total = [g.memory_total_mib for g in self.gpus if g.memory_total_mib is not None]
        return sum(total) if total else None


def _mib(text: str | None) -> int | None:
    if not text:
        return None
    m = re.match(r"\s*(\d+)\s*MiB", text)
    return int(m.group(1)) if m else None


def _host_xml(text: str, source: str) -> HostFacts:
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise InputError(f"{source}: not nvidia-smi -q -x output (XML does not parse: {exc})") from None
    if root.tag != "nvidia_smi_log":
        raise InputError(f"{source}: XML root is <{root.tag}>, expected <nvidia_smi_log> (nvidia-smi -q -x)")
    facts = HostFacts(
        source,
        "nvidia-smi-xml",
        timestamp=root.findtext("timestamp"),
        driver=(root.findtext("driver_version") or "").strip() or None,
        driver_cuda=(root.findtext("cuda_version") or "").strip() or None,
    )
    for gpu in root.findall("gpu"):
        facts.gpus.append(
            GpuFacts(
                name=(gpu.findtext("product_name") or "?").strip(),
                architecture=(gpu.findtext("product_architecture") or "").strip() or None,
                memory_total_mib=_mib(gpu.findtext("fb_memory_usage/total")),
                memory_used_mib=_mib(gpu.findtext("fb_memory_usage/used")),
                uuid=(gpu.findtext("uuid") or "").strip() or None,
                fabric=(gpu.findtext("fabric/state") or "").strip() or None,
            )
        )
    return facts


_SMI_HEAD = re.compile(r"NVIDIA-SMI\s+(\S+)\s+Driver Version:\s+(\S+)\s+CUDA Version:\s+(\S+)")
_SMI_GPU = re.compile(r"^\|\s+(\d+)\s+(.+?)\s{2,}(?:On|Off)\s+\|")
_SMI_MEM = re.compile(r"(\d+)MiB\s*/\s*(\d+)MiB")


def _host_plain(text: str, source: str) -> HostFacts:
    head = _SMI_HEAD.search(text)
    if head is None:
        raise InputError(
            f"{source}: neither nvidia-smi -q -x XML nor nvidia-smi output "
            "(no 'NVIDIA-SMI ... Driver Version: ... CUDA Version: ...' line)"
        )
    first = text.strip().splitlines()[0].strip()
    facts = HostFacts(
        source,
        "nvidia-smi",
        timestamp=first if not first.startswith(("+", "|")) else None,
        driver=head.group(2),
        driver_cuda=head.group(3),
    )
    pending: GpuFacts | None = None
    for line in text.splitlines():
        g = _SMI_GPU.match(line)
        if g:
            pending = GpuFacts(name=g.group(2).strip())
            facts.gpus.append(pending)
            continue
        m = _SMI_MEM.search(line)
        if m and pending is not None and pending.memory_total_mib is None:
            pending.memory_used_mib, pending.memory_total_mib = int(m.group(1)), int(m.group(2))
    return facts


def read_host(path: str | Path) -> HostFacts:
    """Read ``nvidia-smi -q -x`` XML or plain ``nvidia-smi`` output (told apart by content)."""
    text = read_text(path, "host info")
    facts = _host_xml(text, str(path)) if text.lstrip().startswith("<") else _host_plain(text, str(path))
    facts.simulated = SIM_MARKER in text
    return facts
