"""vLLM's Prometheus metrics, with the names, types, labels and buckets of vllm-wire.md section 4.

Written with prometheus_client, as vLLM does, in single-process mode: counters carry ``_total`` and a
``_created`` gauge. Label names are declared in alphabetical order, which is how they appear on the
wire (``engine``, ``finished_reason``, ``model_name``). Every series exists from the start, histograms
at zero, as on a real server before its first request: the real tier holds the names, before and
after the first request, to a real vLLM 0.32 (106 ``vllm:`` names, tests/real_vllm/test_fidelity.py).
"""

from __future__ import annotations

import itertools

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["SimMetrics"]

# vLLM's bucket lists (vllm-wire.md section 4); TTFT and inter-token share their tail
_SECONDS_TAIL = (0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, *_SECONDS_TAIL, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, *_SECONDS_TAIL)
REQUEST_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
#: 1-2-5 up to 10,000: request token counts (prompt, generation, max_tokens, prefill KV computed),
#: as vLLM 0.32 builds them for a 16,384-token context
COUNT_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
#: tokens per engine step: powers of two up to the batch's token budget
ITERATION_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
N_BUCKETS = (1, 2, 5, 10, 20)
PREEMPTION_BUCKETS = (1, 2, 3, 4, 5, 10, 20)
BASE = ("engine", "model_name")


