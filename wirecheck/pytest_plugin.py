"""wirecheck's pytest plugin (entry point ``pytest11``): contract tests in a team's CI.

- ``pytest --wirecheck-target URL`` adds one test, ``wirecheck-scenarios``, that runs the agent-loop
  scenarios against the target and fails with the shortest failing request and how to reproduce it
  (``--wirecheck-examples N``, ``--wirecheck-seed S``, ``--wirecheck-model NAME``).
- ``wirecheck_params(path)`` turns a capture (store, JSONL, HAR, mitmproxy flows) into one test per
  exchange, and the ``wirecheck_check`` fixture fails a test on any error finding::

      @pytest.mark.parametrize("exchange", wirecheck_params("recordings/agent.jsonl"))
      def test_recorded(exchange, wirecheck_check):
          wirecheck_check(exchange)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from wirecheck.contracts import CheckConfig, Exchange, Finding, check_exchanges, read_exchanges

__all__ = ["wirecheck_params"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("wirecheck", "wirecheck contract tests")
    group.addoption(
        "--wirecheck-target",
        metavar="URL",
        default=None,
        help="run the wirecheck agent-loop scenarios against this target",
    )
    group.addoption("--wirecheck-examples", type=int, default=50, help="scenario examples (default 50)")
    group.addoption("--wirecheck-seed", type=int, default=None, help="repeat a scenario run exactly")
    group.addoption("--wirecheck-model", default=None, help="model name to send")


class ScenarioItem(pytest.Item):
    def runtest(self) -> None:
        from wirecheck.generators import run_scenarios

        opt = self.config.getoption
        report = run_scenarios(
            opt("wirecheck_target"),
            examples=opt("wirecheck_examples"),
            seed=opt("wirecheck_seed"),
            model=opt("wirecheck_model"),
        )
        self.user_properties.append(("wirecheck_requests", report.requests))
        if report.failure is not None:
            raise ScenarioFailed(report.failure)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, ScenarioFailed):
            f = excinfo.value.failure
            lines = ["a contract was broken; the shortest failing request:"]
            lines += [f"  {x.rule} [{x.fault}] {x.message}" for x in f.findings]
            lines += [f"reproduce: {f.curl}"]
            if f.seed is not None:
                lines.append(f"seed: {f.seed}")
            if f.note:
                lines.append(f"note: {f.note}")
            return "\n".join(lines)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[str, int | None, str]:
        return "wirecheck", None, f"wirecheck scenarios against {self.config.getoption('wirecheck_target')}"


class ScenarioFailed(Exception):
    def __init__(self, failure: Any) -> None:
        super().__init__("a contract was broken")
        self.failure = failure


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    if config.getoption("wirecheck_target"):
        items.append(ScenarioItem.from_parent(session, name="wirecheck-scenarios"))


def _load(path: str | Path) -> list[Exchange]:
    from wirecheck.record import is_store, open_store
    from wirecheck.replay import load_capture

    if is_store(path):
        store = open_store(path)
        try:
            return list(store.exchanges())
        finally:
            store.close()
    if str(path).endswith(".jsonl"):
        return list(read_exchanges(path))
    return list(load_capture(path))


def wirecheck_params(path: str | Path) -> list[Any]:
    """One ``pytest.param`` per exchange of a capture, with the exchange id as the test id."""
    return [pytest.param(ex, id=f"{ex.tap}:{ex.id}") for ex in _load(path)]


def _message(findings: Iterable[Finding]) -> str:
    return "\n".join(f"{f.rule} [{f.fault}] {f.message} at {f.evidence.get('pointer', '')}" for f in findings)


@pytest.fixture
def wirecheck_check() -> Callable[..., list[Finding]]:
    """Check exchanges; fail the test on any error finding (warnings are returned)."""

    def check(*exchanges: Exchange, direct: bool = True) -> list[Finding]:
        res = check_exchanges(list(exchanges), CheckConfig(direct=direct))
        errors = [f for f in res.findings if f.severity == "error"]
        if errors:
            pytest.fail("wirecheck contract broken:\n" + _message(errors), pytrace=False)
        return res.findings

    return check
