"""The real_vllm tier's servers, started in the background: ``./dev test`` runs this at its beginning,
so that the install and the starts (minutes on a clean 2-core machine) overlap the tiers before it.

    python scripts/realvllm/servers.py --status DIR

1. ``./dev vllm-install`` (a no-op when .venv-vllm's stamp is current; it waits on an install already
   under way).
2. Each server of ``SERVERS`` in turn (``serve.py`` in .venv-vllm, a process group of its own, its log
   in ``DIR/NAME.log``): one start at a time, since each takes both cores for a minute.
3. As each start ends, ``DIR/NAME.json`` says ``{"url": ..., "error": null}`` or ``{"url": null,
   "error": "why"}``; once every start has ended, ``DIR/ready`` exists. The tier reads them
   (tests/real_vllm/conftest.py): a server that did not come up fails its tests, it never skips them.

The servers run until this script's stdin closes (the lifeline: ``./dev`` holds the other end, so the
servers stop however ``./dev`` ends) or it gets SIGTERM/SIGINT. Standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: name -> serve.py's flags; every test of the tier asks for one of these by name
SERVERS: dict[str, list[str]] = {
    "default": [],
    "no_prefix_caching": ["--no-prefix-caching"],
}
START_TIMEOUT_S = 240


def quiet_port() -> int:
    """A free loopback port below the kernel's ephemeral range: a vLLM binds its port ~40 s after the
    port is chosen, and a ``bind(0)`` elsewhere in the suite in that window may be handed the same
    ephemeral port. Ports under 32768 are never handed out that way (Linux's ip_local_port_range)."""
    for _ in range(200):
        port = random.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free loopback port in 20000-32000")


def publish(status: Path, name: str, url: str | None, error: str | None) -> None:
    tmp = status / f".{name}.json"
    tmp.write_text(json.dumps({"url": url, "error": error}))
    os.replace(tmp, status / f"{name}.json")


def tail(path: Path, n: int = 4000) -> str:
    with contextlib.suppress(OSError):
        return path.read_text(errors="replace")[-n:]
    return ""


def start(
    name: str, flags: list[str], status: Path, ending: threading.Event
) -> tuple[subprocess.Popen[bytes], str | None, str | None]:
    """Start one server and wait for /health: (the process, its URL or None, why not)."""
    port = quiet_port()
    url = f"http://127.0.0.1:{port}"
    log = status / f"{name}.log"
    cmd = [
        str(ROOT / ".venv-vllm/bin/python"),
        str(ROOT / "scripts/realvllm/serve.py"),
        "--port",
        str(port),
        *flags,
    ]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
    t0 = time.monotonic()
    while proc.poll() is None:
        if ending.is_set():
            return proc, None, "the test run ended before this server was up"
        if time.monotonic() - t0 > START_TIMEOUT_S:
            return proc, None, f"vLLM ({name}) did not answer /health in {START_TIMEOUT_S} s:\n{tail(log)}"
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/health", timeout=2) as r:
            if r.status == 200:
                print(f"real_vllm: server {name} up in {time.monotonic() - t0:.1f} s on {url}", flush=True)
                return proc, url, None
        time.sleep(0.5)
    return proc, None, f"vLLM ({name}) exited with {proc.returncode} while starting:\n{tail(log)}"


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's group (the API server, its engine and workers), SIGKILL after 30 s."""
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait)
            return


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--status", type=Path, required=True, help="where each server's outcome is written")
    status = parser.parse_args().status
    status.mkdir(parents=True, exist_ok=True)
    ending = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: ending.set())
    signal.signal(signal.SIGINT, lambda *_: ending.set())
    # the lifeline: stdin closes when whoever started this ends
    threading.Thread(target=lambda: (sys.stdin.buffer.read(), ending.set()), daemon=True).start()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        t0 = time.monotonic()
        install = subprocess.run(
            [str(ROOT / "dev"), "vllm-install"], capture_output=True, text=True, check=False
        )
        error = None
        if install.returncode != 0:
            error = (
                f"installing the CPU build of vLLM failed (rc {install.returncode}); the real_vllm tier "
                f"cannot run without it:\n{install.stdout[-3000:]}\n{install.stderr[-3000:]}"
            )
        else:
            print(f"real_vllm: install step {time.monotonic() - t0:.1f} s", flush=True)
        for name, flags in SERVERS.items():
            if error is not None or ending.is_set():
                publish(status, name, None, error or "the test run ended before this server started")
                continue
            proc, url, why = start(name, flags, status, ending)
            procs.append(proc)
            publish(status, name, url, why)
        (status / "ready").touch()
        while not ending.wait(1.0):
            pass
    finally:
        for proc in procs:
            stop(proc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
