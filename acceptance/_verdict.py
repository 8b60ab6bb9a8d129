"""From the phases to one verdict (DESIGN.md), and the acceptance checklist ticked from evidence.

``rework`` when a check that concerns the environment fails (the compat chain, a gateway changing bytes,
a parser or flag misconfigured, prefix caching off, contract failures a retry does not fix); ``scale-up``
when compat passes but load, long input, the ramp or the soak show resource faults (OOM, preemption
growth, KV saturation); ``limited`` when what remains is non-critical and bounded (occasional contract
failures a retry fixes, queueing a rate limit holds), granted only with a scope, an on-call owner and
rollback conditions; ``go`` when every phase passes.
"""

from __future__ import annotations

from typing import Any

from ._catalogue import PHASE_NAMES, checks
from ._model import Check, Limits, PhaseResult, Verdict

__all__ = ["ALL_PHASES", "CHECKLIST", "checklist", "decide", "oom_line", "render_checklist"]

ALL_PHASES = PHASE_NAMES

#: the startup log's warning and error lines: each is a check, so the item is done when there are none
_LOG_LINES = ("compat.log-warning.", "compat.log-error.", "compat.log-danger.")
#: items whose checks, when present, are what stays open
NONE_EXPECTED = (_LOG_LINES,)

#: (item, the check ids or id prefixes that evidence it)
CHECKLIST: list[tuple[str, tuple[str, ...]]] = [
    ("Host driver R580+ and >= 580.65.06 on every host", ("compat.driver", "compat.driver-uniform")),
    (
        "GPU model, GPU count, node count and interconnect recorded; TP x PP x DP matches the GPUs",
        ("compat.gpus", "compat.topology", "compat.interconnect"),
    ),
    ("CUDA 13 runtime inside the container (not nvidia-smi's driver maximum)", ("compat.cuda-runtime",)),
    (
        "Official vllm/vllm-openai:kimi-k3 image, or a documented self-built image",
        ("compat.image", "compat.self-built"),
    ),
    (
        "vLLM 0.27.1 or later, the same instance everywhere",
        ("compat.vllm-version", "compat.same-instance", "compat.fingerprint"),
    ),
    (
        "Recipe flags: the family's tool and reasoning parsers, auto tool choice, prefix caching",
        ("compat.flags",),
    ),
    ("Startup log read: no unexplained warning or fallback", _LOG_LINES),
    (
        "Engine serves after load; load times and a per-GPU memory curve recorded",
        ("capacity.load", "capacity.gpu-memory"),
    ),
    ("The agent sample set is served at full length", ("capacity.long-input",)),
    (
        "SLO held up to the target concurrency, without resource faults",
        ("capacity.ramp", "capacity.resources", "capacity.oom", "capacity.metrics", "capacity.gpu-memory"),
    ),
    ("Soak without drift, errors or preemption growth", ("capacity.soak",)),
    (
        "Prefix cache: cold, warm A, warm B and control behave; counters from the serving instance",
        ("cache.",),
    ),
    (
        "Tool calls, reasoning and JSON output keep the contracts; a failed tool call is retried",
        ("interface.contracts", "interface.scenarios", "interface.tool-retry"),
    ),
    (
        "Gateway forwards answers unchanged; requests keep the contract",
        ("interface.gateway", "interface.caller"),
    ),
]


#: the items checklist() adds itself, not from checks: (item, where the report shows it)
_OWN_ITEMS = (
    (
        "Rollback alerts and a dashboard for the first days (generated; install them)",
        "alerts.yml, grafana-dashboard.json",
    ),
    ("Reviewer named", "Evidence: reviewer"),
    ("Post-launch monitoring owner named (--on-call)", "Verdict: limits"),
    ("Limited go-live: rate-limit scope, on-call owner and rollback conditions recorded", "Verdict: limits"),
)


def render_checklist() -> str:
    """docs/acceptance.md's map of checklist items to the checks and report sections that show them."""
    lines = [
        "| checklist item | checks | report section | needs a real GPU host |",
        "|---|---|---|---|",
    ]
    for title, keys in CHECKLIST:
        specs = [
            c for c in checks() if any(c.id == k or (k.endswith(".") and c.id.startswith(k)) for k in keys)
        ]
        ids = ", ".join(f"`{k}*`" if k.endswith(".") else f"`{k}`" for k in keys)
        sections = ", ".join(dict.fromkeys(c.section for c in specs))
        gpu = "yes" if any(c.needs_gpu_host for c in specs) else "no"
        lines.append(f"| {title} | {ids} | {sections} | {gpu} |")
    lines += [f"| {title} | (the run itself) | {where} | no |" for title, where in _OWN_ITEMS]
    return "\n".join(lines) + "\n"


def _matches(check: Check, keys: tuple[str, ...]) -> bool:
    return any(check.id == k or (k.endswith(".") and check.id.startswith(k)) for k in keys)


