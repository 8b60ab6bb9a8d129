"""Startup-log warnings judged, not only listed.

vLLM's multiprocess workers prefix their lines with the process name, in colour on a terminal:
``\\x1b[1;36m(Worker_TP1 pid=2345)\\x1b[0;0m WARNING 12-02 ...``, ``(VllmWorker TP1 pid=...)``,
``(EngineCore_DP0 pid=...)``, ``(APIServer pid=...)``. :func:`clean_line` takes the colour codes off and
:data:`PREFIX` matches the prefix, so a worker's warning is read like the API server's.

Known-dangerous warnings block go, by kind: NCCL falling back to socket transport (no InfiniBand/RoCE
reached the container: a cross-node all-reduce over TCP) or a Fabric Manager / NVLink fault is an
environment fault (``rework``); CUDA graphs or custom all-reduce disabled, or P2P unavailable, cost
throughput that a rate limit can hold (``limited``). Every other warning is listed and needs an explicit
acknowledgement (``--ack-warning REGEX``) to pass: an unexplained warning is not evidence of a good start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ANSI", "DANGEROUS", "PREFIX", "Danger", "Judged", "clean_line", "judge"]

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
#: a vLLM process prefix: one or two words (``Worker_TP1``, ``VllmWorker TP1``, ``EngineCore_DP0``) and a pid
PREFIX = re.compile(r"^\((?:[A-Za-z][\w-]*)(?: [\w-]+)? pid=\d+\)\s+")


@dataclass(frozen=True, slots=True)
class Danger:
    kind: str
    pattern: re.Pattern[str]
    leads_to: str
    why: str


DANGEROUS: tuple[Danger, ...] = (
    Danger(
        "nccl-socket",
        re.compile(
            r"NET/Socket|falling back to socket|Using network Socket|NCCL_IB_DISABLE=1|NET/IB ?: ?No device",
            re.I,
        ),
        "rework",
        "NCCL uses TCP sockets, not InfiniBand/RoCE: cross-node all-reduce will bottleneck",
    ),
    Danger(
        "fabric-manager",
        re.compile(r"fabric ?manager.*(?:not|fail|error)|NVLink.*(?:inactive|down|error|not)", re.I),
        "rework",
        "NVSwitch/NVLink not serving (Fabric Manager): GPUs talk over PCIe",
    ),
    Danger(
        "cuda-compat",
        re.compile(r"CUDA driver version is insufficient|forward compatibility", re.I),
        "rework",
        "the container's CUDA runtime and the host driver disagree",
    ),
    Danger(
        "no-cuda-graphs",
        re.compile(r"CUDA ?graph[^.]*(?:disabled|not (?:be )?(?:used|supported))|enforce[_-]eager", re.I),
        "limited",
        "eager mode: decode is slower; hold the rate below the measured knee",
    ),
    Danger(
        "no-custom-allreduce",
        re.compile(r"custom all-?reduce is disabled|P2P is (?:disabled|not supported)", re.I),
        "limited",
        "all-reduce without P2P: slower tensor parallelism",
    ),
)


def clean_line(raw: str) -> str:
    """The line without colour codes and without a vLLM process prefix."""
    return PREFIX.sub("", ANSI.sub("", raw).strip())


@dataclass(frozen=True, slots=True)
class Judged:
    line: str
    #: ``danger`` (a known kind), ``acknowledged`` (matches --ack-warning) or ``unacknowledged``
    verdict: str
    kind: str | None = None
    leads_to: str | None = None
    why: str = ""
    ack: str | None = None


def judge(lines: list[str], acks: list[str]) -> list[Judged]:
    pats = [(a, re.compile(a, re.I)) for a in acks]
    out = []
    for line in lines:
        d = next((d for d in DANGEROUS if d.pattern.search(line)), None)
        if d is not None:
            # an acknowledgement never clears a known-dangerous warning: it decides the verdict
            out.append(Judged(line, "danger", d.kind, d.leads_to, d.why))
            continue
        ack = next((a for a, p in pats if p.search(line)), None)
        out.append(Judged(line, "acknowledged" if ack else "unacknowledged", ack=ack))
    return out
