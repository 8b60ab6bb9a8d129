"""The ``wirecheck`` command line.

Exit codes: 0 no error finding, 1 at least one error finding, 2 unusable input or usage.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from wirecheck._version import __version__
from wirecheck.contracts import (
    CheckConfig,
    Exchange,
    WirecheckError,
    check_exchanges,
    read_exchanges,
    render_json,
    render_junit,
    render_rules_markdown,
    render_text,
    rules,
)

EXAMPLE = Path(__file__).with_name("examples") / "dual-tap.jsonl"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="wirecheck", description="Conformance checks for OpenAI-compatible agent traffic served by vLLM."
    )
    p.add_argument("--version", action="version", version=f"wirecheck {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    c = sub.add_parser("check", help="check recorded exchanges (JSONL) against the contracts")
    c.add_argument("files", nargs="*", metavar="FILE", help="exchange JSONL files ('-' for standard input)")
    c.add_argument("--example", action="store_true", help="check the shipped example capture")
    c.add_argument("--format", choices=("text", "json", "junit"), default="text")
    c.add_argument("--output", "-o", metavar="PATH", help="write the report here instead of standard output")
    c.add_argument(
        "--pair-taps",
        action="store_true",
        help="also pair caller and engine exchanges that lack a correlation id, by request fingerprint and time",
    )
    c.add_argument(
        "--direct",
        action="store_true",
        help="the taps sit straight in front of the engine: single-tap findings keep their fault",
    )
    c.add_argument("--family", choices=("auto", "kimi_k2", "kimi_k3", "hermes", "generic"), default="auto")
    expect = c.add_mutually_exclusive_group()
    expect.add_argument(
        "--expect-reasoning",
        dest="expect_reasoning",
        action="store_true",
        default=None,
        help="every response must carry reasoning",
    )
    expect.add_argument(
        "--no-expect-reasoning", dest="expect_reasoning", action="store_false", help="never expect reasoning"
    )
    c.add_argument(
        "--disable", action="append", default=[], metavar="RULE", help="leave a rule out (repeatable)"
    )

    r = sub.add_parser("rules", help="list the rule catalogue")
    r.add_argument("--markdown", action="store_true", help="print docs/rules.md")

    s = sub.add_parser("sim", help="run the vLLM-faithful simulator (docs/sim.md)")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--model", default="", help="served model name (default: the family's)")
    s.add_argument("--family", choices=("kimi_k2", "kimi_k3", "hermes"), default="kimi_k2")
    s.add_argument("--dialect", choices=("vllm-0.33", "vllm-0.15"), default="vllm-0.33")
    s.add_argument(
        "--faults", default="", metavar="SPEC", help="NAME[=RATE],... (wirecheck sim --list-faults)"
    )
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--list-faults", action="store_true", help="list the fault names and exit")
    s.add_argument("--api-key", default=None)
    s.add_argument(
        "--no-tool-parser", action="store_true", help="serve without a tool parser (markup stays in content)"
    )
    s.add_argument("--max-model-len", type=int, default=131072)
    cap = s.add_argument_group("capacity model")
    cap.add_argument("--block-size", type=int, default=16)
    cap.add_argument("--num-gpu-blocks", type=int, default=8192, help="KV budget in blocks")
    cap.add_argument("--max-num-seqs", type=int, default=256)
    cap.add_argument("--max-num-batched-tokens", type=int, default=8192)
    cap.add_argument("--max-waiting", type=int, default=1024, help="queue length past which requests get 503")
    cap.add_argument("--prefill-tokens-per-s", type=float, default=20000.0)
    cap.add_argument("--decode-tokens-per-s", type=float, default=60.0)
    cap.add_argument("--no-prefix-caching", action="store_true")
    cap.add_argument(
        "--hybrid-cache", action="store_true", help="Kimi K3 KDA cache: state only at prompt ends"
    )
    cap.add_argument("--prefix-cache-retention-interval", type=int, default=0)
    cap.add_argument("--time-scale", type=float, default=1.0, help="real seconds per simulated second")
    cap.add_argument("--slow-first-token-s", type=float, default=2.0)
    cap.add_argument("--oom-at-tokens", type=int, default=None)
    cap.add_argument("--oom-recover-s", type=float, default=None)

    g = sub.add_parser("sim-gateway", help="run the fault-injecting gateway (docs/sim.md)")
    g.add_argument("--upstream", required=False, metavar="URL")
    g.add_argument("--host", default="127.0.0.1")
    g.add_argument("--port", type=int, default=8001)
    g.add_argument("--faults", default="", metavar="SPEC")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--list-faults", action="store_true")
    return p


def _load(files: Sequence[str]) -> list[Exchange]:
    out: list[Exchange] = []
    for name in files:
        if name == "-":
            out.extend(read_exchanges(sys.stdin))
        else:
            out.extend(read_exchanges(name))
    return out


def _check(args: argparse.Namespace) -> int:
    files = list(args.files)
    if args.example:
        files.append(str(EXAMPLE))
    if not files:
        raise WirecheckError("check: name at least one FILE (or --example)")
    unknown = [r for r in args.disable if r not in {x.id for x in rules()}]
    if unknown:
        raise WirecheckError(
            f"check: unknown rule(s) for --disable: {', '.join(unknown)} (see 'wirecheck rules')"
        )
    config = CheckConfig(
        family=args.family,
        expect_reasoning=args.expect_reasoning,
        direct=args.direct,
        pair_by_fingerprint=args.pair_taps,
        disabled=frozenset(args.disable),
    )
    exchanges = _load(files)
    result = check_exchanges(exchanges, config)
    if args.format == "json":
        text = render_json(result)
    elif args.format == "junit":
        text = render_junit(result, exchange_ids=[e.id for e in exchanges])
    else:
        text = render_text(result, color=args.output is None and sys.stdout.isatty())
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 1 if result.errors else 0


def _rules(args: argparse.Namespace) -> int:
    if args.markdown:
        sys.stdout.write(render_rules_markdown())
        return 0
    for r in rules():
        print(f"{r.id:32} {r.severity!s:8} {r.fault!s:8} {r.summary}")
    return 0


def _sim(args: argparse.Namespace) -> int:
    import uvicorn

    from wirecheck.sim import FAULTS, SimConfig, create_app, parse_faults

    if args.list_faults:
        for name, what in FAULTS.items():
            print(f"{name:32} {what}")
        return 0
    cfg = SimConfig(
        model=args.model,
        family=args.family,
        dialect=args.dialect,
        faults=parse_faults(args.faults, seed=args.seed),
        seed=args.seed,
        api_key=args.api_key,
        tool_parser=not args.no_tool_parser,
        max_model_len=args.max_model_len,
        block_size=args.block_size,
        num_gpu_blocks=args.num_gpu_blocks,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        max_waiting=args.max_waiting,
        prefill_tokens_per_s=args.prefill_tokens_per_s,
        decode_tokens_per_s=args.decode_tokens_per_s,
        enable_prefix_caching=not args.no_prefix_caching,
        hybrid_cache=args.hybrid_cache,
        prefix_cache_retention_interval=args.prefix_cache_retention_interval,
        time_scale=args.time_scale,
        slow_first_token_s=args.slow_first_token_s,
        oom_at_tokens=args.oom_at_tokens,
        oom_recover_s=args.oom_recover_s,
    )
    print(
        f"wirecheck sim: {cfg.model} ({cfg.family}, {cfg.dialect}) on http://{args.host}:{args.port}",
        flush=True,
    )
    uvicorn.run(create_app(cfg), host=args.host, port=args.port, log_level="warning")
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        if args.command == "check":
            return _check(args)
        if args.command == "rules":
            return _rules(args)
        if args.command == "sim":
            return _sim(args)
        if args.command == "sim-gateway":
            return _sim_gateway(args)
    except WirecheckError as exc:
        print(f"wirecheck: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    parser.error(f"unknown command {args.command}")
    return 2