def checklist(
    phases: list[PhaseResult], reviewer: str | None, verdict: Verdict, files: dict[str, str]
) -> list[dict[str, Any]]:
    """Each item is done only when checks evidence it and none of them failed or lacked evidence."""
    checks = [c for ph in phases for c in ph.checks]
    ran = {ph.name for ph in phases if ph.blocked is None}
    blocked = {ph.name: ph.blocked for ph in phases if ph.blocked is not None}
    items = []
    for title, keys in CHECKLIST:
        found = [c for c in checks if _matches(c, keys)]
        phase = keys[0].split(".")[0]
        bad = [c for c in found if c.status in ("fail", "missing", "warn")]
        if phase in blocked:
            state, why = "not run", f"phase {phase} blocked: {blocked[phase]}"
        elif phase not in ran:
            state, why = "not run", f"phase {phase} did not run"
        elif keys in NONE_EXPECTED:
            # done when the evidence was given and no check matches (every warning is listed)
            if any(c.id == "compat.flags" and c.status == "missing" for c in checks):
                state, why = "open", "no startup log given"
            elif any(c.blocking for c in found):
                state, why = "open", "; ".join([f"{c.id}: {c.detail}" for c in found if c.blocking][:3])
            elif found:
                state, why = (
                    "done",
                    f"{len(found)} warnings, each acknowledged: "
                    + "; ".join(str(c.evidence.get("ack")) for c in found[:3]),
                )
            else:
                state, why = "done", "no warning, fallback or error in the startup log"
        elif not found:
            state, why = "open", "no evidence"
        elif any(c.blocking for c in found):
            state, why = "open", "; ".join(f"{c.id}: {c.detail}" for c in bad[:3])
        else:
            state, why = "done", "; ".join(f"{c.id}: {c.status}" for c in found[:4])
        items.append({"item": title, "state": state, "evidence": why, "checks": [c.id for c in found]})
    items.append(
        {
            "item": "Rollback alerts and a dashboard for the first days (generated; install them)",
            "state": "done" if files.get("alerts") and files.get("dashboard") else "open",
            "evidence": ", ".join(v for k, v in files.items() if k in ("alerts", "dashboard")),
            "checks": [],
        }
    )
    items.append(
        {
            "item": "Reviewer named",
            "state": "done" if reviewer else "open",
            "evidence": reviewer or "no --reviewer",
            "checks": [],
        }
    )
    items.append(
        {
            "item": "Post-launch monitoring owner named (--on-call)",
            "state": "done" if verdict.limits.get("owner") else "open",
            "evidence": verdict.limits.get("owner") or "no --on-call: nobody watches the first days",
            "checks": [],
        }
    )
    if verdict.decision == "limited":
        items.append(
            {
                "item": "Limited go-live: rate-limit scope, on-call owner and rollback conditions recorded",
                "state": "done" if verdict.granted else "open",
                "evidence": "; ".join(
                    f"{k}: {v}"
                    for k, v in verdict.limits.items()
                    if k in ("scope", "owner", "rollback") and v
                )
                or "missing " + ", ".join(verdict.missing_conditions),
                "checks": [],
            }
        )
    return items


def oom_line(oom: dict[str, Any]) -> str:
    """The OOM's evidence in one line, for the reasons of every report format."""
    mem = oom.get("gpu_memory_before"), oom.get("gpu_memory_after")
    return (
        f"OOM at {oom.get('step')}: concurrency {oom.get('concurrency')}, input tokens max "
        f"{oom.get('input_tokens_max')}, max output tokens {oom.get('max_output_tokens')}, max_model_len "
        f"{oom.get('max_model_len')}, prefix caching {oom.get('prefix_caching')}, KV offload "
        f"{oom.get('kv_offload')}, GPU memory used before/after {_mem(mem[0])} / {_mem(mem[1])}; "
        f"engine {oom.get('state')}"
    )


def _mem(m: Any) -> str:
    if not m:
        return "not measured"
    return f"{m.get('used_mib_max')} MiB of {m.get('total_mib')} MiB (max over {m.get('gpus')} GPUs)"


def decide(
    phases: list[PhaseResult], selected: list[str], limits: Limits, suggested: dict[str, Any]
) -> Verdict:
    blocking = [c for ph in phases for c in ph.checks if c.blocking]
    crashed = [ph for ph in phases if ph.error is not None]
    blocked = [ph for ph in phases if ph.blocked is not None]
    rework = [c for c in blocking if c.leads_to == "rework"]
    # the OOM leads the scale-up reasons: it is the cause, what follows it is consequence
    scale = sorted((c for c in blocking if c.leads_to == "scale-up"), key=lambda c: c.id != "capacity.oom")
    limited = [c for c in blocking if c.leads_to == "limited"]
    partial = set(selected) != set(ALL_PHASES)
    oom = next((c.evidence for c in scale if c.id == "capacity.oom"), None)

    def why(cs: list[Check]) -> list[str]:
        return [oom_line(c.evidence) if c.id == "capacity.oom" else f"{c.id}: {c.detail}" for c in cs]

    after = [f"(blocked) phase {ph.name} did not run: {ph.blocked}" for ph in blocked]
    lim = {"scope": limits.scope, "owner": limits.owner, "rollback": limits.rollback, "suggested": suggested}
    if crashed or rework:
        reasons = [f"phase {ph.name} could not finish: {ph.error}" for ph in crashed] + why(rework)
        reasons += [f"(also) {r}" for r in why(scale + limited)] + after
        return Verdict("rework", True, reasons, partial, limits=lim, oom=oom)
    if scale:
        reasons = why(scale) + [f"(also) {r}" for r in why(limited)] + after
        return Verdict("scale-up", True, reasons, partial, limits=lim, oom=oom)
    if blocked:
        # cannot happen without a failed check that blocked them; never let it read as go
        return Verdict("rework", True, after, partial, limits=lim)
    if limited:
        missing = limits.missing()
        return Verdict("limited", not missing, why(limited), partial, missing_conditions=missing, limits=lim)
    if not limits.owner:
        # go-live needs someone watching the first days (go-live checklist: "post-launch monitoring
        # owner ... named"); without one the go is not granted
        return Verdict(
            "go",
            False,
            ["every check of the phases run passed", "no monitoring owner named: pass --on-call OWNER"],
            partial,
            missing_conditions=["--on-call"],
            limits=lim,
        )
    return Verdict("go", True, ["every check of the phases run passed"], partial, limits=lim)
