"""The ``wirecheck`` command line.

Exit codes: 0 no error finding, 1 at least one error finding, 2 unusable input or usage; for
``accept``: 0 accepted (go, or limited with its conditions), 1 not accepted.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from wirecheck._errors import ERRORS, WirecheckError
from wirecheck._version import __version__
from wirecheck.contracts import (
    DEFAULT_REDACTION,
    FAMILY_CHOICES,
    FAMILY_NAMES,
    GENERIC,
    CheckConfig,
    Exchange,
    Finding,
    Redaction,
    bounded_loads,
    check_exchanges,
    detect_family,
    printable,
    read_exchanges,
    render_html,
    render_json,
    render_junit,
    render_rules_markdown,
    render_text,
    rules,
    unknown_family_note,
)

EXAMPLE = Path(__file__).with_name("examples") / "dual-tap.jsonl"


def _redact_option(p: argparse.ArgumentParser) -> None:
    # one policy for every writer (issue 11 point 4): --redact only ever adds to the default list
    p.add_argument(
        "--redact",
        action="append",
        default=[],
        metavar="NAME",
        help="also redact this header or query parameter in everything written (repeatable, or "
        "comma-separated); always redacted: headers "
        + ", ".join(sorted(DEFAULT_REDACTION.headers))
        + ", any header ending in "
        + ", ".join(DEFAULT_REDACTION.header_suffixes)
        + "; query keys "
        + ", ".join(sorted(DEFAULT_REDACTION.query_keys)),
    )


def _redaction(args: argparse.Namespace) -> Redaction:
    return DEFAULT_REDACTION.extended(args.redact)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="wirecheck", description="Conformance checks for OpenAI-compatible agent traffic served by vLLM."
    )
    p.add_argument("--version", action="version", version=f"wirecheck {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    c = sub.add_parser("check", help="check recorded exchanges (JSONL) against the contracts")
    c.add_argument("files", nargs="*", metavar="FILE", help="exchange JSONL files ('-' for standard input)")
    c.add_argument("--example", action="store_true", help="check the shipped example capture")
    c.add_argument("--format", choices=("text", "json", "junit", "html"), default="text")
    c.add_argument("--output", "-o", metavar="PATH", help="write the report here instead of standard output")
    c.add_argument(
        "--pair-taps",
        action="store_true",
        help="no effect, kept so that existing scripts run: taps always pair by correlation id, then "
        "completion id, then request fingerprint and time",
    )
    c.add_argument(
        "--direct",
        action="store_true",
        help="the taps sit straight in front of the engine: single-tap findings keep their fault",
    )
    c.add_argument(
        "--family",
        choices=FAMILY_CHOICES,
        default="auto",
        help="the family table's dialect to judge against (default: detected from the model name)",
    )
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
    _redact_option(c)

    r = sub.add_parser("rules", help="list the rule catalogue")
    r.add_argument("--markdown", action="store_true", help="print docs/rules.md")

    x = sub.add_parser("proxy", help="run the recording proxy in the request path")
    x.add_argument(
        "--upstream",
        required=True,
        metavar="URL",
        help="where the (caller) listener forwards: the gateway, or vLLM",
    )
    x.add_argument("--listen", default="127.0.0.1:8100", metavar="HOST:PORT")
    x.add_argument("--tap", default="caller", help="name of the first listener's tap (default caller)")
    x.add_argument(
        "--engine-upstream", metavar="URL", help="dual tap: where the engine listener forwards (vLLM)"
    )
    x.add_argument(
        "--engine-listen",
        default="127.0.0.1:8101",
        metavar="HOST:PORT",
        help="dual tap: point the gateway's upstream here",
    )
    x.add_argument(
        "--store",
        default="wirecheck.db",
        help="SQLite file (default wirecheck.db) or postgresql://USER@HOST/DB, shared by several proxy replicas",
    )
    x.add_argument("--no-store", action="store_true", help="forward only, record nothing")
    x.add_argument(
        "--no-live-checks", action="store_true", help="record only; check later with wirecheck check STORE"
    )
    _redact_option(x)
    x.add_argument("--body-limit", default="32MiB", help="largest request body (413 past it)")
    x.add_argument(
        "--read-timeout", type=float, default=600.0, help="seconds to wait for the upstream's next byte"
    )
    x.add_argument(
        "--settle",
        type=float,
        default=1.0,
        help="seconds to wait for the other tap before checking an exchange",
    )
    x.add_argument(
        "--admin",
        default="127.0.0.1:8102",
        metavar="HOST:PORT",
        help="the admin listener: /wirecheck/health, /findings, /metrics (default 127.0.0.1:8102; 'off' for none)",
    )
    x.add_argument(
        "--admin-token",
        default=None,
        metavar="TOKEN",
        help="bearer token the admin listener asks for (default $WIRECHECK_ADMIN_TOKEN); needed beyond loopback",
    )
    x.add_argument(
        "--correlation-secret",
        default=None,
        metavar="TEXT",
        help="key of the x-wirecheck-id correlation; replicas sharing a store need the same one "
        "(default $WIRECHECK_CORRELATION_SECRET, else random per process)",
    )
    x.add_argument(
        "--record-limit",
        default="16MiB",
        help="most bytes recorded per request or response body; the rest is forwarded, not kept",
    )
    x.add_argument("--max-header-size", default="64KiB", help="largest request head a caller may send (431)")
    x.add_argument(
        "--request-timeout",
        type=float,
        default=30.0,
        help="seconds a caller has to send a request head, and again its body (408)",
    )
    x.add_argument(
        "--idle-timeout", type=float, default=75.0, help="seconds before an idle caller connection is closed"
    )

    rp = sub.add_parser("replay", help="re-send captured requests to a target (or two) and check the answers")
    rp.add_argument("source", metavar="SOURCE", help="store, exchange JSONL, HAR or mitmproxy flow file")
    rp.add_argument("--target", required=True, metavar="URL")
    rp.add_argument(
        "--compare", metavar="URL2", help="send each request to this target too and compare the answers"
    )
    rp.add_argument("--concurrency", type=int, default=4)
    rp.add_argument("--rate", type=float, default=None, help="requests per second, open loop")
    rp.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="K:V",
        help="set a header (replaces redacted credentials; its value is never written anywhere)",
    )
    _redact_option(rp)
    rp.add_argument("--store", metavar="OUT", help="record the answers into this store")
    rp.add_argument("--dry-run", action="store_true", help="list what would be sent, send nothing")
    rp.add_argument("--format", choices=("text", "json"), default="text")

    sc = sub.add_parser("scenarios", help="drive hypothesis agent-loop scenarios against a live target")
    sc.add_argument("--target", required=True, metavar="URL")
    sc.add_argument("--examples", type=int, default=50)
    sc.add_argument("--seed", type=int, default=None, help="repeat a run exactly")
    sc.add_argument("--stream", choices=("both", "on", "off"), default="both")
    sc.add_argument("--model", default=None, help="model name to send (default: none, the server's)")
    sc.add_argument("--header", action="append", default=[], metavar="K:V")
    sc.add_argument(
        "--via-proxy",
        action="store_true",
        help="--target is a gateway: put wirecheck's taps on both sides of it",
    )
    sc.add_argument(
        "--engine-upstream", metavar="URL", help="with --via-proxy: the engine (vLLM) behind the gateway"
    )
    sc.add_argument(
        "--engine-listen",
        default="127.0.0.1:8101",
        metavar="HOST:PORT",
        help="with --via-proxy: the engine tap; point the gateway's upstream here",
    )

    a = sub.add_parser(
        "accept",
        help="go-live acceptance: compat, capacity, cache and interface phases, one verdict, a report folder",
        description="Exit codes: 0 accepted (go, or limited with its conditions), 1 not accepted "
        "(rework, scale-up, limited without conditions, or a partial run), 2 unusable input.",
    )
    a.add_argument(
        "--target", required=True, metavar="URL", help="where callers send requests (engine or gateway)"
    )
    a.add_argument(
        "--engine-url", metavar="URL", help="the vLLM engine itself: /version, /tokenize, /health, /metrics"
    )
    a.add_argument(
        "--metrics-url",
        action="extend",
        nargs="+",
        default=[],
        metavar="URL",
        help="engine /metrics (one per engine; default ENGINE-URL/metrics)",
    )
    # issue 15: GPU memory measured through every capacity step, and the evidence an SRE signs
    a.add_argument(
        "--gpu-metrics-url",
        action="extend",
        nargs="+",
        default=[],
        metavar="URL",
        help="a DCGM exporter's /metrics per node (DCGM_FI_DEV_FB_USED/FB_FREE/GPU_UTIL)",
    )
    a.add_argument(
        "--gpu-source",
        choices=("auto", "dcgm", "nvml", "nvidia-smi", "none"),
        default="auto",
        help="where GPU memory is sampled (auto: --gpu-metrics-url, else NVML, else nvidia-smi)",
    )
    a.add_argument(
        "--ack-warning",
        action="append",
        default=[],
        metavar="REGEX",
        help="acknowledge startup-log warnings matching REGEX (each unknown warning needs one to pass)",
    )
    a.add_argument("--recipe-accessed", metavar="DATE", help="when the operator read the vLLM recipe")
    a.add_argument(
        "--support-status", metavar="TEXT", help="the recipe's vLLM support status for this model, as read"
    )
    a.add_argument(
        "--host-info",
        action="extend",
        nargs="+",
        default=[],
        metavar="FILE",
        help="nvidia-smi -q -x (or nvidia-smi) output from each host, or several samples",
    )
    a.add_argument(
        "--container-info", metavar="FILE", help="what `wirecheck probe` printed inside the container"
    )
    a.add_argument(
        "--startup-log",
        action="extend",
        nargs="+",
        default=[],
        metavar="FILE",
        help="the vLLM server's log from its start (one per node: the first is held to the recipe)",
    )
    a.add_argument(
        "--topology",
        action="extend",
        nargs="+",
        default=[],
        metavar="FILE",
        help="`nvidia-smi topo -m` output from each node (NVLink, NICs)",
    )
    img = a.add_mutually_exclusive_group()
    img.add_argument(
        "--official-image", action="store_true", help="the deployment runs vllm/vllm-openai:kimi-k3"
    )
    img.add_argument(
        "--self-built", metavar="FILE", help="JSON build record of a self-built image (docs/acceptance.md)"
    )
    a.add_argument(
        "--reviewer",
        required=True,
        metavar="NAME",
        help="who reviews this acceptance (recorded in the evidence)",
    )
    a.add_argument("--profile", choices=("quick", "standard", "soak"), default="quick")
    a.add_argument(
        "--phases", default="compat,capacity,cache,interface", help="comma list (default: all four)"
    )
    a.add_argument("--out", required=True, metavar="DIR", help="report folder")
    a.add_argument("--model", default=None, help="model name to send (default: the first of /v1/models)")
    a.add_argument(
        "--family",
        choices=FAMILY_NAMES,
        default=None,
        help="family whose parser flags to hold the deployment to (default: from the model name)",
    )
    a.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="K:V",
        help="send this header with every request (its value is never written to the report folder)",
    )
    _redact_option(a)
    a.add_argument("--slo-ttft-p95", type=float, default=2.0, metavar="S")
    a.add_argument("--slo-itl-p95", type=float, default=0.2, metavar="S")
    a.add_argument("--slo-e2e-p95", type=float, default=60.0, metavar="S")
    a.add_argument("--max-error-rate", type=float, default=0.01, metavar="FRACTION")
    a.add_argument(
        "--target-concurrency",
        type=int,
        default=None,
        metavar="N",
        help="the concurrency production needs (default: the ramp's top)",
    )
    a.add_argument(
        "--open-loop",
        default=None,
        metavar="RPS,...",
        help="ramp by arrival rates (open loop) instead of concurrency",
    )
    a.add_argument("--limit-scope", default=None, metavar="TEXT", help="for limited: the rate-limit scope")
    a.add_argument("--on-call", default=None, metavar="OWNER", help="for limited: the on-call owner")
    a.add_argument("--rollback", default=None, metavar="TEXT", help="for limited: the rollback conditions")
    a.add_argument(
        "--max-retry-rate",
        type=float,
        default=0.1,
        metavar="FRACTION",
        help="at most this share of requests may need a retry for limited",
    )
    a.add_argument(
        "--interface-requests",
        type=int,
        default=None,
        metavar="N",
        help="agent requests in the interface phase (default: the profile's)",
    )
    a.add_argument(
        "--scenario-examples",
        type=int,
        default=None,
        metavar="N",
        help="hypothesis scenario examples (default: the profile's; 0 skips them)",
    )
    a.add_argument("--seed", type=int, default=1)
    a.add_argument(
        "--via-proxy",
        action="store_true",
        help="--target is a gateway: put wirecheck's taps on both sides of it",
    )
    a.add_argument(
        "--engine-listen",
        default="127.0.0.1:8101",
        metavar="HOST:PORT",
        help="with --via-proxy: the engine tap; point the gateway's upstream here",
    )
    a.add_argument(
        "--load-engine",
        choices=("in-process", "locust"),
        default="in-process",
        help="run the capacity load in this process (default) or on Locust workers",
    )
    a.add_argument(
        "--locust-workers", type=int, default=2, metavar="N", help="local Locust workers to start (default 2)"
    )
    a.add_argument(
        "--locust-master",
        default=None,
        metavar="HOST:PORT",
        help="bind the Locust master here and wait for workers started on other machines "
        '(locust -f "$(wirecheck locustfile)" --worker --master-host HOST --master-port PORT)',
    )
    a.add_argument(
        "--locust-expect-workers",
        type=int,
        default=None,
        metavar="N",
        help="with --locust-master: workers to wait for",
    )
    a.add_argument(
        "--store",
        default=None,
        metavar="PATH|URL",
        help="with --via-proxy: where the taps record (default DIR/wirecheck.db; or postgresql://...)",
    )
    a.add_argument("--format", choices=("text", "json"), default="text")
    a.add_argument("--quiet", action="store_true", help="no progress lines")

    sub.add_parser("locustfile", help="print the path of wirecheck's locustfile (the WirecheckUser class)")

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

    d = sub.add_parser(
        "demo",
        help="the whole tool on loopback with faults: accept --profile quick through dual taps, a verdict, a report",
    )
    d.add_argument("--out", default="wirecheck-demo", help="report folder (default ./wirecheck-demo)")
    d.add_argument("--requests", type=int, default=28, help="interface requests (the acceptance's agent set)")
    d.add_argument("--seed", type=int, default=7)
    d.add_argument(
        "--phases",
        default="compat,capacity,cache,interface",
        help="acceptance phases to run (default all four)",
    )

    e = sub.add_parser("export", help="export a store as exchange JSONL or HAR")
    e.add_argument("store", metavar="STORE")
    e.add_argument("--format", choices=("jsonl", "har"), default="jsonl")
    e.add_argument("--output", "-o", metavar="PATH")
    _redact_option(e)

    s = sub.add_parser("sim", help="run the vLLM-faithful simulator (docs/sim.md)")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--model", default="", help="served model name (default: the family's)")
    s.add_argument(
        "--family", choices=FAMILY_NAMES, default=None, help="the dialect to serve (default: the simulator's)"
    )
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


def _load(files: Sequence[str], notes: list[Finding] | None = None) -> list[Exchange]:
    """Exchanges from stores, exchange JSONL, HAR and mitmproxy flow files, told apart by content.
    Stores are opened read-only; what a store says it lost (gap rows) or set aside (live checks
    skipped) is added to ``notes`` as findings, so that a report counts it (issue 11, points 3, 6)."""
    from wirecheck.record import is_store, open_store, store_notes
    from wirecheck.replay import load_capture

    out: list[Exchange] = []
    for name in files:
        if name == "-":
            out.extend(read_exchanges(sys.stdin))
        elif is_store(name):
            store = open_store(name)
            try:
                out.extend(store.exchanges())
                if notes is not None:
                    notes.extend(store_notes(store))
            finally:
                store.close()
        else:
            out.extend(load_capture(name))
    return out


def _hostport(value: str, what: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise WirecheckError(f"{what}: expected HOST:PORT, got {value!r}")
    return host or "127.0.0.1", int(port)


def _size(value: str, what: str = "--body-limit") -> int:
    units = {
        "kib": 1024,
        "mib": 1024**2,
        "gib": 1024**3,
        "kb": 1000,
        "mb": 1000**2,
        "gb": 1000**3,
        "b": 1,
        "": 1,
    }
    num = value.strip().lower().rstrip()
    for unit in sorted(units, key=len, reverse=True):
        if unit and num.endswith(unit):
            try:
                return int(float(num[: -len(unit)]) * units[unit])
            except ValueError:
                break
    if num.isdigit():
        return int(num)
    raise WirecheckError(f"{what}: cannot read {value!r} (e.g. 32MiB)")


def _proxy(args: argparse.Namespace) -> int:
    from wirecheck.proxy import ADMIN_TOKEN_ENV, ProxyRun, TapConfig, run_proxy
    from wirecheck.record import correlation_secret

    redact = _redaction(args)
    limit = _size(args.body_limit)
    record_limit = _size(args.record_limit, "--record-limit")
    max_head = _size(args.max_header_size, "--max-header-size")
    for name in ("request_timeout", "idle_timeout"):
        if not getattr(args, name) > 0:
            raise WirecheckError(f"--{name.replace('_', '-')}: must be a positive number of seconds")
    secret = correlation_secret(args.correlation_secret)
    tap_limits: dict[str, Any] = {
        "redact": redact,
        "body_limit": limit,
        "read_timeout_s": args.read_timeout,
        "record_limit": record_limit,
        "request_timeout_s": args.request_timeout,
        "correlation_secret": secret,
    }
    admin = None if args.admin.strip().lower() == "off" else _hostport(args.admin, "--admin")
    token = args.admin_token or os.environ.get(ADMIN_TOKEN_ENV) or None
    loopback = ("127.0.0.1", "localhost", "::1")
    if admin is not None and admin[0] not in loopback and not token:
        # findings carry excerpts of every caller's prompts and answers (issue 11, point 11)
        raise WirecheckError(
            f"--admin: {admin[0]} is beyond loopback; give --admin-token (or WIRECHECK_ADMIN_TOKEN) too"
        )
    taps = [
        (
            TapConfig(upstream=args.upstream, tap=args.tap, **tap_limits),
            *_hostport(args.listen, "--listen"),
        )
    ]
    if args.engine_upstream:
        engine = TapConfig(
            upstream=args.engine_upstream, tap="engine", inject_correlation=False, **tap_limits
        )
        taps.append((engine, *_hostport(args.engine_listen, "--engine-listen")))
    for cfg, host, _ in taps:
        if host not in ("127.0.0.1", "localhost", "::1"):
            print(
                f"wirecheck proxy: warning: the {cfg.tap} tap listens on {host}, beyond loopback",
                file=sys.stderr,
            )
    return run_proxy(
        ProxyRun(
            taps=taps,
            store_path=None if args.no_store else args.store,
            live_checks=not args.no_live_checks,
            settle_s=args.settle,
            admin=admin,
            admin_token=token,
            max_head=max_head,
            head_timeout_s=args.request_timeout,
            idle_timeout_s=args.idle_timeout,
        )
    )


def _headers_arg(values: list[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for h in values:
        k, sep, v = h.partition(":")
        if not sep or not k.strip():
            raise WirecheckError(f"--header: expected K:V, got {h!r}")
        headers[k.strip()] = v.strip()
    return headers


def _scenarios(args: argparse.Namespace) -> int:
    from wirecheck.generators import run_scenarios

    via = None
    if args.via_proxy:
        if not args.engine_upstream:
            raise WirecheckError(
                "scenarios: --via-proxy needs --engine-upstream URL (the engine behind the gateway)"
            )
        via = (args.engine_upstream, _hostport(args.engine_listen, "--engine-listen")[1])
    report = run_scenarios(
        args.target,
        examples=args.examples,
        seed=args.seed,
        stream=args.stream,
        model=args.model,
        headers=_headers_arg(args.header),
        via_proxy=via,
    )
    if report.ok:
        print(f"scenarios: {report.requests} requests over {args.examples} examples, no contract broken")
        return 0
    fail = report.failure
    assert fail is not None
    print(f"scenarios: contract broken after {report.requests} requests; the shortest failing request:")
    for f in fail.findings:
        print(f"  {f.rule} [{f.fault}] {f.message}")
    print(json.dumps(fail.request, indent=2))
    if fail.note:
        print(f"note: {fail.note}")
    print("reproduce:")
    print(f"  {fail.curl}")
    if args.seed is not None:
        print(f"  {_scenarios_line(args)}")
    return 1


def _scenarios_line(args: argparse.Namespace) -> str:
    """The command that reruns this run as given, the gateway's taps included (issue 14: the line
    dropped --via-proxy and its engine flags)."""
    parts = ["wirecheck", "scenarios", "--target", args.target, "--examples", str(args.examples)]
    parts += ["--seed", str(args.seed)]
    if args.stream != "both":
        parts += ["--stream", args.stream]
    if args.model:
        parts += ["--model", args.model]
    for h in args.header:
        parts += ["--header", h]
    if args.via_proxy:
        parts += [
            "--via-proxy",
            "--engine-upstream",
            args.engine_upstream,
            "--engine-listen",
            args.engine_listen,
        ]
    return shlex.join(parts)


def _replay(args: argparse.Namespace) -> int:
    from wirecheck.record import Store, is_store
    from wirecheck.replay import detect_format, replay

    headers = _headers_arg(args.header)
    redaction = _redaction(args)
    captured = _load([args.source])
    lines = None
    if args.source != "-" and not is_store(args.source) and detect_format(args.source) == "jsonl":
        # the n-th exchange of a JSONL file is on its n-th non-blank line: name it in errors
        with open(args.source, encoding="utf-8", errors="replace") as fh:
            lines = [n for n, line in enumerate(fh, 1) if line.strip()]
    tty = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if tty:
            print(f"\rreplay: {done}/{total}", end="" if done < total else "\n", file=sys.stderr, flush=True)

    res = replay(
        captured,
        args.target,
        compare=args.compare,
        concurrency=args.concurrency,
        rate=args.rate,
        headers=headers,
        dry_run=args.dry_run,
        progress=progress,
        redaction=redaction,
        source=args.source,
        lines=lines,
    )
    if args.dry_run:
        for ex in res.planned:
            print(
                printable(
                    f"{ex.request.method} {redaction.url(args.target).rstrip('/')}{redaction.target(ex.request.path)} ({len(ex.request.body)} bytes, from {ex.id})"
                )
            )
        print(f"replay: {len(res.planned)} request(s) would be sent; nothing was sent", file=sys.stderr)
        return 0
    if args.store:
        store = Store(args.store)
        try:
            store.write_now(res.answers)
        finally:
            store.close()
    errors = [f for f in res.findings if f.severity == "error"]
    if args.format == "json":
        print(
            json.dumps(
                {
                    "sent": res.sent,
                    "answers": len(res.answers),
                    "findings": [f.to_dict() for f in res.findings],
                    "diffs": [
                        {
                            "source": d.source_id,
                            "what": d.what,
                            "target": d.a,
                            "compare": d.b,
                            "breaks_contract": d.blamed,
                        }
                        for d in res.diffs
                    ],
                },
                indent=2,
                default=str,
            )
        )
    else:
        for f in res.findings:
            print(
                f"{str(f.severity).upper():7} {f.rule} [{f.fault}] "
                + printable(f"{f.tap}:{f.exchange_id} {f.message}")
            )
        for d in res.diffs:
            side = {"a": "the target", "b": "the compare target", "both": "both", "neither": "neither side"}[
                d.blamed
            ]
            print(
                printable(
                    f"DIFF    {d.source_id}: {d.what}: {d.a!r} vs {d.b!r} (breaks the contract: {side})"
                )
            )
        print(
            f"replay: {res.sent} request(s) sent, {len(res.answers)} answer(s), {len(errors)} error finding(s), {len(res.diffs)} difference(s)"
        )
    return 1 if errors or any(d.blamed != "neither" for d in res.diffs) else 0


def _export(args: argparse.Namespace) -> int:
    from wirecheck.proxy import write_har, write_jsonl
    from wirecheck.record import open_store

    redaction = _redaction(args)
    store = open_store(args.store)
    try:
        exchanges = list(store.exchanges())
    finally:
        store.close()
    fh = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout  # noqa: SIM115 - stdout is not closed
    try:
        n = (
            write_har(exchanges, fh, redaction=redaction)
            if args.format == "har"
            else write_jsonl(exchanges, fh, redaction=redaction)
        )
    finally:
        if args.output:
            fh.close()
    print(f"wirecheck export: {n} exchange(s)", file=sys.stderr)
    return 0


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
        disabled=frozenset(args.disable),
    )
    notes: list[Finding] = []
    exchanges = _load(files, notes)
    lost = sum(int(f.evidence.get("lost", 0)) for f in notes)
    if not exchanges:
        # nothing was checked: that is not a pass (issue 11, point 7)
        raise WirecheckError(
            f"check: no exchanges in {', '.join(files)}"
            + (f" ({lost} exchange(s) recorded as lost by the store)" if lost else "")
            + ": an empty capture is not a pass"
        )
    if args.family == "auto":
        for model in _unknown_models(exchanges):
            print(f"wirecheck: note: {printable(unknown_family_note(model))}", file=sys.stderr)
    result = check_exchanges(exchanges, config)
    result.findings.extend(notes)
    result.lost = lost
    if args.format == "json":
        text = render_json(result)
    elif args.format == "junit":
        text = render_junit(
            result, exchange_ids=[e.id for e in exchanges] + sorted({f.exchange_id for f in notes})
        )
    elif args.format == "html":
        text = render_html(result, exchanges, redaction=_redaction(args))
    else:
        text = render_text(result, color=args.output is None and sys.stdout.isatty())
    if args.output:
        # check -o DIR/file makes DIR, as a report folder should (issue 15)
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 1 if result.errors else 0


def _unknown_models(exchanges: list[Exchange]) -> list[str]:
    """The requested models that the family table does not know (issue 16: say so, judge generic)."""
    models: set[str] = set()
    for e in exchanges:
        try:
            body = bounded_loads(e.request.body or b"null")  # hostile depth: issue 11, point 3
        except ValueError:
            continue
        if isinstance(body, dict) and isinstance(body.get("model"), str):
            models.add(body["model"])
    return sorted(m for m in models if detect_family(m) == GENERIC)


def _rules(args: argparse.Namespace) -> int:
    if args.markdown:
        sys.stdout.write(render_rules_markdown())
        return 0
    for r in rules():
        print(f"{r.id:32} {r.severity!s:8} {r.fault!s:8} {r.summary}")
    return 0


def _sim(args: argparse.Namespace) -> int:
    import asyncio

    import uvicorn

    from wirecheck.sim import DEFAULT_FAMILY, FAULTS, SimConfig, create_app, parse_faults

    if args.list_faults:
        for name, what in FAULTS.items():
            print(f"{name:32} {what}")
        return 0
    cfg = SimConfig(
        model=args.model,
        family=args.family or DEFAULT_FAMILY,
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


def _float_list(value: str | None, what: str) -> list[float] | None:
    if not value:
        return None
    try:
        out = [float(x) for x in value.split(",") if x.strip()]
    except ValueError:
        raise WirecheckError(f"{what}: expected numbers separated by commas, got {value!r}") from None
    if not out or any(x <= 0 for x in out):
        raise WirecheckError(f"{what}: rates must be positive")
    return out


def _accept(args: argparse.Namespace) -> int:
    import asyncio

    from wirecheck.acceptance import AcceptOptions, Limits, Progress, Slo, run_acceptance, via_taps
    from wirecheck.record import Store

    opts = AcceptOptions(
        target=args.target,
        reviewer=args.reviewer,
        out=Path(args.out),
        engine_url=args.engine_url,
        metrics_urls=args.metrics_url,
        gpu_metrics_urls=args.gpu_metrics_url,
        gpu_source=args.gpu_source,
        ack_warnings=args.ack_warning,
        recipe_accessed=args.recipe_accessed,
        support_status=args.support_status,
        host_files=args.host_info,
        container_file=args.container_info,
        startup_log=args.startup_log[0] if args.startup_log else None,
        more_startup_logs=args.startup_log[1:],
        topology_files=args.topology,
        official_image=args.official_image,
        self_built=args.self_built,
        profile=args.profile,
        phases=[p.strip() for p in args.phases.split(",") if p.strip()],
        model=args.model,
        family=args.family,
        headers=_headers_arg(args.header),
        redaction=_redaction(args),
        slo=Slo(args.slo_ttft_p95, args.slo_e2e_p95, args.slo_itl_p95, args.max_error_rate),
        limits=Limits(args.limit_scope, args.on_call, args.rollback, args.max_retry_rate),
        target_concurrency=args.target_concurrency,
        open_loop_rates=_float_list(args.open_loop, "--open-loop"),
        seed=args.seed,
        interface_requests=args.interface_requests,
        scenario_examples=args.scenario_examples,
        load_engine=args.load_engine,
        locust_workers=args.locust_workers,
        locust_master=args.locust_master,
        locust_expect_workers=args.locust_expect_workers,
    )
    progress = Progress(quiet=args.quiet)

    async def run() -> object:
        if not args.via_proxy:
            return await run_acceptance(opts, progress)
        if not args.engine_url:
            raise WirecheckError("accept: --via-proxy needs --engine-url (the engine behind the gateway)")
        port = _hostport(args.engine_listen, "--engine-listen")[1]
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

    from wirecheck.acceptance import AcceptanceResult, InterfaceResult

    result = asyncio.run(run())
    assert isinstance(result, AcceptanceResult)
    v = result.verdict
    if args.format == "json":
        print(json.dumps(result.report["verdict"], indent=2))
    else:
        # a verdict on the simulator's evidence says so wherever it is read (issue 15)
        print(f"verdict: {v.label}" + (" [SIMULATED evidence: not a real deployment]" if v.simulated else ""))
        for r in v.reasons:
            print(f"  - {r}")
        iface = next((p for p in result.phases if isinstance(p, InterfaceResult)), None)
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
        if args.command == "proxy":
            return _proxy(args)
        if args.command == "export":
            return _export(args)
        if args.command == "replay":
            return _replay(args)
        if args.command == "scenarios":
            return _scenarios(args)
        if args.command == "accept":
            return _accept(args)
        if args.command == "probe":
            return _probe(args)
        if args.command == "locustfile":
            from wirecheck.acceptance import locustfile_path

            print(locustfile_path())
            return 0
        if args.command == "demo":
            from wirecheck.acceptance import run_demo

            phases = [p.strip() for p in args.phases.split(",") if p.strip()]
            return run_demo(args.out, requests=args.requests, seed=args.seed, phases=phases)
        if args.command == "sim":
            return _sim(args)
        if args.command == "sim-gateway":
            return _sim_gateway(args)
    except ERRORS as exc:
        # messages quote file names and wire data: escaped (issue 11, point 8)
        print(f"wirecheck: error: {printable(exc)}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    parser.error(f"unknown command {args.command}")
    return 2
