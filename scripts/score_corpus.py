"""Score the checker on the corpus of exchanges rebuilt from public bug reports (tests/corpus/).

Prints precision and recall per party, "attributed right" per API and per shape, the false alarms on
legal shapes and every case not judged right; writes the whole report as JSON with ``--json``.

    python scripts/score_corpus.py                     # the tables
    python scripts/score_corpus.py --json score.json   # and the report as JSON
    python scripts/score_corpus.py --check             # exit 1 when a case of the baseline is no longer right
    python scripts/score_corpus.py --write-baseline    # record today's right cases (after an improvement)

The baseline (tests/corpus/baseline.json) lists the cases judged right; tests/corpus/test_corpus.py
fails when one of them stops being right. Improvements are recorded on purpose, with --write-baseline.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.corpus import load_cases  # noqa: E402 - the repository root goes on the path first
from tests.corpus.score import BASELINE, compare, read_baseline, render, score, write_baseline  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", metavar="PATH", help="write the whole report (every verdict) as JSON here")
    ap.add_argument("--check", action="store_true", help="exit 1 when a baseline case is no longer right")
    ap.add_argument("--write-baseline", action="store_true", help=f"record the right cases in {BASELINE}")
    ap.add_argument("--quiet", action="store_true", help="print the summary line only")
    args = ap.parse_args(argv)

    report = score(load_cases())
    text = render(report)
    print(text.splitlines()[0] if args.quiet else text, end="" if not args.quiet else "\n")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if args.write_baseline:
        write_baseline(report)
        print(f"baseline: {report['right']} right case(s) written to {BASELINE.relative_to(ROOT)}")
        return 0
    lost, gained = compare(report, read_baseline())
    if gained:
        print(f"improved (not in the baseline yet; --write-baseline records them): {', '.join(gained)}")
    if lost:
        print(f"REGRESSED (right in the baseline, not now): {', '.join(lost)}")
        return 1 if args.check else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
