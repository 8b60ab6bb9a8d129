"""``wirecheck accept`` (go-live acceptance), ``probe``, ``locustfile`` and ``demo``.

Every option that is one field of ``AcceptOptions`` comes from the ``FIELDS`` table (``_fields``);
the rest (headers, SLO and limits, the startup logs, the taps of --via-proxy) are built here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from wirecheck._errors import WirecheckError
from wirecheck.acceptance import ALL_PHASES, AcceptOptions, Limits, Slo
from wirecheck.contracts import FAMILY_NAMES

from ._common import float_list, headers_arg, hostport, redact_option, redaction, via_proxy_options
from ._fields import Opt, add_fields, build

#: every phase, in the order they run (acceptance's one list: a new phase is in the default)
_ALL = ",".join(ALL_PHASES)

__all__ = ["register"]

FIELDS = {
    "target": Opt("where callers send requests (engine or gateway)", kwargs={"metavar": "URL"}),
    "engine_url": Opt(
        "the vLLM engine itself: /version, /tokenize, /health, /metrics", kwargs={"metavar": "URL"}
    ),
    "metrics_urls": Opt(
        "engine /metrics (one per engine; default ENGINE-URL/metrics)", "--metrics-url", {"metavar": "URL"}
    ),
    # GPU memory measured through every capacity step, and the evidence an SRE signs
    "gpu_metrics_urls": Opt(
        "a DCGM exporter's /metrics per node (DCGM_FI_DEV_FB_USED/FB_FREE/GPU_UTIL)",
        "--gpu-metrics-url",
        {"metavar": "URL"},
    ),
    "gpu_source": Opt(
        "where GPU memory is sampled (auto: --gpu-metrics-url, else NVML, else nvidia-smi)",
        kwargs={"choices": ("auto", "dcgm", "nvml", "nvidia-smi", "none")},
    ),
    "ack_warnings": Opt(
        "acknowledge startup-log warnings matching REGEX (each unknown warning needs one to pass)",
        "--ack-warning",
        {"action": "append", "nargs": None, "metavar": "REGEX"},
    ),
    "recipe_accessed": Opt("when the operator read the vLLM recipe", kwargs={"metavar": "DATE"}),
    "support_status": Opt(
        "the recipe's vLLM support status for this model, as read", kwargs={"metavar": "TEXT"}
    ),
    "host_files": Opt(
        "nvidia-smi -q -x (or nvidia-smi) output from each host, or several samples",
        "--host-info",
        {"metavar": "FILE"},
    ),
    "container_file": Opt(
        "what `wirecheck probe` printed inside the container", "--container-info", {"metavar": "FILE"}
    ),
    "topology_files": Opt(
        "`nvidia-smi topo -m` output from each node (NVLink, NICs)", "--topology", {"metavar": "FILE"}
    ),
    "reviewer": Opt("who reviews this acceptance (recorded in the evidence)", kwargs={"metavar": "NAME"}),
    "profile": Opt(kwargs={"choices": ("quick", "standard", "soak")}),
    "model": Opt("model name to send (default: the first of /v1/models)"),
    "family": Opt(
        "family whose parser flags to hold the deployment to (default: from the model name)",
        kwargs={"choices": FAMILY_NAMES},
    ),
    "target_concurrency": Opt(
        "the concurrency production needs (default: the ramp's top)", kwargs={"metavar": "N"}
    ),
    "interface_requests": Opt(
        "agent requests in the interface phase (default: the profile's)", kwargs={"metavar": "N"}
    ),
    "scenario_examples": Opt(
        "hypothesis scenario examples (default: the profile's; 0 skips them)", kwargs={"metavar": "N"}
    ),
    "seed": Opt(),
    # capacity at the context lengths the team really sends, not short synthetic prompts only
    "samples": Opt(
        "the team's own chat requests for the long-input and ramp stages: JSONL of request bodies, "
        "or a capture replay reads (exchange JSONL, HAR, mitmproxy flows, a wirecheck store)",
        kwargs={"metavar": "FILE"},
    ),
    "load_engine": Opt(
        "run the capacity load in this process or on Locust workers",
        kwargs={"choices": ("in-process", "locust")},
    ),
    "locust_workers": Opt("local Locust workers to start", kwargs={"metavar": "N"}),
    "locust_master": Opt(
        "bind the Locust master here and wait for workers started on other machines "
        '(locust -f "$(wirecheck locustfile)" --worker --master-host HOST --master-port PORT)',
        kwargs={"metavar": "HOST:PORT"},
    ),
    "locust_expect_workers": Opt("with --locust-master: workers to wait for", kwargs={"metavar": "N"}),
}
SLO_FIELDS = {
    "ttft_p95_s": Opt("each capacity step's TTFT p95 limit, seconds", "--slo-ttft-p95", {"metavar": "S"}),
    "itl_p95_s": Opt("inter-token latency p95 limit, seconds", "--slo-itl-p95", {"metavar": "S"}),
    "e2e_p95_s": Opt("end-to-end latency p95 limit, seconds", "--slo-e2e-p95", {"metavar": "S"}),
    "max_error_rate": Opt("largest share of failed requests", "--max-error-rate", {"metavar": "FRACTION"}),
}
LIMIT_FIELDS = {
    "scope": Opt("for limited: the rate-limit scope", "--limit-scope", {"metavar": "TEXT"}),
    "owner": Opt("for limited: the on-call owner", "--on-call", {"metavar": "OWNER"}),
    "rollback": Opt("for limited: the rollback conditions", "--rollback", {"metavar": "TEXT"}),
    "max_retry_rate": Opt(
        "at most this share of requests may need a retry for limited",
        "--max-retry-rate",
        {"metavar": "FRACTION"},
    ),
}
IMAGE_FIELDS = {
    "official_image": Opt("the deployment runs vllm/vllm-openai:kimi-k3"),
    "self_built": Opt(
        "JSON build record of a self-built image (docs/acceptance.md)", kwargs={"metavar": "FILE"}
    ),
}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    a = sub.add_parser(
        "accept",
        help="go-live acceptance: compat, capacity, cache and interface phases, one verdict, a report folder",
        description="Exit codes: 0 accepted (go, or limited with its conditions), 1 not accepted "
        "(rework, scale-up, limited without conditions, or a partial run), 2 unusable input.",
    )
    add_fields(a, AcceptOptions, FIELDS)
    add_fields(a.add_mutually_exclusive_group(), AcceptOptions, IMAGE_FIELDS)
    a.add_argument(
        "--startup-log",
        action="extend",
        nargs="+",
        default=[],
        metavar="FILE",
        help="the vLLM server's log from its start (one per node: the first is held to the recipe)",
    )
    a.add_argument("--phases", default=_ALL, help=f"comma list (default: all, {_ALL})")
    a.add_argument("--out", required=True, metavar="DIR", help="report folder")
    a.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="K:V",
        help="send this header with every request (its value is never written to the report folder)",
    )
    redact_option(a)
    add_fields(a, Slo, SLO_FIELDS)
    a.add_argument(
        "--open-loop",
        default=None,
        metavar="RPS,...",
        help="ramp by arrival rates (open loop) instead of concurrency",
    )
    add_fields(a, Limits, LIMIT_FIELDS)
    via_proxy_options(a)
    a.add_argument(
        "--store",
        default=None,
        metavar="PATH|URL",
        help="with --via-proxy: where the taps record (default DIR/wirecheck.db; or postgresql://...)",
    )
    a.add_argument("--format", choices=("text", "json"), default="text")
    a.add_argument("--quiet", action="store_true", help="no progress lines")
    a.set_defaults(run=_accept)

    sub.add_parser(
        "locustfile", help="print the path of wirecheck's locustfile (the WirecheckUser class)"
    ).set_defaults(run=_locustfile)

    pr = sub.add_parser(
        "probe", help="print the container facts compat needs (run it inside the serving container)"
    )
    pr.add_argument(
        "--image",
        default=None,
        metavar="TAG",
        help="the image this container runs (it cannot see its own tag)",
    )
    pr.add_argument("--out", default=None, metavar="FILE", help="write the JSON here instead of stdout")
    pr.add_argument(
        "--script",
        action="store_true",
        help="print the probe as a standalone Python script, for containers without wirecheck "
        "(wirecheck probe --script | docker exec -i CONTAINER python3 - --image TAG)",
    )
    pr.set_defaults(run=_probe)

    d = sub.add_parser(
        "demo",
        help="the whole tool on loopback with faults: accept --profile quick through dual taps, a verdict, a report",
    )
    d.add_argument("--out", default="wirecheck-demo", help="report folder (default ./wirecheck-demo)")
    d.add_argument("--requests", type=int, default=28, help="interface requests (the acceptance's agent set)")
    d.add_argument("--seed", type=int, default=7)
    d.add_argument("--phases", default=_ALL, help=f"acceptance phases to run (default: all, {_ALL})")
    d.set_defaults(run=_demo)


def _phases(value: str) -> list[str]:
    return [p.strip() for p in value.split(",") if p.strip()]


def options(args: argparse.Namespace) -> AcceptOptions:
    return build(
        AcceptOptions,
        args,
        FIELDS | IMAGE_FIELDS,
        out=Path(args.out),
        startup_log=args.startup_log[0] if args.startup_log else None,
        more_startup_logs=args.startup_log[1:],
        phases=_phases(args.phases),
        headers=headers_arg(args.header),
        redaction=redaction(args),
        slo=build(Slo, args, SLO_FIELDS),
        limits=build(Limits, args, LIMIT_FIELDS),
        open_loop_rates=float_list(args.open_loop, "--open-loop"),
    )


def _accept(args: argparse.Namespace) -> int:
    import asyncio

    from wirecheck.acceptance import AcceptanceResult, InterfaceFacts, Progress, run_acceptance, via_taps
    from wirecheck.record import Store

    opts = options(args)
    progress = Progress(quiet=args.quiet)

    async def run() -> object:
        if not args.via_proxy:
            return await run_acceptance(opts, progress)
        if not args.engine_url:
            raise WirecheckError("accept: --via-proxy needs --engine-url (the engine behind the gateway)")
        port = hostport(args.engine_listen, "--engine-listen")[1]
        opts.out.mkdir(parents=True, exist_ok=True)
        store = Store(args.store or opts.out / "wirecheck.db", writer=True)
        try:
            async with via_taps(
                args.target, args.engine_url, port, store, redaction=opts.written_redaction()
            ) as (caller_url, source):
                opts.topology.update(
                    gateway=args.target, taps=f"caller tap {caller_url}, engine tap :{port}", store=store.path
                )
                opts.target, opts.taps = caller_url, source
                return await run_acceptance(opts, progress)
        finally:
            store.close()

    result = asyncio.run(run())
    assert isinstance(result, AcceptanceResult)
    v = result.verdict
    if args.format == "json":
        print(json.dumps(result.report["verdict"], indent=2))
    else:
        # a verdict on the simulator's evidence says so wherever it is read
        print(f"verdict: {v.label}" + (" [SIMULATED evidence: not a real deployment]" if v.simulated else ""))
        for r in v.reasons:
            print(f"  - {r}")
        iface = next((p.facts for p in result.phases if isinstance(p.facts, InterfaceFacts)), None)
        if iface is not None and iface.errors_by_fault:
            blamed = ", ".join(f"{k} {n}" for k, n in iface.errors_by_fault.items())
            print(f"attribution ({iface.attributed_from}): {blamed}")
        print(
            f"report: {result.files['html']} and {result.files['markdown']} (also report.json, alerts.yml, grafana-dashboard.json)"
        )
    return 0 if v.accepted else 1


def _probe(args: argparse.Namespace) -> int:
    from wirecheck.acceptance import probe

    if args.script:
        from wirecheck.acceptance import probe_script

        sys.stdout.write(probe_script())
        return 0
    text = json.dumps(probe(args.image), indent=2) + "\n"
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"probe: wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _locustfile(args: argparse.Namespace) -> int:
    from wirecheck.acceptance import locustfile_path

    print(locustfile_path())
    return 0


def _demo(args: argparse.Namespace) -> int:
    from wirecheck.acceptance import run_demo

    return run_demo(args.out, requests=args.requests, seed=args.seed, phases=_phases(args.phases))
