"""scripts/dev.py's test tiers: how many pytest-xdist workers each runs."""

from __future__ import annotations

import importlib.util
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
