"""Every compiled twin setup.py lists is built and in use, and each has its Python reference.

The twins are optional extensions: an install without a compiler goes on without them, and the code
runs its Python. On a machine that builds them (CI included) a twin that silently failed to build
would leave its compiled path untested, so this fails instead, unless ``WIRECHECK_PURE_PYTHON`` asks
for the Python on purpose."""

from __future__ import annotations

import ast
from pathlib import Path

from wirecheck.contracts._native import PURE_PYTHON, native

ROOT = Path(__file__).resolve().parents[2]


def _listed() -> list[tuple[str, str]]:
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == "NATIVE"
        ):
            assert node.value is not None
            listed = ast.literal_eval(node.value)
            assert isinstance(listed, list)
            return [(str(name), str(source)) for name, source in listed]
    raise AssertionError("setup.py has no NATIVE list")


def test_every_listed_twin_is_built_and_sits_beside_its_python() -> None:
    listed = _listed()
    assert len(listed) >= 1
    for name, source in listed:
        c = ROOT / source
        assert c.is_file(), source
        assert c.with_suffix(".pyi").is_file(), f"{source}: no stub for strict mypy"
        assert name.rsplit(".", 1)[1] == c.stem, (name, source)
        if not PURE_PYTHON:
            assert native(name) is not None, f"{name} is not built (is a C compiler installed?)"
        else:
            assert native(name) is None
