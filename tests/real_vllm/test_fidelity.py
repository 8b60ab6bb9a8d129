"""The simulator held to a real vLLM: the same requests against both, compared on wire
shape (tests/real_vllm/fidelity.py). Every difference is either fixed in sim/ or listed here and in
docs/sim.md as a known version difference (the real build is vLLM 0.32, the simulator follows 0.33).
A new difference fails this test; a difference that goes away fails it too, so the list stays true.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.real_vllm import apis
from tests.real_vllm.conftest import FamilyServer
from tests.real_vllm.families import model
from tests.real_vllm.fidelity import chat_shape, metrics_shape, wire_facts
from tests.support import wire
from wirecheck.generators._endpoints import ENDPOINT_PATHS
from wirecheck.record import serve
from wirecheck.sim import SimConfig, create_app

TOOLS = [wire.WEATHER, wire.SEARCH]
USER_TOOL = [{"role": "user", "content": "Use get_weather for Tokyo."}]
REQUESTS: dict[str, dict[str, Any]] = {
    "plain": {"messages": [{"role": "user", "content": "Say hello."}]},
    "plain-stream": {"messages": [{"role": "user", "content": "Say hello."}], "stream": True},
    "plain-stream-usage": {
        "messages": [{"role": "user", "content": "Say hello."}],
        "stream": True,
        "stream_options": {"include_usage": True},
    },
    "tool": {"messages": USER_TOOL, "tools": TOOLS},
    "tool-stream-usage": {
        "messages": USER_TOOL,
        "tools": TOOLS,
        "stream": True,
        "stream_options": {"include_usage": True},
    },
    "required": {"messages": USER_TOOL, "tools": TOOLS, "tool_choice": "required"},
    "named": {
        "messages": USER_TOOL,
        "tools": TOOLS,
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    },
    "unknown-model": {"messages": USER_TOOL, "model": "no-such-model"},
    "tool-choice-without-tools": {"messages": USER_TOOL, "tool_choice": "required"},
}


@pytest.fixture(scope="module")
def shapes(real_vllm: str) -> Iterator[dict[str, tuple[set[str], set[str]]]]:
    """name -> (simulator shape, real shape), metrics included, requests sent in the same order."""
    out: dict[str, tuple[set[str], set[str]]] = {}
    sim_app = create_app(SimConfig(family="kimi_k2", time_scale=0.001))
    with serve(sim_app) as sim_url:
        got: dict[str, list[set[str]]] = {}
        for url in (sim_url, real_vllm):
            with httpx.Client(base_url=url, timeout=60) as c:
                for name, body in REQUESTS.items():
                    got.setdefault(name, []).append(chat_shape(c, {"model": wire.K2, **body}))
                got.setdefault("metrics", []).append(metrics_shape(c))
    for name, (sim, real) in got.items():
        out[name] = (sim, real)
    yield out


KNOWN: set[str] = {
    # 0.33 fields a 0.32 build does not send: choices[].weight_versions, kv_transfer_params on chunks
    "sim-only .choices[].weight_versions:null",
    "sim-only finish.choices[].weight_versions:null",
    "sim-only finish.kv_transfer_params:null",
    "sim-only token.kv_transfer_params:null",
    "sim-only tool.kv_transfer_params:null",
    # the simulator always sends prompt_tokens_details.cached_tokens, as a server started with
    # --enable-prompt-tokens-details; without the flag (./dev vllm) 0.32 sends null (whole) or nothing (stream)
    "real-only .usage.prompt_tokens_details:null",
    "sim-only .usage.prompt_tokens_details.cached_tokens:number",
    "sim-only .usage.prompt_tokens_details.created_cache_tokens:null",
    "sim-only .usage.prompt_tokens_details.multimodal_tokens:null",
    "sim-only .usage.prompt_tokens_details:object",
    "sim-only usage.usage.prompt_tokens_details.cached_tokens:number",
    "sim-only usage.usage.prompt_tokens_details.created_cache_tokens:null",
    "sim-only usage.usage.prompt_tokens_details.multimodal_tokens:null",
    "sim-only usage.usage.prompt_tokens_details:object",
    # system_fingerprint: the simulator always writes -tp<N>; 0.32 leaves it out at tensor parallel size 1
    "real-only .system_fingerprint:vllm-<ver>-<hex8>",
    "real-only finish.system_fingerprint:vllm-<ver>-<hex8>",
    "real-only usage.system_fingerprint:vllm-<ver>-<hex8>",
    "sim-only .system_fingerprint:vllm-<ver>-tp<N>-<hex8>",
    "sim-only finish.system_fingerprint:vllm-<ver>-tp<N>-<hex8>",
    "sim-only usage.system_fingerprint:vllm-<ver>-tp<N>-<hex8>",
    # /metrics: 0.32 serves version=1.0.0 and more cache_config_info labels; the simulator's
    # cache_config_info has hybrid_kv_cache (its hybrid K3 cache model)
    "real-only content-type:text/plain; version=1.0.0; charset=utf-8",
    "real-only vllm:cache_config_info:gauge:_block_size_resolved,block_size,cache_dtype,cache_hit_alignment_tokens,effective_attention_block_size,enable_mamba_shared_prefix_checkpoint,enable_prefix_caching,engine,gpu_memory_utilization,hash_block_size,is_attention_free,kv_cache_dtype_skip_layers,kv_cache_layout,kv_cache_max_concurrency,kv_cache_memory_bytes,kv_cache_size_tokens,kv_offloading_backend,kv_offloading_size,kv_sharing_fast_prefill,mamba_block_size,mamba_cache_dtype,mamba_cache_mode,mamba_page_size_padded,mamba_ssm_cache_dtype,num_cpu_blocks,num_gpu_blocks,num_gpu_blocks_override,prefix_cache_retention_interval,prefix_caching_hash_algo,prefix_match_unit,replayssm_buffer_len,skip_page_size_padded,sliding_window,swa_bounded_replay,use_kda_recoverssm,use_replayssm,user_specified_block_size",
    "sim-only content-type:text/plain; version=0.0.4; charset=utf-8",
    "sim-only vllm:cache_config_info:gauge:block_size,enable_prefix_caching,engine,hybrid_kv_cache,kv_cache_size_tokens,num_gpu_blocks,prefix_cache_retention_interval",
}


#: differences the real server shows only under load, so a run may have them or not. vLLM's output
#: collector (vllm/v1/engine/output_processor.py, RequestOutputCollector) merges streamed deltas the
#: API server has not taken yet: on a busy machine the finish chunk then carries the last tokens'
#: text (seen in one clean-clone run of ten). The simulator sends one token a chunk and an
#: empty finish delta; the rules take text on the finish chunk as output (contracts/_assembly.py
#: folds a chunk's delta before its finish_reason), so nothing is blamed either way.
VARIES: set[str] = {
    "real-only finish.choices[].delta.content:str",
}


def differences(shapes: dict[str, tuple[set[str], set[str]]]) -> set[str]:
    """``side path:kind`` for everything one side has and the other lacks, over all requests."""
    diff: set[str] = set()
    for sim, real in shapes.values():
        diff |= {f"sim-only {s}" for s in sim - real}
        diff |= {f"real-only {s}" for s in real - sim}
    return diff


def test_the_simulator_matches_the_real_wire_shape_but_for_known_version_differences(
    shapes: dict[str, tuple[set[str], set[str]]],
) -> None:
    diff = differences(shapes)
    assert sorted(diff - KNOWN - VARIES) == [], (
        "new differences: fix sim/ or list them in KNOWN (or VARIES) and docs/sim.md"
    )
    assert sorted(KNOWN - diff) == [], (
        "listed differences that went away: drop them from KNOWN and docs/sim.md"
    )


def test_the_shapes_agree_on_what_matters_most(shapes: dict[str, tuple[set[str], set[str]]]) -> None:
    """Finish reasons, content null vs "", ids and error statuses agree request by request."""
    keys = ("finish_reason", "message.content", ".id:", "status:", "tool_calls[].id", "last-frame")

    def pick(shape: set[str]) -> set[str]:
        return {s for s in shape if any(k in s for k in keys)}

    for name, (sim, real) in shapes.items():
        assert pick(sim) == pick(real), name


def metric_names(page: str) -> set[str]:
    """The ``vllm:`` sample names of a /metrics page (``_bucket``, ``_total``, ``_created`` apart):
    what a dashboard, an alert rule or a counter delta can refer to."""
    return {line.split("{", 1)[0].split(" ", 1)[0] for line in page.splitlines() if line.startswith("vllm:")}


def test_the_simulators_metric_names_are_the_real_servers_before_and_after_the_first_request(
    family: FamilyServer,
) -> None:
    """A fresh simulator and a fresh real vLLM of the family list the same series (every histogram
    already there at zero), and still do after a request."""
    assert family.metrics_before is not None, "the fleet read no /metrics page before the first request"
    sim_app = create_app(SimConfig(family=family.family, model=model(family.family), time_scale=0.001))
    body = {"model": model(family.family), "messages": [{"role": "user", "content": "Say hello."}]}
    with serve(sim_app) as sim_url, httpx.Client(base_url=sim_url, timeout=60) as sim:
        sim_before = metric_names(sim.get("/metrics").text)
        assert sim.post("/v1/chat/completions", json=body).status_code == 200
        sim_after = metric_names(sim.get("/metrics").text)
    with httpx.Client(base_url=family.url, timeout=60) as real:
        assert real.post("/v1/chat/completions", json=body).status_code == 200
        real_after = metric_names(real.get("/metrics").text)
    real_before = metric_names(family.metrics_before)
    assert (sorted(sim_before - real_before), sorted(real_before - sim_before)) == ([], [])
    assert (sorted(sim_after - real_after), sorted(real_after - sim_after)) == ([], [])


WIRE_REQUESTS: dict[str, dict[str, Any]] = {
    "plain": {"messages": [{"role": "user", "content": "Say hello."}]},
    "tool": {"messages": USER_TOOL, "tools": TOOLS},
    "required": {"messages": USER_TOOL, "tools": TOOLS, "tool_choice": "required"},
    "no-max-tokens-messages": {"messages": USER_TOOL},
}
#: (family, api, request, stream) -> what the simulator says that the real server does not, and
#: the reverse; each with why it stays
WIRE_KNOWN: dict[tuple[str, str, str, bool], tuple[set[str], set[str]]] = {
    # the tiny Qwen3-shaped model writes "</think>\n\n<tool_call>", and the hermes parser streams
    # the blank line as content; the simulator's hermes model writes no blank line there
    ("hermes", "chat", "tool", True): (set(), {"delta-key:content"}),
    ("hermes", "responses", "tool", True): (
        set(),
        {
            "event:response.output_text.delta",
            "event:response.output_text.done",
            "key-order:response.output_text.delta:model",
            "key-order:response.output_text.done:model",
        },
    ),
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("api", apis.APIS)
def test_each_familys_wire_agrees_with_the_simulator_on_what_clients_act_on(
    family: FamilyServer, api: str, stream: bool
) -> None:
    """Status, content type, how the answer ends, its blocks or items, call id shapes, and for
    streams the event types and the ending: the simulator of the family against its real vLLM."""
    name = model(family.family)
    sim_app = create_app(SimConfig(family=family.family, model=name, time_scale=0.001))
    diffs: dict[str, tuple[list[str], list[str]]] = {}
    with serve(sim_app) as sim_url:
        for kind, chat in WIRE_REQUESTS.items():
            if kind == "no-max-tokens-messages" and (api != "messages" or stream):
                continue
            body = apis.body_for(api, {"model": name, **chat}, stream=stream)
            if kind == "no-max-tokens-messages":
                body.pop("max_tokens")  # a validation error: vLLM answers it OpenAI-shaped
            facts = []
            for url in (sim_url, family.url):
                with httpx.Client(base_url=url, timeout=120) as c:
                    facts.append(wire_facts(api, c.post(ENDPOINT_PATHS[api], json=body), stream=stream))
            sim, real = facts
            known_sim, known_real = WIRE_KNOWN.get((family.family, api, kind, stream), (set(), set()))
            if (sim - real) != known_sim or (real - sim) != known_real:
                diffs[kind] = (sorted(sim - real), sorted(real - sim))
    assert diffs == {}, "simulator-only, real-only: fix sim/ or list in WIRE_KNOWN with why"
