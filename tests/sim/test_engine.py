"""The simulator's /metrics and capacity model: names, types, labels and buckets as vLLM 0.33 writes
them (vllm-wire.md section 4), and counters that move as vLLM's do."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.support import wire
from tests.support.recording import post

REFERENCE_TYPES = {  # vllm-wire.md section 4, on the wire
    "vllm:num_requests_running": "gauge",
    "vllm:num_requests_waiting": "gauge",
    "vllm:num_requests_waiting_by_reason": "gauge",
    "vllm:kv_cache_usage_perc": "gauge",
    "vllm:cache_config_info": "gauge",
    "vllm:prefix_cache_queries": "counter",
    "vllm:prefix_cache_hits": "counter",
    "vllm:external_prefix_cache_queries": "counter",
    "vllm:external_prefix_cache_hits": "counter",
    "vllm:prompt_tokens_cached": "counter",
    "vllm:prompt_tokens_cached_by_source": "counter",
    "vllm:prompt_tokens": "counter",
    "vllm:generation_tokens": "counter",
    "vllm:prompt_tokens_by_source": "counter",
    "vllm:num_preemptions": "counter",
    "vllm:request_success": "counter",
    "vllm:tool_call_parser_invocations": "counter",
    "vllm:time_to_first_token_seconds": "histogram",
    "vllm:inter_token_latency_seconds": "histogram",
    "vllm:request_time_per_output_token_seconds": "histogram",
    "vllm:e2e_request_latency_seconds": "histogram",
    "vllm:request_queue_time_seconds": "histogram",
    "vllm:request_prefill_time_seconds": "histogram",
    "vllm:request_decode_time_seconds": "histogram",
    "vllm:request_prefill_kv_computed_tokens": "histogram",
}
TTFT_LE = "0.001,0.005,0.01,0.02,0.04,0.06,0.08,0.1,0.25,0.5,0.75,1.0,2.5,5.0,7.5,10.0,20.0,40.0,80.0,160.0,640.0,2560.0"
ITL_LE = "0.01,0.025,0.05,0.075,0.1,0.15,0.2,0.3,0.4,0.5,0.75,1.0,2.5,5.0,7.5,10.0,20.0,40.0,80.0"
REQ_LE = (
    "0.3,0.5,0.8,1.0,1.5,2.0,2.5,5.0,10.0,15.0,20.0,30.0,40.0,50.0,60.0,120.0,240.0,480.0,960.0,1920.0,7680.0"
)


async def scrape(c: httpx.AsyncClient) -> dict[str, float]:
    text = (await c.get("/metrics")).text
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            key = s.name + (
                "{"
                + ",".join(
                    f"{k}={v}" for k, v in sorted(s.labels.items()) if k not in ("engine", "model_name")
                )
                + "}"
                if len(s.labels) > 2
                else ""
            )
            out[key] = s.value
    return out


async def test_metrics_parse_with_the_reference_names_types_labels_and_buckets(
    sim_client: Callable[..., Any],
) -> None:
    c = sim_client()
    await post(c, wire.req(stream=True))
    r = await c.get("/metrics")
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    families = {f.name: f for f in text_string_to_metric_families(r.text)}
    for name, kind in REFERENCE_TYPES.items():
        assert families[name].type == kind, name
    text = r.text
    # counters carry _total on the wire and a _created gauge (single-process mode)
    assert "\nvllm:prefix_cache_queries_total{" in text
    assert "# TYPE vllm:prefix_cache_queries_created gauge" in text
    # labels in alphabetical order
    assert (
        'vllm:request_success_total{engine="0",finished_reason="stop",model_name="moonshotai/Kimi-K2-Thinking"} 1.0'
        in text
    )
    assert 'vllm:num_requests_running{engine="0",model_name="moonshotai/Kimi-K2-Thinking"}' in text
    for hist, les in (
        ("time_to_first_token_seconds", TTFT_LE),
        ("inter_token_latency_seconds", ITL_LE),
        ("e2e_request_latency_seconds", REQ_LE),
    ):
        got = [s.labels["le"] for s in families[f"vllm:{hist}"].samples if s.name.endswith("_bucket")]
        assert got == [*les.split(","), "+Inf"], hist
    info = next(s for s in families["vllm:cache_config_info"].samples)
    assert (
        info.value == 1
        and info.labels["block_size"] == "16"
        and info.labels["enable_prefix_caching"] == "True"
    )


def _agent_input(system: str, question: str) -> dict[str, Any]:
    """A long agent prompt: system prompt, tool definitions, then the business question."""
    return wire.req(
        messages=[{"role": "system", "content": system}, {"role": "user", "content": question}],
        tools=[wire.WEATHER, wire.SEARCH],
    )


SYSTEM = "You are the operations agent of a logistics company. " * 40


async def test_cache_counters_move_for_cold_warm_and_changed_prefix(sim_client: Callable[..., Any]) -> None:
    c = sim_client()
    m0 = await scrape(c)
    await post(c, _agent_input(SYSTEM, "Ship order 1 to Tokyo?"))
    m1 = await scrape(c)
    cold_q = m1["vllm:prefix_cache_queries_total"] - m0["vllm:prefix_cache_queries_total"]
    assert cold_q > 300 and m1["vllm:prefix_cache_hits_total"] == 0
    await post(c, _agent_input(SYSTEM, "Ship order 2 to Osaka?"))  # same system and tools, new business data
    m2 = await scrape(c)
    warm_hits = m2["vllm:prefix_cache_hits_total"] - m1["vllm:prefix_cache_hits_total"]
    warm_q = m2["vllm:prefix_cache_queries_total"] - m1["vllm:prefix_cache_queries_total"]
    assert 0.8 * warm_q < warm_hits < warm_q and warm_hits % 16 == 0
    assert m2["vllm:prompt_tokens_cached_total"] - m1["vllm:prompt_tokens_cached_total"] == warm_hits
    # the control changes one field early in the system prompt: only the tool block before it is reused
    await post(c, _agent_input(SYSTEM.replace("logistics", "insurance", 1), "Ship order 2 to Osaka?"))
    m3 = await scrape(c)
    control_hits = m3["vllm:prefix_cache_hits_total"] - m2["vllm:prefix_cache_hits_total"]
    assert control_hits < 0.4 * warm_hits
    # cached tokens show in usage too
    r = await post(c, _agent_input(SYSTEM, "Ship order 3 to Kyoto?"))
    assert r.json()["usage"]["prompt_tokens_details"]["cached_tokens"] > 300
    # computed prefill tokens fell for the warm request: the histogram's sum grows by less
    assert (
        m2["vllm:request_prefill_kv_computed_tokens_sum"] - m1["vllm:request_prefill_kv_computed_tokens_sum"]
        < 0.2 * cold_q
    )


async def test_prefix_caching_off_moves_no_cache_counter(sim_client: Callable[..., Any]) -> None:
    c = sim_client(enable_prefix_caching=False)
    for q in ("a?", "b?"):
        await post(c, _agent_input(SYSTEM, q))
    m = await scrape(c)
    assert m["vllm:prefix_cache_queries_total"] == 0 and m["vllm:prefix_cache_hits_total"] == 0
    assert m["vllm:prompt_tokens_total"] > 600


QUESTION_1 = "Where is order 1? " + "It left the Tokyo warehouse on Monday. " * 6
QUESTION_2 = "Cancel order 2. " + "The customer in Osaka asked twice already. " * 6


async def _two_questions(c: httpx.AsyncClient) -> tuple[dict[str, Any], dict[str, float], dict[str, float]]:
    """K3 asked QUESTION_1, then QUESTION_2 under the same long system prompt: the first request,
    and the metrics after each."""
    first = wire.req(
        model="moonshotai/Kimi-K3",
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION_1}],
    )
    await post(c, first)
    m1 = await scrape(c)
    second = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION_2}]
    await post(c, {**first, "messages": second})
    return first, m1, await scrape(c)


async def test_hybrid_cache_hits_only_at_retained_prompt_ends(sim_client: Callable[..., Any]) -> None:
    c = sim_client(family="kimi_k3", hybrid_cache=True)
    # same system, other question: the shared prefix is long, but no state was kept inside it
    first, m1, m2 = await _two_questions(c)
    assert m2["vllm:prefix_cache_hits_total"] == m1["vllm:prefix_cache_hits_total"]
    # the next turn extends the first conversation: it hits up to the first prompt's end
    turn2 = {
        **first,
        "messages": [
            *first["messages"],
            {"role": "assistant", "content": "Done."},
            {"role": "user", "content": "And order 3?"},
        ],
    }
    await post(c, turn2)
    m3 = await scrape(c)
    hits = m3["vllm:prefix_cache_hits_total"] - m2["vllm:prefix_cache_hits_total"]
    assert hits > 0 and hits <= m1["vllm:prefix_cache_queries_total"]


async def test_hybrid_retention_interval_keeps_state_inside_the_prompt(
    sim_client: Callable[..., Any],
) -> None:
    c = sim_client(family="kimi_k3", hybrid_cache=True, prefix_cache_retention_interval=64)
    _, m1, m2 = await _two_questions(c)
    hits = m2["vllm:prefix_cache_hits_total"] - m1["vllm:prefix_cache_hits_total"]
    assert hits > 0 and hits % 64 == 0


async def _prompt_tokens(probe: httpx.AsyncClient, body: dict[str, Any]) -> int:
    """How many tokens ``body``'s prompt (messages and tools) takes, by the simulator's /tokenize."""
    r = await probe.post("/tokenize", json={"messages": body["messages"], "tools": body["tools"]})
    count: int = r.json()["count"]
    return count


async def test_small_kv_budget_queues_and_preempts(sim_client: Callable[..., Any]) -> None:
    body = _agent_input("Be brief. " * 30, "Ship order to Tokyo?")
    prompt_len = await _prompt_tokens(sim_client(), body)
    per_seq = -(-(prompt_len + 1) // 16)
    # room for two prompts and one block to grow: decoding must preempt; no prefix caching, so the
    # prompts share no blocks and the budget really binds
    c = sim_client(
        num_gpu_blocks=2 * per_seq + 1, max_num_seqs=8, decode_tokens_per_s=200, enable_prefix_caching=False
    )
    results = await asyncio.gather(
        *(
            post(
                c,
                {
                    **body,
                    "messages": [*body["messages"][:1], {"role": "user", "content": f"Order {i} to Tokyo?"}],
                },
            )
            for i in range(6)
        )
    )
    assert all(r.status_code == 200 for r in results)
    m = await scrape(c)
    assert m["vllm:num_preemptions_total"] > 0
    assert m["vllm:request_queue_time_seconds_count"] == 6
    assert m["vllm:kv_cache_usage_perc"] == 0  # everything freed once done


async def test_oom_kills_the_engine_until_it_recovers(sim_client: Callable[..., Any]) -> None:
    c = sim_client(oom_at_tokens=600, oom_recover_s=200.0)  # 200 simulated s = 0.1 s real at the test scale
    assert (await c.get("/health")).status_code == 200
    results = await asyncio.gather(*(post(c, _agent_input(SYSTEM, f"Order {i}?")) for i in range(3)))
    assert any(r.status_code == 500 for r in results)
    assert (await c.get("/health")).status_code == 503
    r = await post(c, wire.req())
    assert r.status_code == 500 and "EngineCore" in r.json()["error"]["message"]
    await asyncio.sleep(0.2)
    assert (await c.get("/health")).status_code == 200
    assert (await post(c, wire.req())).status_code == 200
    m = await scrape(c)
    assert m["vllm:request_success_total{finished_reason=error}"] >= 1


async def test_slow_first_token_delays_only_the_first_token(sim_client: Callable[..., Any]) -> None:
    c = sim_client(faults="engine.slow_first_token", slow_first_token_s=400.0)  # 0.2 s real
    t0 = time.monotonic()
    r = await post(c, wire.req(stream=True))
    assert r.status_code == 200 and time.monotonic() - t0 >= 0.2
    [ex] = c.exchanges
    assert ex.response.chunks[0].t_ms >= 190


async def test_client_disconnect_aborts_and_frees_the_kv_cache(sim_client: Callable[..., Any]) -> None:
    c = sim_client(decode_tokens_per_s=1.0, time_scale=0.01)  # 10 ms a token
    async with c.stream("POST", "/v1/chat/completions", json=wire.req(stream=True)) as r:
        async for _ in r.aiter_raw():
            break
    await asyncio.sleep(0.05)
    m = await scrape(c)
    assert m["vllm:request_success_total{finished_reason=abort}"] == 1
    assert m["vllm:num_requests_running"] == 0 and m["vllm:kv_cache_usage_perc"] == 0


async def test_lru_eviction_forgets_the_oldest_prefix(sim_client: Callable[..., Any]) -> None:
    body_a = _agent_input("Alpha team rules. " * 40, "Order 1?")
    n = await _prompt_tokens(sim_client(), body_a)
    c = sim_client(num_gpu_blocks=-(-n // 16) + 8)  # room for about one prompt's blocks
    await post(c, body_a)
    await post(c, _agent_input("Beta team rules. " * 40, "Order 1?"))  # evicts most of A
    m1 = await scrape(c)
    await post(c, body_a)
    m2 = await scrape(c)
    assert m2["vllm:prefix_cache_hits_total"] - m1["vllm:prefix_cache_hits_total"] < n / 2


async def test_continuous_usage_stats_put_usage_on_every_chunk(sim_client: Callable[..., Any]) -> None:
    c = sim_client()
    r = await post(
        c, wire.req(stream=True, stream_options={"include_usage": True, "continuous_usage_stats": True})
    )
    frames = [f for f in r.text.split("\n\n") if f.startswith("data: {") and '"delta":{"role"' not in f]
    assert frames and all('"usage":{' in f for f in frames)


async def test_a_prompt_larger_than_the_kv_cache_is_rejected_not_hung(sim_client: Callable[..., Any]) -> None:
    c = sim_client(num_gpu_blocks=4)
    r = await c.post("/v1/chat/completions", json=_agent_input(SYSTEM, "Order?"))
    assert r.status_code == 400 and "KV blocks" in r.json()["error"]["message"]


async def test_a_lone_sequence_that_outgrows_the_cache_stops_with_length(
    sim_client: Callable[..., Any],
) -> None:
    body = wire.req(messages=[{"role": "user", "content": "Hello"}])
    probe = sim_client()
    n = (await probe.post("/tokenize", json={"messages": body["messages"]})).json()["count"]
    c = sim_client(num_gpu_blocks=-(-(n + 1) // 16))
    r = await asyncio.wait_for(post(c, body), 5)
    assert r.json()["choices"][0]["finish_reason"] == "length"
