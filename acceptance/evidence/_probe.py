"""``wirecheck probe``: the container facts that compat needs, gathered inside the container.

Run it in the serving image (``docker run --rm --gpus all IMAGE wirecheck probe --image IMAGE``, or
``docker exec``): it reports the CUDA runtime the container's libraries were built for (torch's, else the
CUDA toolkit's version.json, else the base image's ``CUDA_VERSION``), torch, vLLM and NCCL versions, and
the vLLM and NCCL environment. It imports torch when torch is there, and never needs a GPU.
"""

from __future__ import annotations

import glob
import importlib.metadata
import importlib.util
import json
import os
import platform
import socket
import time
from typing import Any

__all__ = ["probe", "probe_script"]


def _dist(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cuda_toolkit() -> str | None:
    for path in ("/usr/local/cuda/version.json", *glob.glob("/usr/local/cuda-*/version.json")):
        try:
            with open(path, encoding="utf-8") as fh:
                doc = json.load(fh)
        except (OSError, ValueError):
            continue
        version = (doc.get("cuda") or doc.get("cuda_cudart") or {}).get("version")
        if version:
            return str(version)
    return None


def probe(image: str | None = None) -> dict[str, Any]:
    # a container cannot see its own image; the operator passes TAG or TAG@sha256:DIGEST (docker
    # inspect --format '{{index .RepoDigests 0}}'): the digest pins what the tag meant that day
    image = image or os.environ.get("WIRECHECK_IMAGE")
    digest = os.environ.get("WIRECHECK_IMAGE_DIGEST")
    if image and "@sha256:" in image:
        image, digest = image.split("@", 1)[0], image.split("@", 1)[1]
    facts: dict[str, Any] = {
        "wirecheck_probe": 1,
        "collected_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "hostname": socket.gethostname(),
        "image": image,
        "image_digest": digest,
        "cuda_runtime": None,
        "cuda_runtime_source": None,
        "torch": _dist("torch"),
        "vllm": _dist("vllm"),
        "nccl": None,
        "python": platform.python_version(),
        "env": {
            k: v
            for k, v in sorted(os.environ.items())
            if k.startswith(("VLLM_", "NCCL_", "CUDA_", "NVIDIA_"))
        },
    }
    if importlib.util.find_spec("torch") is not None:
        try:
            import torch  # type: ignore[import-not-found]

            facts["torch"] = str(torch.__version__)
            if torch.version.cuda:
                facts["cuda_runtime"], facts["cuda_runtime_source"] = (
                    str(torch.version.cuda),
                    "torch.version.cuda",
                )
            try:
                v = torch.cuda.nccl.version()
                facts["nccl"] = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
            except Exception:
                pass
        except Exception as exc:
            facts["torch_error"] = f"{type(exc).__name__}: {exc}"
    if facts["cuda_runtime"] is None and (tk := _cuda_toolkit()):
        facts["cuda_runtime"], facts["cuda_runtime_source"] = tk, "/usr/local/cuda/version.json"
    if facts["cuda_runtime"] is None and os.environ.get("CUDA_VERSION"):
        facts["cuda_runtime"], facts["cuda_runtime_source"] = os.environ["CUDA_VERSION"], "env CUDA_VERSION"
    if facts["nccl"] is None and os.environ.get("NCCL_VERSION"):
        facts["nccl"] = os.environ["NCCL_VERSION"]
    return facts


def probe_script() -> str:
    """This module's source: a standalone script (standard library only) for ``python3 -``."""
    with open(__file__, encoding="utf-8") as fh:
        return fh.read()


def main() -> None:
    """Run as a script inside a container that has no wirecheck: ``wirecheck probe --script | docker
    exec -i CONTAINER python3 - --image TAG`` (this module needs nothing but the standard library)."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="wirecheck-probe")
    ap.add_argument("--image", default=None)
    args = ap.parse_args()
    sys.stdout.write(json.dumps(probe(args.image), indent=2) + "\n")


if __name__ == "__main__":
    main()
