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

import contextlib
import itertools
import json
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import gevent
import httpx
from locust import User, constant, events, task
from locust.runners import (
    STATE_INIT,
    STATE_MISSING,
    STATE_STOPPED,
    STATE_STOPPING,
    MasterRunner,
    WorkerRunner,
)

from wirecheck.acceptance.load import REQUEST_READ_TIMEOUT_S, Sample, capacity_body, measure_sync, spec

__all__ = ["WirecheckUser"]

#: a worker reports its step's progress at most this often (seconds)
PROGRESS_EVERY_S = 0.5
#: Locust marks a worker missing after about 4 s without a heartbeat. On a loaded machine a worker can
#: miss a few and come back, so a step fails only when one stays missing this long (seconds).
MISSING_GRACE_S = 15.0
#: how often the master tells the acceptance run that it is alive, with the step's sample count
TICK_S = 2.0
#: the longest the master waits for its workers to be back and ready, or to report their users
SETTLE_S = 120.0


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
        self.last_progress = 0.0

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
            count, step = len(self.samples), self.step
            finished = count == self.total
            # the master fails a step whose worker sends nothing for the client's request timeout plus
            # slack: tell it how far this worker has come, at most twice a second (a message per request
            # would be too many on a large run)
            now = time.monotonic()
            beat = not finished and now - self.last_progress >= PROGRESS_EVERY_S
            if beat:
                self.last_progress = now
        if finished:
            self._finish()
        elif beat and self.runner is not None and step is not None:
            self.runner.send_message("wirecheck_progress", {"step": step, "samples": count})

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
        self.client = httpx.Client(timeout=httpx.Timeout(REQUEST_READ_TIMEOUT_S, connect=10))

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
            # flushed each time, as the master's are: a run stopped hard keeps what it measured
            _STANDALONE["out"].write(json.dumps(s.to_raw()) + "\n")
            _STANDALONE["out"].flush()


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


class StepFailed(Exception):
    """A step that cannot finish: its message goes to the acceptance run as the phase's error."""


class _Watch:
    """What the master has heard about the step in flight: each worker's ``wirecheck_done`` and its
    last progress (sample count, when), so that a lost or silent worker fails the step in bounded time."""

    def __init__(self) -> None:
        self.step: str | None = None
        self.done: dict[str, dict[str, Any]] = {}
        self.seen: dict[str, tuple[int, float]] = {}

    def begin(self, step: str, workers: list[str]) -> None:
        now = time.monotonic()
        self.step, self.done, self.seen = step, {}, {w: (0, now) for w in workers}

    def on_done(self, node: str, data: dict[str, Any]) -> None:
        if data.get("step") == self.step:  # a late report of a failed step is not this step's
            self.done[node] = data
            self.seen[node] = (len(data.get("samples", [])), time.monotonic())

    def on_progress(self, node: str, data: dict[str, Any]) -> None:
        if data.get("step") == self.step and node in self.seen:
            self.seen[node] = (int(data.get("samples", 0)), time.monotonic())

    def samples(self) -> int:
        return sum(n for n, _ in self.seen.values())


def _busy(runner: MasterRunner) -> list[str]:
    """Workers that are neither ready nor gone: still stopping from the last step, or missing."""
    return [w.id for w in runner.clients.values() if w.state != STATE_INIT]


def _until(runner: MasterRunner, cond: Callable[[], bool], failure: Callable[[], str]) -> None:
    """Wait up to SETTLE_S for ``cond``, failing the step at once when a worker is lost meanwhile,
    and with ``failure()`` (what the workers had reached) when the time runs out."""
    lost = _Lost(runner)
    try:
        _wait(lambda: lost.check() and cond(), SETTLE_S, "")
    except TimeoutError:
        raise StepFailed(failure()) from None


