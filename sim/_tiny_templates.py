"""Chat templates of the real ones' shape for the real tier's tiny models (``_tiny_model``).

Ours, written to the shape of each family's published template: where tools are declared, how an
assistant turn writes its reasoning and calls, how tool results come back, and what the generation
prompt opens. transformers renders chat templates with ``trim_blocks`` and ``lstrip_blocks``, which
eat a newline written right after a block tag, so every newline here is an expression (``¶`` in
the sources below, made ``{{ '\\n' }}``). vLLM hands the templates tool-call arguments already
parsed into mappings (vllm/renderers/chat_utils.py); ``args`` writes either form.
"""

from __future__ import annotations

__all__ = [
    "DEEPSEEK_TEMPLATE",
    "GLM_TEMPLATE",
    "HERMES_TEMPLATE",
    "K2_TEMPLATE",
    "K3_TEMPLATE",
    "MINIMAX_TEMPLATE",
    "QWEN3_CODER_TEMPLATE",
]

_MACROS = (
    "{%- macro text(c) -%}{%- if c is string -%}{{ c }}{%- elif c -%}{%- for p in c -%}"
    "{%- if p.type == 'text' -%}{{ p.text }}{%- endif -%}{%- endfor -%}{%- endif -%}{%- endmacro -%}"
    "{%- macro args(a) -%}{%- if a is string -%}{{ a }}{%- else -%}{{ a | tojson }}{%- endif -%}{%- endmacro -%}"
    "{%- macro value(v) -%}{%- if v is string -%}{{ v }}{%- else -%}{{ v | tojson }}{%- endif -%}{%- endmacro -%}"
    "{%- macro xtml(v) -%}{%- if v is string -%}string{%- elif v is boolean -%}boolean"
    "{%- elif v is number -%}number{%- elif v is none -%}null{%- elif v is mapping -%}object"
    "{%- else -%}array{%- endif -%}{%- endmacro -%}"
    "{%- macro reasoning(m) -%}{{ m.reasoning or m.reasoning_content or '' }}{%- endmacro -%}"
)
_OFF = "{%- set off = THINKING is defined and not THINKING -%}"


def _render(source: str, thinking: str = "thinking") -> str:
    return _MACROS + _OFF.replace("THINKING", thinking) + source.replace("¶", "{{ '\\n' }}")


# Kimi K2 / K3 frame: tools in a tool_declare system block, results as "## Return of ID"
_KIMI = (
    "{%- if tools -%}<|im_system|>tool_declare<|im_middle|>{{ tools | tojson }}<|im_end|>{%- endif -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'system' -%}<|im_system|>system<|im_middle|>{{ text(m.content) }}<|im_end|>"
    "{%- elif m.role == 'user' -%}<|im_user|>user<|im_middle|>{{ text(m.content) }}<|im_end|>"
    "{%- elif m.role == 'tool' -%}<|im_system|>tool<|im_middle|>## Return of {{ m.tool_call_id }}¶"
    "{{ text(m.content) }}<|im_end|>"
    "{%- elif m.role == 'assistant' -%}<|im_assistant|>assistant<|im_middle|>@TURN@<|im_end|>"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_assistant|>assistant<|im_middle|>@PROMPT@{%- endif -%}"
)

K2_TEMPLATE = _render(
    _KIMI.replace(
        "@TURN@",
        "<think>{{ reasoning(m) }}</think>{{ text(m.content) }}"
        "{%- if m.tool_calls -%}<|tool_calls_section_begin|>{%- for tc in m.tool_calls -%}"
        "<|tool_call_begin|>{{ tc.id }}<|tool_call_argument_begin|>{{ args(tc.function.arguments) }}"
        "<|tool_call_end|>{%- endfor -%}<|tool_calls_section_end|>{%- endif -%}",
    ).replace("@PROMPT@", "<think>{%- if off -%}</think>{%- endif -%}")
)

K3_TEMPLATE = _render(
    _KIMI.replace(
        "@TURN@",
        "<|open|>think<|sep|>{{ reasoning(m) }}<|close|>think<|sep|>"
        "{%- if m.content or m.tool_calls -%}<|open|>response<|sep|>{{ text(m.content) }}"
        "<|close|>response<|sep|>{%- endif -%}"
        "{%- if m.tool_calls -%}<|open|>tools<|sep|>{%- for tc in m.tool_calls -%}"
        '<|open|>call tool="{{ tc.function.name }}" index="{{ loop.index }}"<|sep|>'
        "{%- if tc.function.arguments is mapping -%}{%- for k, v in tc.function.arguments.items() -%}"
        '<|open|>argument key="{{ k }}" type="{{ xtml(v) }}"<|sep|>'
        "{{ value(v) }}<|close|>argument<|sep|>{%- endfor -%}"
        '{%- else -%}<|open|>argument key="raw" type="object"<|sep|>{{ tc.function.arguments }}'
        "<|close|>argument<|sep|>{%- endif -%}"
        "<|close|>call<|sep|>{%- endfor -%}<|close|>tools<|sep|>{%- endif -%}",
    ).replace(
        "@PROMPT@",
        "<|open|>think<|sep|>{%- if off -%}<|close|>think<|sep|>{%- endif -%}",
    )
)