class SimMetrics:
    def __init__(self, model: str, engine: str = "0") -> None:
        self.registry = CollectorRegistry()
        self.labels = {"engine": engine, "model_name": model}
        r = self.registry

        def gauge(name: str, doc: str, extra: tuple[str, ...] = ()) -> Gauge:
            return Gauge(f"vllm:{name}", doc, sorted((*BASE, *extra)), registry=r)

        def counter(name: str, doc: str, extra: tuple[str, ...] = ()) -> Counter:
            return Counter(f"vllm:{name}", doc, sorted((*BASE, *extra)), registry=r)

        def hist(name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(f"vllm:{name}", doc, list(BASE), buckets=buckets, registry=r)

        self.running = gauge("num_requests_running", "Number of requests in model execution batches.")
        self.waiting = gauge("num_requests_waiting", "Number of requests waiting to be processed.")
        self.waiting_by_reason = gauge(
            "num_requests_waiting_by_reason", "Number of requests waiting, by reason.", ("reason",)
        )
        self.kv_usage = gauge("kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
        self.cache_config = Gauge(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            sorted(
                (
                    "block_size",
                    "enable_prefix_caching",
                    "engine",
                    "kv_cache_size_tokens",
                    "num_gpu_blocks",
                    "prefix_cache_retention_interval",
                    "hybrid_kv_cache",
                )
            ),
            registry=r,
        )
        self.pc_queries = counter(
            "prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens."
        )
        self.pc_hits = counter("prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.")
        self.ext_queries = counter(
            "external_prefix_cache_queries",
            "External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens.",
        )
        self.ext_hits = counter(
            "external_prefix_cache_hits",
            "External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.",
        )
        self.preemptions = counter("num_preemptions", "Cumulative number of preemption from the engine.")
        self.prompt_tokens = counter("prompt_tokens", "Number of prefill tokens processed.")
        self.prompt_by_source = counter(
            "prompt_tokens_by_source", "Number of prompt tokens by source.", ("source",)
        )
        self.prompt_cached = counter(
            "prompt_tokens_cached", "Number of cached prompt tokens (local + external)."
        )
        self.prompt_cached_by_source = counter(
            "prompt_tokens_cached_by_source", "Number of cached prompt tokens by source.", ("source",)
        )
        self.generation_tokens = counter("generation_tokens", "Number of generation tokens processed.")
        self.success = counter(
            "request_success", "Count of successfully processed requests.", ("finished_reason",)
        )
        # no engine label: an API-server metric in vLLM (0.32 seen, 0.33 documented)
        self.parser = Counter(
            "vllm:tool_call_parser_invocations",
            "Tool call parser invocations.",
            ["mode", "model_name", "outcome", "request_type"],
            registry=r,
        )
        self.ttft = hist(
            "time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS
        )
        self.itl = hist(
            "inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL_BUCKETS
        )
        self.tpot = hist(
            "request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            ITL_BUCKETS,
        )
        self.e2e = hist(
            "e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", REQUEST_BUCKETS
        )
        self.queue_time = hist(
            "request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            REQUEST_BUCKETS,
        )
        self.prefill_time = hist(
            "request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request.",
            REQUEST_BUCKETS,
        )
        self.decode_time = hist(
            "request_decode_time_seconds",
            "Histogram of time spent in DECODE phase for request.",
            REQUEST_BUCKETS,
        )
        self.prefill_kv = hist(
            "request_prefill_kv_computed_tokens",
            "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
            COUNT_BUCKETS,
        )
        self.inference_time = hist(
            "request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            REQUEST_BUCKETS,
        )
        self.request_prompt = hist(
            "request_prompt_tokens", "Number of prefill tokens processed.", COUNT_BUCKETS
        )
        self.request_generation = hist(
            "request_generation_tokens", "Number of generation tokens processed.", COUNT_BUCKETS
        )
        self.iteration_tokens = hist(
            "iteration_tokens_total", "Histogram of number of tokens per engine_step.", ITERATION_BUCKETS
        )
        self.max_generation = hist(
            "request_max_num_generation_tokens",
            "Histogram of maximum number of requested generation tokens.",
            COUNT_BUCKETS,
        )
        self.params_n = hist("request_params_n", "Histogram of the n request parameter.", N_BUCKETS)
        self.params_max_tokens = hist(
            "request_params_max_tokens", "Histogram of the max_tokens request parameter.", COUNT_BUCKETS
        )
        self.request_preemptions = hist(
            "request_num_preemptions",
            "Histogram of the number of times a request was preempted.",
            PREEMPTION_BUCKETS,
        )
        # kept at zero here, as on a server with no multi-modal input, awake, without admission limits
        self.mm_queries = counter(
            "mm_cache_queries", "Multi-modal cache queries, in terms of number of queried items."
        )
        self.mm_hits = counter("mm_cache_hits", "Multi-modal cache hits, in terms of number of cached items.")
        self.flops = counter(
            "estimated_flops_per_gpu",
            "Estimated number of floating point operations per GPU (for Model Flops Utilization calculations).",
        )
        self.read_bytes = counter(
            "estimated_read_bytes_per_gpu",
            "Estimated number of bytes read from memory per GPU (for Model Flops Utilization calculations).",
        )
        self.write_bytes = counter(
            "estimated_write_bytes_per_gpu",
            "Estimated number of bytes written to memory per GPU (for Model Flops Utilization calculations).",
        )
        self.sleep_state = gauge(
            "engine_sleep_state",
            "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; "
            "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
            ("sleep_state",),
        )
        # an API-server metric: no engine label
        self.admission_rejections = Counter(
            "vllm:admission_rejections",
            "Number of admission attempts rejected by a queue limit, by reason.",
            ["model_name", "reason"],
            registry=r,
        )
        L = self.labels
        for m in (self.running, self.waiting, self.kv_usage):
            m.labels(**L).set(0)
        for reason in ("capacity", "deferred"):
            self.waiting_by_reason.labels(reason=reason, **L).set(0)
        for c in (
            self.pc_queries,
            self.pc_hits,
            self.ext_queries,
            self.ext_hits,
            self.preemptions,
            self.prompt_tokens,
            self.prompt_cached,
            self.generation_tokens,
        ):
            c.labels(**L)
        for source in ("local_compute", "local_cache_hit", "external_kv_transfer"):
            self.prompt_by_source.labels(source=source, **L)
        # the cache tier that supplied the hit (vLLM 0.32): local hits are the device's
        for source in ("device", "host", "disk", "p2p", "external_unspecified"):
            self.prompt_cached_by_source.labels(source=source, **L)
        for reason in ("stop", "length", "abort", "error", "repetition"):
            self.success.labels(finished_reason=reason, **L)
        for c in (self.mm_queries, self.mm_hits, self.flops, self.read_bytes, self.write_bytes):
            c.labels(**L)
        for state, value in (("awake", 1), ("weights_offloaded", 0), ("discard_all", 0)):
            self.sleep_state.labels(sleep_state=state, **L).set(value)
        for reason in ("max_num_queued_reqs", "max_num_queued_tokens"):
            self.admission_rejections.labels(model_name=model, reason=reason)
        for mode, outcome, request_type in itertools.product(
            ("streaming", "non_streaming"),
            ("tool_call", "no_tool_call"),
            ("chat_completions", "responses", "other"),
        ):
            self.parser.labels(mode=mode, model_name=model, outcome=outcome, request_type=request_type)
        for h in (
            self.ttft,
            self.itl,
            self.tpot,
            self.e2e,
            self.queue_time,
            self.prefill_time,
            self.decode_time,
            self.prefill_kv,
            self.inference_time,
            self.request_prompt,
            self.request_generation,
            self.iteration_tokens,
            self.max_generation,
            self.params_n,
            self.params_max_tokens,
            self.request_preemptions,
        ):
            h.labels(**L)

    def render(self) -> bytes:
        return generate_latest(self.registry)
