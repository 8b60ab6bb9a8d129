"""The family table: one row per agent dialect, and the one detector.

A *family* is what vLLM's ``--tool-call-parser`` names: how a model writes tool calls and thinking
into its raw output, which special tokens it uses, who writes the call ids, and which parsers and
flags serve it. Everything that depends on the family reads this table: the rules (markup left in
text, the id format), ``CheckConfig.family`` and ``wirecheck check --family``, acceptance compat
(the recipe flags it holds a deployment to), and the simulator (which models, parser names and
flags it serves; it writes and parses the markup with its own code, never with these patterns,
so that it can catch the checker's mistakes: DESIGN.md).

The table is data (strings and regular-expression sources), so the pure kernel can own it. A model
that no row matches is judged by the generic contracts only, with a note: never by another
family's expectations.

Facts: vllm-wire.md section 3 (markup, flags, what a failing parser leaves behind). Adding a
family: docs/rules.md, "Adding a family".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

__all__ = [
    "FAMILIES",
    "FAMILY_CHOICES",
    "FAMILY_NAMES",
    "GENERIC",
    "Family",
    "detect_family",
    "rows_saying",
    "unknown_family_note",
]

#: what a model no row matches is judged as: the contracts every family shares, nothing more
GENERIC = "generic"


@dataclass(frozen=True, slots=True, kw_only=True)
class Family:
    """One dialect. Patterns are regular-expression sources; tokens are literal strings."""

    #: the table key: vLLM's ``--tool-call-parser`` name for this markup
    name: str
    #: who writes this markup, for people
    title: str
    #: ``re.search`` patterns over the lower-cased served model name; the first row that matches wins
    models: tuple[str, ...]
    #: a model of the family, as vLLM serves it (the simulator's default ``--model``)
    example_model: str
    #: tool-call markup that a working tool parser turns into ``tool_calls``
    tool_markup: tuple[str, ...]
    #: thinking markup that a working reasoning parser turns into the reasoning field
    reasoning_markup: tuple[str, ...]
    #: other special tokens (chat template, channels) that no field should carry
    special_tokens: tuple[str, ...]
    #: the call id when the model writes it itself (named group ``name``); None: vLLM mints
    #: ``chatcmpl-tool-<hex>`` ids, which are not judged
    id_pattern: str | None
    #: the id shape, for people (messages and docs)
    id_shape: str
    #: an id that is close to ``id_pattern`` but not it, and what that near miss is called
    id_near_miss: tuple[str, str] | None = None
    #: the response fields reasoning may arrive in (vLLM 0.16+ ``reasoning``; 0.11-0.15 both)
    reasoning_fields: tuple[str, ...] = ("reasoning", "reasoning_content")
    #: vLLM ``--tool-call-parser`` and ``--reasoning-parser`` (None: the recipe sets none)
    tool_parser: str
    reasoning_parser: str | None
    #: the model thinks when a request does not say (chat_template_kwargs)
    thinks_by_default: bool
    #: the model writes its opening think tag itself (the chat template's generation prompt does
    #: not open the thinking): the reasoning parser strips that tag and usage counts its token
    #: outside the reasoning (rule reasoning-unclosed)
    writes_think_open: bool = False
    #: named ``tool_choice`` without ``strict`` tools is a 400 (vllm-wire.md section 3, K3)
    named_choice_needs_strict: bool = False
    #: the model mixes linear and full attention, so vLLM's prefix cache is hybrid and keeps only
    #: prompt ends (Kimi K3's KDA layers; judged from the family, not a sim-only label)
    hybrid_kv_cache: bool = False
    #: what the tool parser drops without a trace when the model's markup is malformed (the message
    #: is then empty with ``stop``: rule answer-empty); None: nothing known
    silent_call_drop: str | None = None
    #: vLLM issues in which the streaming tool parser read calls otherwise than the whole-response
    #: parser (rule stream-nonstream-mismatch)
    stream_misparse_issues: tuple[int, ...] = ()

    @property
    def recipe_flags(self) -> Mapping[str, object]:
        """The serving flags, keyed as vLLM's startup log prints its arguments."""
        flags: dict[str, object] = {"tool_call_parser": self.tool_parser}
        if self.reasoning_parser is not None:
            flags["reasoning_parser"] = self.reasoning_parser
        flags["enable_auto_tool_choice"] = True
        return flags

    @property
    def command_line(self) -> str:
        """The same flags as ``vllm serve`` takes them."""
        out = []
        for key, value in self.recipe_flags.items():
            flag = "--" + key.replace("_", "-")
            out.append(flag if value is True else f"{flag} {value}")
        return " ".join(out)


