"""The prefix-cache judges, over :class:`CacheFacts`: the counters first (readable, moving, from the
serving instance, prefix caching on), then each probe against what a working prefix cache does.

It passes when cold queries grow with hits near 0, warm A hits most of the prompt and computes fewer
tokens with a prefill time that falls in rough proportion, warm B hits its shared prefix (measured
with the engine's ``/tokenize``), and the control's hits drop. With Kimi K3's hybrid (KDA) cache,
state is kept only at prompt ends unless ``--prefix-cache-retention-interval N`` is set, so warm B
hits only up to a retained boundary: a warning that explains it, not a failure.
"""

from __future__ import annotations

from collections.abc import Iterator

from .._catalogue import REWORK, SCALE_UP, Ruling, failed, info, judge, missing, passed, warned
from ._cache import CacheFacts

__all__: list[str] = []

#: below this, prefill times are scheduling noise, not evidence (a real K3 cold prefill of the probe's
#: ~3.6k tokens takes far longer)
PREFILL_NOISE_S = 0.05


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


@judge("cache.metrics", leads_to=(REWORK,), section="Cache")
def _metrics(f: CacheFacts) -> Iterator[Ruling]:
    """Prefix-cache counters scraped

    Every judgment of the cache is by the engine's own counters: without /metrics there is none.
    Listed only when the scrape failed."""
    if f.metrics_problem is not None:
        yield missing(f.metrics_problem)


@judge("cache.instances", leads_to=(REWORK,), section="Cache")
def _instances(f: CacheFacts) -> Iterator[Ruling]:
    """With several metrics URLs: one instance answered, none restarted

    Warm hits can only be judged on the instance that served cold: probes spread over instances (no
    sticky routing) or a counter that fell (a restart) say nothing about the cache."""
    if len(f.metrics_urls) < 2 or not f.probes:
        return
    answered = {n: r.get("instance") for n, r in f.probes.items()}
    restarted = sorted({u for r in f.probes.values() for u in r.get("restarted", [])})
    detail = ", ".join(f"{n} on {u}" for n, u in answered.items())
    if restarted:
        yield failed(
            f"counters fell (a restart) at {', '.join(restarted)}; {detail}",
            {"answered": answered, "restarted": restarted},
        )
    elif len(set(answered.values())) > 1:
        yield failed(
            f"the probes went to different instances ({detail}): warm hits cannot be judged; "
            "route the probes to one instance (sticky sessions) or give only its --metrics-url",
            {"answered": answered},
        )
    else:
        yield passed(detail, {"answered": answered})


@judge("cache.probes", leads_to=(REWORK, SCALE_UP), section="Cache")
def _probes(f: CacheFacts) -> Iterator[Ruling]:
    """The four cache probes answered

    A probe that fails decides the phase: a prompt the KV cache cannot hold needs more memory, any
    other failure is the engine's. Listed only when one failed."""
    failures = f.failed_probes
    if not failures:
        return
    errs = [str(f.probes[n]["error"]).lower() for n in failures]
    kv = all("kv" in e or "longer than" in e for e in errs)
    yield failed(
        "failed: "
        + ", ".join(f"{n} ({f.probes[n]['error']})" for n in failures)
        + ("; the KV cache cannot hold the probe" if kv else ""),
        leads_to=SCALE_UP if kv else REWORK,
    )


@judge("cache.instance", leads_to=(REWORK,), section="Cache")
def _instance(f: CacheFacts) -> Iterator[Ruling]:
    """Counters come from the serving instance

    Counters that do not move at all while four requests were served belong to another instance: the
    wrong host or port, another replica behind the gateway, or a DP rank not scraped."""
    if f.probes and not f.failed_probes and f.still:
        yield failed(
            "no counter moved while four requests were served: this scrape is not of the serving instance "
            "(wrong host or port, another replica behind the gateway, or a DP rank not scraped)",
            {"totals": {k: f.total(k) for k in ("queries", "hits", "prompt", "cached")}},
        )


