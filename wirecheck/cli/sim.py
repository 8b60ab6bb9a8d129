"""``wirecheck sim`` (the vLLM simulator) and ``sim-gateway`` (the fault-injecting gateway).

The simulator's options are the fields of ``SimConfig`` (the ``FIELDS`` tables, ``_fields``); only
the fault spec is parsed by hand.
"""

from __future__ import annotations

import argparse

from wirecheck._errors import WirecheckError
from wirecheck.contracts import FAMILY_NAMES
from wirecheck.sim import SimConfig

from ._fields import Opt, add_fields, build

__all__ = ["register"]

FIELDS = {
    "model": Opt("served model name (default: the family's)"),
    "family": Opt("the dialect to serve", kwargs={"choices": FAMILY_NAMES}),
    "dialect": Opt(kwargs={"choices": ("vllm-0.33", "vllm-0.15")}),
    "seed": Opt(),
    "api_key": Opt("like vLLM's --api-key: requests without 'Authorization: Bearer KEY' get 401"),
    "tool_parser": Opt("serve without a tool parser (markup stays in content)", "--no-tool-parser"),
    "max_model_len": Opt(),
}
CAPACITY_FIELDS = {
    "block_size": Opt(),
    "num_gpu_blocks": Opt("KV budget in blocks"),
    "max_num_seqs": Opt(),
    "max_num_batched_tokens": Opt(),
    "max_waiting": Opt("queue length past which requests get 503"),
    "prefill_tokens_per_s": Opt(),
    "decode_tokens_per_s": Opt(),
    "enable_prefix_caching": Opt(None, "--no-prefix-caching"),
    "hybrid_cache": Opt("Kimi K3 KDA cache: state only at prompt ends"),
    "prefix_cache_retention_interval": Opt(),
    "time_scale": Opt("real seconds per simulated second"),
    "slow_first_token_s": Opt(),
    "oom_at_tokens": Opt(),
    "oom_recover_s": Opt(),
}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("sim", help="run the vLLM-faithful simulator (docs/sim.md)")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    add_fields(s, SimConfig, FIELDS)
    add_fields(s.add_argument_group("capacity model"), SimConfig, CAPACITY_FIELDS)
    s.add_argument(
        "--environment",
        default=None,
        metavar="DIR",
        help="also write this simulated deployment's evidence (nvidia-smi.xml/.txt, container.json, "
        "startup.log) for wirecheck accept",
    )
    s.add_argument(
        "--dcgm-port",
        type=int,
        default=None,
        metavar="P",
        help="also serve a simulated DCGM exporter's /metrics on this port (memory follows the KV use)",
    )
    s.add_argument(
        "--faults", default="", metavar="SPEC", help="NAME[=RATE],... (wirecheck sim --list-faults)"
    )
    s.add_argument("--list-faults", action="store_true", help="list the fault names and exit")
    s.set_defaults(run=_sim)

    g = sub.add_parser("sim-gateway", help="run the fault-injecting gateway (docs/sim.md)")
    g.add_argument("--upstream", required=False, metavar="URL")
    g.add_argument("--host", default="127.0.0.1")
    g.add_argument("--port", type=int, default=8001)
    g.add_argument("--faults", default="", metavar="SPEC")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--list-faults", action="store_true")
    g.set_defaults(run=_sim_gateway)


def _sim(args: argparse.Namespace) -> int:
    import asyncio

    import uvicorn

    from wirecheck.sim import FAULTS, create_app, parse_faults

    if args.list_faults:
        for name, what in FAULTS.items():
            print(f"{name:32} {what}")
        return 0
    cfg = build(SimConfig, args, FIELDS | CAPACITY_FIELDS, faults=parse_faults(args.faults, seed=args.seed))
    if args.environment:
        from wirecheck.sim import write_environment

        paths = write_environment(args.environment, cfg)
        print(
            f"wirecheck sim: evidence for accept in {args.environment}: {', '.join(p.name for p in paths.values())}"
        )
    print(
        f"wirecheck sim: {cfg.model} ({cfg.family}, {cfg.dialect}) on http://{args.host}:{args.port}",
        flush=True,
    )
    app = create_app(cfg)
    if args.dcgm_port is None:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
        return 0
    from wirecheck.sim import create_dcgm_app

    print(
        f"wirecheck sim: simulated DCGM exporter on http://{args.host}:{args.dcgm_port}/metrics", flush=True
    )

    async def both() -> None:
        servers = [
            uvicorn.Server(uvicorn.Config(a, host=args.host, port=p, log_level="warning"))
            for a, p in ((app, args.port), (create_dcgm_app(app), args.dcgm_port))
        ]
        await asyncio.gather(*(srv.serve() for srv in servers))

    asyncio.run(both())
    return 0


def _sim_gateway(args: argparse.Namespace) -> int:
    import uvicorn

    from wirecheck.sim import GATEWAY_FAULTS, GatewayConfig, create_gateway, parse_gateway_faults

    if args.list_faults:
        for name, what in GATEWAY_FAULTS.items():
            print(f"{name:28} {what}")
        return 0
    if not args.upstream:
        raise WirecheckError("sim-gateway: --upstream URL is required")
    cfg = GatewayConfig(upstream=args.upstream, faults=parse_gateway_faults(args.faults, seed=args.seed))
    print(f"wirecheck sim-gateway: http://{args.host}:{args.port} -> {args.upstream}", flush=True)
    uvicorn.run(create_gateway(cfg), host=args.host, port=args.port, log_level="warning")
    return 0