# Kimi's chat-template tokens, shared by the K2 and K3 templates (vllm-wire.md section 3).
_KIMI_TEMPLATE = ("<|im_end|>", "<|im_middle|>", "<|im_user|>", "<|im_assistant|>", "<|im_system|>")

_ROWS = (
    # vLLM --tool-call-parser kimi_k2 --reasoning-parser kimi_k2 (vllm-wire.md section 3). The model
    # writes the id itself as the call header; the engine parser drops a call whose header is not
    # NAME:IDX. Thinking before </think>, an opening <think> may be absent.
    Family(
        name="kimi_k2",
        title="Kimi K2 (K2-Instruct, K2-Thinking, K2.5)",
        models=(r"kimi[-_ ]?k2",),
        example_model="moonshotai/Kimi-K2-Thinking",
        tool_markup=(
            r"<\|tool_calls?_section_begin\|>",
            r"<\|tool_call_begin\|>",
            r"<\|tool_call_argument_begin\|>",
            r"<\|tool_call_end\|>",
            r"<\|tool_calls?_section_end\|>",
        ),
        reasoning_markup=(r"</?think>",),
        special_tokens=_KIMI_TEMPLATE,
        id_pattern=r"^functions\.(?P<name>.+):(?P<idx>\d+)$",
        id_shape="functions.NAME:IDX",
        id_near_miss=(r"^.+:\d+$", "a header without the functions. prefix"),
        tool_parser="kimi_k2",
        reasoning_parser="kimi_k2",
        thinks_by_default=True,
        silent_call_drop="a call whose header is not ``NAME:IDX`` (``functions.get_weather`` without ``:0``)",
    ),
    # vLLM --tool-call-parser kimi_k3 --reasoning-parser kimi_k3: "XTML" channels
    # <|open|>X<|sep|>...<|close|>X<|sep|>; ids minted; on an exception content = the raw output;
    # a named tool_choice needs strict tools (vllm-wire.md section 3; the leak "<|close|>message
    # <|sep|>" is vllm #51399).
    Family(
        name="kimi_k3",
        title="Kimi K3",
        models=(r"kimi[-_ ]?k3",),
        example_model="moonshotai/Kimi-K3",
        tool_markup=(
            r"<\|open\|>tools",
            r"<\|open\|>call\b",
            r"<\|close\|>call",
            r"<\|open\|>argument\b",
            r"<\|close\|>tools",
        ),
        reasoning_markup=(r"<\|open\|>think", r"<\|close\|>think"),
        special_tokens=("<|open|>", "<|close|>", "<|sep|>", *_KIMI_TEMPLATE),
        id_pattern=None,
        id_shape="chatcmpl-tool-<hex>, minted by vLLM",
        tool_parser="kimi_k3",
        reasoning_parser="kimi_k3",
        thinks_by_default=True,
        named_choice_needs_strict=True,
        hybrid_kv_cache=True,
    ),
    # vLLM --tool-call-parser qwen3_coder (vllm/parser/qwen3.py, an engine parser in 0.32): XML calls
    # <tool_call><function=NAME><parameter=K>V</parameter></function></tool_call>, values converted by
    # the tool's schema, ids minted as chatcmpl-tool-<hex> (the legacy parser minted call_<24 hex>). Qwen3-Coder does not think: the
    # recipe sets no reasoning parser. Before hermes, whose Qwen3 pattern leaves Coder models out.
    Family(
        name="qwen3_coder",
        title="Qwen3-Coder (XML function calls)",
        models=(r"qwen3[-_.]?coder",),
        example_model="Qwen/Qwen3-Coder-30B-A3B-Instruct",
        tool_markup=(
            r"<tool_call>",
            r"</tool_call>",
            r"<function=",
            r"</function>",
            r"<parameter=",
            r"</parameter>",
        ),
        reasoning_markup=(),
        special_tokens=("<|im_start|>", "<|im_end|>", "<|endoftext|>"),
        id_pattern=None,
        id_shape="chatcmpl-tool-<hex>, minted by vLLM (0.32's engine parser)",
        tool_parser="qwen3_coder",
        reasoning_parser=None,
        thinks_by_default=False,
    ),
    # vLLM --tool-call-parser glm45 (vllm/tool_parsers/glm4_moe_tool_parser.py): <tool_call>NAME\n
    # <arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>, string-typed values raw, others
    # JSON (or a Python literal), ids minted (make_tool_call_id). --reasoning-parser glm45 splits
    # <think>...</think> (vllm/reasoning/, registered as glm45). Chat-template tokens <|user|>,
    # <|assistant|>, <|system|>, <|observation|> end a turn; GLM-4.7 has its own parser (glm47).
    Family(
        name="glm45",
        title="GLM-4.5 and GLM-4.6",
        models=(r"glm-?4\.[56]",),
        example_model="zai-org/GLM-4.5-Air",
        tool_markup=(
            r"<tool_call>",
            r"</tool_call>",
            r"<arg_key>",
            r"</arg_key>",
            r"<arg_value>",
            r"</arg_value>",
        ),
        reasoning_markup=(r"</?think>",),
        special_tokens=("<|user|>", "<|assistant|>", "<|system|>", "<|observation|>", "<|endoftext|>"),
        id_pattern=None,
        id_shape="chatcmpl-tool-<hex>, minted by vLLM",
        tool_parser="glm45",
        reasoning_parser="glm45",
        thinks_by_default=True,
        # GLM-4.5's generation prompt ends at <|assistant|>; the model writes <think> itself
        writes_think_open=True,
    ),
    # vLLM --tool-call-parser deepseek_v31 (vllm/tool_parsers/deepseekv31_tool_parser.py): special
    # tokens with full-width bars (U+FF5C) and U+2581 for spaces: calls_begin, then per call
    # call_begin NAME sep {json} call_end, then calls_end; arguments passed through, ids minted
    # (make_tool_call_id), content = the text before the section. --reasoning-parser deepseek_v3 splits <think>...</think> when the request
    # turns thinking on (off by default). V3.2 writes another format (deepseek_v32): not this row.
    Family(
        name="deepseek_v31",
        title="DeepSeek V3.1 (full-width special tokens)",
        models=(r"deepseek[-_]?v3\.1",),
        example_model="deepseek-ai/DeepSeek-V3.1",
        tool_markup=(
            "<\uff5ctool\u2581calls\u2581begin\uff5c>",
            "<\uff5ctool\u2581call\u2581begin\uff5c>",
            "<\uff5ctool\u2581sep\uff5c>",
            "<\uff5ctool\u2581call\u2581end\uff5c>",
            "<\uff5ctool\u2581calls\u2581end\uff5c>",
        ),
        reasoning_markup=(r"</?think>",),
        special_tokens=(
            "<\uff5cbegin\u2581of\u2581sentence\uff5c>",
            "<\uff5cend\u2581of\u2581sentence\uff5c>",
            "<\uff5cUser\uff5c>",
            "<\uff5cAssistant\uff5c>",
        ),
        id_pattern=None,
        id_shape="chatcmpl-tool-<hex>, minted by vLLM",
        tool_parser="deepseek_v31",
        reasoning_parser="deepseek_v3",
        thinks_by_default=False,
    ),
    # vLLM --tool-call-parser minimax_m2 (vllm/tool_parsers/minimax_m2_tool_parser.py):
    # <minimax:tool_call><invoke name="NAME"><parameter name="K">V</parameter></invoke>
    # </minimax:tool_call>, values converted by the tool's schema, ids chatcmpl-tool-<hex> (0.32). Reasoning parser
    # minimax_m2 (vllm/reasoning/minimax_m2_reasoning_parser.py) splits <think>...</think>; its variant
    # minimax_m2_append_think, which many deployments use, keeps the think block in content, which
    # the markup rules report (not yet told apart). Chat-template special tokens: ]~!b[ opens the
    # prompt, ]~b]ROLE opens a turn, [e~[ ends one (the end of sequence).
    Family(
        name="minimax_m2",
        title="MiniMax M2",
        models=(r"minimax[-_]?m2",),
        example_model="MiniMaxAI/MiniMax-M2",
        tool_markup=(
            r"<minimax:tool_call>",
            r"</minimax:tool_call>",
            r"<invoke name=",
            r"</invoke>",
            r"<parameter name=",
            r"</parameter>",
        ),
        reasoning_markup=(r"</?think>",),
        special_tokens=("[e~[", "]~!b[", "]~b]"),
        id_pattern=None,
        id_shape="chatcmpl-tool-<hex>, minted by vLLM (0.32's engine parser)",
        tool_parser="minimax_m2",
        reasoning_parser="minimax_m2",
        thinks_by_default=True,
    ),
    # vLLM --tool-call-parser openai (vllm/tool_parsers/openai_tool_parser.py, gpt-oss): harmony
    # messages <|channel|>CHANNEL[ to=RECIPIENT][ <|constrain|>json]<|message|>TEXT<|end|>, parsed
    # from token ids: a message to functions.NAME is a call (its JSON re-dumped), channel final
    # (else a commentary preamble) is content, and --reasoning-parser openai_gptoss takes the
    # analysis channel as reasoning (vllm/reasoning/gptoss_reasoning_parser.py). Ids minted.
    Family(
        name="openai",
        title="gpt-oss (harmony channels)",
        models=(r"gpt-oss",),
        example_model="openai/gpt-oss-120b",
        tool_markup=(r"to=functions\.", r"<\|constrain\|>", r"<\|call\|>"),
        reasoning_markup=(r"<\|channel\|>analysis",),
        special_tokens=("<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|return|>"),
        id_pattern=None,
        id_shape="chatcmpl-tool-<hex>, minted by vLLM",
        tool_parser="openai",
        reasoning_parser="openai_gptoss",
        thinks_by_default=True,
    ),
    # vLLM --tool-call-parser hermes: <tool_call>{"name": ..., "arguments": {...}}</tool_call>, ids
    # minted, a failing parse leaves the markup in content (vllm-wire.md section 3). The think tags
    # are split by vLLM's qwen3 reasoning parser (vllm/reasoning/qwen3_reasoning_parser.py);
    # Hermes 4 writes the same tags. Qwen3-Coder writes XML calls: another parser (qwen3_coder).
    Family(
        name="hermes",
        title="Hermes-style (Hermes 2 Pro to 4, Qwen2.5, Qwen3, QwQ)",
        models=(r"hermes", r"qwen2\.5(?!.*coder)", r"qwen3(?!.*coder)", r"qwq"),
        example_model="NousResearch/Hermes-4-70B",
        tool_markup=(r"<tool_call>", r"</tool_call>"),
        reasoning_markup=(r"</?think>",),
        special_tokens=("<|im_start|>", "<|im_end|>", "<|end_of_text|>"),
        id_pattern=None,
        id_shape="chatcmpl-tool-<hex>, minted by vLLM",
        tool_parser="hermes",
        reasoning_parser="qwen3",
        # vLLM's qwen3 reasoning parser reads output as reasoning until </think> unless the request
        # says enable_thinking: false (vllm/parser/qwen3.py), as Qwen3's template thinks by default
        thinks_by_default=True,
        # Qwen3's and Hermes 4's generation prompts end at the assistant header; the model writes
        # <think> itself (QwQ's and the Qwen3 2507 thinking templates open it: one token less)
        writes_think_open=True,
        stream_misparse_issues=(9693, 28806),
    ),
)