@judge("cache.enabled", leads_to=(REWORK,), section="Cache")
def _enabled(f: CacheFacts) -> Iterator[Ruling]:
    """Prefix caching enabled

    Prompt tokens that move with no prefix-cache query mean the engine runs without prefix caching:
    every agent turn recomputes its whole history. Kimi K3 needs --enable-prefix-caching."""
    if not f.counters_usable:
        return
    enabled = f.cache_config.get("enable_prefix_caching")
    if f.total("queries") == 0:
        yield failed(
            f"prompt tokens moved ({f.total('prompt'):.0f}) but prefix cache queries did not: prefix caching is off"
            + (f" (cache_config_info enable_prefix_caching={enabled})" if enabled is not None else "")
            + "; Kimi K3 needs --enable-prefix-caching",
            {
                "totals": {k: f.total(k) for k in ("queries", "hits", "prompt", "cached")},
                "cache_config": f.cache_config,
            },
        )
    else:
        yield passed(
            f"enable_prefix_caching={enabled}" if enabled else "prefix cache counters move",
            {"cache_config": f.cache_config},
        )


@judge("cache.cold", leads_to=(REWORK,), section="Cache")
def _cold(f: CacheFacts) -> Iterator[Ruling]:
    """Cold probe: queries up, hits near 0

    The run's salt starts the prompt, so nothing can have cached it: hits here mean the salt is not
    where the cache looks, or the counters are not this engine's."""
    if not f.judgeable:
        return
    cold = f.probes["cold"]
    ok = (cold["queries"] or 0) > 0 and (cold["hits"] or 0) <= max(0.05 * (cold["queries"] or 0), 32)
    detail = f"queries +{cold['queries']:.0f}, hits +{cold['hits']:.0f}"
    yield passed(detail, cold) if ok else failed(detail, cold)


@judge("cache.warm-a", leads_to=(REWORK,), section="Cache")
def _warm_a(f: CacheFacts) -> Iterator[Ruling]:
    """Warm A hits most of the prompt

    The same prompt again must hit more than half of its tokens: an agent's next turn resends its
    whole history."""
    if not f.judgeable:
        return
    cold, wa = f.probes["cold"], f.probes["warm_a"]
    prompt = cold["prompt_tokens"] or cold["queries"] or 0
    detail = f"hits +{wa['hits']:.0f} of {prompt} prompt tokens"
    yield passed(detail, wa) if (wa["hits"] or 0) > 0.5 * prompt else failed(detail, wa)


def _computed(f: CacheFacts) -> tuple[float | None, float | None]:
    """Prefill tokens computed per request, cold and warm A."""
    cold, wa = f.probes["cold"], f.probes["warm_a"]
    return _ratio(cold["computed_sum"], cold["computed_count"]), _ratio(
        wa["computed_sum"], wa["computed_count"]
    )


@judge("cache.computed", leads_to=(REWORK,), section="Cache")
def _computed_tokens(f: CacheFacts) -> Iterator[Ruling]:
    """Warm prefill computes fewer tokens

    Hits that are counted but not used leave the prefill as long as cold's: vLLM's
    ``request_prefill_kv_computed_tokens`` says what was really computed (vLLM 0.16 or later)."""
    if not f.judgeable:
        return
    comp_c, comp_a = _computed(f)
    if comp_c is None or comp_a is None:
        yield missing("vllm:request_prefill_kv_computed_tokens not on /metrics (vLLM < 0.16?)")
        return
    detail = f"computed {comp_c:.0f} -> {comp_a:.0f} tokens"
    ev = {"cold": comp_c, "warm_a": comp_a}
    yield passed(detail, ev) if comp_a < comp_c else failed(detail, ev)


@judge("cache.prefill-time", leads_to=(REWORK,), section="Cache")
def _prefill_time(f: CacheFacts) -> Iterator[Ruling]:
    """Warm prefill time falls in proportion

    Fewer computed tokens should mean a shorter prefill; a time that does not fall in rough proportion
    says fixed per-request costs dominate, or the hits are not used. Under 50 ms both ways the times
    are scheduling noise and the computed tokens decide."""
    if not f.judgeable:
        return
    t_c, t_a = f.probes["cold"]["prefill_s"], f.probes["warm_a"]["prefill_s"]
    if t_c is None or t_a is None:
        yield missing("vllm:request_prefill_time_seconds not on /metrics")
        return
    comp_c, comp_a = _computed(f)
    time_ratio = t_a / t_c if t_c else None
    comp_ratio = (comp_a / comp_c) if comp_c and comp_a is not None else None
    falls = t_a < t_c
    proportional = (
        time_ratio is not None
        and comp_ratio is not None
        and time_ratio <= max(3 * comp_ratio, comp_ratio + 0.5)
    )
    # a cold prefill this short is inside the scheduler's noise (the simulator at a small time scale
    # on a loaded machine measured 4 ms -> 25 ms): the computed-token drop is the evidence then
    noise = max(t_c, t_a) < PREFILL_NOISE_S and comp_ratio is not None and comp_ratio < 0.5
    shown = "?" if time_ratio is None else f"{time_ratio:.2f}"
    detail = f"prefill {t_c * 1000:.1f} ms -> {t_a * 1000:.1f} ms (x{shown})" + (
        f"; computed tokens x{comp_ratio:.2f}" if comp_ratio is not None else ""
    )
    if not proportional:
        detail += (
            f"; under {PREFILL_NOISE_S * 1000:.0f} ms, within scheduling noise: judged by the computed tokens"
            if noise
            else "; not in proportion: fixed per-request costs dominate or the hits are not used"
        )
    ev = {"time_ratio": time_ratio, "computed_ratio": comp_ratio}
    if falls and proportional:
        yield passed(detail, ev)
    elif noise:
        yield info(detail, ev)
    elif falls:
        yield warned(detail, ev)
    else:
        yield failed(detail, ev)


