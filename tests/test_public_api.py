"""The public surface: one sorted __all__ per package, and the import rules of DESIGN.md."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def _isort_key(name: str) -> tuple[int, str]:
    # constants, then classes, then functions (ruff RUF022's isort-style order)
    if name.isupper() or (name.upper() == name and "_" in name):
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


@pytest.mark.parametrize("module", ["wirecheck", "wirecheck.contracts"])
def test_all_is_sorted_and_complete(module: str) -> None:
    mod = importlib.import_module(module)
    names = list(mod.__all__)
    assert names == sorted(names, key=_isort_key)
    for n in names:
        assert hasattr(mod, n), f"{module}.__all__ names {n}, which it lacks"
    public = {n for n in vars(mod) if not n.startswith("_") and not isinstance(getattr(mod, n), type(ast))}
    assert public - set(names) == set(), f"{module} exports names missing from __all__"


def test_contracts_exports_stay_as_documented() -> None:
    # drift guard: adding or removing a public name is a deliberate change to this list
    c = importlib.import_module("wirecheck.contracts")
    assert len(c.__all__) == 71
    for name in (
        "Exchange",
        "Finding",
        "Fault",
        "Severity",
        "check_exchanges",
        "read_exchanges",
        "rule",
        "rules",
        "SSEDecoder",
        "assemble_stream",
        "Redaction",
    ):
        assert name in c.__all__


def _imports(folder: str) -> set[str]:
    found = set()
    for path in (ROOT / folder).rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
    return {m for m in found if m.startswith("wirecheck")}


def test_contracts_imports_no_other_wirecheck_package() -> None:
    assert _imports("contracts") == set()


@pytest.mark.parametrize("folder", ["proxy", "replay", "generators", "sim"])
def test_leaf_packages_never_reach_into_each_others_internals(folder: str) -> None:
    # contracts, and the public top level of a sibling package, never its private modules
    bad = {
        m
        for m in _imports(folder)
        if not m.startswith(f"wirecheck.{folder}") and m.count(".") > 1 and m.split(".")[2].startswith("_")
    }
    assert bad == set()
    assert not {
        m
        for m in _imports(folder)
        if m.startswith("wirecheck.")
        and m.split(".")[1] not in ("contracts", "proxy", "replay", "generators", "sim")
    }


def test_sim_uses_nothing_but_contracts() -> None:
    # a simulator that shared the checker's machinery could not catch the checker's bugs
    assert {m for m in _imports("sim") if m.startswith("wirecheck.")} <= {"wirecheck.contracts"}


def test_sim_shares_nothing_with_the_checkers_rules() -> None:
    assert {m for m in _imports("sim") if m.startswith("wirecheck.contracts")} <= {"wirecheck.contracts"}


def test_only_the_cli_imports_acceptance() -> None:
    for folder in ("contracts", "proxy", "replay", "generators", "sim"):
        assert not {m for m in _imports(folder) if m.startswith("wirecheck.acceptance")}
    others = {m for p in (ROOT / "wirecheck").glob("*.py") if p.name != "cli.py" for m in _imports_file(p)}
    assert not {m for m in others if m.startswith("wirecheck.acceptance")}


def _imports_file(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
