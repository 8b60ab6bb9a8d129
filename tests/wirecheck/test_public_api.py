"""The public surface: one sorted __all__ per package, and the import rules of DESIGN.md."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from tests.support.import_rules import violations

ROOT = Path(__file__).parents[2]


def _isort_key(name: str) -> tuple[int, str]:
    # constants, then classes, then functions (ruff RUF022's isort-style order)
    if name.isupper() or (name.upper() == name and "_" in name):
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


@pytest.mark.parametrize(
    "module", ["wirecheck", "wirecheck.contracts", "wirecheck.record", "wirecheck.proxy"]
)
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
    # 65, less the error tree's WirecheckError, UsageError and TransportError (moved to the front
    # door), plus the family table's FAMILIES, FAMILY_CHOICES, FAMILY_NAMES, GENERIC,
    # Family, detect_family and unknown_family_note; the redaction policy (DEFAULT_REDACTION, REDACTED,
    # Redaction) and bounded parsing (JsonLimitError, bounded_loads, printable); the TapSet; the
    # known-bug catalogue (KNOWN_BUGS, KnownBug) and the version-on-the-wire reader (server_version);
    # the bounded-memory check (check_stream, its WINDOW, and exchange_bytes: what it counts a held
    # exchange as); twin_key (what the live checker asks of the exchanges around a batch); json_loads
    # (json.loads as the store reads its documents: orjson first where it reads alike); the tap names
    # CALLER and ENGINE, kin_keys and may_pair (what the live checker asks to find a batch's group of
    # possible partners across taps); JoinedResponse (a streamed response as a store row holds it,
    # its chunks made when read); native, native_status and native_summary (where a compiled twin is
    # in use, for the other packages that load one, and the line the proxy prints at start);
    # build_views (the views of many exchanges built a step at a time: the live checker's pages)
    assert len(c.__all__) == 93
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


def test_the_tree_keeps_designs_import_rules() -> None:
    # no known breaks: the generators' taps and correlation ids come from record/
    assert violations(ROOT) == []


# --- each rule, broken once on a temporary tree: a guard that cannot fail guards nothing ---------------

_PYPROJECT = """
[tool.setuptools.package-dir]
"wirecheck" = "wirecheck"
"wirecheck.cli" = "wirecheck/cli"
{extra}
"wirecheck.contracts" = "contracts"
"wirecheck.proxy" = "proxy"
"wirecheck.generators" = "generators"
"wirecheck.replay" = "replay"
"wirecheck.sim" = "sim"
"wirecheck.acceptance" = "acceptance"
"""
_CLEAN = {
    "wirecheck/__init__.py": "from wirecheck._errors import WirecheckError\nfrom wirecheck.contracts import FAMILIES\n",
    "wirecheck/_errors.py": "from wirecheck.contracts import InputError\n",
    "wirecheck/cli/__init__.py": "from wirecheck.acceptance import run\nfrom . import _check\n",
    "wirecheck/cli/_check.py": "from wirecheck.contracts import check_exchanges\n",
    "contracts/__init__.py": (
        "from ._check import check_exchanges\nfrom ._errors import ConfigError\n"
        "from ._families import FAMILIES\nfrom ._markup import TOOL_MARKUP\n"
    ),
    "contracts/_check.py": "from ._markup import TOOL_MARKUP\n",
    "proxy/__init__.py": "from wirecheck.contracts import Exchange\nfrom ._app import App\n",
    "replay/__init__.py": "from wirecheck.contracts import read_exchanges\n",
    "generators/__init__.py": "from wirecheck.contracts import Exchange\n",
    "sim/__init__.py": "from wirecheck.contracts import FAMILIES, ConfigError\nfrom ._app import app\n",
    "sim/_app.py": "from wirecheck.contracts import FAMILIES\nmodel = FAMILIES['x'].example_model\n",
    "acceptance/__init__.py": (
        "from wirecheck._errors import TransportError\nfrom wirecheck.proxy import Store\n"
        "from wirecheck.sim import create_app\nfrom wirecheck.contracts import check_exchanges\n"
    ),
}
_RECORD = '"wirecheck.record" = "record"'

#: (rule, files added to the clean tree, what the report says)
BREAKS = [
    (
        "contracts is pure",
        {"contracts/_x.py": "from wirecheck.sim import app\n"},
        "contracts may import only nothing",
    ),
    (
        "contracts is pure (relative)",
        {"contracts/_x.py": "from ..proxy import App\n"},
        "imports wirecheck.proxy",
    ),
    (
        "contracts is pure (front door)",
        {"contracts/_x.py": "import wirecheck._errors\n"},
        "may import only nothing",
    ),
    (
        "record only contracts",
        {"record/__init__.py": "from wirecheck.proxy import App\n"},
        "record may import only",
    ),
    (
        "leaves: replay never proxy",
        {"replay/_x.py": "from wirecheck.proxy import App\n"},
        "replay may import only",
    ),
    ("leaves: proxy never sim", {"proxy/_x.py": "from .. import sim\n"}, "proxy imports wirecheck.sim"),
    (
        "leaves: no front door",
        {"generators/_x.py": "from wirecheck._errors import E\n"},
        "generators may import",
    ),
    (
        "leaves: dynamic import",
        {"sim/_x.py": "import importlib\nimportlib.import_module('wirecheck.replay')\n"},
        "sim imports wirecheck.replay",
    ),
    (
        "sim: not the checker",
        {"sim/_x.py": "from wirecheck.contracts import check_exchanges\n"},
        "sim uses the checker's check_exchanges",
    ),
    (
        "sim: not the markup",
        {"sim/_x.py": "from wirecheck.contracts import TOOL_MARKUP\n"},
        "the checker's TOOL_MARKUP (contracts._markup)",
    ),
    ("sim: names only", {"sim/_x.py": "import wirecheck.contracts as c\n"}, "sim takes names with"),
    (
        "sim: not the table's patterns",
        {"sim/_x.py": "from wirecheck.contracts import FAMILIES\nFAMILIES['x'].tool_markup\n"},
        "reads the family table's tool_markup",
    ),
    (
        "private modules",
        {"acceptance/_x.py": "from wirecheck.proxy._app import App\n"},
        "another package's private module",
    ),
    (
        "sim: private contracts",
        {"sim/_x.py": "from wirecheck.contracts._markup import TOOL_MARKUP\n"},
        "private module",
    ),
    (
        "acceptance never the CLI",
        {"acceptance/_x.py": "from wirecheck.cli import main\n"},
        "of the front door, only",
    ),
    (
        "only the CLI imports acceptance",
        {"wirecheck/pytest_plugin.py": "from wirecheck.acceptance import run\n"},
        "only the CLI imports acceptance",
    ),
    (
        "no package imports acceptance",
        {"proxy/_x.py": "from wirecheck.acceptance import run\n"},
        "proxy may import only",
    ),
    (
        "unknown packages",
        {"extra/__init__.py": "from wirecheck.contracts import Exchange\n"},
        "not a package DESIGN.md names",
    ),
]


def _tree(root: Path, files: dict[str, str], *, record: bool = False, extra: bool = False) -> Path:
    mapped = "\n".join([_RECORD] * record + ['"wirecheck.extra" = "extra"'] * extra)
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(_PYPROJECT.format(extra=mapped))
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_the_clean_tree_passes_with_and_without_record(tmp_path: Path) -> None:
    assert violations(_tree(tmp_path / "a", _CLEAN)) == []
    record = {"record/__init__.py": "from wirecheck.contracts import Exchange\n"}
    assert violations(_tree(tmp_path / "b", _CLEAN | record, record=True)) == []
    # a record folder that pyproject does not map yet is not a package: nothing to check
    assert violations(_tree(tmp_path / "c", _CLEAN | {"record/_x.py": "import wirecheck.sim\n"})) == []


@pytest.mark.parametrize(("rule", "files", "said"), BREAKS, ids=[b[0] for b in BREAKS])
def test_each_rule_fails_when_broken(tmp_path: Path, rule: str, files: dict[str, str], said: str) -> None:
    root = _tree(tmp_path, _CLEAN | files, record="record/" in str(files), extra="extra/" in str(files))
    found = violations(root)
    assert len(found) == 1, found
    assert said in found[0], found
    assert found[0].startswith(next(iter(files))), found


# --- recording is written once --------------------------------------------------------------

#: modules that read an upstream's raw stream without recording it through wirecheck.record: the proxy's
#: taps forward through their own kept upstream parser, and the simulator's gateway forwards (and breaks)
#: what it passes on; everything else that streams and records uses record's client
_FORWARDERS = {"proxy/_upstream.py", "sim/_gateway.py"}


def _sources() -> list[Path]:
    folders = ("wirecheck", "contracts", "proxy", "generators", "replay", "sim", "acceptance", "benchmarks")
    return [p for f in folders for p in sorted((ROOT / f).rglob("*.py"))]


def test_only_record_streams_records_and_picks_ports() -> None:
    found = []
    for path in _sources():
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(ROOT).as_posix()
        if re.search(r"\.a?iter_raw\(\)", text) and rel not in _FORWARDERS:
            found.append(
                f"{rel}: streams a response itself (use wirecheck.record.record_async / record_sync)"
            )
        if re.search(r"^def free_port\b|^def serve\b", text, re.M):
            found.append(f"{rel}: its own free_port / serve (use wirecheck.record's)")
    assert found == []
