"""The simulator's /metrics lists every series from the start, as a real vLLM does: a fresh
dashboard, an alert rule and the first counter delta see the same names before and after the
first request (the real tier compares the names with a real vLLM 0.32, 106 of them)."""

from __future__ import annotations

import httpx

from wirecheck.record import serve
from wirecheck.sim import SimConfig, create_app


def _names(page: str) -> set[str]:
    return {line.split("{", 1)[0].split(" ", 1)[0] for line in page.splitlines() if line.startswith("vllm:")}


def test_the_metric_names_are_there_before_the_first_request_and_stay() -> None:
    body = {"model": "moonshotai/Kimi-K2-Thinking", "messages": [{"role": "user", "content": "Say hello."}]}
    with (
        serve(create_app(SimConfig(family="kimi_k2", time_scale=0.001))) as url,
        httpx.Client(base_url=url) as c,
    ):
        before = _names(c.get("/metrics").text)
        assert c.post("/v1/chat/completions", json=body).status_code == 200
        after = _names(c.get("/metrics").text)
    assert before == after
    # every histogram is there at zero: its buckets, count, sum and created time
    for hist in ("time_to_first_token_seconds", "request_prompt_tokens", "iteration_tokens_total"):
        assert {f"vllm:{hist}_{s}" for s in ("bucket", "count", "sum", "created")} <= before
    assert len(before) == 106
