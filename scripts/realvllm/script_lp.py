"""Scripted output for the tiny model: a vLLM v1 custom logits processor.

Served with ``--logits-processors script_lp:ScriptedOutput`` (this folder on PYTHONPATH). The model
has random weights, so this processor decides every token:

- ``vllm_xargs: {"script": TEXT}`` (it arrives as ``SamplingParams.extra_args``): the model emits TEXT
  exactly, raw markup included, then EOS. TEXT is what follows the chat template's generation prompt,
  which already opened the thinking (``<think>`` or a think channel), so a script starts with the
  reasoning and what closes it. The request's ``max_tokens`` still cuts it, as it would cut a real model.
- no script: a small default agent answers from the prompt (declared tools, last turn), so that
  ``accept`` and ``scenarios`` traffic gets sensible answers: a call of a tool the user names, with
  arguments valid for its schema; an answer after a tool result, the same call again after a tool
  result that reports a failure; a short answer otherwise. How the family's model writes thinking,
  answers and calls comes with the model (``wirecheck-model.json``'s ``script``, from families.json).

Structured outputs: xgrammar's mask is applied before this processor, so disallowed tokens arrive as
-inf. Several candidate scripts are followed in step (the default answer and, for ``required`` or
named ``tool_choice``, one call per declared tool); a candidate drops out when the grammar forbids its
next token (a whitespace token the grammar forbids is left out instead). When none is left, the processor steers to the shortest legal completion (closing tokens
first, whitespace last: a plain argmax loops on whitespace inside JSON).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import torch
from transformers import AutoTokenizer
from vllm.config import VllmConfig
from vllm.sampling_params import SamplingParams
from vllm.v1.sample.logits_processor import AdapterLogitsProcessor

_CLOSERS = set('}]"')
_OPENERS = set("{[")


class _Vocab:
    """The served tokenizer and per-token facts that steering needs, built once per process."""

    def __init__(self, path: str) -> None:
        self.tok = AutoTokenizer.from_pretrained(path)
        self.eos = int(self.tok.eos_token_id)
        n = len(self.tok)
        texts = [self.tok.decode([i]) for i in range(n)]
        # steering preferences, outside and inside a JSON string (see _steer_score)
        self.rank_out = torch.tensor([_steer_score(t) for t in texts], dtype=torch.float32)
        self.rank_in = torch.tensor([_steer_score_in_string(t) for t in texts], dtype=torch.float32)
        # whitespace-only tokens, which a constrained format may leave out (_Request._next)
        self.blank = [bool(t) and not t.strip() for t in texts]
        # how this family's model writes (build_model.py stores it beside the weights)
        meta = json.loads((Path(path) / "wirecheck-model.json").read_text(encoding="utf-8"))
        self.dialect: dict[str, Any] = meta["script"]
        self.markers = re.compile("|".join(re.escape(m) for m in self.dialect["json_after"]))

    def encode(self, text: str) -> list[int]:
        return [*self.tok.encode(text, add_special_tokens=False), self.eos]


def _steer_score(text: str) -> float:
    """Outside a JSON string: close structures, open none, never open a string; whitespace last."""
    if not text.strip():
        return -1000.0
    net = sum(c in _CLOSERS for c in text) - sum(c in _OPENERS for c in text)
    opens_string = text.count('"') % 2 == 1
    return net * 10.0 - (5.0 if opens_string else 0.0) - len(text) * 0.01


def _steer_score_in_string(text: str) -> float:
    """Inside a JSON string: close it as soon as the grammar lets us, else stay short."""
    if text.startswith('"'):
        return 100.0 + _steer_score(text[1:]) if text[1:].strip() else 100.0
    if not text.strip() or "\\" in text:
        return -1000.0
    return -len(text) * 0.01


def _in_string(text: str, markers: re.Pattern[str]) -> bool:
    """Whether JSON written after the last markup marker has an open string."""
    tail = markers.split(text)[-1]
    return len(re.findall(r'(?<!\\)"', tail)) % 2 == 1


# --- the default agent -------------------------------------------------------------------------


def _value(schema: Any, hint: str, depth: int = 0) -> Any:
    """A value valid for a practical subset of JSON Schema, built from a word of the user's turn."""
    if not isinstance(schema, dict) or depth > 6:
        return hint
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for comb in ("anyOf", "oneOf"):
        if isinstance(schema.get(comb), list) and schema[comb]:
            return _value(schema[comb][0], hint, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        required = schema.get("required") or list(props)
        return {k: _value(props.get(k, {}), hint, depth + 1) for k in required if k in props}
    if kind == "array":
        return [_value(schema.get("items", {}), hint, depth + 1)] * max(1, int(schema.get("minItems", 1)))
    if kind == "integer":
        return max(int(schema.get("minimum", 1)), 1) if "maximum" not in schema else int(schema["maximum"])
    if kind == "number":
        return float(schema.get("minimum", 1.5))
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    text = hint
    if isinstance(schema.get("minLength"), int):
        text = text.ljust(schema["minLength"], "x")
    if isinstance(schema.get("maxLength"), int):
        text = text[: schema["maxLength"]]
    return text


def _hint(user: str) -> str:
    caps = [
        w for w in re.findall(r"\b[A-Z][a-zA-Z]{2,}\b", user) if w not in {"What", "The", "Please", "Use"}
    ]
    return caps[-1] if caps else (re.findall(r"[a-zA-Z]{3,}", user)[-1:] or ["value"])[0]


def _tools_in(text: str) -> list[dict[str, Any]]:
    """JSON values one after another (a list of tools, or tools or functions one per line)."""
    out: list[dict[str, Any]] = []
    decoder, i = json.JSONDecoder(), 0
    while i < len(text):
        if text[i] in " \n\t,":
            i += 1
            continue
        try:
            value, i = decoder.raw_decode(text, i)
        except ValueError:
            break
        out += [v for v in (value if isinstance(value, list) else [value]) if isinstance(v, dict)]
    return out


def _parse_prompt(prompt: str, dialect: dict[str, Any]) -> tuple[list[dict[str, Any]], str, str, str, int]:
    """(declared tools, role of the last turn, its text, the last user turn's text, where the
    conversation starts) from the chat template's output, read with the family's patterns
    (families.json)."""
    tools: list[dict[str, Any]] = []
    start = 0
    for m in re.finditer(dialect["tools_pattern"], prompt, re.S):
        start = m.end()
        if "name" in m.groupdict():  # a function's name and its parameters, apart
            try:
                params = json.loads(m.group("json"))
            except ValueError:
                params = {"type": "object"}
            tools.append({"name": m.group("name").strip(), "parameters": params})
        else:
            tools += _tools_in(m.group("json"))
    last_role, last_text, user_text = ("user", "", "")
    for m in re.finditer(dialect["turns_pattern"], prompt, re.S):
        if m.group("tool") is not None:
            last_role, last_text = "tool", m.group("tool")
        elif m.group("user") is not None:
            last_role, last_text = "user", m.group("user")
            user_text = last_text
    return tools, last_role, last_text, user_text, start


def _arguments(args: Any, argument: dict[str, str] | None) -> str:
    """The call's arguments as the family writes them: one JSON object (``argument`` None), or one
    piece per key, text values raw and the others as JSON."""
    if argument is None:
        return json.dumps(args, ensure_ascii=False)
    return "".join(
        argument["string"].format(key=k, value=v)
        if isinstance(v, str)
        else argument["json"].format(key=k, value=json.dumps(v), type=_json_type(v))
        for k, v in (args.items() if isinstance(args, dict) else [])
    )


def _json_type(value: Any) -> str:
    """A value's JSON type as K3's XTML ``type=`` names it (integers are ``number``)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if value is None:
        return "null"
    return "object" if isinstance(value, dict) else "array"


def prior_calls(history: str, dialect: dict[str, Any]) -> int:
    """How many tool calls the conversation's history already holds: the chat template writes each
    one in the family's native markup, which opens as the default agent's ``call`` pattern does.

    Models that write their call ids number them over the whole conversation (Kimi K2's
    ``functions.NAME:N``); an id that repeats one of an earlier turn makes agent frameworks stop
    (openai-agents) or loop (pydantic-ai), so the default agent continues the count."""
    marker = dialect["call"].split("{", 1)[0]
    return history.count(marker) if marker else 0


def default_scripts(prompt: str, dialect: dict[str, Any]) -> list[str]:
    """Candidate outputs, best first: what a small well-behaved agent would write for this prompt,
    in the markup ``dialect`` (families.json's ``script``) describes."""
    tools, role, text, user_text, start = _parse_prompt(prompt, dialect)
    index = prior_calls(prompt[start:], dialect)
    thinking_open = dialect["think_open"] is not None and prompt.endswith(dialect["think_open"])
    fns = [t.get("function", t) for t in tools]
    fns = [f for f in fns if isinstance(f, dict) and isinstance(f.get("name"), str)]

    def think(reason: str) -> str:
        return dialect["think_close"].format(reason=reason) if thinking_open else ""

    def answer(words: str) -> str:
        return str(dialect["answer"].format(text=words))

    def call(fn: dict[str, Any], section: str = "tools") -> str:
        # arguments from the user's words, so a retry repeats the failed call's arguments
        args = _value(fn.get("parameters") or {"type": "object"}, _hint(user_text or text))
        one = dialect["call"].format(
            name=fn["name"], index=index, number=1, arguments=_arguments(args, dialect["argument"])
        )
        return str((dialect.get(section) or dialect["tools"]).format(calls=one))

    # one reasoning for every candidate: reasoning is never constrained, so candidates that share it
    # stay in step until the grammar (if any) picks among the answers after it
    named = [f for f in fns if f["name"] in text] if role == "user" else []
    # the tool that answered last: the declared one the history names last (its call, and its id
    # in the result for some families, come after the tools)
    answered = max(fns, key=lambda f: prompt.rfind(f["name"])) if role == "tool" and fns else None
    # a tool result that reports a failure: call the tool again, as a well-behaved agent model does
    # (accept's interface.tool-retry)
    failed = role == "tool" and re.search(r"\berror\b|\bfailed\b|\btimeout\b|\bexception\b", text, re.I)
    if failed and answered is not None:
        named = [answered]
        reason, words = f"The {answered['name']} call failed; I will retry it.", "Sorry: the tool failed."
    elif role == "tool":
        reason, words = "The tool answered; I report it.", f"Done: {text.strip()[:80]}"
    elif named:
        reason, words = f"I will call {named[0]['name']}.", "Hello! Here is a short answer."
    else:
        reason, words = "A short answer will do.", "Hello! Here is a short answer."
    plain = think(reason) + answer(words)
    # under response_format json_object the grammar rules out the plain answer: answer in JSON
    as_json = think(reason) + answer(json.dumps({"answer": words}))
    if role == "tool" and not failed:
        # after a good result a model answers (in JSON where a grammar wants it); where a grammar
        # demands a call (required tool_choice), it calls a tool other than the one that just
        # answered first (an agent framework's final_result tool), not the same one forever
        others = [f for f in fns if f is not answered] + ([answered] if answered else [])
        return [plain, as_json, *(think(reason) + call(f) for f in others)]
    order = named + [f for f in fns if f not in named]
    calls = [think(reason) + call(f) for f in order]
    # an answer, then a call: where a grammar lets the answer through and then demands a call (K3's
    # structural tag for required tool_choice: the response channel, then the tools channel)
    answer_then_call = [plain + call(f, "tools_after_answer") for f in order]
    if named:
        return [*calls, plain, as_json, *answer_then_call]
    return [plain, *answer_then_call, *calls, as_json]


# --- the processor ----------------------------------------------------------------------------


#: how many whitespace tokens of a candidate the grammar may leave out in a row: a constrained
#: format that starts its call right after the reasoning (hermes' structural tag after </think>)
#: forbids the blank line the model would write there
_SKIP = 3


class _Request:
    """Per-request state: candidate token scripts followed in step with the output so far, each
    with a cursor; a candidate drops out when the output leaves it."""

    def __init__(self, vocab: _Vocab, scripts: list[list[int]] | None, lazy: bool) -> None:
        self.vocab = vocab
        self.scripts = scripts
        self.lazy = lazy  # default agent: candidates built from the prompt on the first step
        self.cursors: list[int] = [0] * len(scripts or [])
        self.seen = 0  # output tokens already followed

    def _next(self, script: list[int], pos: int, ok: Any) -> int | None:
        """Where the candidate goes on: its next token if ``ok`` takes it, else the first one
        after at most _SKIP whitespace tokens that ``ok`` takes; None when neither."""
        for j in range(pos, min(pos + _SKIP + 1, len(script))):
            if ok(script[j]):
                return j
            if not self.vocab.blank[script[j]]:
                return None
        return None

    def _follow(self, output_ids: list[int]) -> None:
        assert self.scripts is not None
        for tok in output_ids[self.seen :]:
            live = [
                (script, j + 1)
                for script, pos in zip(self.scripts, self.cursors, strict=True)
                if (j := self._next(script, pos, lambda t, tok=tok: t == tok)) is not None
            ]
            self.scripts = [script for script, _ in live]
            self.cursors = [pos for _, pos in live]
        self.seen = len(output_ids)

    def __call__(self, prompt_ids: list[int], output_ids: list[int], logits: torch.Tensor) -> torch.Tensor:
        if self.scripts is None:
            prompt = self.vocab.tok.decode(prompt_ids, skip_special_tokens=False)
            self.scripts = [self.vocab.encode(s) for s in default_scripts(prompt, self.vocab.dialect)]
            self.cursors = [0] * len(self.scripts)
        self._follow(list(output_ids))
        allowed = torch.isfinite(logits)
        choice: int | None = None
        for script, pos in zip(self.scripts, self.cursors, strict=True):
            j = self._next(script, pos, lambda t: bool(allowed[t]))
            if j is not None:
                choice = script[j]
                break
        if choice is None:
            if bool(allowed[self.vocab.eos]):
                choice = self.vocab.eos
            else:
                text = self.vocab.tok.decode(list(output_ids), skip_special_tokens=False)
                rank = self.vocab.rank_in if _in_string(text, self.vocab.markers) else self.vocab.rank_out
                score = torch.where(allowed, rank[: logits.shape[-1]], -math.inf)
                choice = int(torch.argmax(score))
        out = torch.full_like(logits, -math.inf)
        out[choice] = 0.0
        return out


_VOCABS: dict[str, _Vocab] = {}


class ScriptedOutput(AdapterLogitsProcessor):
    """vLLM v1 logits processor: every request follows its script (or the default agent's)."""

    def __init__(self, vllm_config: VllmConfig, device: torch.device, is_pin_memory: bool) -> None:
        super().__init__(vllm_config, device, is_pin_memory)
        path = vllm_config.model_config.tokenizer
        if path not in _VOCABS:
            _VOCABS[path] = _Vocab(path)
        self.vocab = _VOCABS[path]

    def is_argmax_invariant(self) -> bool:
        # it changes which token wins, so vLLM must run it under greedy sampling too
        return False

    def new_req_logits_processor(self, params: SamplingParams) -> Any:
        extra = params.extra_args or {}
        script = extra.get("script")
        if isinstance(script, str):
            return _Request(self.vocab, [self.vocab.encode(script)], lazy=False)
        return _Request(self.vocab, None, lazy=True)
