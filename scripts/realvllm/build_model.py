"""Build the tiny local model that the real vLLM serves (issue 13). Runs in .venv-vllm (Python 3.11).

Nothing comes from a model hub. The model is a 2-layer Llama (hidden 128, 2 heads of 64, tied
embeddings) with random weights from a fixed seed; its output is never sampled for meaning, because
the scripted-output logits processor (``script_lp.py``) decides every token. What must be real is
what vLLM's parsers and template code look at:

- a byte-level BPE tokenizer (``tokenizers``, vocab 8000) trained on text shipped in the repository
  (README and docs), so prompts stay short, with the family's exact special tokens, the ones vLLM's
  kimi_k2 / kimi_k3 tool and reasoning parsers look up by string;
- a chat template of the real one's shape: tools in a ``tool_declare`` system block, tool results as
  ``## Return of ID``, history tool calls in native markup, and a generation prompt that prefills
  ``<think>`` (``<think></think>`` with thinking off). Without the prefill the real streaming reasoning
  parser files reasoning under content on turns after a tool call (shared reference real-vllm-cpu.md).

Same inputs, same bytes: the output folder is named after a hash of this file and the corpus, so a
change rebuilds and an unchanged tree reuses the build.

    python build_model.py --family kimi_k2 --out-root DIR   # prints the model folder
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VOCAB = 8000

# The strings vLLM 0.32's parsers look up (vllm/tool_parsers/kimi_k2_tool_parser.py,
# vllm/reasoning/kimi_k2_reasoning_parser.py and the kimi_k3 pair). EOS is <|im_end|>.
_CHAT = ["<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|im_system|>", "<|im_middle|>"]
SPECIAL: dict[str, list[str]] = {
    "kimi_k2": [
        *_CHAT,
        "<|tool_calls_section_begin|>",
        "<|tool_calls_section_end|>",
        "<|tool_call_begin|>",
        "<|tool_call_argument_begin|>",
        "<|tool_call_end|>",
    ],
    "kimi_k3": [*_CHAT, "<|open|>", "<|close|>", "<|sep|>"],
}
# Added but not special: the reasoning parser finds them as text and decoding keeps them.
ADDED: dict[str, list[str]] = {"kimi_k2": ["<think>", "</think>"], "kimi_k3": []}

# Jinja templates. K2: Kimi K2-Thinking / K2.5 shape. K3: the XTML channels; the generation prompt
# opens the think channel as K3's template does when thinking is on.
_K2_TEMPLATE = r"""{%- macro text(c) -%}{%- if c is string -%}{{ c }}{%- elif c -%}{%- for p in c -%}{%- if p.type == 'text' -%}{{ p.text }}{%- endif -%}{%- endfor -%}{%- endif -%}{%- endmacro -%}
{%- if tools -%}<|im_system|>tool_declare<|im_middle|>{{ tools | tojson }}<|im_end|>{%- endif -%}
{%- for m in messages -%}
{%- if m.role == 'system' -%}<|im_system|>system<|im_middle|>{{ text(m.content) }}<|im_end|>
{%- elif m.role == 'user' -%}<|im_user|>user<|im_middle|>{{ text(m.content) }}<|im_end|>
{%- elif m.role == 'tool' -%}<|im_system|>tool<|im_middle|>## Return of {{ m.tool_call_id }}
{{ text(m.content) }}<|im_end|>
{%- elif m.role == 'assistant' -%}<|im_assistant|>assistant<|im_middle|><think>{{ m.reasoning or m.reasoning_content or '' }}</think>{{ text(m.content) }}
{%- if m.tool_calls -%}<|tool_calls_section_begin|>{%- for tc in m.tool_calls -%}<|tool_call_begin|>{{ tc.id }}<|tool_call_argument_begin|>{{ tc.function.arguments if tc.function.arguments is string else tc.function.arguments | tojson }}<|tool_call_end|>{%- endfor -%}<|tool_calls_section_end|>{%- endif -%}<|im_end|>
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}<|im_assistant|>assistant<|im_middle|><think>{%- if thinking is defined and not thinking -%}</think>{%- endif -%}{%- endif -%}"""

_K3_TEMPLATE = r"""{%- macro text(c) -%}{%- if c is string -%}{{ c }}{%- elif c -%}{%- for p in c -%}{%- if p.type == 'text' -%}{{ p.text }}{%- endif -%}{%- endfor -%}{%- endif -%}{%- endmacro -%}
{%- if tools -%}<|im_system|>tool_declare<|im_middle|>{{ tools | tojson }}<|im_end|>{%- endif -%}
{%- for m in messages -%}
{%- if m.role == 'system' -%}<|im_system|>system<|im_middle|>{{ text(m.content) }}<|im_end|>
{%- elif m.role == 'user' -%}<|im_user|>user<|im_middle|>{{ text(m.content) }}<|im_end|>
{%- elif m.role == 'tool' -%}<|im_system|>tool<|im_middle|>## Return of {{ m.tool_call_id }}
{{ text(m.content) }}<|im_end|>
{%- elif m.role == 'assistant' -%}<|im_assistant|>assistant<|im_middle|><|open|>think<|sep|>{{ m.reasoning or m.reasoning_content or '' }}<|close|>think<|sep|>
{%- if m.content -%}<|open|>response<|sep|>{{ text(m.content) }}<|close|>response<|sep|>{%- endif -%}
{%- if m.tool_calls -%}<|open|>tools<|sep|>{%- for tc in m.tool_calls -%}<|open|>call tool="{{ tc.function.name }}" index="{{ loop.index0 }}"<|sep|><|open|>argument key="raw" type="object"<|sep|>{{ tc.function.arguments if tc.function.arguments is string else tc.function.arguments | tojson }}<|close|>argument<|sep|><|close|>call<|sep|>{%- endfor -%}<|close|>tools<|sep|>{%- endif -%}<|im_end|>
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}<|im_assistant|>assistant<|im_middle|>{%- if thinking is defined and not thinking -%}<|open|>think<|sep|><|close|>think<|sep|>{%- else -%}<|open|>think<|sep|>{%- endif -%}{%- endif -%}"""

TEMPLATE = {"kimi_k2": _K2_TEMPLATE, "kimi_k3": _K3_TEMPLATE}


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


def fingerprint(family: str) -> str:
    h = hashlib.sha256()
    h.update(Path(__file__).read_bytes())
    h.update(family.encode())
    for t in corpus():
        h.update(t.encode())
    return h.hexdigest()[:12]


def build(family: str, out: Path) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    special = SPECIAL[family]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|im_end|>",
        additional_special_tokens=special[1:],
    )
    if ADDED[family]:
        fast.add_tokens(ADDED[family], special_tokens=False)
    fast.chat_template = TEMPLATE[family]
    tmp = out.with_name(out.name + ".tmp")
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
        eos_token_id=fast.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=fast.convert_tokens_to_ids("<|im_end|>"),
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(cfg)
    model.save_pretrained(tmp, safe_serialization=True)
    (tmp / "wirecheck-model.json").write_text(json.dumps({"family": family, "fingerprint": out.name}))
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--family", choices=sorted(SPECIAL), default="kimi_k2")
    ap.add_argument("--out-root", type=Path, required=True)
    args = ap.parse_args(argv)
    out = args.out_root / f"{args.family}-{fingerprint(args.family)}"
    if not (out / "wirecheck-model.json").is_file():
        args.out_root.mkdir(parents=True, exist_ok=True)
        build(args.family, out)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
