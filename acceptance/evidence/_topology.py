"""Multi-node evidence: nodes, GPUs, the interconnect, and whether TP x PP x DP fits the GPUs.

- Nodes come from the host files: ``nvidia-smi -q -x`` names each GPU's UUID, so files with the same UUIDs
  are one node sampled twice and files with different UUIDs are different nodes. A plain ``nvidia-smi``
  file (no UUIDs) joins the node whose driver, GPU model and count it shows; with no such node it is one
  of its own. Two hosts of 8 GPUs are 2 nodes and 16 GPUs.
- The interconnect comes from ``nvidia-smi topo -m`` (``NV#`` between GPUs is NVLink; ``mlx5_*`` NICs are
  InfiniBand/RoCE), the Fabric Manager state in ``nvidia-smi -q -x`` (NVSwitch systems: ``Completed``
  when it serves), and the startup logs' NCCL lines (``NET/IB`` or ``NET/Socket``; ``P2P/NVLink``).
- TP x PP x DP comes from the startup log, else the fingerprint (``compat.topology`` holds it to the GPUs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wirecheck.contracts import InputError

from ._files import SIM_MARKER
from ._host import HostFacts
from ._startup import StartupLog

__all__ = ["TopoFacts", "group_nodes", "interconnect", "read_topo", "topology"]


@dataclass(slots=True)
class TopoFacts:
    source: str
    gpus: int = 0
    nvlink_pairs: int = 0
    nics: list[str] = field(default_factory=list)
    simulated: bool = False


def read_topo(path: str | Path) -> TopoFacts:
    """Read ``nvidia-smi topo -m`` output: the GPU matrix and the NICs."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"topology {path}: {exc.strerror or exc}") from None
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines or not re.search(r"\bGPU0\b", lines[0]):
        raise InputError(f"topology {path}: not `nvidia-smi topo -m` output (no GPU0 header)")
    facts = TopoFacts(str(path), simulated=SIM_MARKER in text)
    for ln in lines[1:]:
        cells = ln.split()
        if not cells or ln.startswith(("Legend", " ")):
            continue
        if re.fullmatch(r"GPU\d+", cells[0]):
            facts.gpus += 1
            facts.nvlink_pairs += sum(1 for c in cells[1:] if re.fullmatch(r"NV\d+", c))
        elif re.fullmatch(r"(?:mlx\d+_\d+|NIC\d+)", cells[0]):
            facts.nics.append(cells[0])
    facts.nvlink_pairs //= 2  # the matrix names each pair twice
    for m in re.finditer(r"^\s*(NIC\d+):\s*(\S+)", text, re.M):
        facts.nics = [m.group(2) if n == m.group(1) else n for n in facts.nics]
    return facts


def group_nodes(hosts: list[HostFacts]) -> list[dict[str, Any]]:
    """The nodes the host files describe (see the module's rule)."""
    nodes: list[dict[str, Any]] = []
    for h in hosts:
        uuids = frozenset(g.uuid for g in h.gpus if g.uuid)
        shape = (h.driver, len(h.gpus), tuple(sorted({g.name for g in h.gpus})))
        match = None
        for n in nodes:
            if (uuids and n["uuids"] and (uuids & n["uuids"])) or (not uuids and n["shape"] == shape):
                match = n
            if match:
                break
        if match is None:
            nodes.append({"uuids": uuids, "shape": shape, "gpus": len(h.gpus), "sources": [h.source]})
        else:
            match["sources"].append(h.source)
            match["uuids"] = match["uuids"] or uuids
    return [
        {
            "node": i + 1,
            "gpus": n["gpus"],
            "sources": n["sources"],
            "identified_by": "uuid" if n["uuids"] else "shape",
        }
        for i, n in enumerate(nodes)
    ]


def interconnect(hosts: list[HostFacts], topos: list[TopoFacts], logs: list[StartupLog]) -> dict[str, Any]:
    nccl = [ln for log in logs for ln in log.nccl + log.warnings]
    fabric = sorted({g.fabric for h in hosts for g in h.gpus if g.fabric and g.fabric != "N/A"})
    return {
        "nvlink_pairs": sum(t.nvlink_pairs for t in topos) if topos else None,
        "nics": sorted({n for t in topos for n in t.nics}),
        "fabric_manager": fabric or None,
        "nccl_ib": any(re.search(r"NET/IB\b(?!\s*:\s*No device)", ln) for ln in nccl),
        "nccl_socket": any(re.search(r"NET/Socket", ln) for ln in nccl),
        "nccl_nvlink": any(re.search(r"P2P/(?:NVLink|CUMEM|IPC)|NVLS", ln) for ln in nccl),
    }


def topology(
    hosts: list[HostFacts], topos: list[TopoFacts], logs: list[StartupLog], parallel: dict[str, int | None]
) -> dict[str, Any]:
    """Nodes, GPUs, the interconnect, and the parallelism (missing sizes are 1) with the GPUs it needs."""
    nodes = group_nodes(hosts)
    tp, pp, dp = (parallel.get(k) or 1 for k in ("tp", "pp", "dp"))
    return {
        "nodes": nodes,
        "node_count": len(nodes),
        "gpu_count": sum(n["gpus"] for n in nodes),
        "interconnect": interconnect(hosts, topos, logs),
        "parallel": {"tp": tp, "pp": pp, "dp": dp, "gpus_needed": tp * pp * dp},
    }
