"""Both paths of the checker's compiled twins: a module that marks itself with
``pytest.mark.usefixtures("both_paths")`` runs each of its tests with the twins (where built) and
again with the pure-Python reference in their place (contracts/_native.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from wirecheck.contracts import _assembly, _markup, _sse


# module-scoped: hypothesis' tests take no function-scoped fixture, and a module runs whole on
# one path, then whole on the other
@pytest.fixture(scope="module", params=["native", "python"])
def both_paths(request: pytest.FixtureRequest) -> Iterator[str]:
    with pytest.MonkeyPatch.context() as mp:
        if request.param == "python":
            mp.setattr(_sse, "_C", None)
            mp.setattr(_assembly, "_C", None)
            # find_markup is the twin itself where built, imported by name by the rules' modules
            for name, module in list(sys.modules.items()):
                if (
                    name.startswith("wirecheck.contracts.")
                    and getattr(module, "find_markup", None) is _markup.find_markup
                ):
                    mp.setattr(module, "find_markup", _markup._find_markup)
        yield str(request.param)
