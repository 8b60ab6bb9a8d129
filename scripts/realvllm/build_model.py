"""Build the tiny local model that the real vLLM serves. Runs in .venv-vllm (Python 3.11).

Nothing comes from a model hub. The model is a 2-layer Llama (hidden 128, 2 heads of 64, tied
embeddings) with random weights from a fixed seed; its output is never sampled for meaning, because
the scripted-output logits processor (``script_lp.py``) decides every token. What must be real is
what vLLM's parsers and template code look at:

- a byte-level BPE tokenizer (``tokenizers``, vocab 8000) trained on text shipped in the repository
  (README and docs), so prompts stay short, with the family's exact special tokens, the ones vLLM's
  tool and reasoning parsers for it look up by string;
- a chat template of the real one's shape (where tools are declared, how results and history calls
  are written, what the generation prompt opens: Kimi's prefills ``<think>``; without that the real
  streaming reasoning parser files reasoning under content on turns after a tool call, shared
  reference real-vllm-cpu.md).

The family's facts (tokens, template pieces, how its model writes) come from ``families.json``,
which ``write_families.py`` writes from wirecheck's own family table: this venv has no wirecheck.

Same inputs, same bytes: the output folder is named after a hash of this file, the family's facts
and the corpus, so a change rebuilds and an unchanged tree reuses the build.

    python build_model.py [--family NAME ...] --out-root DIR   # prints each model folder
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
VOCAB = 8000

FAMILIES = Path(__file__).resolve().parent / "families.json"


def family_facts() -> dict[str, Any]:
    """families.json: ``default`` and, per family, tokens, template pieces, parsers, script pieces."""
    facts: dict[str, Any] = json.loads(FAMILIES.read_text(encoding="utf-8"))
    return facts


def corpus() -> list[str]:
    """Training text shipped in the repository, in a fixed order, plus the markup the model writes."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    texts = [p.read_text(encoding="utf-8") for p in files if p.is_file()]
    # JSON as tools and arguments spell it, so argument text tokenizes compactly
    texts.append(
        json.dumps(
            {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
        )
        * 50
    )
    return texts


def fingerprint(family: str, facts: dict[str, Any]) -> str:
    h = hashlib.sha256()
    h.update(Path(__file__).read_bytes())
    h.update(family.encode())
    h.update(json.dumps(facts, sort_keys=True).encode())
    for t in corpus():
        h.update(t.encode())
    return h.hexdigest()[:12]


def base_tokenizer(out_root: Path) -> Path:
    """The byte-level BPE every family's tokenizer starts from, trained once (a few seconds) and
    kept beside the models; the families add their own tokens to a copy."""
    h = hashlib.sha256(Path(__file__).read_bytes())
    for t in corpus():
        h.update(t.encode())
    path = out_root / f"bpe-{h.hexdigest()[:12]}.json"
    if path.is_file():
        return path
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    out_root.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tok.save(str(tmp))
    os.replace(tmp, path)
    return path


def build(family: str, facts: dict[str, Any], bpe: Path, out: Path) -> None:
    import torch
    from tokenizers import Tokenizer
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    special = facts["special_tokens"]  # EOS first
    fast = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_file(str(bpe)),
        eos_token=special[0],
        pad_token=special[0],
        additional_special_tokens=special[1:],
    )
    if facts["added_tokens"]:
        fast.add_tokens(facts["added_tokens"], special_tokens=False)
    fast.chat_template = facts["chat_template"]
    tmp = out.with_name(out.name + f".{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    fast.save_pretrained(tmp)

    torch.manual_seed(13)
    cfg = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=16384,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=fast.convert_tokens_to_ids(special[0]),
        pad_token_id=fast.convert_tokens_to_ids(special[0]),
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(cfg)
    model.save_pretrained(tmp, safe_serialization=True)
    # script_lp.py reads how this family's model writes (the default agent's pieces) from here
    (tmp / "wirecheck-model.json").write_text(
        json.dumps({"family": family, "fingerprint": out.name, "script": facts["script"]})
    )
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)


def model_dir(family: str, out_root: Path) -> Path:
    """The family's model folder, built first if this tree has not built it yet."""
    facts = family_facts()["families"][family]
    out = out_root / f"{family}-{fingerprint(family, facts)}"
    if not (out / "wirecheck-model.json").is_file():
        build(family, facts, base_tokenizer(out_root), out)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    known = family_facts()
    ap.add_argument(
        "--family",
        action="append",
        choices=sorted(known["families"]),
        help="repeat for several (one process builds them all); default: the default family",
    )
    ap.add_argument("--out-root", type=Path, required=True)
    args = ap.parse_args(argv)
    for family in args.family or [known["default"]]:
        print(model_dir(family, args.out_root), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
