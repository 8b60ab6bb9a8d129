"""The results side of ``proxy_overhead.py``: one row per proxy and level (each against the direct
row of the same level, and its CPU against nginx's, measured in the same run), the printed table,
and the targets checked against the rows.
"""

from __future__ import annotations

from typing import Any

#: a client process this busy (percent of one core) is the bottleneck, not the proxy
LOADGEN_BOUND_PCT = 90.0


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def row(kind: str, level: int, r: dict[str, Any], d: dict[str, Any]) -> dict[str, Any]:
    """The row of proxy ``kind`` at ``level`` streams from its raw result ``r``; ``d`` is the direct
    connection's raw result at the same level."""
    return {
        "proxy": kind,
        "streams": level,
        "ttft_p50_ms": pct(r["ttft"], 0.5) * 1000,
        "ttft_p99_ms": pct(r["ttft"], 0.99) * 1000,
        "added_ttft_p50_ms": (pct(r["ttft"], 0.5) - pct(d["ttft"], 0.5)) * 1000,
        "added_ttft_p99_ms": (pct(r["ttft"], 0.99) - pct(d["ttft"], 0.99)) * 1000,
        "gap_p50_ms": pct(r["gaps"], 0.5) * 1000,
        "gap_p99_ms": pct(r["gaps"], 0.99) * 1000,
        "throughput_ratio": r["events_per_s"] / d["events_per_s"],
        "rss_mb": r["rss_mb"],
        # CPU of all the proxy's processes (workers, writer, checker) per stream
        # and per SSE event the callers received
        "cpu_ms_per_stream": r["cpu_s"] * 1000 / max(len(r["ttft"]), 1),
        "cpu_us_per_event": r["cpu_s"] * 1e6 / max(r["events"], 1),
        # of which in the kernel (system time): for any proxy mostly its sockets' reads and writes
        "sys_us_per_event": r["sys_s"] * 1e6 / max(r["events"], 1) if "sys_s" in r else None,
        # the same during the load only, and how long the live checker took to catch up after it
        "cpu_load_us_per_event": r.get("cpu_load_s", r["cpu_s"]) * 1e6 / max(r["events"], 1),
        "catchup_s": r.get("catchup_s", 0.0),
        # over nginx's at the same level in the same run (vs_nginx; None without an nginx row)
        "cpu_vs_nginx": None,
        # the proxy's top process alone: for wirecheck without --workers, the process that forwards
        # (event loop and store writer), without its helpers (live checker, live view)
        "main_cpu_us_per_event": (
            r["main_cpu_s"] * 1e6 / max(r["events"], 1) if _one_process(kind) and "main_cpu_s" in r else None
        ),
        # of which the thread that runs its event loop: the rest is its store writer's thread
        "loop_cpu_us_per_event": (
            r["loop_cpu_s"] * 1e6 / max(r["events"], 1) if _one_process(kind) and "loop_cpu_s" in r else None
        ),
        "events": r["events"],
        # the load generator's busiest process, in percent of one core
        "loadgen_cpu_pct": r["loadgen_cpu_pct"],
        "loadgen_bound": r["loadgen_cpu_pct"] >= LOADGEN_BOUND_PCT,
        "failed_streams": r["failed"],
        "samples": len(r["ttft"]),
    }


def vs_nginx(rows: list[dict[str, Any]]) -> None:
    """Each row's CPU per event as a ratio to nginx's at the same level (nginx records and checks
    nothing: the ratio is what recording and checking cost beyond forwarding, on this machine)."""
    nginx = {r["streams"]: r["cpu_us_per_event"] for r in rows if r["proxy"] == "nginx"}
    for r in rows:
        base = nginx.get(r["streams"])
        if base and r["proxy"] != "direct":
            r["cpu_vs_nginx"] = r["cpu_us_per_event"] / base


def _one_process(kind: str) -> bool:
    """A proxy whose top process is the one that forwards: wirecheck without --workers."""
    return kind.startswith("wirecheck") and "-w" not in kind


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}us"