#: every family by name, in table order
FAMILIES: Mapping[str, Family] = MappingProxyType({f.name: f for f in _ROWS})
#: the names, in table order
FAMILY_NAMES: tuple[str, ...] = tuple(FAMILIES)
#: what ``CheckConfig.family`` and ``wirecheck check --family`` accept
FAMILY_CHOICES: tuple[str, ...] = ("auto", *FAMILY_NAMES, GENERIC)


@lru_cache(maxsize=1)
def _model_patterns() -> tuple[tuple[re.Pattern[str], str], ...]:
    return tuple((re.compile(p), f.name) for f in _ROWS for p in f.models)


@lru_cache(maxsize=1)
def _id_patterns() -> tuple[tuple[re.Pattern[str], str], ...]:
    return tuple((re.compile(f.id_pattern), f.name) for f in _ROWS if f.id_pattern is not None)


@lru_cache(maxsize=256)
def _family_by_name(name: str) -> str | None:
    """The family a model name (lower case) says, if any: a service serves a few models, and every
    exchange asked the table's dozens of name patterns again, twice (1.3 us an exchange)."""
    for pattern, family in _model_patterns():
        if pattern.search(name):
            return family
    return None


def detect_family(model: str | None, call_ids: Iterable[str | None] = ()) -> str:
    """The family of a served model: by its name, else by the shape of ids only one family writes,
    else :data:`GENERIC`. The one detector: the rules, the CLI and acceptance all call this. A
    model or an id that is not a string (a hostile answer's) tells nothing."""
    family = _family_by_name(model.lower()) if isinstance(model, str) else None
    if family is not None:
        return family
    for call_id in call_ids:
        if not isinstance(call_id, str):
            continue
        for pattern, family in _id_patterns():
            if call_id and pattern.match(call_id):
                return family
    return GENERIC


def rows_saying(say: Callable[[Family], str | None]) -> str:
    """What the rows that have something to say about one trait say, in table order, joined by
    "; ": how rule docs cite family facts without naming a family themselves."""
    return "; ".join(text for f in _ROWS if (text := say(f)))


def unknown_family_note(model: str | None) -> str:
    """What to tell a user whose model no row matches (the generic contracts still apply)."""
    return (
        f"model {model or '(none)'!r} matches no family ({', '.join(FAMILY_NAMES)}): only the generic "
        "contracts apply; pass --family to hold it to one family's markup, ids and parser flags"
    )
