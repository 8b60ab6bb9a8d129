"""acceptance/'s shape, held: short functions, modules that import each other in one direction only,
no private name reaching across a module's edge, and one sorted public surface per package.

Each guard is proven by breaking it once on a small tree of its own: a guard that cannot fail guards
nothing."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "acceptance"
#: the longest a function in acceptance/ may be: past it, a function does two things
MAX_LINES = 80


def _modules(root: Path) -> dict[str, Path]:
    """Dotted module name (relative to ``root``, '' for its __init__) -> file."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def long_functions(root: Path) -> list[str]:
    found = []
    for name, path in _modules(root).items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_LINES:
                    found.append(f"{name or '(package)'}.{node.name}: {lines} lines")
    return found


def _resolve(
    module: str, is_package: bool, node: ast.ImportFrom, known: set[str]
) -> list[tuple[str, list[str]]]:
    """(imported module, names taken from it) for one ``from ... import`` inside the package."""
    if node.level:
        base = module.split(".") if module else []
        if not is_package:
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
        target = ".".join([*base, *(node.module.split(".") if node.module else [])])
    elif node.module and node.module.startswith("wirecheck.acceptance"):
        target = node.module.removeprefix("wirecheck.acceptance").lstrip(".")
    else:
        return []
    out = []
    names = []
    for alias in node.names:
        sub = f"{target}.{alias.name}" if target else alias.name
        if sub in known:
            out.append((sub, []))  # a submodule, imported as one
        else:
            names.append(alias.name)
    if names:
        out.append((target, names))
    return out


def import_graph(root: Path) -> tuple[dict[str, set[str]], list[str]]:
    """Module -> the package's modules it imports (type-checking imports too), and each private name
    imported across a module's edge."""
    mods = _modules(root)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    private = []
    for name, path in mods.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            for target, names in _resolve(name, is_package, node, set(mods)):
                if target in mods and target != name:
                    graph[name].add(target)
                private += [
                    f"{name or '(package)'} imports {n} from {target or '(package)'}"
                    for n in names
                    if n.startswith("_")
                ]
    return graph, private


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _all_order(name: str) -> tuple[int, str]:
    """Constants, then classes, then functions, each sorted (ruff's RUF022 order for ``__all__``)."""
    if name.isupper() or (name.upper() == name and "_" in name):
        return (0, name)
    return (1, name) if name[:1].isupper() else (2, name)


def test_no_function_in_acceptance_is_over_80_lines() -> None:
    assert long_functions(PACKAGE) == []


def test_acceptance_modules_import_each_other_in_one_direction() -> None:
    graph, _ = import_graph(PACKAGE)
    assert cycles(graph) == []


def test_no_private_name_crosses_a_module_edge() -> None:
    _, private = import_graph(PACKAGE)
    assert private == []


@pytest.mark.parametrize(
    "module",
    [
        "wirecheck.acceptance",
        "wirecheck.acceptance.demo",
        "wirecheck.acceptance.evidence",
        "wirecheck.acceptance.load",
        "wirecheck.acceptance.phases",
        "wirecheck.acceptance.report",
    ],
)
def test_each_acceptance_package_has_one_sorted_complete_all(module: str) -> None:
    mod = importlib.import_module(module)
    names = list(mod.__all__)
    assert names == sorted(names, key=_all_order)
    assert all(hasattr(mod, n) for n in names)
    public = {n for n in vars(mod) if not n.startswith("_") and not isinstance(getattr(mod, n), type(ast))}
    assert public - set(names) == set()


def test_every_subpackage_is_mapped_for_the_build() -> None:
    """pyproject maps packages explicitly (package-dir): a subpackage it does not list is not installed."""
    import tomllib

    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    folders = sorted(p.parent.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("__init__.py"))
    for folder in folders:
        pkg = "wirecheck." + folder.replace("/", ".")
        assert pkg in cfg["packages"] and cfg["package-dir"][pkg] == folder, folder


# --- each guard broken once ---------------------------------------------------------------------


def _tree(tmp: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = tmp / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return tmp


def test_the_guards_fail_when_broken(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    tree = _tree(
        tmp_path,
        {
            "__init__.py": "from ._a import A\n",
            "_a.py": "from ._b import B\nA = 1\n",
            "_b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._a import A\nB = 2\n",
            "sub/__init__.py": "from ._c import C\n",
            "sub/_c.py": f"from .._a import _hidden\nC = 3\ndef long():\n{body}\n",
        },
    )
    assert long_functions(tree) == [f"sub._c.long: {MAX_LINES + 1} lines"]
    graph, private = import_graph(tree)
    assert cycles(graph) == [["_a", "_b"]]
    assert private == ["sub._c imports _hidden from _a"]
