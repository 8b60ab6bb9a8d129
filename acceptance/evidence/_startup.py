"""The vLLM server's startup log: version, flags, engine config, KV cache lines, NCCL/CUDA/DP lines,
every WARNING, error and fallback, and the load timings. A file with no vLLM log line in it is an
:class:`InputError`, never a silent empty result."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wirecheck.contracts import InputError

from ._files import SIM_MARKER, read_text
from ._warnings import DANGEROUS, clean_line

__all__ = ["StartupLog", "read_startup_log"]


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
    text = read_text(path, "startup log")
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