# ChatML (Qwen3 and Hermes): a system turn that declares tools as JSON lines in <tools>; results
# come back in one user turn, each in <tool_response>
_CHATML = (
    "{%- set first = messages[0] if messages else {} -%}"
    "{%- if tools -%}<|im_start|>system¶"
    "{%- if first.role == 'system' -%}{{ text(first.content) }}¶¶{%- endif -%}"
    "# Tools¶¶@TOOLS_INTRO@¶<tools>{%- for t in tools -%}¶{{ t | tojson }}{%- endfor -%}¶</tools><|im_end|>¶"
    "{%- elif first.role == 'system' -%}<|im_start|>system¶{{ text(first.content) }}<|im_end|>¶{%- endif -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'user' or (m.role == 'system' and not loop.first) -%}"
    "<|im_start|>{{ m.role }}¶{{ text(m.content) }}<|im_end|>¶"
    "{%- elif m.role == 'assistant' -%}<|im_start|>assistant¶@TURN@<|im_end|>¶"
    "{%- elif m.role == 'tool' -%}"
    "{%- if loop.first or loop.previtem.role != 'tool' -%}<|im_start|>user¶{%- else -%}¶{%- endif -%}"
    "<tool_response>¶{{ text(m.content) }}¶</tool_response>"
    "{%- if loop.last or loop.nextitem.role != 'tool' -%}<|im_end|>¶{%- endif -%}"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_start|>assistant¶@PROMPT@{%- endif -%}"
)

HERMES_TEMPLATE = _render(
    _CHATML.replace(
        "@TOOLS_INTRO@",
        "You may call one or more functions to assist with the user query. Function signatures:",
    )
    .replace(
        "@TURN@",
        "{%- if reasoning(m) -%}<think>¶{{ reasoning(m) }}¶</think>¶¶{%- endif -%}{{ text(m.content) }}"
        "{%- for tc in m.tool_calls or [] -%}{%- if m.content or not loop.first -%}¶{%- endif -%}"
        '<tool_call>¶{"name": "{{ tc.function.name }}", "arguments": {{ args(tc.function.arguments) }}}¶'
        "</tool_call>{%- endfor -%}",
    )
    .replace("@PROMPT@", "{%- if off -%}<think>¶¶</think>¶¶{%- endif -%}"),
    thinking="enable_thinking",
)

QWEN3_CODER_TEMPLATE = _render(
    _CHATML.replace("@TOOLS_INTRO@", "You have access to the following functions:")
    .replace(
        "@TURN@",
        "{{ text(m.content) }}{%- for tc in m.tool_calls or [] -%}¶<tool_call>¶<function={{ tc.function.name }}>¶"
        "{%- if tc.function.arguments is mapping -%}{%- for k, v in tc.function.arguments.items() -%}"
        "<parameter={{ k }}>¶{{ value(v) }}¶</parameter>¶{%- endfor -%}{%- endif -%}"
        "</function>¶</tool_call>{%- endfor -%}",
    )
    .replace("@PROMPT@", ""),
)

_DSB, _DSE = "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<\uff5cend\u2581of\u2581sentence\uff5c>"
_DS_USER, _DS_ASSISTANT = "<\uff5cUser\uff5c>", "<\uff5cAssistant\uff5c>"
_DS_CALLS, _DS_CALLS_END = (
    "<\uff5ctool\u2581calls\u2581begin\uff5c>",
    "<\uff5ctool\u2581calls\u2581end\uff5c>",
)
_DS_CALL, _DS_CALL_END = "<\uff5ctool\u2581call\u2581begin\uff5c>", "<\uff5ctool\u2581call\u2581end\uff5c>"
_DS_SEP = "<\uff5ctool\u2581sep\uff5c>"
_DS_OUT, _DS_OUT_END = "<\uff5ctool\u2581output\u2581begin\uff5c>", "<\uff5ctool\u2581output\u2581end\uff5c>"

