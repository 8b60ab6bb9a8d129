"""DESIGN.md's import rules as one checker over a source tree.

``violations(root)`` reads the folder-to-package map from ``root/pyproject.toml`` (setuptools'
``package-dir``), parses every module with ``ast`` (nothing is imported, so a temporary tree with a
broken rule can be checked too), resolves relative imports and ``importlib.import_module("...")``
calls, and reports every import that breaks a rule. A package is covered as soon as its folder is
mapped in pyproject.toml (``record``, the recording layer).

The rules (DESIGN.md, "Import rules"):

1. ``contracts`` imports no other wirecheck package (it is pure).
2. ``record`` imports only ``contracts``.
3. ``proxy``, ``replay``, ``generators`` and ``sim`` import only ``contracts`` and ``record``, never each
   other.
4. ``sim`` shares nothing with contracts' rules: from ``wirecheck.contracts`` it takes only names
   defined in the modules listed in ``SIM_MAY_USE`` (errors, the exchange and wire model, the family
   table's names), always by ``from wirecheck.contracts import NAME``, and it never reads the family
   table's markup patterns (``SIM_NEVER_READS``): its own writers and parsers make the markup.
5. ``acceptance`` may use all of the packages (and the front door's error tree and version), never the
   CLI.
6. Only the CLI (``wirecheck/cli.py`` or a ``wirecheck/cli/`` package) imports ``acceptance``.
7. Between packages, only the public top level: ``wirecheck.X``, never ``wirecheck.X._private``.
"""

from __future__ import annotations

import ast
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

FRONT_DOOR = "wirecheck"
#: the front door's modules that the packages behind it may use (acceptance only)
FRONT_DOOR_SHARED = frozenset({"_errors", "_version"})
LEAVES = ("proxy", "replay", "generators", "sim")
#: package -> the other wirecheck packages it may import (DESIGN.md)
MAY_IMPORT: dict[str, frozenset[str]] = {
    "contracts": frozenset(),
    "record": frozenset({"contracts"}),
    **{leaf: frozenset({"contracts", "record"}) for leaf in LEAVES},
    "acceptance": frozenset({"contracts", "record", *LEAVES, FRONT_DOOR}),
    FRONT_DOOR: frozenset({"contracts", "record", *LEAVES, "acceptance"}),
}
#: contracts modules whose names the simulator may use: data and errors, never the checker
SIM_MAY_USE = frozenset({"_errors", "_exchange", "_families", "_wire"})
#: family-table fields that are the checker's markup knowledge: the simulator writes its own
SIM_NEVER_READS = frozenset(
    {"tool_markup", "reasoning_markup", "special_tokens", "id_pattern", "id_near_miss"}
)


@dataclass(frozen=True, slots=True)
class Import:
    path: Path
    line: int
    module: str  # absolute, e.g. "wirecheck.contracts._markup"
    names: tuple[str, ...]  # for "from M import a, b"; empty for "import M"


def package_dirs(root: Path) -> dict[str, Path]:
    """Package name ("contracts", "wirecheck" for the front door) -> its folder, from pyproject."""
    conf = tomllib.loads((root / "pyproject.toml").read_text())
    mapping = conf["tool"]["setuptools"]["package-dir"]
    out = {}
    for dotted, folder in mapping.items():
        parts = dotted.split(".")
        if parts[0] == FRONT_DOOR and len(parts) <= 2 and (root / folder).is_dir():
            out[parts[1] if len(parts) == 2 else FRONT_DOOR] = (root / folder).resolve()
    # a subpackage mapped on its own (wirecheck.cli = wirecheck/cli) belongs to the folder around it
    return {
        name: folder
        for name, folder in out.items()
        if not any(folder != other and folder.is_relative_to(other) for other in out.values())
    }


def _module_name(package: str, folder: Path, path: Path) -> str:
    rel = path.relative_to(folder).with_suffix("").parts
    if rel[-1] == "__init__":
        rel = rel[:-1]
    base = [FRONT_DOOR] if package == FRONT_DOOR else [FRONT_DOOR, package]
    return ".".join([*base, *rel])


