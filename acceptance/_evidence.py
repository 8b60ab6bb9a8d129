"""Readers for the environment evidence: nvidia-smi (XML and plain), ``wirecheck probe`` JSON, the vLLM
startup log, ``/version`` strings and ``system_fingerprint``.

Every reader takes text and returns plain facts; a file it cannot read is an ``InputError`` that names
the file and what was expected, never a silent empty result.
"""

from __future__ import annotations

import ast
import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wirecheck.contracts import InputError

from ._warnings import DANGEROUS, clean_line

#: what the simulator writes into every evidence file: a verdict built on it must say so
SIM_MARKER = "wirecheck-simulated-evidence"

__all__ = [
    "SIM_MARKER",
    "ContainerFacts",
    "GpuFacts",
    "HostFacts",
    "StartupLog",
    "parse_fingerprint",
    "parse_version",
    "read_container",
    "read_host",
    "read_startup_log",
    "version_at_least",
]


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


def _read(path: str | Path, what: str) -> str:
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise InputError(f"{what} {p}: no such file") from None
    except OSError as exc:
        raise InputError(f"{what} {p}: {exc.strerror or exc}") from None


def read_host(path: str | Path) -> HostFacts:
    """Read ``nvidia-smi -q -x`` XML or plain ``nvidia-smi`` output (told apart by content)."""
    text = _read(path, "host info")
    facts = _host_xml(text, str(path)) if text.lstrip().startswith("<") else _host_plain(text, str(path))
    facts.simulated = SIM_MARKER in text
    return facts


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
    text = _read(path, "container info")
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


@dataclass(slots=True)
class StartupLog:
    source: str
    version: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    engine_config: dict[str, str] = field(default_factory=dict)
    kv_cache_memory_gib: float | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    max_concurrency_len: int | None = None
    weight_load_s: float | None = None
    model_load_s: float | None = None
    model_load_gib: float | None = None
    startup_s: float | None = None
    started: str | None = None
    ready: bool = False
    nccl: list[str] = field(default_factory=list)
    cuda: list[str] = field(default_factory=list)
    dp: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    simulated: bool = False

    def flag(self, name: str) -> Any:
        """A server flag as the log shows it: non-default args first, then the engine config line."""
        if name in self.args:
            return self.args[name]
        raw = self.engine_config.get(name)
        if raw is None:
            return None
        return {"True": True, "False": False, "None": None}.get(raw, raw.strip("'\""))


_STAMP = re.compile(
    r"^(?:\(\w+ pid=\d+\)\s+)?(INFO|WARNING|ERROR|DEBUG|CRITICAL)\s+(\d\d-\d\d \d\d:\d\d:\d\d)"
)
_NUM = r"([\d,]+(?:\.\d+)?)"


def _seconds(stamp: str) -> float:
    day, clock = stamp.split(" ")
    m, d = (int(x) for x in day.split("-"))
    hh, mm, ss = (int(x) for x in clock.split(":"))
    return (((m * 31 + d) * 24 + hh) * 60 + mm) * 60 + ss


