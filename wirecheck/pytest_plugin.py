"""wirecheck's pytest plugin (entry point ``pytest11``): contract tests in a team's CI.

- ``pytest --wirecheck-target URL`` adds one test, ``wirecheck-scenarios``, that runs the agent-loop
  scenarios against the target and fails with the shortest failing request and how to reproduce it
  (``--wirecheck-examples N``, ``--wirecheck-seed S``, ``--wirecheck-model NAME``).
- ``wirecheck_params(path)`` turns a capture (store, JSONL, HAR, mitmproxy flows; opened as every
  wirecheck reader opens one, ``wirecheck.replay.read_capture``) into one test per exchange, and the
  ``wirecheck_check`` fixture fails a test on any error finding. What a store says about itself (a
  gap row: exchanges it could not write; an exchange the live checker set aside) is one more test
  each, as ``wirecheck check`` reports it: its param is that finding, which ``wirecheck_check``
  returns as a warning::

      @pytest.mark.parametrize("exchange", wirecheck_params("recordings/agent.jsonl"))
      def test_recorded(exchange, wirecheck_check):
          wirecheck_check(exchange)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from wirecheck.contracts import CheckConfig, Exchange, Finding, Severity, check_exchanges

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


def wirecheck_params(path: str | Path) -> list[Any]:
    """One ``pytest.param`` per exchange of a capture, with the exchange id as the test id; and one
    per note the store keeps about itself (``store-gap``, ``live-check-skipped``)."""
    from wirecheck.replay import read_capture

    notes: list[Finding] = []
    params = [pytest.param(ex, id=f"{ex.tap}:{ex.id}") for ex in read_capture(path, notes=notes)]
    return params + [pytest.param(f, id=f"{f.tap}:{f.exchange_id}") for f in notes]


def _message(findings: Iterable[Finding]) -> str:
    return "\n".join(f"{f.rule} [{f.fault}] {f.message} at {f.evidence.get('pointer', '')}" for f in findings)


@pytest.fixture
def wirecheck_check() -> Callable[..., list[Finding]]:
    """Check exchanges; fail the test on any error finding (warnings are returned)."""

    def check(*exchanges: Exchange | Finding, direct: bool = True) -> list[Finding]:
        # a store's own note (a gap, a skipped check) is already a finding: reported as it is
        noted = [x for x in exchanges if isinstance(x, Finding)]
        res = check_exchanges([x for x in exchanges if isinstance(x, Exchange)], CheckConfig(direct=direct))
        found = res.findings + noted
        errors = [f for f in found if f.severity == Severity.ERROR]
        if errors:
            pytest.fail("wirecheck contract broken:\n" + _message(errors), pytrace=False)
        return found

    return check
