import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

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


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store's URL on each backend in turn: an SQLite file, then a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "s.db")
    return str(request.getfixturevalue("pg_url"))
