"""The real_vllm tier: one real vLLM (the CPU build, tiny local model) per family.

The servers come from the fleet (tests/real_vllm/chain.py, scripts/realvllm/fleet.py), started in
the background before the tier runs. ``family`` is a session-scoped fixture parametrized by family,
so pytest runs every test of one family together, across the tier's modules; when it moves to the
next family the fixture's teardown tells the fleet, which stops that server and starts another.
The default family's server stays up to the end: other tiers' tests (accept, the frameworks) use
it through ``real_vllm``.

A family whose parsers the CPU build ships but whose server cannot run here is named in
``NOT_SERVED`` (tests/real_vllm/families.py) with the reason, which the tier prints at the end of
every run; tests/real_vllm/test_coverage.py keeps that list and the served one equal to the table.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.real_vllm import chain
from tests.real_vllm.families import NOT_SERVED, SERVED


def pytest_collection_finish(session: pytest.Session) -> None:
    """A plain pytest run of the tier starts the fleet itself once collection ends (./dev test
    starts it first thing and says where in WIRECHECK_REAL_VLLM_STATUS)."""
    if any("tests/real_vllm/" in i.nodeid for i in session.items):
        chain.start_chain(session.config)


def pytest_sessionfinish(session: pytest.Session) -> None:
    chain.stop_chain(session.config)


@dataclass(frozen=True)
class FamilyServer:
    family: str
    url: str
    #: the server's /metrics page before its first request (the fleet reads it once /health answers)
    metrics_before: str | None


@pytest.fixture(scope="session")
def real_vllm(pytestconfig: pytest.Config) -> str:
    """Base URL of the default family's real vLLM (kimi_k2, prefix caching on)."""
    if url := os.environ.get("WIRECHECK_REAL_VLLM_URL"):
        return url
    return str(chain.slot(pytestconfig, chain.DEFAULT_SLOT)["url"])


@pytest.fixture(scope="session")
def real_vllm_no_prefix_caching(pytestconfig: pytest.Config) -> str:
    """Base URL of a second kimi_k2 vLLM, started with --no-prefix-caching."""
    if url := os.environ.get("WIRECHECK_REAL_VLLM_NO_PREFIX_CACHING_URL"):
        return url
    if os.environ.get("WIRECHECK_REAL_VLLM_URL"):
        pytest.fail(
            "WIRECHECK_REAL_VLLM_URL is set: set WIRECHECK_REAL_VLLM_NO_PREFIX_CACHING_URL too", pytrace=False
        )
    try:
        return str(chain.slot(pytestconfig, "no_prefix_caching")["url"])
    finally:
        chain.done(pytestconfig, "no_prefix_caching")


@pytest.fixture(scope="session", params=SERVED)
def family(request: pytest.FixtureRequest, pytestconfig: pytest.Config) -> Iterator[FamilyServer]:
    """One family's real vLLM; every test that takes it runs once per family, grouped by family."""
    name: str = request.param
    if name == chain.DEFAULT_SLOT and (url := os.environ.get("WIRECHECK_REAL_VLLM_URL")):
        yield FamilyServer(name, url, None)
        return
    outcome = chain.slot(pytestconfig, name)
    try:
        yield FamilyServer(name, str(outcome["url"]), outcome.get("metrics_before"))
    finally:
        if name != chain.DEFAULT_SLOT:
            chain.done(pytestconfig, name)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """Name the families the tier does not serve, with the reason, and the fleet's figures."""
    if not any(
        "real_vllm" in str(getattr(r, "nodeid", "")) for r in terminalreporter.stats.get("passed", [])
    ):
        return
    for name, why in NOT_SERVED.items():
        terminalreporter.write_line(f"real_vllm: family {name} not served: {why}")
    if report := chain.fleet_report(config):
        terminalreporter.write_line(f"real_vllm: fleet {report}")
