"""The compat phase: is this the environment the Kimi K3 recipe asks for, shown by evidence?

It measures by reading: the host files, the container probe, the startup logs (every node's), the
topology files and the self-built record, with what the engine said (``/version`` and an answer's
``system_fingerprint``), into :class:`CompatFacts`. Reading happens before any load, and also when
compat is not among the phases run: a bad file stops the run before a request is sent. The judges
(``_compat_judges``) hold the facts to the recipe (vllm-wire.md, the K3 recipe).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wirecheck.contracts import InputError, detect_family

from .._model import Facts
from ..evidence import (
    ContainerFacts,
    HostFacts,
    Judged,
    StartupLog,
    TopoFacts,
    judge,
    parse_fingerprint,
    parse_version,
    read_container,
    read_host,
    read_startup_log,
    read_topo,
    topology,
)

__all__ = [
    "MIN_DRIVER",
    "MIN_VLLM",
    "OFFICIAL_IMAGE",
    "RECIPE_FAMILY",
    "SELF_BUILT_FIELDS",
    "CompatFacts",
    "CompatInputs",
    "LogLine",
    "measure_compat",
]

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


@dataclass(frozen=True, slots=True)
class LogLine:
    """A startup log's warning or error line, judged by kind (``evidence.judge``), with where it is."""

    #: "warning" or "error"
    level: str
    judged: Judged
    log: str


@dataclass(slots=True, kw_only=True)
class CompatFacts(Facts):
    hosts: list[HostFacts]
    container: ContainerFacts | None
    #: the first node's startup log (held to the recipe's flags) and every other node's
    log: StartupLog | None
    more_logs: list[StartupLog] = field(default_factory=list)
    topos: list[TopoFacts] = field(default_factory=list)
    #: the self-built image's record, when one was given
    self_built: dict[str, Any] | None = None
    #: --official-image: the operator says the deployment runs the official image
    official_said: bool = False
    family: str = RECIPE_FAMILY
    version: str | None = None
    fingerprint: str | None = None
    acks: list[str] = field(default_factory=list)

    @property
    def image(self) -> str | None:
        return self.container.image if self.container else None

    @property
    def official(self) -> bool:
        """The probe names the official image (no self-built record): its dev version strings pass."""
        return self.self_built is None and (self.image or "").split("@")[0] == OFFICIAL_IMAGE

    @property
    def logs(self) -> list[StartupLog]:
        return [x for x in [self.log, *self.more_logs] if x is not None]

    @property
    def parsed_fingerprint(self) -> dict[str, Any] | None:
        return parse_fingerprint(self.fingerprint) if self.fingerprint else None

    @property
    def parallel(self) -> dict[str, int | None]:
        """TP, PP and DP from the startup log, else from the fingerprint."""
        fp = self.parsed_fingerprint or {}
        return {
            k: _int(self.log.flag(flag) if self.log else None) or fp.get(k)
            for k, flag in (
                ("tp", "tensor_parallel_size"),
                ("pp", "pipeline_parallel_size"),
                ("dp", "data_parallel_size"),
            )
        }

    @property
    def topology(self) -> dict[str, Any]:
        return topology(self.hosts, self.topos, self.logs, self.parallel)

    def log_lines(self) -> list[LogLine]:
        """Every log's warnings, then its errors, log by log (the first node's first), judged."""
        return [
            LogLine(level, j, log.source)
            for log in ([self.log] if self.log else []) + self.more_logs
            for level, lines in (("warning", log.warnings), ("error", log.errors))
            for j in judge(lines, self.acks)
        ]

    @property
    def startup(self) -> dict[str, Any] | None:
        """The first log's facts as the report and the OOM evidence keep them."""
        log = self.log
        if log is None:
            return None
        return {
            **_pick(log, _STARTUP_KEYS),
            "key_lines": (log.nccl[:3] + log.cuda[:3] + log.dp[:3]),
            "flags": _memory_flags(log),
        }

    @property
    def container_json(self) -> dict[str, Any] | None:
        return None if self.container is None else _pick(self.container, _CONTAINER_KEYS)

    def to_json(self) -> dict[str, Any]:
        return {
            "image_column": "self-built" if self.self_built is not None else "official",
            "self_built": self.self_built,
            "hosts": [_pick(h, _HOST_KEYS, gpus=len(h.gpus)) for h in self.hosts],
            "container": self.container_json,
            "startup": self.startup,
            "topology": self.topology,
            "version": self.version,
            "fingerprint": self.fingerprint,
            "parsed_version": list(parse_version(self.version) or []) if self.version else None,
        }

    def simulated_sources(self) -> list[str]:
        return [
            src
            for src, sim in [
                *((h.source, h.simulated) for h in self.hosts),
                *([(self.container.source, self.container.simulated)] if self.container else []),
                *((x.source, x.simulated) for x in self.logs),
                *((t.source, t.simulated) for t in self.topos),
            ]
            if sim
        ]

    def key_logs(self) -> list[str]:
        startup = self.startup or {}
        return (startup.get("key_lines") or []) + (startup.get("warnings") or [])


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


def _self_built_record(path: str) -> dict[str, Any]:
    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"self-built record {path}: no such file") from None
    except ValueError as exc:
        raise InputError(f"self-built record {path}: not JSON ({exc})") from None
    if not isinstance(record, dict):
        raise InputError(
            f"self-built record {path}: expected a JSON object with {', '.join(SELF_BUILT_FIELDS)}"
        )
    return record


def measure_compat(inp: CompatInputs) -> CompatFacts:
    """Read every evidence file ``inp`` names (an unusable one is an ``InputError``)."""
    return CompatFacts(
        hosts=inp.hosts if inp.hosts is not None else [read_host(p) for p in inp.host_files],
        container=read_container(inp.container_file) if inp.container_file else None,
        log=read_startup_log(inp.startup_log) if inp.startup_log else None,
        more_logs=[read_startup_log(p) for p in inp.more_startup_logs],
        topos=[read_topo(p) for p in inp.topology_files],
        self_built=_self_built_record(inp.self_built) if inp.self_built else None,
        official_said=inp.official_image,
        family=inp.family,
        version=inp.version,
        fingerprint=inp.fingerprint,
        acks=list(inp.ack_warnings),
    )
