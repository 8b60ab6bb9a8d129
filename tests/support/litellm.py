"""A real LiteLLM proxy (``litellm[proxy]`` from PyPI, in its own ``.venv-litellm`` made by ``./dev``) as
the gateway between two taps, started by the tests on loopback with a master key."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.support.servers import process, run_dev
from wirecheck.record import free_port

ROOT = Path(__file__).resolve().parents[2]
LITELLM = Path(os.environ.get("WIRECHECK_LITELLM", ROOT / ".venv-litellm" / "bin" / "litellm"))
#: `./dev test` installs LiteLLM in the background while pytest runs; `./dev litellm-install` waits for
#: that install (a lock), or makes the venv when nothing did (a no-op once its stamp is current)
INSTALL_TIMEOUT_S = 900
MASTER_KEY = "sk-wirecheck-litellm-test"
#: importing litellm's proxy takes 20-70 s on a busy 2-core machine (measured)
START_TIMEOUT_S = 180.0


def litellm_gateway(
    engine_url: str, models: dict[str, str], *, port: int | None = None
) -> contextlib.AbstractContextManager[str]:
    """LiteLLM on a loopback port (a free one unless given); ``models`` maps the caller's alias to
    the engine's model (``hosted_vllm/NAME``, ``openai/NAME``), every one pointed at ``engine_url``."""
    return _run(engine_url, models, port or free_port())


def _install() -> None:
    if "WIRECHECK_LITELLM" in os.environ:
        return
    proc = run_dev("litellm-install", timeout=INSTALL_TIMEOUT_S)
    if proc.returncode != 0:
        raise RuntimeError(
            f"./dev litellm-install failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )


@contextlib.contextmanager
def _run(engine_url: str, models: dict[str, str], port: int) -> Iterator[str]:
    _install()
    if not LITELLM.exists():
        raise RuntimeError(
            f"LiteLLM is not installed at {LITELLM}: run ./dev test (it makes .venv-litellm), "
            "or set WIRECHECK_LITELLM to a litellm executable"
        )
    with tempfile.TemporaryDirectory(prefix="wc-litellm-") as tmp:
        entries = "".join(
            f"""  - model_name: {alias}
    litellm_params:
      model: {target}
      api_base: {engine_url}/v1
      api_key: none
"""
            for alias, target in models.items()
        )
        conf = Path(tmp) / "config.yaml"
        conf.write_text(f"model_list:\n{entries}general_settings:\n  master_key: {MASTER_KEY}\n")
        # no network: the cost map shipped in the package, no telemetry
        env = {
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_TELEMETRY": "False",
            "NO_PROXY": "127.0.0.1,localhost",
        }
        url = f"http://127.0.0.1:{port}"

        def live() -> bool:
            return httpx.get(f"{url}/health/liveliness", timeout=2).status_code == 200

        with process(
            [str(LITELLM), "--config", str(conf), "--host", "127.0.0.1", "--port", str(port)],
            ready=live,
            ready_s=START_TIMEOUT_S,
            logs=Path(tmp) / "litellm",
            env=env,
            cwd=Path(tmp),
        ):
            yield url