def imports_of(path: Path, module: str, subpackages: frozenset[str] = frozenset()) -> list[Import]:
    """Every wirecheck import in one file, relative ones resolved against ``module``'s name."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_pkg = path.name == "__init__.py"
    found: list[Import] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [Import(path, node.lineno, a.name, ()) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = tuple(a.name for a in node.names)
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_pkg else 0)]
                target = ".".join([*anchor, node.module] if node.module else anchor)
            else:
                target = node.module or ""
            # "from wirecheck import sim" names a package, not an attribute of the front door
            packs = [n for n in names if target == FRONT_DOOR and n in subpackages]
            found += [Import(path, node.lineno, f"{FRONT_DOOR}.{n}", ()) for n in packs]
            if len(packs) < len(names):
                found.append(Import(path, node.lineno, target, names))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append(Import(path, node.lineno, node.args[0].value, ()))
    return [i for i in found if i.module == FRONT_DOOR or i.module.startswith(FRONT_DOOR + ".")]


def _contracts_exports(folder: Path) -> dict[str, str]:
    """Name re-exported by contracts' ``__init__`` -> the private module that defines it."""
    tree = ast.parse((folder / "__init__.py").read_text(encoding="utf-8"))
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for a in node.names:
                out[a.asname or a.name] = node.module
    return out


def _target_package(module: str, packages: dict[str, Path]) -> str:
    parts = module.split(".")
    if len(parts) >= 2 and parts[1] in packages and parts[1] != FRONT_DOOR:
        return parts[1]
    return FRONT_DOOR


def violations(root: Path) -> list[str]:
    """Every import in the tree under ``root`` that breaks DESIGN.md's import rules."""
    packages = package_dirs(root)
    exports = _contracts_exports(packages["contracts"]) if "contracts" in packages else {}
    out: list[str] = []
    for pkg, folder in sorted(packages.items()):
        allowed = MAY_IMPORT.get(pkg)
        for path in sorted(folder.rglob("*.py")):
            where = path.relative_to(root.resolve())
            module = _module_name(pkg, folder, path)
            for imp in imports_of(path, module, frozenset(packages)):
                target = _target_package(imp.module, packages)
                tail = imp.module.split(".")[1:] if target == FRONT_DOOR else imp.module.split(".")[2:]
                at = f"{where}:{imp.line}: {pkg} imports {imp.module}"
                if target == pkg:
                    continue
                if allowed is None:
                    out.append(f"{at}: {pkg} is not a package DESIGN.md names")
                    continue
                if target not in allowed:
                    out.append(f"{at}: {pkg} may import only {', '.join(sorted(allowed)) or 'nothing'}")
                    continue
                if target == "acceptance" and not re.fullmatch(r"wirecheck/cli(\.py|/.*)", where.as_posix()):
                    out.append(f"{at}: only the CLI imports acceptance")
                    continue
                if target == FRONT_DOOR and tail and tail[0] not in FRONT_DOOR_SHARED:
                    out.append(f"{at}: of the front door, only {', '.join(sorted(FRONT_DOOR_SHARED))}")
                    continue
                if target != FRONT_DOOR and tail and tail[0].startswith("_"):
                    out.append(f"{at}: another package's private module (use wirecheck.{target})")
                    continue
                if pkg == "sim" and target == "contracts":
                    if not imp.names:
                        out.append(f"{at}: sim takes names with 'from wirecheck.contracts import NAME'")
                    for name in imp.names:
                        home = exports.get(name, "?")
                        if home not in SIM_MAY_USE:
                            out.append(f"{at}: sim uses the checker's {name} (contracts.{home})")
            if pkg == "sim":
                tree = ast.parse(path.read_text(encoding="utf-8"))
                for node in ast.walk(tree):
                    if isinstance(node, ast.Attribute) and node.attr in SIM_NEVER_READS:
                        out.append(
                            f"{where}:{node.lineno}: sim reads the family table's {node.attr}: "
                            "its own writers and parsers make the markup"
                        )
    return out
