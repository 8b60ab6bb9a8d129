"""Both paths of the checker's compiled twins: a module that marks itself with
``pytest.mark.usefixtures("both_paths")`` runs each of its tests with the twins (where built) and
again with the pure-Python reference in their place (contracts/_native.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from tests.support.twins import PATHS, on_path
from wirecheck.contracts import _assembly, _json, _markup, _sse


@pytest.fixture(scope="module", params=PATHS)
def both_paths(request: pytest.FixtureRequest) -> Iterator[str]:
    swaps = [(_sse, "_C", None), (_assembly, "_C", None), (_assembly, "_WHOLE", None), (_json, "_C", None)]
    # find_markup is the twin itself where built, imported by name by the rules' modules
    swaps += [
        (module, "find_markup", _markup._find_markup)
        for name, module in list(sys.modules.items())
        if name.startswith("wirecheck.contracts.")
        and getattr(module, "find_markup", None) is _markup.find_markup
    ]
    built = [
        "wirecheck.contracts._sse_c",
        "wirecheck.contracts._assembly_c",
        "wirecheck.contracts._markup_c",
        "wirecheck.contracts._json_c",
    ]
    with on_path(request.param, swaps, built) as path:
        yield path