# DeepSeek V3.1: the system text first, tools as "### NAME" sections with their parameters; the
# assistant turn opens with </think> (history keeps no reasoning); ``thinking`` prefills <think>
DEEPSEEK_TEMPLATE = _render(
    f"{_DSB}"
    "{%- for m in messages if m.role == 'system' -%}{{ text(m.content) }}{%- endfor -%}"
    "{%- if tools -%}¶¶## Tools¶You have access to the following tools:¶"
    "{%- for t in tools -%}¶### {{ t.function.name }}¶Description: {{ t.function.description or '' }}¶¶"
    "Parameters: {{ (t.function.parameters or {}) | tojson }}¶{%- endfor -%}{%- endif -%}"
    "{%- for m in messages -%}"
    f"{{%- if m.role == 'user' -%}}{_DS_USER}{{{{ text(m.content) }}}}"
    f"{{%- elif m.role == 'assistant' -%}}{_DS_ASSISTANT}</think>{{{{ text(m.content) }}}}"
    f"{{%- if m.tool_calls -%}}{_DS_CALLS}{{%- for tc in m.tool_calls -%}}"
    f"{_DS_CALL}{{{{ tc.function.name }}}}{_DS_SEP}{{{{ args(tc.function.arguments) }}}}{_DS_CALL_END}"
    f"{{%- endfor -%}}{_DS_CALLS_END}{{%- endif -%}}{_DSE}"
    f"{{%- elif m.role == 'tool' -%}}{_DS_OUT}{{{{ text(m.content) }}}}{_DS_OUT_END}"
    "{%- endif -%}{%- endfor -%}"
    f"{{%- if add_generation_prompt -%}}{_DS_ASSISTANT}"
    "{%- if thinking is defined and thinking -%}<think>{%- else -%}</think>{%- endif -%}{%- endif -%}",
)

# GLM-4.5: [gMASK]<sop>, role tokens without closers, tools as JSON lines in <tools>, results after
# <|observation|>; the history keeps each turn's <think> block
GLM_TEMPLATE = _render(
    "[gMASK]<sop>"
    "{%- if tools -%}<|system|>¶# Tools¶¶You may call one or more functions to assist with the user query. "
    "Function signatures:¶<tools>{%- for t in tools -%}¶{{ t | tojson }}{%- endfor -%}¶</tools>{%- endif -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'system' -%}<|system|>¶{{ text(m.content) }}"
    "{%- elif m.role == 'user' -%}<|user|>¶{{ text(m.content) }}{%- if off -%}/nothink{%- endif -%}"
    "{%- elif m.role == 'assistant' -%}<|assistant|>¶<think>{{ reasoning(m) }}</think>¶{{ text(m.content) }}"
    "{%- for tc in m.tool_calls or [] -%}¶<tool_call>{{ tc.function.name }}"
    "{%- if tc.function.arguments is mapping -%}{%- for k, v in tc.function.arguments.items() -%}"
    "<arg_key>{{ k }}</arg_key><arg_value>{{ value(v) }}</arg_value>{%- endfor -%}{%- endif -%}"
    "</tool_call>{%- endfor -%}"
    "{%- elif m.role == 'tool' -%}"
    "{%- if loop.first or loop.previtem.role != 'tool' -%}<|observation|>{%- endif -%}"
    "¶<tool_response>¶{{ text(m.content) }}¶</tool_response>"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>{%- if off -%}¶<think></think>{%- endif -%}{%- endif -%}",
    thinking="enable_thinking",
)

# MiniMax M2: ]~b]ROLE turns closed by [e~[, tools as <tool> JSON in the system turn, results in
# <response>; the generation prompt prefills <think>
MINIMAX_TEMPLATE = _render(
    "]~!b[]~b]system¶{%- for m in messages if m.role == 'system' -%}{{ text(m.content) }}{%- endfor -%}"
    "{%- if tools -%}¶¶# Tools¶You may call one or more tools to assist with the user query.¶<tools>¶"
    "{%- for t in tools -%}<tool>{{ (t.function or t) | tojson }}</tool>¶{%- endfor -%}</tools>{%- endif -%}"
    "[e~[¶"
    "{%- for m in messages -%}"
    "{%- if m.role == 'user' -%}]~b]user¶{{ text(m.content) }}[e~[¶"
    "{%- elif m.role == 'assistant' -%}]~b]ai¶"
    "{%- if reasoning(m) -%}<think>¶{{ reasoning(m) }}¶</think>¶¶{%- endif -%}{{ text(m.content) }}"
    "{%- if m.tool_calls -%}¶<minimax:tool_call>¶{%- for tc in m.tool_calls -%}"
    '<invoke name="{{ tc.function.name }}">¶'
    "{%- if tc.function.arguments is mapping -%}{%- for k, v in tc.function.arguments.items() -%}"
    '<parameter name="{{ k }}">{{ value(v) }}</parameter>¶{%- endfor -%}{%- endif -%}'
    "</invoke>¶{%- endfor -%}</minimax:tool_call>{%- endif -%}[e~[¶"
    "{%- elif m.role == 'tool' -%}"
    "{%- if loop.first or loop.previtem.role != 'tool' -%}]~b]tool{%- endif -%}"
    "¶<response>{{ text(m.content) }}</response>"
    "{%- if loop.last or loop.nextitem.role != 'tool' -%}[e~[¶{%- endif -%}"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}]~b]ai¶<think>¶{%- endif -%}",
)
