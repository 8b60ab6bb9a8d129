"""A small deterministic tokenizer and chat template for the simulator.

Not a real BPE: special tokens (``<|...|>``, think and <tool_call> tags) are single tokens, and text splits
into words with their leading space and single punctuation marks. What matters for the simulation is
that it is deterministic, that the same prompt prefix gives the same leading tokens (for the prefix
cache), and that markup tokens arrive whole, as they do from a real tokenizer.
"""

from __future__ import annotations

import json
import re as _re
import zlib
from typing import Any

__all__ = ["VOCAB", "detokenize", "render_prompt", "token_id", "tokenize"]

VOCAB = 163840  # Kimi's vocabulary size

_TOKEN = _re.compile(
    # special tokens: ASCII and DeepSeek's full-width bars, think and tool-call tags, MiniMax's call tags
    r"<\|[^|<>]{1,40}\|>|<\uff5c[^\uff5c<>]{1,40}\uff5c>|</?think>|</?tool_call>|</?minimax:tool_call>"
    r"|\s+(?=<\||<\uff5c|</?think>|</?tool_call>|</?minimax:tool_call>)"
    r"| ?[A-Za-z]+| ?\d{1,3}| ?[^\sA-Za-z\d]|\s+"
)


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text)


def token_id(tok: str) -> int:
    return zlib.crc32(tok.encode()) % VOCAB


def detokenize(tokens: list[str]) -> str:
    return "".join(tokens)


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return json.dumps(content)


def render_prompt(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
    """The prompt text as a Kimi-style chat template would lay it out: tools first, then turns."""
    parts = []
    if tools:
        parts.append(
            "<|im_system|>tool_declare<|im_middle|>" + json.dumps(tools, sort_keys=True) + "<|im_end|>"
        )
    for m in messages:
        role = str(m.get("role", "user"))
        body = _content_text(m.get("content"))
        if m.get("tool_calls"):
            body += json.dumps(m["tool_calls"], sort_keys=True)
        if m.get("tool_call_id"):
            body = f"## Return of {m['tool_call_id']}\n{body}"
        parts.append(f"<|im_{role}|>{role}<|im_middle|>{body}<|im_end|>")
    parts.append("<|im_assistant|>assistant<|im_middle|>")
    return "".join(parts)