def _settle(runner: MasterRunner, expect: int) -> None:
    """Wait until every expected worker is back and ready before a step starts.

    After a step's ``stop`` a worker sends ``client_stopped`` (the master forgets it) and then
    ``client_ready``; on a loaded machine the second can come late. A step started in between gave
    all users to the other workers, and when the late worker came back Locust re-dispatched the users
    in the middle of the step, killing users in the middle of a request: their samples never arrived
    and the step waited for a ``wirecheck_done`` that could not come (the hang seen in CI)."""

    def failure() -> str:
        states = {w.id: w.state for w in runner.clients.values()}
        return (
            f"{len(runner.clients.ready)} of {expect} Locust workers ready after "
            f"{SETTLE_S:.0f} s (workers: {states or 'none'})"
        )

    _until(runner, lambda: len(runner.clients.ready) >= expect and not _busy(runner), failure)


def _spawn(runner: MasterRunner, users: int) -> list[Any]:
    """Start ``users`` users and wait until the workers report them all: Locust's own wait for the
    reports is one second, after which it calls spawning complete with counts that may still be 0."""
    runner.start(users, spawn_rate=max(users * 50, 100))

    def failure() -> str:
        got = {w.id: w.user_count for w in runner.clients.values()}
        return f"Locust workers reported {runner.user_count} of {users} users after {SETTLE_S:.0f} s ({got})"

    _until(
        runner,
        lambda: runner.spawning_completed and runner.user_count == users and not _missing(runner),
        failure,
    )
    # Pin the users where they are for this step: with no dispatcher, a worker that comes back from
    # missing or connects late is not given users taken from the others (a re-dispatch kills users
    # mid-request, see _settle). ``stop`` clears the dispatcher too, and ``start`` makes a new one.
    runner._users_dispatcher = None
    return [w for w in runner.clients.values() if w.user_count > 0]


def _missing(runner: MasterRunner) -> bool:
    return any(w.state == STATE_MISSING for w in runner.clients.values())


class _Lost:
    """Fails the step when a worker stays missing (no heartbeat) past MISSING_GRACE_S; with ``got``
    (the workers still owing samples and how far each came), only a worker that still owes counts."""

    def __init__(self, runner: MasterRunner) -> None:
        self.runner = runner
        self.since: dict[str, float] = {}

    def check(self, got: dict[str, str] | None = None) -> bool:
        now = time.monotonic()
        for w in list(self.runner.clients.values()):
            if w.state != STATE_MISSING or (got is not None and w.id not in got):
                self.since.pop(w.id, None)
            elif now - self.since.setdefault(w.id, now) > MISSING_GRACE_S:
                more = f" ({got[w.id]})" if got else ""
                raise StepFailed(
                    f"Locust worker {w.id} went missing: no heartbeat for over "
                    f"{MISSING_GRACE_S + 3:.0f} s{more}"
                )
        return True


def _await_reports(runner: MasterRunner, watch: _Watch, shares: dict[str, int], idle_s: float) -> None:
    """Wait for every worker's ``wirecheck_done``; fail when one leaves, stays missing past
    MISSING_GRACE_S, or sends no sample for ``idle_s`` (the client's request timeout plus slack)."""
    lost = _Lost(runner)
    while True:
        left = [w for w in shares if w not in watch.done]
        if not left:
            return
        now = time.monotonic()
        got = {w: f"{watch.seen[w][0]} of {shares[w]} samples reported" for w in left}
        lost.check(got)
        if runner.state in (STATE_STOPPING, STATE_STOPPED):
            # Locust stops the test itself when its last worker goes missing or quits; the stopped
            # users will send nothing more, so waiting for the idle bound would only waste it
            raise StepFailed(
                "Locust stopped the test in the middle of the step: every worker went missing or quit "
                f"({'; '.join(f'{w}: {g}' for w, g in got.items())})"
            )
        for wid in left:
            at = watch.seen[wid][1]
            if runner.clients.get(wid) is None:
                raise StepFailed(f"Locust worker {wid} left in the middle of the step ({got[wid]})")
            if now - at > idle_s:
                raise StepFailed(
                    f"Locust worker {wid} sent no sample for {idle_s:.0f} s, "
                    f"the client's request timeout plus slack ({got[wid]})"
                )
        gevent.sleep(0.05)


