import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests import schedule
from tests.real_vllm import chain

pytest_plugins = ["pytester"]

# Profiles by env var (hypothesis' own test setup): CI is derandomized, keeps no example database and
# prints the blob to reproduce a failure; "dev" explores more.
settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    print_blob=True,
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=300, deadline=None)
settings.load_profile(os.environ.get("WIRECHECK_HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


# The proxies the tests start run their helpers (the live checker, the live view) at a fair share of
# the CPU, not on idle time as deployed (proxy/_lifeline.py yield_cpu): the suite keeps every core busy,
# and tests wait on live findings within seconds. tests/proxy/test_helper_priority.py runs the default.
os.environ.setdefault("WIRECHECK_HELPER_PRIORITY", "normal")

_db_names = itertools.count(1)
_REAL_VLLM = Path(__file__).resolve().parent / "real_vllm"


def _in_tier(item: pytest.Item) -> bool:
    return _REAL_VLLM in Path(str(item.fspath)).parents


#: 220 tests of under a second each (14 s in all on a loaded machine): run last, they let both
#: pytest-xdist workers finish together, where a 20-30 s test last on one left the other idle
_TAIL = (
    "tests/contracts/test_families.py",
    "tests/wirecheck/test_public_api.py",
    "tests/contracts/test_rules.py",
)


def _order(item: pytest.Item) -> tuple[bool, bool]:
    return _in_tier(item), item.nodeid.startswith(_TAIL)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The real_vllm tier runs last: its servers start in the background when collection ends
    (tests/real_vllm/chain.py), so the rest of the suite runs while they install and start. Under
    pytest-xdist the tier is one group (``--dist loadgroup``): its tests share two servers and read
    their counters, so they run one after the other on one worker, which takes them as soon as the
    servers are up (tests/schedule.py), the other worker going on with the rest."""
    # last in a plain run, and under xdist until its servers are up: mid-way, a worker reached the
    # tier while vLLM was still installing (591 s on a busy clean clone) and sat waiting
    items.sort(key=_order)
    xdist = config.pluginmanager.hasplugin("xdist")
    for item in items:
        if _in_tier(item):
            item.add_marker(pytest.mark.real_vllm)
            item.add_marker(pytest.mark.slow)
            if xdist:
                item.add_marker(pytest.mark.xdist_group(schedule.TIER))
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        # the groups, for the controller's scheduler (tests/schedule.py: xdist cannot see them)
        schedule.write_groups(items, Path(workerinput["real_vllm_status"]), workerinput["workerid"])


def pytest_collection_finish(session: pytest.Session) -> None:
    # a plain run starts the tier's servers itself; an xdist worker leaves them to the controller
    if getattr(session.config, "workerinput", None) is None and any(_in_tier(i) for i in session.items):
        chain.start_chain(session.config)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist's controller tells each worker where the servers' outcome is written (and where to
    write its tests' groups, tests/schedule.py)."""
    node.workerinput["real_vllm_status"] = str(chain.status_dir(node.config))


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` as tests/schedule.py explains: groups that work, the tier when ready."""
    if config.getvalue("dist") != "loadgroup":
        return None
    return schedule.TierWhenReady(config, log, chain.status_dir(config), lambda: chain.published(config))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """xdist's controller collects nothing itself: it starts the servers when a worker collected the tier."""
    if any(i.startswith("tests/real_vllm/") for i in ids):
        chain.start_chain(node.config)


def pytest_sessionfinish(session: pytest.Session) -> None:
    chain.stop_chain(session.config)


@pytest.fixture(scope="session")
def postgres() -> Iterator[str]:
    """One real PostgreSQL server for the session (Debian's package; ./dev test installs it)."""
    from tests.support.pg import postgres_server

    with postgres_server() as url:
        yield url


@pytest.fixture
def pg_url(postgres: str) -> str:
    """A fresh, empty database on the session's server."""
    from tests.support.pg import fresh_database

    return fresh_database(postgres, f"wc_{os.getpid()}_{next(_db_names)}")
