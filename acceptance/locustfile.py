"""wirecheck's Locust user class: the capacity phase's load from many machines.

Two ways to use it:

- ``wirecheck accept ... --load-engine locust --locust-workers N`` starts a Locust master and N local
  workers (``--locust-master HOST:PORT --locust-expect-workers N`` waits for workers started elsewhere
  with ``locust -f "$(wirecheck locustfile)" --worker --master-host HOST --master-port PORT``). The
  acceptance run sends each step (the request specs, the users, the open-loop rate) to the workers
  through Locust's message API; each worker builds the same bodies from the specs, times every request
  exactly as the in-process driver does, and sends the raw values back (``wirecheck_done``), never
  Locust's rounded statistics.
- Teams that already run Locust: ``locust -f "$(wirecheck locustfile)" --host http://vllm:8000`` runs
  ``WirecheckUser`` on its own: each user sends varied agent samples; Locust's statistics show TTFT and
  e2e per request, and with ``--wirecheck-out FILE`` the master writes every raw measurement (JSONL).

Importing this module imports Locust, which monkey-patches the standard library with gevent: it is
only ever imported by Locust processes, never by the acceptance run itself.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
import time
from collections import deque
from typing import Any

import gevent
import httpx
from locust import User, constant, events, task
from locust.runners import STATE_STOPPED, MasterRunner, WorkerRunner

from wirecheck.acceptance._client import Sample, measure_sync
from wirecheck.acceptance._workload import capacity_body, spec

__all__ = ["WirecheckUser"]


class _Plan:
    """The step a worker runs now: its share of the specs, its open-loop rate, and the samples."""

    def __init__(self) -> None:
        self.step: str | None = None
        self.label = ""
        self.url = ""
        self.headers: dict[str, str] = {}
        self.todo: deque[tuple[int, dict[str, Any]]] = deque()
        self.total = 0
        self.rate: float | None = None
        self.t0 = 0.0
        self.samples: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.runner: WorkerRunner | None = None

    def load(self, data: dict[str, Any]) -> None:
        with self.lock:
            self.step, self.label = data["step"], data["label"]
            self.url, self.headers = data["url"], data.get("headers") or {}
            self.todo = deque(enumerate(data["specs"]))
            self.total = len(data["specs"])
            self.rate = data.get("rate")
            self.t0 = time.monotonic()
            self.samples = []
        if self.total == 0:
            self._finish()

    def take(self) -> tuple[dict[str, Any], float | None] | None:
        with self.lock:
            if self.step is None or not self.todo:
                return None
            k, sp = self.todo.popleft()
            due = self.t0 + k / self.rate if self.rate else None
            return sp, due

    def record(self, sample: Sample) -> None:
        with self.lock:
            self.samples.append(sample.to_raw())
            finished = len(self.samples) == self.total
        if finished:
            self._finish()

    def _finish(self) -> None:
        with self.lock:
            step, samples = self.step, self.samples
            self.step = None
        if self.runner is not None and step is not None:
            self.runner.send_message("wirecheck_done", {"step": step, "samples": samples, "pid": os.getpid()})


PLAN = _Plan()
_standalone_seq = itertools.count(1)
#: standalone use (under a plain Locust master): where raw measurements go, and the model to send
_STANDALONE: dict[str, Any] = {"out": None, "model": None}


@events.init_command_line_parser.add_listener
def _options(parser: Any) -> None:
    parser.add_argument(
        "--wirecheck-out", default="", help="master: write every raw wirecheck measurement here (JSONL)"
    )
    parser.add_argument("--wirecheck-model", default="", help="model name to send (default: the server's)")


@events.init.add_listener
def _init(environment: Any, **_: Any) -> None:
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        PLAN.runner = runner
        runner.register_message("wirecheck_step", lambda environment, msg, **kw: PLAN.load(msg.data))
    out = getattr(environment.parsed_options, "wirecheck_out", "") if environment.parsed_options else ""
    _STANDALONE["model"] = (
        getattr(environment.parsed_options, "wirecheck_model", "") if environment.parsed_options else ""
    ) or None
    if not isinstance(runner, WorkerRunner) and out:
        _STANDALONE["out"] = open(out, "a", encoding="utf-8")  # noqa: SIM115 - open for the process's lifetime

        def write(environment: Any, msg: Any, **kw: Any) -> None:
            for raw in msg.data.get("samples", []):
                _STANDALONE["out"].write(json.dumps(raw) + "\n")
            _STANDALONE["out"].flush()

        runner.register_message("wirecheck_samples", write)


class WirecheckUser(User):
    """One agent caller: streams chat completions and times them (TTFT at the first token chunk)."""

    wait_time = constant(0)

    def on_start(self) -> None:
        self.client = httpx.Client(timeout=httpx.Timeout(600, connect=10))

    def on_stop(self) -> None:
        self.client.close()

    def _report(self, label: str, s: Sample) -> None:
        self.environment.events.request.fire(
            request_type="chat",
            name=label,
            response_time=s.e2e_s * 1000.0,
            response_length=s.completion_tokens or 0,
            exception=None if s.ok else RuntimeError(s.error or "failed"),
            context={"ttft_ms": None if s.ttft_s is None else s.ttft_s * 1000.0},
        )

    @task
    def chat(self) -> None:
        if PLAN.runner is not None:  # driven by wirecheck accept: the step's specs, nothing else
            got = PLAN.take()
            if got is None:
                gevent.sleep(0.005)
                return
            sp, due = got
            lag = 0.0
            if due is not None:
                wait = due - time.monotonic()
                if wait > 0:
                    gevent.sleep(wait)
                lag = max(time.monotonic() - due, 0.0)
            s = measure_sync(self.client, PLAN.url, capacity_body(sp), headers=PLAN.headers)
            s.lag_s = lag
            self._report(PLAN.label, s)
            PLAN.record(s)
            return
        # standalone, under a plain Locust master: varied agent samples against --host
        s = measure_sync(
            self.client,
            (self.host or "").rstrip("/") + "/v1/chat/completions",
            capacity_body(spec("varied", next(_standalone_seq), model=_STANDALONE["model"])),
        )
        self._report("agent sample", s)
        runner = self.environment.runner
        if isinstance(runner, WorkerRunner):
            runner.send_message("wirecheck_samples", {"samples": [s.to_raw()]})
        elif _STANDALONE["out"] is not None:
            _STANDALONE["out"].write(json.dumps(s.to_raw()) + "\n")


# --- the master that ``wirecheck accept --load-engine locust`` drives --------------------------------


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _wait(cond: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        gevent.sleep(0.02)


def _run_step(
    runner: MasterRunner, done: dict[str, list[dict[str, Any]]], cmd: dict[str, Any]
) -> dict[str, Any]:
    specs = cmd["specs"]
    rate = cmd.get("rate")
    users = max(1, min(len(specs), 512) if rate else int(cmd["users"]))
    runner.start(users, spawn_rate=max(users * 50, 100))
    _wait(lambda: runner.spawning_completed, 120, "Locust workers did not finish spawning users")
    workers = [w for w in runner.clients.values() if w.user_count > 0]
    slots = [w.id for w in workers for _ in range(w.user_count)]
    shares: dict[str, list[dict[str, Any]]] = {w.id: [] for w in workers}
    for j, sp in enumerate(specs):
        shares[slots[j % len(slots)]].append(sp)
    total = sum(w.user_count for w in workers)
    step = cmd["step"]
    done[step] = []
    for w in workers:
        runner.send_message(
            "wirecheck_step",
            {
                "step": step,
                "label": cmd["label"],
                "url": cmd["url"],
                "headers": cmd.get("headers") or {},
                "specs": shares[w.id],
                # the open-loop rate is split across workers by their share of the users
                "rate": (rate * w.user_count / total) if rate else None,
            },
            client_id=w.id,
        )
    _wait(
        lambda: len(done[step]) >= len(workers),
        float(cmd.get("timeout_s", 3600)),
        f"step {cmd['label']}: a worker did not report",
    )
    runner.stop()
    _wait(lambda: runner.state == STATE_STOPPED, 60, "Locust workers did not stop")
    samples = [raw for part in done.pop(step) for raw in part["samples"]]
    return {
        "event": "done",
        "step": step,
        "samples": samples,
        "workers": {w.id: len(shares[w.id]) for w in workers},
        "users": {w.id: w.user_count for w in workers},
    }


def master_main() -> None:
    """A Locust master under a line protocol on stdin/stdout (JSON): ``step`` and ``quit`` in,
    ``ready``, ``done`` and ``error`` out. Run with gevent patched first."""
    import argparse

    from gevent.fileobject import FileObjectPosix
    from locust.env import Environment

    ap = argparse.ArgumentParser(prog="wirecheck-locust-master")
    ap.add_argument("--bind-host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--workers", type=int, required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--wait-workers-s", type=float, default=120.0)
    args = ap.parse_args()
    env = Environment(user_classes=[WirecheckUser], events=events, host=args.target)
    runner = env.create_master_runner(master_bind_host=args.bind_host, master_bind_port=args.port)
    done: dict[str, list[dict[str, Any]]] = {}

    def on_done(environment: Any, msg: Any, **kw: Any) -> None:
        done.setdefault(msg.data["step"], []).append(msg.data)

    runner.register_message("wirecheck_done", on_done)
    try:
        _wait(
            lambda: runner.worker_count >= args.workers,
            args.wait_workers_s,
            f"{args.workers} Locust workers did not connect to {args.bind_host}:{args.port}",
        )
    except TimeoutError as exc:
        _emit({"event": "error", "message": str(exc), "workers": runner.worker_count})
        runner.quit()
        return
    _emit({"event": "ready", "workers": runner.worker_count})
    stdin = FileObjectPosix(sys.stdin.fileno(), "rb")
    for raw in stdin:
        try:
            cmd = json.loads(raw)
        except ValueError:
            _emit({"event": "error", "message": f"not JSON: {raw[:80]!r}"})
            continue
        if cmd.get("cmd") == "quit":
            break
        try:
            _emit(_run_step(runner, done, cmd))
        except Exception as exc:
            _emit({"event": "error", "step": cmd.get("step"), "message": f"{type(exc).__name__}: {exc}"})
    runner.quit()
