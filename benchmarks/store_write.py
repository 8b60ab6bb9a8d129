"""What writing an exchange to the store costs, with ids made the way the proxy makes them and with
wholly random ids: the same rows, in the same batches, side by side in one run.

The store indexes each exchange by its id (unique) and by its correlation id (record/_backend.py).
A B-tree takes keys that grow at its right-hand end, a leaf page at a time; a random key lands on a
leaf of its own, which the transaction then writes whole to the WAL (and the checkpoint writes again
to the database). The proxy's exchange ids and correlation nonces begin with the time in
milliseconds (record/_correlation.py) for that reason. This script records ``--batches`` batches of
``--batch`` streamed chat completions (``--events`` frames each, as the proxy's writer takes them:
600 exchanges a second and a tenth of a second's linger are batches of 60) into a fresh SQLite store
through the writer's own insert (``Store.write_now``), first ``--warm`` batches untimed (a store that
holds rows already), then the rest timed, in CPU seconds of this process (SQLite writes and
checkpoints in the committing thread):

- baseline: ids wholly random (64 bits of hex for the exchange, a random nonce for its correlation);
- tap ids: ids and correlations minted by the tap's own ``Correlator``;
- for each, CPU per exchange, bytes written per exchange (``/proc/self/io``), and the ratio to the
  baseline. The two alternate ``--rounds`` times; medians.

    python benchmarks/store_write.py [--batches 200] [--batch 60] [--warm 40] [--events 20] [--rounds 3]
"""

from __future__ import annotations

import argparse
import copy
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_output import machine, write_json
from live_checker import recorded

from wirecheck.contracts import Exchange
from wirecheck.record import Store
from wirecheck.record._correlation import Correlator, correlation_secret

HERE = Path(__file__).resolve().parent

Ids = Callable[[], tuple[str, str]]


def _random_ids() -> tuple[str, str]:
    """An exchange id and a correlation as they were made before the time came first: all random."""
    return f"caller-{secrets.token_hex(8)}", f"{secrets.token_hex(12)}.{secrets.token_hex(16)}"


def _tap_ids(corr: Correlator) -> Ids:
    """An exchange id and a correlation as the caller tap makes them (``proxy/_app.py``: one nonce
    for both)."""

    def ids() -> tuple[str, str]:
        nonce = corr.nonce()
        return f"caller-{nonce}", corr.mint(nonce)

    return ids


def _written() -> int:
    """Bytes this process has asked the kernel to write so far."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    return 0


def _one(template: Exchange, ids: Ids, args: argparse.Namespace) -> dict[str, float]:
    """One store written with these ids: CPU and bytes per exchange over the timed batches."""
    with tempfile.TemporaryDirectory(prefix="wc-store-write-") as tmp:
        store = Store(str(Path(tmp) / "s.db"))
        try:
            batches: list[list[Exchange]] = []
            for _ in range(args.batches):
                batch = []
                for _ in range(args.batch):
                    ex = copy.copy(template)
                    ex.id, ex.correlation = ids()
                    batch.append(ex)
                batches.append(batch)
            for batch in batches[: args.warm]:
                store.write_now(batch)
            wrote, cpu = _written(), time.process_time()
            for batch in batches[args.warm :]:
                store.write_now(batch)
            cpu, wrote = time.process_time() - cpu, _written() - wrote
        finally:
            store.close()
    n = (args.batches - args.warm) * args.batch
    return {"cpu_us": cpu / n * 1e6, "bytes": wrote / n}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--batch", type=int, default=60, help="exchanges a transaction")
    ap.add_argument("--warm", type=int, default=40, help="batches written before the timed ones")
    ap.add_argument("--events", type=int, default=20, help="SSE frames a stream")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(HERE / "results" / "store_write.json"))
    args = ap.parse_args()
    if args.batches <= args.warm or args.batch < 1 or args.rounds < 1:
        ap.error("--batches must be more than --warm, and --batch and --rounds at least 1")
    template = recorded(0, time.time(), 640.0, args.events)[0]
    kinds: dict[str, Ids] = {"random ids": _random_ids, "tap ids": _tap_ids(Correlator(correlation_secret()))}
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
    for _ in range(args.rounds):
        for kind, ids in kinds.items():
            runs[kind].append(_one(template, ids, args))
    rows: list[dict[str, Any]] = []
    base = statistics.median(r["cpu_us"] for r in runs["random ids"])
    print(
        f"{args.batches - args.warm} batches of {args.batch} exchanges of {args.events} frames, "
        f"after {args.warm}; medians of {args.rounds}"
    )
    print(f"{'ids':12} {'CPU/exchange':>14} {'x random':>9} {'written/exchange':>17}")
    for kind, got in runs.items():
        cpu = statistics.median(r["cpu_us"] for r in got)
        written = statistics.median(r["bytes"] for r in got)
        rows.append(
            {
                "ids": kind,
                "cpu_us_per_exchange": round(cpu, 2),
                "cpu_range": [
                    round(min(r["cpu_us"] for r in got), 2),
                    round(max(r["cpu_us"] for r in got), 2),
                ],
                "ratio_to_random": round(cpu / base, 3),
                "bytes_written_per_exchange": round(written),
            }
        )
        print(f"{kind:12} {cpu:11.1f} us {cpu / base:8.2f}x {written / 1024:13.1f} KB")
    path = write_json(args.out, {"machine": machine(), "args": vars(args), "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
