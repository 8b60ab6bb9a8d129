"""One real vLLM (the CPU build, tiny local model) for the whole real_vllm tier.

The tier's servers start in the background as soon as collection ends, so their install and start
(minutes on a clean 2-core machine) overlap the rest of the suite instead of adding to it (the
12-minute budget of ``./dev test``); the tier's tests run last (tests/conftest.py orders them). The
background chain: install the pinned CPU build into .venv-vllm (``./dev vllm-install``: a no-op when its
stamp is current, and it waits on the install ``./dev test`` may already have begun), then start
``scripts/realvllm/serve.py`` with prefix caching on, then a second one with it off. Every test shares
those servers.

If the install or a start fails, the tier FAILS, it never skips: CI must not pass without a real
vLLM. Set WIRECHECK_REAL_VLLM_URL to run the tier against a server already running (the
prefix-caching-off test then needs WIRECHECK_REAL_VLLM_NO_PREFIX_CACHING_URL too).
"""

from __future__ import annotations

import pytest

from tests.real_vllm.chain import wait_for


@pytest.fixture(scope="session")
def real_vllm(pytestconfig: pytest.Config) -> str:
    """Base URL of the shared real vLLM (kimi_k2 family, prefix caching on)."""
    return wait_for(pytestconfig, "default", "WIRECHECK_REAL_VLLM_URL")


@pytest.fixture(scope="session")
def real_vllm_no_prefix_caching(pytestconfig: pytest.Config) -> str:
    """Base URL of a second real vLLM, started with --no-prefix-caching."""
    return wait_for(pytestconfig, "no_prefix_caching", "WIRECHECK_REAL_VLLM_NO_PREFIX_CACHING_URL")