@judge("cache.warm-b", leads_to=(REWORK,), section="Cache")
def _warm_b(f: CacheFacts) -> Iterator[Ruling]:
    """Warm B hits its shared prefix

    The same tools and system prompt with a new question must hit at least half the tokens it shares
    with cold. On a hybrid (KDA) cache without a retention interval it hits only up to a retained
    boundary: a warning that says why."""
    if not f.judgeable:
        return
    wb, shared = f.probes["warm_b"], f.shared_b
    hits = wb["hits"] or 0
    detail = f"hits +{hits:.0f}" + (f" of {shared} shared tokens" if shared else "")
    note = f.retained_note
    if hits > 0 and not (shared is not None and hits < 0.5 * shared):
        yield passed(detail, wb)
    elif f.hybrid and f.retention_interval in (None, "0"):
        yield warned(f"{detail}; {note}", wb)
    else:
        yield failed(detail + (f"; {note}" if note else ""), wb)


@judge("cache.control", leads_to=(REWORK,), section="Cache")
def _control(f: CacheFacts) -> Iterator[Ruling]:
    """Changed-prefix control hits drop

    A prompt that differs from the first token on must not hit: hits here mean the cache matches on
    something other than the prefix, or the salt did not reach the prompt."""
    if not f.judgeable:
        return
    ctl, wa = f.probes["control"], f.probes["warm_a"]
    detail = f"hits +{ctl['hits']:.0f} (warm A +{wa['hits']:.0f})"
    yield passed(detail, ctl) if (ctl["hits"] or 0) < 0.5 * max(wa["hits"] or 0, 1) else failed(detail, ctl)


@judge("cache.usage", leads_to=(REWORK,), section="Cache")
def _usage(f: CacheFacts) -> Iterator[Ruling]:
    """Answers report cached tokens

    ``usage.prompt_tokens_details.cached_tokens`` (with --enable-prompt-tokens-details) should equal
    the ``prompt_tokens_cached`` counter's delta for each probe; a difference is recorded."""
    if not f.judgeable:
        return
    rows = f.probes
    if all(r["usage_cached_tokens"] is None for r in rows.values()):
        yield info("not reported (the server runs without --enable-prompt-tokens-details)")
        return
    mismatch = [
        n
        for n, r in rows.items()
        if r["usage_cached_tokens"] is not None
        and r["cached"] is not None
        and r["usage_cached_tokens"] != r["cached"]
    ]
    ev = {n: (r["usage_cached_tokens"], r["cached"]) for n, r in rows.items()}
    if mismatch:
        yield warned("differs for " + ", ".join(mismatch), ev)
    else:
        yield passed("cached_tokens = prompt_tokens_cached delta for every probe", ev)


@judge("cache.sources", leads_to=(REWORK,), section="Cache")
def _sources(f: CacheFacts) -> Iterator[Ruling]:
    """Local, external and restart sources told apart

    Hits from the engine's own cache and from a KV connector (external) are counted apart."""
    if not f.judgeable:
        return
    ext_q, ext_h, local_h = f.total("external_queries"), f.total("external_hits"), f.total("hits")
    yield info(
        f"local hits {local_h:.0f} tokens; external (KV connector) queries {ext_q:.0f}, hits {ext_h:.0f}"
        + ("" if ext_q else " (no KV connector in use)"),
        {"local_hits": local_h, "external_queries": ext_q, "external_hits": ext_h},
    )
