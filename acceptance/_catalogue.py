"""The catalogue of acceptance checks: every check id a phase may emit, declared once.

Like the rule catalogue in ``contracts``, this is the one place a check id is spelled. A :class:`Check`
with an id not declared here is refused when it is built, so a new check cannot appear in a report
without a line here, and ``docs/acceptance.md`` carries the table generated from it (a test fails when
the docs are stale). An id ending in ``.`` declares a family of numbered ids (one per startup warning).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CHECKS", "PHASE_NAMES", "CheckSpec", "declared", "render_catalogue"]

#: the phases, in the order they run (the Phase protocol's list in ``_phases`` follows it)
PHASE_NAMES = ("compat", "capacity", "cache", "interface")


@dataclass(frozen=True, slots=True)
class CheckSpec:
    id: str
    #: what it establishes, in one line
    title: str
    #: the verdicts a failure or missing evidence can lead to
    leads_to: tuple[str, ...]
    #: the report section that shows its evidence
    section: str
    #: True when only a real GPU host can give the evidence that makes it pass
    needs_gpu_host: bool = False

    @property
    def phase(self) -> str:
        return self.id.split(".", 1)[0]

    @property
    def family(self) -> bool:
        return self.id.endswith(".")


_R, _S, _L = "rework", "scale-up", "limited"

CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec("compat.driver", "Host driver R580+ and >= 580.65.06", (_R,), "Evidence: hosts", True),
    CheckSpec("compat.driver-uniform", "One driver version on every host", (_R,), "Evidence: hosts", True),
    CheckSpec("compat.gpus", "GPU model and count recorded", (_R,), "Evidence: hosts", True),
    CheckSpec("compat.topology", "TP x PP x DP matches the nodes' GPUs", (_R,), "Evidence: topology", True),
    CheckSpec(
        "compat.interconnect",
        "NVLink / InfiniBand / Fabric Manager recorded",
        (_R,),
        "Evidence: topology",
        True,
    ),
    CheckSpec(
        "compat.cuda-runtime", "CUDA 13 runtime inside the container", (_R,), "Evidence: container", True
    ),
    CheckSpec("compat.container", "Container facts from wirecheck probe", (_R,), "Evidence: container", True),
    CheckSpec("compat.image", "Official kimi-k3 image or a documented self-built one", (_R,), "Compat"),
    CheckSpec("compat.self-built", "Self-built image record complete", (_R,), "Self-built vs official"),
    CheckSpec("compat.vllm-version", "vLLM 0.27.1 or later", (_R,), "Compat"),
    CheckSpec("compat.engine", "The engine answered /version", (_R,), "Compat"),
    CheckSpec("compat.same-instance", "Probe, /version and log name one instance", (_R,), "Compat"),
    CheckSpec("compat.fingerprint", "system_fingerprint agrees with the startup log", (_R,), "Compat"),
    CheckSpec("compat.flags", "Recipe parser and prefix-caching flags", (_R,), "Compat", True),
    CheckSpec(
        "compat.log-warning.", "Startup warning, acknowledged or not (one per line)", (_R,), "Key logs", True
    ),
    CheckSpec(
        "compat.log-error.", "Startup error, acknowledged or not (one per line)", (_R,), "Key logs", True
    ),
    CheckSpec(
        "compat.log-danger.", "Known-dangerous startup warning (NCCL socket, ...)", (_R, _L), "Key logs", True
    ),
    CheckSpec("capacity.metrics", "Engine /metrics scraped", (_R,), "Capacity"),
    CheckSpec("capacity.load", "Engine up and serving after load", (_R,), "Capacity: load", True),
    CheckSpec("capacity.long-input", "The agent sample set at full length", (_S, _R), "Capacity: long input"),
    CheckSpec("capacity.ramp", "Concurrency ramp holds the SLO", (_S, _R, _L), "Capacity: ramp"),
    CheckSpec("capacity.open-loop-lag", "The load client kept to its schedule", (), "Capacity: ramp"),
    CheckSpec("capacity.resources", "No resource faults at the target", (_S,), "Capacity: ramp"),
    CheckSpec("capacity.oom", "No out-of-memory", (_S,), "Capacity: OOM"),
    CheckSpec(
        "capacity.gpu-memory",
        "Per-GPU memory measured through every step",
        (_R,),
        "Capacity: GPU memory",
        True,
    ),
    CheckSpec("capacity.soak", "Soak without drift, errors or resource faults", (_S, _R), "Capacity: soak"),
    CheckSpec("cache.metrics", "Prefix-cache counters scraped", (_R,), "Cache"),
    CheckSpec("cache.probes", "The four cache probes answered", (_R,), "Cache"),
    CheckSpec("cache.instance", "Counters come from the serving instance", (_R,), "Cache"),
    CheckSpec(
        "cache.instances", "With several metrics URLs: one instance answered, none restarted", (_R,), "Cache"
    ),
    CheckSpec("cache.enabled", "Prefix caching enabled", (_R,), "Cache"),
    CheckSpec("cache.usage", "Answers report cached tokens", (_R,), "Cache"),
    CheckSpec("cache.cold", "Cold probe: queries up, hits near 0", (_R,), "Cache"),
    CheckSpec("cache.warm-a", "Warm A hits most of the prompt", (_R,), "Cache"),
    CheckSpec("cache.warm-b", "Warm B hits its shared prefix", (_R,), "Cache"),
    CheckSpec("cache.control", "Changed-prefix control hits drop", (_R,), "Cache"),
    CheckSpec("cache.computed", "Warm prefill computes fewer tokens", (_R,), "Cache"),
    CheckSpec("cache.prefill-time", "Warm prefill time falls in proportion", (_R,), "Cache"),
    CheckSpec("cache.sources", "Local, external and restart sources told apart", (_R,), "Cache"),
    CheckSpec("interface.gateway", "The gateway forwards answers unchanged", (_R,), "Interface: attribution"),
    CheckSpec("interface.caller", "Requests keep the contract", (_R,), "Interface: attribution"),
    CheckSpec("interface.contracts", "Agent requests keep the contracts", (_R, _L), "Interface"),
    CheckSpec(
        "interface.tool-retry", "The model retries a tool after a failed tool result", (_R, _L), "Interface"
    ),
    CheckSpec("interface.scenarios", "Hypothesis agent scenarios", (_R, _L), "Interface: scenarios"),
)

_BY_ID = {c.id: c for c in CHECKS}


def declared(check_id: str) -> CheckSpec | None:
    """The declaration of ``check_id``: its own line, or the numbered family it belongs to."""
    spec = _BY_ID.get(check_id)
    if spec is not None:
        return spec
    head, _, tail = check_id.rpartition(".")
    fam = _BY_ID.get(head + ".")
    return fam if fam is not None and tail.isdigit() else None


def render_catalogue() -> str:
    """The Markdown table docs/acceptance.md carries between its catalogue markers."""
    lines = [
        "| check | phase | what it establishes | failure leads to | report section | real GPU host |",
        "|---|---|---|---|---|---|",
    ]
    for c in CHECKS:
        cid = f"`{c.id}N`" if c.family else f"`{c.id}`"
        leads = ", ".join(c.leads_to) or "listed (warn)"
        lines.append(
            f"| {cid} | {c.phase} | {c.title} | {leads} | {c.section} | {'yes' if c.needs_gpu_host else 'no'} |"
        )
    return "\n".join(lines) + "\n"
