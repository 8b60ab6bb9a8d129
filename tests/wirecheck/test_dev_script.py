"""scripts/dev.py: how many pytest-xdist workers each test tier runs, and where bytecode goes."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("wirecheck_dev_script", ROOT / "scripts/dev.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def test_a_tier_runs_one_worker_more_than_the_cores_up_to_the_bound(dev: ModuleType) -> None:
    assert [dev.default_workers(n) for n in (1, 2, 3, 7, 8, 64)] == [2, 3, 4, 8, 8, 8]
    assert dev.MAX_WORKERS == 8


def test_each_parallel_tier_asks_xdist_for_that_many_and_the_real_vllm_tier_for_none(
    dev: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WIRECHECK_TEST_WORKERS", raising=False)
    want = str(dev.default_workers())
    for tier in dev.TIERS:
        args = dev.tier_args(tier)
        if tier.name == "real_vllm":
            assert "-n" not in args  # its tests share the servers, one after the other
        else:
            assert args[args.index("-n") + 1] == want, tier.name
    # the variable still sets the count for every parallel tier (a machine shared with other work)
    monkeypatch.setenv("WIRECHECK_TEST_WORKERS", "1")
    unit = next(t for t in dev.TIERS if t.name == "unit")
    args = dev.tier_args(unit)
    assert args[args.index("-n") + 1] == "1"


def test_the_processes_dev_starts_keep_their_bytecode_in_one_ignored_folder(dev: ModuleType) -> None:
    environ = {"PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin"}
    dev.keep_bytecode(environ)
    assert environ == {"PATH": "/usr/bin", "PYTHONPYCACHEPREFIX": str(ROOT / ".pycache")}
    assert ".pycache/" in (ROOT / ".gitignore").read_text().split("\n")
    mine = {"PYTHONPYCACHEPREFIX": "/somewhere/else"}
    dev.keep_bytecode(mine)
    assert mine == {"PYTHONPYCACHEPREFIX": "/somewhere/else"}


def test_a_child_under_those_settings_writes_bytecode_there_and_not_beside_the_source(
    dev: ModuleType, tmp_path: Path
) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src/kept.py").write_text("X = 1\n")
    environ = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    dev.keep_bytecode(environ)
    environ["PYTHONPYCACHEPREFIX"] = str(tmp_path / "cache")
    subprocess.run([sys.executable, "-c", "import kept"], cwd=tmp_path / "src", env=environ, check=True)
    assert list((tmp_path / "cache").rglob("kept.*.pyc"))
    assert not (tmp_path / "src/__pycache__").exists()
