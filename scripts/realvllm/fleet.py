"""The real tier's servers: one real vLLM per family, started in the background a few at a time.

Runs in .venv-vllm (Python 3.11, no wirecheck), so that ``./dev test`` can start it first thing,
before any test tier, and the real tier only reads what it writes. A vLLM start is ~35 s of mostly
one core and ~1.3 GB (serve.py), so never all at once: ``--ahead N`` servers are up or starting at
a time; when the tier is done with one (it touches ``STATE/SLOT.done``) that server stops and the
next slot starts. A slot the tier waits for (``STATE/SLOT.wanted``) starts at once. Each slot's outcome goes to ``STATE/SLOT.json``, written whole:

    {"slot", "family", "flags", "url" | null, "error" | null, "start_s", "metrics_before"}

``metrics_before`` is the server's /metrics page read once /health answers and before any request,
so the tier can compare a fresh simulator with a fresh real server. ``STATE/fleet.json`` says at the
end how long each start took and the fleet's peak resident memory. The fleet stops every server
and exits when every slot is done, when ``STATE/stop`` appears, when its parent process dies, or
(``--stop-on-stdin-eof``, for ./dev test, which holds the pipe) when its standard input closes.

    python fleet.py --state DIR [--slot NAME ...] [--ahead N] [--stop-on-stdin-eof]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from build_model import family_facts, model_dir  # this folder is sys.path[0]: the script's own

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
START_TIMEOUT_S = 300


@dataclass(frozen=True)
class Slot:
    name: str
    family: str
    flags: tuple[str, ...] = ()


def slots() -> dict[str, Slot]:
    """Every family with a tiny model, the default family first (its tier is the longest), then a
    second default-family server without prefix caching (accept's cache phase must fail on it),
    then the other families by name: the order in which the tier takes them."""
    known = family_facts()
    default = known["default"]
    out = {default: Slot(default, default)}
    out["no_prefix_caching"] = Slot("no_prefix_caching", default, ("--no-prefix-caching",))
    out.update((f, Slot(f, f)) for f in sorted(known["families"]) if f != default)
    return out


def quiet_port() -> int:
    """A free loopback port below the kernel's ephemeral range (Linux's starts at 32768): a vLLM
    binds ~35 s after its port is chosen, and a bind(0) elsewhere in that window is never handed
    a port from here."""
    for _ in range(200):
        port = random.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free loopback port in 20000-32000")


def _get(url: str, timeout: float = 2.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except Exception as exc:  # not up yet, in whatever way
        return 0, str(exc)


def _rss_kb(pgid: int) -> int:
    """Resident memory of every process in a process group (the API server and its engine core)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[2]) != pgid:
                continue
            for line in Path(f"/proc/{entry}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total


@dataclass
class Running:
    slot: Slot
    proc: subprocess.Popen[bytes]
    url: str
    log: Path
    t0: float
    up: bool = False
    outcome: dict[str, Any] = field(default_factory=dict)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


class Fleet:
    def __init__(self, state: Path, order: list[Slot], ahead: int) -> None:
        self.state, self.pending, self.ahead = state, list(order), ahead
        self.slots = list(order)
        self.running: list[Running] = []
        self.report: dict[str, Any] = {"starts": {}, "peak_rss_mb": 0, "ahead": ahead}
        self.parent = os.getppid()

    def publish(self, run: Running, error: str | None, metrics: str | None = None) -> None:
        out = {
            "slot": run.slot.name,
            "family": run.slot.family,
            "flags": list(run.slot.flags),
            "url": None if error else run.url,
            "error": error,
            "start_s": round(time.monotonic() - run.t0, 1),
            "metrics_before": metrics,
        }
        tmp = self.state / f".{run.slot.name}.json"
        tmp.write_text(json.dumps(out))
        os.replace(tmp, self.state / f"{run.slot.name}.json")
        self.report["starts"][run.slot.name] = out["start_s"] if error is None else error[:200]

    def launch(self, slot: Slot) -> None:
        port = quiet_port()
        log = self.state / f"{slot.name}.log"
        cmd = [sys.executable, str(HERE / "serve.py"), "--port", str(port), "--family", slot.family]
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [*cmd, *slot.flags], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.running.append(Running(slot, proc, f"http://127.0.0.1:{port}", log, time.monotonic()))

    def poll(self) -> None:
        for run in list(self.running):
            if run.up:
                if (self.state / f"{run.slot.name}.done").exists():
                    run.stop()
                    self.running.remove(run)
                continue
            if run.proc.poll() is not None:
                tail = run.log.read_text(errors="replace")[-4000:]
                self.publish(run, f"vLLM exited with {run.proc.returncode} while starting:\n{tail}")
                self.running.remove(run)
            elif time.monotonic() - run.t0 > START_TIMEOUT_S:
                run.stop()
                tail = run.log.read_text(errors="replace")[-4000:]
                self.publish(run, f"vLLM did not answer /health in {START_TIMEOUT_S} s:\n{tail}")
                self.running.remove(run)
            elif _get(f"{run.url}/health")[0] == 200:
                status, page = _get(f"{run.url}/metrics", timeout=10)
                run.up = True
                self.publish(run, None, page if status == 200 else None)

    def refuse_unknown(self) -> None:
        """A slot the tier waits for that this fleet does not have (started with --slot): say so,
        so that the test fails at once instead of waiting."""
        mine = {s.name for s in self.slots}
        for wanted in self.state.glob("*.wanted"):
            name = wanted.name.removesuffix(".wanted")
            out = self.state / f"{name}.json"
            if name not in mine and not out.exists():
                out.write_text(
                    json.dumps({"slot": name, "url": None, "error": "not among this fleet's --slot"})
                )

    def run(self) -> None:
        while self.pending or self.running:
            if (self.state / "stop").exists() or os.getppid() != self.parent:
                break
            while self.pending and len(self.running) < self.ahead:
                self.launch(self.pending.pop(0))
            # a slot the tier is already waiting for starts at once, past --ahead: the tier may
            # take its slots in another order than the fleet's, and must never wait on a slot
            # that waits on the tier
            for slot in [s for s in self.pending if (self.state / f"{s.name}.wanted").exists()]:
                self.pending.remove(slot)
                self.launch(slot)
            self.refuse_unknown()
            self.poll()
            rss = sum(_rss_kb(r.proc.pid) for r in self.running)
            self.report["peak_rss_mb"] = max(self.report["peak_rss_mb"], rss // 1024)
            time.sleep(0.5)

    def close(self) -> None:
        for run in self.running:
            run.stop()
        for slot in self.pending:  # never started: say so, so that no test waits for it
            (self.state / f"{slot.name}.json").write_text(
                json.dumps(
                    {
                        "slot": slot.name,
                        "family": slot.family,
                        "url": None,
                        "error": "the fleet stopped first",
                    }
                )
            )
        (self.state / "fleet.json").write_text(json.dumps(self.report, indent=2))


def _stop_on_eof(state: Path) -> None:
    while sys.stdin.buffer.read(4096):
        pass
    (state / "stop").touch()


def main(argv: list[str] | None = None) -> int:
    known = slots()
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--state", type=Path, required=True)
    ap.add_argument("--slot", action="append", choices=sorted(known), help="default: every slot")
    ap.add_argument("--ahead", type=int, default=3, help="servers up or starting at once")
    ap.add_argument(
        "--stop-on-stdin-eof",
        action="store_true",
        help="stop everything when standard input closes (./dev test holds it open for the run)",
    )
    args = ap.parse_args(argv)
    args.state.mkdir(parents=True, exist_ok=True)
    order = [known[s] for s in (args.slot or list(known))]
    # every model first, in this one process (one torch import), then the servers reuse them
    built: list[Slot] = []
    for slot in order:
        try:
            model_dir(slot.family, ROOT / ".venv-vllm" / "models")
            built.append(slot)
        except Exception as exc:  # a family whose model cannot be built fails alone, and says why
            (args.state / f"{slot.name}.json").write_text(
                json.dumps(
                    {
                        "slot": slot.name,
                        "family": slot.family,
                        "url": None,
                        "error": f"building its model: {exc!r}",
                    }
                )
            )
    fleet = Fleet(args.state, built, args.ahead)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if args.stop_on_stdin_eof:
        threading.Thread(target=_stop_on_eof, args=(args.state,), daemon=True).start()
    try:
        fleet.run()
    finally:
        fleet.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