def _config_pairs(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for m in re.finditer(r"(\w+)=('(?:[^'\\]|\\.)*'|\"[^\"]*\"|[^,\s()]+(?:\([^)]*\))?)", text):
        out.setdefault(m.group(1), m.group(2))
    return out


def read_startup_log(path: str | Path) -> StartupLog:
    """Read a vLLM server log: version, flags, engine config, KV cache lines, NCCL/CUDA lines, every
    WARNING and fallback, and the load timings."""
    text = _read(path, "startup log")
    log = StartupLog(str(path), simulated=SIM_MARKER in text)
    first: float | None = None
    last: float | None = None
    recognised = 0
    for raw in text.splitlines():
        # worker lines carry colour codes and a process prefix: (Worker_TP1 pid=..), (EngineCore_DP0 pid=..)
        line = clean_line(raw.rstrip())
        st = _STAMP.match(line)
        if not st and "NCCL" in line and any(d.pattern.search(line) for d in DANGEROUS):
            # NCCL_DEBUG lines have no vLLM stamp; the transport they choose is what matters
            log.warnings.append(line)
        if st:
            recognised += 1
            t = _seconds(st.group(2))
            if first is None:
                first, log.started = t, st.group(2)
            last = t
            level = st.group(1)
            if level == "WARNING":
                log.warnings.append(line)
            elif level in ("ERROR", "CRITICAL"):
                log.errors.append(line)
            elif re.search(r"fall(?:ing)? ?back", line, re.I):
                log.warnings.append(line)
        if m := re.search(r"vLLM API server version (\S+)", line):
            log.version = m.group(1)
        if m := re.search(r"non-default args: (\{.*\})\s*$", line):
            try:
                args = ast.literal_eval(m.group(1))
            except (ValueError, SyntaxError):
                args = None
            if isinstance(args, dict):
                log.args.update({str(k): v for k, v in args.items()})
        if m := re.search(r"Initializing a V1 LLM engine \(v([^)]+)\) with config: (.*)$", line):
            log.version = log.version or m.group(1)
            log.engine_config.update(_config_pairs(m.group(2)))
        if m := re.search(r"Available KV cache memory: " + _NUM + r" GiB", line):
            log.kv_cache_memory_gib = float(m.group(1).replace(",", ""))
        if m := re.search(r"GPU KV cache size: " + _NUM + r" tokens", line):
            log.kv_cache_tokens = int(float(m.group(1).replace(",", "")))
        if m := re.search(r"Maximum concurrency for " + _NUM + r" tokens per request: " + _NUM + "x", line):
            log.max_concurrency_len = int(m.group(1).replace(",", ""))
            log.max_concurrency = float(m.group(2).replace(",", ""))
        if m := re.search(r"Loading weights took " + _NUM + " seconds", line):
            log.weight_load_s = float(m.group(1).replace(",", ""))
        if m := re.search(r"Model loading took " + _NUM + " GiB(?: memory)? and " + _NUM + " seconds", line):
            log.model_load_gib = float(m.group(1).replace(",", ""))
            log.model_load_s = float(m.group(2).replace(",", ""))
        if re.search(r"nccl", line, re.I) and (st or re.search(r"NCCL (?:INFO|WARN)", line)):
            log.nccl.append(line)
        elif re.search(r"\bCUDA\b|cuda graph|cudagraph", line) and st:
            log.cuda.append(line)
        if re.search(r"\bDP rank\b|data parallel rank|dp_rank", line, re.I):
            log.dp.append(line)
        if "Application startup complete" in line:
            log.ready = True
            if first is not None and last is not None:
                log.startup_s = last - first
    if recognised == 0 and not log.ready:
        raise InputError(
            f"startup log {path}: no vLLM log lines found (expected lines like 'INFO 12-02 10:00:00 [file.py:1] ...')"
        )
    return log


def parse_version(text: str) -> tuple[int, ...] | None:
    """``0.33.0`` -> (0, 33, 0); a dev build such as ``0.1.dev19262+gb6bbf29dd`` -> None (not comparable)."""
    m = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:(?:rc|post)\d+)?(?:\+\S+)?$", text.strip())
    if not m or ".dev" in text:
        return None
    return tuple(int(x) for x in m.groups() if x is not None)


def version_at_least(text: str, minimum: str) -> bool | None:
    have, need = parse_version(text), parse_version(minimum)
    if have is None or need is None:
        return None
    width = max(len(have), len(need))
    return have + (0,) * (width - len(have)) >= need + (0,) * (width - len(need))


_FP = re.compile(r"^vllm-(?P<version>.+?)(?P<par>(?:-(?:tp|pp|dp)\d+|-ep)*)-(?P<hash>[0-9a-f]{8})$")


def parse_fingerprint(fp: str) -> dict[str, Any] | None:
    """``vllm-0.33.0-tp8-ep-1a2b3c4d`` -> version, tp, pp, dp, ep, hash; None when it is not vLLM's."""
    m = _FP.match(fp.strip())
    if not m:
        return None
    par = m.group("par")
    out: dict[str, Any] = {"version": m.group("version"), "hash": m.group("hash"), "ep": "-ep" in par}
    for key in ("tp", "pp", "dp"):
        k = re.search(rf"-{key}(\d+)", par)
        out[key] = int(k.group(1)) if k else 1
    return out
