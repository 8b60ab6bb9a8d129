"""Regenerate docs/acceptance.md's generated tables (the check catalogue and the checklist map).

Run after changing acceptance/_catalogue.py or the CHECKLIST in acceptance/_verdict.py;
tests/acceptance/test_catalogue.py fails while the docs are stale.
"""

from __future__ import annotations

import re
from pathlib import Path

from wirecheck.acceptance._catalogue import render_catalogue
from wirecheck.acceptance._verdict import render_checklist

DOC = Path(__file__).resolve().parents[1] / "docs" / "acceptance.md"


def main() -> None:
    text = DOC.read_text(encoding="utf-8")
    for name, body in (("catalogue", render_catalogue()), ("checklist", render_checklist())):
        pattern = rf"<!-- {name}:begin -->\n.*?<!-- {name}:end -->"
        if not re.search(pattern, text, re.S):
            raise SystemExit(f"{DOC}: no <!-- {name}:begin --> ... <!-- {name}:end --> markers")
        new = f"<!-- {name}:begin -->\n{body}<!-- {name}:end -->"
        text = re.sub(pattern, lambda _m, new=new: new, text, flags=re.S)
    DOC.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
