"""Simulator configuration and the fault spec.

A fault spec is a comma-separated list of ``NAME`` or ``NAME=RATE`` (rate 0..1, default 1), e.g.
``model.invalid_json=0.2,engine.reset_mid_stream=0.05``. Whether a fault fires for a request is
decided by a hash of the seed, the fault name and the request's sequence number, so a run with the
same seed and traffic fires the same faults. Names are listed in docs/sim.md and in ``FAULTS``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from wirecheck.contracts import FAMILIES, ConfigError

from ._families import DEFAULT_FAMILY, SIM_FAMILIES

__all__ = ["FAULTS", "FaultSpec", "SimConfig", "parse_faults"]

#: every simulator fault: name -> what it does (docs/sim.md)
FAULTS: dict[str, str] = {
    "model.invalid_json": "tool call arguments with a syntax error in the middle (unquoted string)",
    "model.schema_violation": "tool call arguments of the wrong type for the tool's schema",
    "model.undeclared_tool": "a call to a tool the request did not declare",
    "model.bad_id": "Kimi K2: a call header without the functions. prefix (search:0)",
    "model.ignore_tool_choice": "tool_choice required/named is not obeyed (constrained decoding off)",
    "model.no_tool_retry": "after a failed tool result the model gives up in text instead of retrying the call",
    "parser.markup_in_content": "the tool parser fails: raw tool markup stays in content",
    "parser.call_dropped": "the call vanishes but finish_reason stays tool_calls (vllm #54701)",
    "parser.reasoning_in_content": "the reasoning parser fails: reasoning and </think> stay in content",
    "parser.truncated_args": "arguments cut short by the parser, finish_reason tool_calls",
    "parser.call_in_reasoning": (
        "the model writes its call before the thinking closes, which the family's parser leaves in the "
        "reasoning where vLLM 0.32's does (Kimi K3, vllm #54273); where 0.32's takes it out (Kimi K2, vllm "
        "PR 33646) nothing shows"
    ),
    "engine.queue_full": "HTTP 503 before any output (admission limit)",
    "engine.error_500": "HTTP 500 engine error",
    "engine.error_mid_stream": "an in-band error frame after some output, then [DONE]",
    "engine.reset_mid_stream": "the connection is cut after some output",
    "engine.json_output_unconstrained": (
        "JSON output wrapped in a Markdown fence: the requested format was not decoded under"
    ),
    "engine.slow_first_token": "the first token comes late (slow_first_token_s)",
}
DIALECTS = ("vllm-0.33", "vllm-0.15")


@dataclass(frozen=True, slots=True)
class FaultSpec:
    rates: dict[str, float] = field(default_factory=dict)
    seed: int = 0

    def fires(self, name: str, seq: int) -> bool:
        rate = self.rates.get(name, 0.0)
        if rate <= 0:
            return False
        if rate >= 1:
            return True
        h = hashlib.sha256(f"{self.seed}:{name}:{seq}".encode()).digest()
        return int.from_bytes(h[:8], "big") / 2**64 < rate

    def __bool__(self) -> bool:
        return any(r > 0 for r in self.rates.values())


def parse_faults(spec: str | None, *, seed: int = 0, known: dict[str, str] = FAULTS) -> FaultSpec:
    rates: dict[str, float] = {}
    for raw in (spec or "").split(","):
        part = raw.strip()
        if not part:
            continue
        name, _, rate_s = part.partition("=")
        name = name.strip()
        if name not in known:
            raise ConfigError(f"unknown fault {name!r}; known: {', '.join(sorted(known))}")
        try:
            rate = float(rate_s) if rate_s else 1.0
        except ValueError:
            raise ConfigError(f"fault {name}: rate {rate_s!r} is not a number") from None
        if not 0 <= rate <= 1:
            raise ConfigError(f"fault {name}: rate {rate} is not between 0 and 1")
        rates[name] = rate
    return FaultSpec(rates, seed)


@dataclass(kw_only=True, slots=True)
class SimConfig:
    model: str = ""  # empty: the family's usual model (the family table's example_model)
    family: str = DEFAULT_FAMILY
    dialect: str = "vllm-0.33"
    version: str = "0.33.0"
    faults: FaultSpec = field(default_factory=FaultSpec)
    seed: int = 0
    #: --enable-auto-tool-choice with a tool parser; without it tool markup stays in content
    tool_parser: bool = True
    reasoning_parser: bool = True
    max_model_len: int = 131072
    # capacity model
    block_size: int = 16
    num_gpu_blocks: int = 8192
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    max_waiting: int = 1024
    prefill_tokens_per_s: float = 20000.0
    decode_tokens_per_s: float = 60.0
    batch_slowdown: float = 0.01
    enable_prefix_caching: bool = True
    #: hybrid (Kimi K3 KDA) cache: state kept only at prompt ends, and every N tokens when N > 0
    hybrid_cache: bool = False
    prefix_cache_retention_interval: int = 0
    #: real seconds per simulated second (0.01 runs a hundred times faster)
    time_scale: float = 1.0
    slow_first_token_s: float = 2.0
    #: the engine dies (health 503, requests 500) when running sequences hold more tokens than this
    oom_at_tokens: int | None = None
    oom_recover_s: float | None = None
    tensor_parallel_size: int = 8
    #: like vLLM's --api-key: requests without "Authorization: Bearer KEY" get 401 {"error": "Unauthorized"}
    api_key: str | None = None
    sse_keep_alive_s: float | None = None

    def __post_init__(self) -> None:
        if self.family not in SIM_FAMILIES:
            raise ConfigError(f"family {self.family!r}: expected one of {', '.join(SIM_FAMILIES)}")
        if not self.model:
            self.model = FAMILIES[self.family].example_model
        if self.dialect not in DIALECTS:
            raise ConfigError(f"dialect {self.dialect!r}: expected one of {', '.join(DIALECTS)}")
        if self.time_scale <= 0:
            raise ConfigError("time_scale must be positive")
        if self.block_size <= 0 or self.num_gpu_blocks <= 0 or self.max_num_seqs <= 0:
            raise ConfigError("block_size, num_gpu_blocks and max_num_seqs must be positive")
        if self.prefix_cache_retention_interval < 0:
            raise ConfigError("prefix_cache_retention_interval must be >= 0")

    @property
    def reasoning_parser_on(self) -> bool:
        """A reasoning parser runs: asked for, and vLLM has one for the family (the table's)."""
        return self.reasoning_parser and FAMILIES[self.family].reasoning_parser is not None

    @property
    def thinking_default(self) -> bool:
        return FAMILIES[self.family].thinks_by_default

    @property
    def fingerprint(self) -> str:
        h = hashlib.sha256(f"{self.model}{self.version}".encode()).hexdigest()[:8]
        return f"vllm-{self.version}-tp{self.tensor_parallel_size}-{h}"
