"""``wirecheck scenarios``: hypothesis agent-loop scenarios against a live target."""

from __future__ import annotations

import argparse
import json
import shlex

from wirecheck._errors import WirecheckError

from ._common import headers_arg, hostport, progress_options, via_proxy_options

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sc = sub.add_parser("scenarios", help="drive hypothesis agent-loop scenarios against a live target")
    sc.add_argument("--target", required=True, metavar="URL")
    sc.add_argument("--examples", type=int, default=50)
    sc.add_argument("--seed", type=int, default=None, help="repeat a run exactly")
    sc.add_argument("--stream", choices=("both", "on", "off"), default="both")
    sc.add_argument("--model", default=None, help="model name to send (default: none, the server's)")
    sc.add_argument("--header", action="append", default=[], metavar="K:V")
    via_proxy_options(sc, "with --via-proxy: the engine (vLLM) behind the gateway")
    sc.add_argument(
        "--through-gateway",
        action="store_true",
        help="--target is a gateway and nothing taps its engine side: a failure the model, the parser or "
        "the engine would carry is blamed unknown (the gateway is not ruled out); --via-proxy sees both sides",
    )
    sc.add_argument(
        "--endpoint",
        choices=("chat", "responses", "messages"),
        default="chat",
        help="the API the agent loop speaks: chat completions, the Responses API, or the Anthropic "
        "Messages API",
    )
    progress_options(sc)
    sc.set_defaults(run=_scenarios)


def _scenarios(args: argparse.Namespace) -> int:
    import time

    from wirecheck.acceptance import Progress
    from wirecheck.contracts import CheckConfig
    from wirecheck.generators import ScenarioReport, engine_tap_line, header_variable, run_scenarios

    progress, t0 = Progress(quiet=args.quiet, every_s=args.progress_every), time.monotonic()

    def tick(r: ScenarioReport) -> None:
        progress.tick(r.progress_line(progress.eta(time.monotonic() - t0, r.examples_done, r.examples)))

    via = None
    if args.via_proxy:
        if not args.engine_upstream:
            raise WirecheckError(
                "scenarios: --via-proxy needs --engine-upstream URL (the engine behind the gateway)"
            )
        via = (args.engine_upstream, hostport(args.engine_listen, "--engine-listen")[1])
    report = run_scenarios(
        args.target,
        examples=args.examples,
        seed=args.seed,
        stream=args.stream,
        model=args.model,
        headers=headers_arg(args.header),
        via_proxy=via,
        # one attribution, the contracts': what only the caller's side saw is the caller tap's to judge
        config=None if via else CheckConfig(direct=not args.through_gateway),
        endpoint=args.endpoint,
        progress=tick,
    )
    progress.done()
    if report.ok:
        print(f"scenarios: {report.requests} requests over {args.examples} examples, no contract broken")
        return 0
    fail = report.failure
    assert fail is not None
    print(f"scenarios: contract broken after {report.requests} requests; the shortest failing request:")
    for line in fail.lines():  # with both taps, each says the side it was seen on
        print(f"  {line}")
    print(json.dumps(fail.request, indent=2))
    if fail.note:
        print(f"note: {fail.note}")
    print("reproduce:")
    names = list(headers_arg(args.header))
    if names:
        # the --header values are the operator's credentials: never printed (nor a raw control
        # character); the lines below read them from these variables
        print(f"  (set {', '.join(header_variable(n) for n in names)} to the --header values first)")
    if args.via_proxy:
        # the gateway forwards to the engine tap, which ends with the run: the curl line needs it back
        # (every reproduce line reruns as printed)
        print(f"  {engine_tap_line(args.engine_upstream, args.engine_listen)} &")
    print(f"  {fail.curl}")
    if args.seed is not None:
        print(f"  {_scenarios_line(args)}")
    return 1


def _scenarios_line(args: argparse.Namespace) -> str:
    """The command that reruns this run as given, the gateway's taps included (the line
    dropped --via-proxy and its engine flags)."""
    parts = ["wirecheck", "scenarios", "--target", args.target, "--examples", str(args.examples)]
    parts += ["--seed", str(args.seed)]
    if args.endpoint != "chat":
        parts += ["--endpoint", args.endpoint]
    if args.stream != "both":
        parts += ["--stream", args.stream]
    if args.model:
        parts += ["--model", args.model]
    if args.through_gateway and not args.via_proxy:
        parts.append("--through-gateway")
    if args.via_proxy:
        parts += [
            "--via-proxy",
            "--engine-upstream",
            args.engine_upstream,
            "--engine-listen",
            args.engine_listen,
        ]
    from wirecheck.generators import header_placeholder

    line = shlex.join(parts)
    for name in headers_arg(args.header):
        line += f" --header {header_placeholder(name)}"
    return line
