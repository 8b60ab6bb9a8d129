"""The frameworks table of docs/frameworks.md: every case, with and without the proxy, against the
simulator and (given ``--real URL``) a real vLLM serving Kimi K2.

    .venv/bin/python -m tests.frameworks.table                              # simulator only
    .venv/bin/python -m tests.frameworks.table --real http://127.0.0.1:8000  # and a real vLLM

The real server is the tiny-model one of docs/real-vllm.md (``./dev vllm --port 8000``). Every
finding on these legal loops is a false alarm, so the two last columns are equal unless a case's
loop ended early.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from tests.frameworks.clients import CASES
from tests.frameworks.harness import Compared, compare
from wirecheck.record import serve
from wirecheck.sim import SimConfig, create_app

MODEL = "moonshotai/Kimi-K2-Thinking"


@contextmanager
def _simulator() -> Iterator[str]:
    with serve(create_app(SimConfig(time_scale=0.001))) as url:
        yield url


def _at(url: str) -> Callable[[], AbstractContextManager[str]]:
    @contextmanager
    def up() -> Iterator[str]:
        yield url

    return up


def row(r: Compared, where: str) -> str:
    c, p = r.case, r.proxied
    done = "yes" if p.completed else f"no ({p.error})"
    same = "same" if not r.differences else "differs: " + ", ".join(r.differences)
    found = ", ".join(f"`{rule}` ({party})" for rule, party in r.judged) or "-"
    return (
        f"| {c.client} | {c.api} | {'yes' if c.streamed else 'no'} | {c.what} | {where} | {done} | "
        f"{p.requests} | {same} | {found} | {len(r.judged)} |"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--real", metavar="URL", help="also run every case against this real vLLM (Kimi K2)")
    ap.add_argument("cases", nargs="*", help="case ids (default: all)")
    args = ap.parse_args()
    targets: list[tuple[str, Callable[[], AbstractContextManager[str]]]] = [("simulator", _simulator)]
    if args.real:
        targets.append(("real vLLM", _at(args.real.rstrip("/"))))
    print(
        "| client | API | streamed | loop | server | completed | requests | with/without proxy "
        "| findings | false alarms |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        for case_id in args.cases or list(CASES):
            for where, up in targets:
                r = compare(CASES[case_id], up, MODEL, Path(tmp) / where.replace(" ", "-"))
                print(row(r, where), flush=True)
    print(f"\n{len(args.cases or CASES)} cases x {len(targets)} servers in {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