def print_table(rows: list[dict[str, Any]]) -> None:
    """The rows as a table, and a note where the load generator, not the proxy, was the bottleneck."""
    head = f"{'proxy':12} {'streams':>7} {'+TTFT p50':>10} {'+TTFT p99':>10} {'gap p50':>8} {'gap p99':>8} {'thru x':>7} {'RSS MB':>7} {'cpu/str':>8} {'cpu/ev':>8} {'x nginx':>7} {'sys/ev':>8} {'main/ev':>8} {'loop/ev':>8} {'catch-up':>8} {'gen cpu':>7} {'failed':>6}"
    print(head)
    for r in rows:
        ratio = "-" if r.get("cpu_vs_nginx") is None else f"{r['cpu_vs_nginx']:.2f}"
        print(
            f"{r['proxy']:12} {r['streams']:7d} {r['added_ttft_p50_ms']:9.2f}ms {r['added_ttft_p99_ms']:9.2f}ms "
            f"{r['gap_p50_ms']:7.1f}ms {r['gap_p99_ms']:7.1f}ms {r['throughput_ratio']:7.2f} {r['rss_mb']:7.1f} "
            f"{r['cpu_ms_per_stream']:6.2f}ms {r['cpu_us_per_event']:6.1f}us {ratio:>7} {_us(r['sys_us_per_event']):>8} {_us(r['main_cpu_us_per_event']):>8} {_us(r['loop_cpu_us_per_event']):>8} "
            f"{r.get('catchup_s', 0.0):7.1f}s {r['loadgen_cpu_pct']:6.0f}% {r['failed_streams']:6d}"
        )
    bound = [f"{r['proxy']}@{r['streams']}" for r in rows if r["loadgen_bound"]]
    if bound:
        print(
            f"note: the load generator itself was the bottleneck (a client process at >= {LOADGEN_BOUND_PCT:g} % "
            f"of a core) at {', '.join(bound)}: latency and throughput there measure the generator too; "
            "try --clients 2"
        )


def targets(rows: list[dict[str, Any]], levels: list[int]) -> list[tuple[str, bool, str]]:
    """(target, met, what was measured) for each target the rows can answer."""
    by = {(r["proxy"], r["streams"]): r for r in rows}
    out: list[tuple[str, bool, str]] = []
    # wirecheck, and wirecheck with live-view viewers open: the same targets
    for kind in sorted({r["proxy"] for r in rows if r["proxy"].startswith("wirecheck")}):
        tag = "" if kind == "wirecheck" else f" ({kind})"
        if (kind, 64) in by:
            w = by[(kind, 64)]
            out.append(
                (
                    f"added TTFT p50 <= 1 ms at 64 streams{tag}",
                    w["added_ttft_p50_ms"] <= 1.0,
                    f"{w['added_ttft_p50_ms']:.2f} ms",
                )
            )
            out.append(
                (
                    f"added TTFT p99 <= 5 ms at 64 streams{tag}",
                    w["added_ttft_p99_ms"] <= 5.0,
                    f"{w['added_ttft_p99_ms']:.2f} ms",
                )
            )
        ratios = [by[(kind, lv)]["throughput_ratio"] for lv in levels if (kind, lv) in by]
        if ratios:
            out.append(
                (
                    f"throughput >= 0.9x direct at every level{tag}",
                    min(ratios) >= 0.9,
                    f"lowest {min(ratios):.2f}x",
                )
            )
    pairs = [
        (lv, by[("wirecheck", lv)], by[("mitmproxy", lv)])
        for lv in levels
        if ("wirecheck", lv) in by and ("mitmproxy", lv) in by
    ]
    if pairs:
        worse = [lv for lv, w, m in pairs if w["added_ttft_p50_ms"] >= m["added_ttft_p50_ms"]]
        out.append(
            (
                "less added TTFT p50 than mitmproxy at every level",
                not worse,
                f"not at {worse}" if worse else "at all levels",
            )
        )
    # at 256 streams, for wirecheck as deployed, with --workers, and with live-view viewers
    # open (their overhead stays within the same targets); not for the wirecheck-asgi A/B
    for kind in sorted(
        {
            r["proxy"]
            for r in rows
            if r["proxy"] == "wirecheck" or r["proxy"].startswith(("wirecheck-w", "wirecheck+"))
        }
    ):
        if (kind, 256) in by:
            w = by[(kind, 256)]
            out.append(
                (
                    f"at 256 streams ({kind}): added TTFT p50 <= 5 ms, p99 <= 25 ms, throughput >= 0.95x",
                    w["added_ttft_p50_ms"] <= 5.0
                    and w["added_ttft_p99_ms"] <= 25.0
                    and w["throughput_ratio"] >= 0.95,
                    f"{w['added_ttft_p50_ms']:.1f} / {w['added_ttft_p99_ms']:.1f} ms, {w['throughput_ratio']:.2f}x",
                )
            )
        if (kind, 256) in by and by[(kind, 256)].get("cpu_vs_nginx") is not None:
            x = by[(kind, 256)]["cpu_vs_nginx"]
            out.append(
                (
                    f"at 256 streams ({kind}): CPU per event <= 2x nginx's (all processes, checking included)",
                    x <= 2.0,
                    f"{x:.2f}x ({by[(kind, 256)]['cpu_us_per_event']:.1f} us)",
                )
            )
    if ("wirecheck", 256) in by:
        rss = by[("wirecheck", 256)]["rss_mb"]
        out.append(("RSS <= 150 MB at 256 streams", rss <= 150, f"{rss:.0f} MB (proxy and its worker)"))
    return out