def _stop(runner: MasterRunner, timeout: float) -> None:
    runner.stop()
    _wait(lambda: runner.state == STATE_STOPPED, timeout, "Locust workers did not stop")


def _run_step(runner: MasterRunner, watch: _Watch, cmd: dict[str, Any], expect: int) -> dict[str, Any]:
    specs = cmd["specs"]
    rate = cmd.get("rate")
    label = str(cmd["label"])
    users = max(1, min(len(specs), 512) if rate else int(cmd["users"]))
    _settle(runner, expect)
    workers = _spawn(runner, users)
    slots = [w.id for w in workers for _ in range(w.user_count)]
    shares: dict[str, list[dict[str, Any]]] = {w.id: [] for w in workers}
    for j, sp in enumerate(specs):
        shares[slots[j % len(slots)]].append(sp)
    total = sum(w.user_count for w in workers)
    step = cmd["step"]
    watch.begin(step, list(shares))
    for w in workers:
        runner.send_message(
            "wirecheck_step",
            {
                "step": step,
                "label": label,
                "url": cmd["url"],
                "headers": cmd.get("headers") or {},
                "specs": shares[w.id],
                # the open-loop rate is split across workers by their share of the users
                "rate": (rate * w.user_count / total) if rate else None,
            },
            client_id=w.id,
        )
    idle_s = float(cmd.get("idle_s", 660))
    if rate:  # an open-loop worker is idle on purpose between its sends
        idle_s += total / (rate * min(w.user_count for w in workers))
    _await_reports(runner, watch, {w: len(v) for w, v in shares.items()}, idle_s)
    # every sample is in: a worker slow to stop (or gone since) is the next step's concern (_settle)
    with contextlib.suppress(TimeoutError):
        _stop(runner, 30)
    samples = [raw for w in shares for raw in watch.done[w]["samples"]]
    watch.step = None
    return {
        "event": "done",
        "step": step,
        "samples": samples,
        "workers": {w.id: len(shares[w.id]) for w in workers},
        "users": {w.id: w.user_count for w in workers},
    }


def _ticker(watch: _Watch) -> None:
    """Tell the acceptance run, every TICK_S, that the master is alive and how far the step is: it
    bounds its own wait on these (a master stuck or gone is noticed without waiting for hours)."""
    while True:
        gevent.sleep(TICK_S)
        try:
            _emit({"event": "tick", "step": watch.step, "samples": watch.samples()})
        except OSError:  # the acceptance run is gone: stdin's end of file ends the master
            return


def master_main() -> None:
    """A Locust master under a line protocol on stdin/stdout (JSON): ``step`` and ``quit`` in,
    ``ready``, ``tick``, ``done`` and ``error`` out. Run with gevent patched first."""
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
    watch = _Watch()
    runner.register_message(
        "wirecheck_done", lambda environment, msg, **kw: watch.on_done(msg.node_id, msg.data)
    )
    runner.register_message(
        "wirecheck_progress", lambda environment, msg, **kw: watch.on_progress(msg.node_id, msg.data)
    )
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
    ticker = gevent.spawn(_ticker, watch)
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
            _emit(_run_step(runner, watch, cmd, args.workers))
        except Exception as exc:
            what = str(exc) if isinstance(exc, StepFailed) else f"{type(exc).__name__}: {exc}"
            _emit({"event": "error", "step": cmd.get("step"), "message": what})
            watch.step = None
            # leave the workers stopped for a next step or quit. Not waiting for Locust's stopped
            # state: with a worker missing it never comes, and the next step waits for its workers.
            with contextlib.suppress(Exception):
                runner.stop()
    ticker.kill()
    # Locust sends ``quit`` only to the workers it knows: one still between ``client_stopped`` and
    # ``client_ready`` after the last step would be left waiting 60 s for a master that is gone
    # (a missing worker counts as known: it may be dead, and waiting for it helps nothing)
    with contextlib.suppress(TimeoutError):
        _wait(lambda: len(runner.clients.ready) + len(runner.clients.missing) >= args.workers, 15, "")
    runner.quit()
