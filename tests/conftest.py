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


_db_names = itertools.count(1)
_REAL_VLLM = Path(__file__).resolve().parent / "real_vllm"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The real_vllm tier runs last: its servers start in the background when collection ends
    (tests/real_vllm/conftest.py), so the rest of the suite runs while they install and start."""
    items.sort(key=lambda item: _REAL_VLLM in Path(str(item.fspath)).parents)


@pytest.fixture(scope="session")
def postgres() -> Iterator[str]:
    """One real PostgreSQL server for the session (Debian's package; ./dev test installs it)."""
    from tests.pg import postgres_server

    with postgres_server() as url:
        yield url


@pytest.fixture
def pg_url(postgres: str) -> str:
    """A fresh, empty database on the session's server."""
    from tests.pg import fresh_database

    return fresh_database(postgres, f"wc_{os.getpid()}_{next(_db_names)}")
