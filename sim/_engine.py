"""The simulator's capacity model: a scheduler over a KV budget, with a prefix cache, as vLLM's V1
engine behaves from the outside.

- KV budget of ``num_gpu_blocks`` blocks of ``block_size`` tokens; ``max_num_seqs`` running at most;
  a waiting queue; each step prefills up to ``max_num_batched_tokens`` and decodes one token for each
  running sequence, the step taking as long as the token rates say (scaled by ``time_scale``).
- When a decoding sequence needs a block and none is free, the newest running sequence is preempted
  (its blocks freed, back to the front of the queue, recomputed later): ``num_preemptions_total``.
- Prefix cache over chained block hashes with LRU eviction of unreferenced blocks; queries and hits
  are counted in tokens. At least one prompt token is always computed, as in vLLM.
- Hybrid mode (Kimi K3's KDA layers): state is kept only at prompt ends, and every
  ``prefix_cache_retention_interval`` tokens when that is set, so a warm request hits only up to a
  retained boundary.
- OOM: when running sequences hold more than ``oom_at_tokens`` tokens the engine dies: every request
  fails, ``/health`` answers 503, until ``oom_recover_s`` (if set) has passed.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

from ._config import SimConfig
from ._metrics import SimMetrics

__all__ = ["Engine", "EngineDead", "SeqRequest"]


class EngineDead(Exception):
    """The simulated engine has died (OOM)."""


@dataclass(slots=True, eq=False)
class SeqRequest:
    rid: int
    prompt: list[int]
    output: list[str]
    max_tokens: int
    events: asyncio.Queue[tuple[str, Any]] = field(default_factory=asyncio.Queue)
    hashes: list[str] = field(default_factory=list)
    arrival: float = 0.0
    not_before: float = 0.0
    state: str = "waiting"
    computed: int = 0
    cached: int = 0
    generated: int = 0
    recompute: int = 0
    pinned: list[str] = field(default_factory=list)
    private: int = 0
    scheduled_at: float | None = None
    prefill_done_at: float | None = None
    last_token_at: float | None = None
    preempted: int = 0

    @property
    def context(self) -> int:
        return len(self.prompt) + self.generated


def block_hashes(tokens: list[int], block_size: int) -> list[str]:
    out, prev = [], ""
    for i in range(len(tokens) // block_size):
        block = tokens[i * block_size : (i + 1) * block_size]
        prev = hashlib.blake2b(f"{prev}|{block}".encode(), digest_size=12).hexdigest()
        out.append(prev)
    return out


class Engine:
    def __init__(self, cfg: SimConfig, metrics: SimMetrics) -> None:
        self.cfg = cfg
        self.m = metrics
        self.L = metrics.labels
        self.waiting: deque[SeqRequest] = deque()
        self.running: list[SeqRequest] = []
        self.cache: OrderedDict[str, int] = OrderedDict()  # block hash -> references
        self.retained: set[str] = set()
        self.pinned = 0
        self.private = 0
        self.dead_until: float | None = None
        self.dead_reason = ""
        self.steps = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        metrics.cache_config.labels(
            block_size=str(cfg.block_size),
            enable_prefix_caching=str(cfg.enable_prefix_caching),
            engine=self.L["engine"],
            hybrid_kv_cache=str(cfg.hybrid_cache),
            kv_cache_size_tokens=str(cfg.num_gpu_blocks * cfg.block_size),
            num_gpu_blocks=str(cfg.num_gpu_blocks),
            prefix_cache_retention_interval=str(cfg.prefix_cache_retention_interval),
        ).set(1)

    # --- state -----------------------------------------------------------------------------------

    @property
    def dead(self) -> bool:
        if self.dead_until is None:
            return False
        if self.dead_until != float("inf") and time.monotonic() >= self.dead_until:
            self.dead_until = None
            self.cache.clear()
            self.retained.clear()
            return False
        return True

    def in_use(self) -> int:
        return self.pinned + self.private

    def free_blocks(self) -> int:
        return self.cfg.num_gpu_blocks - self.in_use()

    def load(self) -> int:
        return len(self.running) + len(self.waiting)

    # --- public ----------------------------------------------------------------------------------

    def submit(self, req: SeqRequest) -> None:
        if self.dead:
            raise EngineDead(self.dead_reason)
        need = -(-(len(req.prompt) + 1) // self.cfg.block_size)
        if need > self.cfg.num_gpu_blocks:
            raise ValueError(
                f"the prompt needs {need} KV blocks; the cache has {self.cfg.num_gpu_blocks} "
                f"({self.cfg.num_gpu_blocks * self.cfg.block_size} tokens)"
            )
        req.arrival = time.monotonic()
        req.hashes = block_hashes(req.prompt, self.cfg.block_size)
        self.waiting.append(req)
        self._gauges()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._loop())
        self._wake.set()

    def abort(self, req: SeqRequest) -> None:
        if req.state in ("finished", "aborted"):
            return
        if req in self.running:
            self.running.remove(req)
            self._release(req)
        elif req in self.waiting:
            self.waiting.remove(req)
        req.state = "aborted"
        self.m.success.labels(finished_reason="abort", **self.L).inc()
        self._gauges()

    # --- blocks and cache ------------------------------------------------------------------------

    def _evict(self, need: int) -> bool:
        """Make room for ``need`` new blocks by evicting unreferenced cached blocks (LRU)."""
        idle = [h for h, refs in self.cache.items() if refs == 0]  # oldest first (LRU order)
        excess = self.in_use() + len(idle) + need - self.cfg.num_gpu_blocks
        for victim in idle[: max(excess, 0)]:
            del self.cache[victim]
            self.retained.discard(victim)
        return excess <= len(idle) or self.free_blocks() >= need

    def _lookup(self, req: SeqRequest) -> int:
        if not self.cfg.enable_prefix_caching:
            return 0
        if self.cfg.hybrid_cache:
            best = 0
            for i, h in enumerate(req.hashes):
                if h not in self.cache:
                    break
                if h in self.retained:
                    best = i + 1
            return best
        n = 0
        for h in req.hashes:
            if h not in self.cache:
                break
            n += 1
        return n

    def _retain(self, req: SeqRequest) -> None:
        if not self.cfg.hybrid_cache or not req.hashes:
            return
        self.retained.add(req.hashes[-1])  # the prompt end (last full block)
        step = self.cfg.prefix_cache_retention_interval
        if step > 0:
            for i, h in enumerate(req.hashes):
                if ((i + 1) * self.cfg.block_size) % step == 0:
                    self.retained.add(h)

    def _admit(self, req: SeqRequest) -> bool:
        bs = self.cfg.block_size
        hit_blocks = 0 if req.recompute else self._lookup(req)
        hit_blocks = min(hit_blocks, (len(req.prompt) - 1) // bs)  # one token is always computed
        total = -(-(req.context + 1) // bs)
        new = total - hit_blocks
        # pin the hit blocks first, so that making room cannot evict them
        for h in req.hashes[:hit_blocks]:
            if self.cache[h] == 0:
                self.pinned += 1
            self.cache[h] += 1
            self.cache.move_to_end(h)
        if self.free_blocks() < new or not self._evict(new):
            for h in req.hashes[:hit_blocks]:
                self.cache[h] -= 1
                if self.cache[h] == 0:
                    self.pinned -= 1
            return False
        full = req.hashes[hit_blocks:] if self.cfg.enable_prefix_caching and not req.recompute else []
        for h in full:
            if h in self.cache:  # computed meanwhile by a sibling request
                if self.cache[h] == 0:
                    self.pinned += 1
                self.cache[h] += 1
                self.cache.move_to_end(h)
            else:
                self.cache[h] = 1
                self.pinned += 1
        req.pinned = req.hashes[: hit_blocks + len(full)]
        req.private = total - len(req.pinned)
        self.private += req.private
        hit = hit_blocks * bs
        if not req.recompute:
            req.cached = hit
            if self.cfg.enable_prefix_caching:
                self.m.pc_queries.labels(**self.L).inc(len(req.prompt))
                self.m.pc_hits.labels(**self.L).inc(hit)
            self.m.prompt_tokens.labels(**self.L).inc(len(req.prompt))
            self.m.prompt_cached.labels(**self.L).inc(hit)
            self.m.prompt_by_source.labels(source="local_cache_hit", **self.L).inc(hit)
            self.m.prompt_by_source.labels(source="local_compute", **self.L).inc(len(req.prompt) - hit)
            self.m.prompt_cached_by_source.labels(source="device", **self.L).inc(hit)
            self._retain(req)
        req.computed = hit
        req.state = "prefill"
        now = time.monotonic()
        if req.scheduled_at is None:
            req.scheduled_at = now
            self.m.queue_time.labels(**self.L).observe(now - req.arrival)
        return True

    def _release(self, req: SeqRequest) -> None:
        for h in req.pinned:
            if h in self.cache:
                self.cache[h] -= 1
                if self.cache[h] == 0:
                    self.pinned -= 1
        self.private -= req.private
        req.pinned, req.private = [], 0

    # --- the loop --------------------------------------------------------------------------------

    def _gauges(self) -> None:
        self.m.running.labels(**self.L).set(len(self.running))
        self.m.waiting.labels(**self.L).set(len(self.waiting))
        self.m.waiting_by_reason.labels(reason="capacity", **self.L).set(len(self.waiting))
        self.m.kv_usage.labels(**self.L).set(round(self.in_use() / self.cfg.num_gpu_blocks, 6))

    async def _loop(self) -> None:
        while True:
            if not self.running and not self.waiting:
                self._wake.clear()
                await self._wake.wait()
                continue
            delay = self._schedule()
            await asyncio.sleep(
                max(delay, 0.0005) * self.cfg.time_scale if delay > 0 else 0.001 * self.cfg.time_scale
            )
            self._advance()

    def _schedule(self) -> float:
        now = time.monotonic()
        while self.waiting and len(self.running) < self.cfg.max_num_seqs:
            req = self.waiting[0]
            if req.not_before > now:
                break
            if not self._admit(req):
                break
            self.waiting.popleft()
            self.running.append(req)
        budget = self.cfg.max_num_batched_tokens
        self._prefill_tokens = 0
        self._decoding = []
        for req in self.running:
            if req.state == "prefill":
                need = (req.context if req.recompute else len(req.prompt)) - req.computed
                take = min(need, budget)
                req.computed += take
                budget -= take
                self._prefill_tokens += take
                if take == need:
                    req.state = "decode"
                    self._decoding.append(req)
            elif req.state == "decode":
                self._decoding.append(req)
        self._gauges()
        if self._prefill_tokens or self._decoding:
            self.m.iteration_tokens.labels(**self.L).observe(self._prefill_tokens + len(self._decoding))
        t = 0.0005 + self._prefill_tokens / self.cfg.prefill_tokens_per_s
        if self._decoding:
            t += (1.0 / self.cfg.decode_tokens_per_s) * (
                1 + self.cfg.batch_slowdown * (len(self._decoding) - 1)
            )
        return t

    def _advance(self) -> None:
        self.steps += 1
        now = time.monotonic()
        bs = self.cfg.block_size
        for req in list(self._decoding):
            if req.state != "decode" or req not in self.running:
                continue
            if req.prefill_done_at is None:
                req.prefill_done_at = now
                self.m.prefill_time.labels(**self.L).observe(now - (req.scheduled_at or now))
                self.m.prefill_kv.labels(**self.L).observe(len(req.prompt) - req.cached)
            if req.recompute:
                req.recompute = 0
            if req.context + 1 > (len(req.pinned) + req.private) * bs:
                if self.free_blocks() < 1 and not self._evict(1):
                    if len(self.running) == 1:
                        # alone and out of KV: the cache cannot hold this sequence any longer
                        self._finish(req, "length", now)
                        continue
                    victim = self.running[-1]
                    self._preempt(victim)
                    if victim is req:
                        continue
                if self.free_blocks() < 1:
                    self._preempt(req)
                    continue
                req.private += 1
                self.private += 1
            tok = req.output[req.generated]
            req.generated += 1
            if req.last_token_at is None:
                self.m.ttft.labels(**self.L).observe(now - req.arrival)
            else:
                self.m.itl.labels(**self.L).observe(now - req.last_token_at)
            req.last_token_at = now
            self.m.generation_tokens.labels(**self.L).inc()
            req.events.put_nowait(("token", tok))
            if req.generated >= len(req.output) or req.generated >= req.max_tokens:
                self._finish(req, "length" if req.generated < len(req.output) else "stop", now)
        if self.cfg.oom_at_tokens is not None:
            held = sum(r.context for r in self.running)
            if held > self.cfg.oom_at_tokens:
                self._die(f"CUDA out of memory: {held} tokens in running sequences")
        self._gauges()

    def _preempt(self, req: SeqRequest) -> None:
        self.running.remove(req)
        self._release(req)
        req.state = "waiting"
        req.recompute = 1
        req.computed = 0
        self.waiting.appendleft(req)
        self.m.preemptions.labels(**self.L).inc()
        req.preempted += 1

    def _finish(self, req: SeqRequest, reason: str, now: float) -> None:
        self.running.remove(req)
        self._release(req)
        req.state = "finished"
        self.m.success.labels(finished_reason=reason, **self.L).inc()
        self.m.e2e.labels(**self.L).observe(now - req.arrival)
        self.m.inference_time.labels(**self.L).observe(now - (req.scheduled_at or now))
        self.m.request_prompt.labels(**self.L).observe(len(req.prompt))
        self.m.request_generation.labels(**self.L).observe(req.generated)
        self.m.max_generation.labels(**self.L).observe(req.max_tokens)
        self.m.params_max_tokens.labels(**self.L).observe(req.max_tokens)
        self.m.params_n.labels(**self.L).observe(1)
        self.m.request_preemptions.labels(**self.L).observe(req.preempted)
        if req.prefill_done_at is not None:
            self.m.decode_time.labels(**self.L).observe(now - req.prefill_done_at)
            if req.generated > 1:
                self.m.tpot.labels(**self.L).observe((now - req.prefill_done_at) / (req.generated - 1))
        req.events.put_nowait(("finish", reason))

    def _die(self, reason: str) -> None:
        self.dead_reason = reason
        recover = self.cfg.oom_recover_s
        self.dead_until = (
            time.monotonic() + recover * self.cfg.time_scale if recover is not None else float("inf")
        )
        for req in [*self.running, *self.waiting]:
            req.state = "finished"
            req.events.put_nowait(("error", reason))
            self.m.success.labels(finished_reason="error", **self.L).inc()
        self.running.clear()
        self.waiting.clear()
        self.pinned = self.private = 0
        self.cache.clear()
        self.retained.clear()
