"""/v1/responses: vLLM's Responses server getting its own event stream or the parser's output wrong, and
the legal shapes of that stream. One tap in front of vLLM unless a case says otherwise.
"""

from __future__ import annotations

from typing import Any

from wirecheck.contracts import ExchangeError

from .case import Case, case
from .wire import (
    RESPONSES,
    Responses,
    Wire,
    error_body,
    exchange,
    flat_tool,
    function_tool,
)

WEATHER = flat_tool(
    function_tool(
        "get_current_weather",
        "Current weather for a location",
        {"location": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        ["location"],
    )
)
TRANSLATE = flat_tool(
    function_tool(
        "translate",
        "Translate a text",
        {"text": {"type": "string"}, "target": {"type": "string"}},
        ["text", "target"],
    )
)
OPENAI_RESPONSES_STREAMING = "https://platform.openai.com/docs/api-reference/responses-streaming"
VLLM_RESPONSES = (
    "https://github.com/vllm-project/vllm/blob/main/vllm/entrypoints/openai/responses/protocol.py"
)
VLLM_RESPONSES_EVENTS = (
    "https://github.com/vllm-project/vllm/blob/main/vllm/entrypoints/openai/responses/streaming_events.py"
)


def _req(model: str, prompt: str, **kw: Any) -> dict[str, Any]:
    return {"model": model, "input": prompt, **kw}


def cases() -> list[Case]:
    out: list[Case] = []

    # https://github.com/vllm-project/vllm/issues/29725 and https://github.com/vllm-project/vllm/pull/36445:
    # for non-harmony models the Responses stream ran no tool parser: a Qwen3 call arrived as
    # response.output_text.delta events carrying the <tool_call> markup.
    w = Wire(
        "responses-nonharmony-call-streamed-as-output-text", "Qwen/Qwen3-Coder-30B-A3B-Instruct", "0.11.2"
    )
    text = (
        "\n\n<tool_call>\n<function=get_current_weather>\n<parameter=location>\nBoston, MA\n</parameter>\n"
        "<parameter=unit>\nfahrenheit\n</parameter>\n</function>\n</tool_call>"
    )
    req = _req(
        w.model, "What's the weather like in Boston today, in fahrenheit?", tools=[WEATHER], stream=True
    )
    r = Responses(w, req).start().text(*[text[i : i + 9] for i in range(0, len(text), 9)]).completed(118, 41)
    out.append(
        case(
            w.case,
            sources=(
                "https://github.com/vllm-project/vllm/issues/29725",
                "https://github.com/vllm-project/vllm/pull/36445",
            ),
            api="responses",
            exchanges=[exchange(w, RESPONSES, req, r.frames())],
            party="parser",
            rules=("tool-markup-in-content",),
            what="Responses streaming leaves a Qwen3 call as output_text",
            direct=True,
        )
    )

    # https://github.com/vllm-project/vllm/pull/47916: with tool_choice=required the streamed
    # function call's call_id (output_item.added / .done) differs from the one in response.completed.
    w = Wire("responses-streamed-call-id-differs-in-completed", "Qwen2.5-0.5B-Instruct", "0.26.0")
    req = _req(
        w.model,
        "Call get_weather for Berlin. Do not answer directly.",
        tools=[{**WEATHER, "name": "get_weather", "strict": True}],
        tool_choice="required",
        stream=True,
        temperature=0,
        max_output_tokens=64,
    )
    r = (
        Responses(w, req)
        .start()
        .call("get_weather", '{"location": ', '"Berlin"}', completed_call_id=w.tool_id(9))
        .completed(96, 14)
    )
    out.append(
        case(
            w.case,
            sources="https://github.com/vllm-project/vllm/pull/47916",
            api="responses",
            exchanges=[exchange(w, RESPONSES, req, r.frames())],
            party="engine",
            rules=("api-stream-disagrees",),
            what="the completed response names the call by another call_id than the stream",
            direct=True,
        )
    )

    # https://github.com/vllm-project/vllm/pull/56285 (Codex conformance, GLM-5.3-Flash, glm47/glm45
    # parsers): response.completed was rebuilt by re-parsing, so its items carry fresh ids while the
    # streamed output_item.done items had bare-uuid ids; function_call_arguments.done was not always sent.
    w = Wire("responses-completed-reparsed-fresh-item-ids", "zai-org/GLM-5.3-Flash", "0.30.0")
    req = _req(w.model, "Translate 'good morning' to Italian with the tool.", tools=[TRANSLATE], stream=True)
    r = Responses(w, req).start().reasoning("Use the translate tool.")
    bare = w.hex("bare-fc")
    r.raw(
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {
                "arguments": "",
                "call_id": w.tool_id(0),
                "name": "translate",
                "type": "function_call",
                "id": bare,
                "namespace": None,
                "status": "in_progress",
            },
        }
    )
    for piece in ('{"text": "good morning", ', '"target": "it"}'):
        r.raw(
            {
                "type": "response.function_call_arguments.delta",
                "delta": piece,
                "item_id": bare,
                "output_index": 1,
            }
        )
    done_item = {
        "arguments": '{"text": "good morning", "target": "it"}',
        "call_id": w.tool_id(0),
        "name": "translate",
        "type": "function_call",
        "id": bare,
        "namespace": None,
        "status": "completed",
    }
    r.raw({"type": "response.output_item.done", "output_index": 1, "item": done_item})
    fresh = [
        dict(r.output[0], id=f"rs_{w.hex('fresh-rs')}"),
        dict(done_item, id=f"fc_{w.hex('fresh-fc')}", call_id=w.tool_id(1)),
    ]
    r.completed(88, 30, 6, output=fresh)
    out.append(
        case(
            w.case,
            sources="https://github.com/vllm-project/vllm/pull/56285",
            api="responses",
            exchanges=[exchange(w, RESPONSES, req, r.frames())],
            party="engine",
            rules=("api-stream-*",),
            what="the completed response re-parses the output: item ids and call_id change",
            direct=True,
        )
    )

    # https://github.com/vllm-project/vllm/issues/39649 (MiniMax-M2.7 AWQ, minimax_m2 tool parser,
    # v0.19.1rc1.dev379): on /responses one argument delta arrives, then the parser raises inside the
    # ASGI stream and the connection closes without response.completed.
    w = Wire(
        "responses-minimax-parser-exception-cuts-stream", "cyankiwi/Minimax-M2.7-AWQ-4bit", "0.19.1rc1.dev379"
    )
    req = _req(
        w.model, "Translate 'see you tomorrow' into German using the tool.", tools=[TRANSLATE], stream=True
    )
    r = Responses(w, req).start().reasoning("I should translate it with the tool.")
    fid = f"fc_{w.hex('fc1')}"
    r.raw(
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {
                "arguments": "",
                "call_id": w.tool_id(0),
                "name": "translate",
                "type": "function_call",
                "id": fid,
                "namespace": None,
                "status": "in_progress",
            },
        }
    )
    r.raw(
        {
            "type": "response.function_call_arguments.delta",
            "delta": '{"text": "see you tomorrow", "target": "de"}',
            "item_id": fid,
            "output_index": 1,
        }
    )
    frames = r.frames()
    out.append(
        case(
            w.case,
            sources="https://github.com/vllm-project/vllm/issues/39649",
            api="responses",
            exchanges=[
                exchange(
                    w,
                    RESPONSES,
                    req,
                    frames,
                    error=ExchangeError(
                        "upstream_reset",
                        "peer closed connection without sending complete message body",
                        180.0 + 24.0 * len(frames),
                    ),
                )
            ],
            party="parser",
            rules=("transport-error", "api-stream-order"),
            what="the minimax_m2 parser raises mid-stream on /v1/responses; the stream is cut",
            direct=True,
        )
    )

    # https://github.com/vllm-project/vllm/issues/43395 (vLLM v0.21.0, --reasoning-parser gemma4): chat
    # completions carry reasoning, /v1/responses none: reasoning_tokens 0 and no reasoning item, even
    # with reasoning effort high.
    w = Wire("responses-gemma4-reasoning-item-missing", "google/gemma-4-26B-A4B-it", "0.21.0")
    req = _req(w.model, "Which is larger, 2^10 or 10^3? Think it through.", reasoning={"effort": "high"})
    r = Responses(w, req).text("2^10 = 1024 is larger than 10^3 = 1000.")
    out.append(
        case(
            w.case,
            sources="https://github.com/vllm-project/vllm/issues/43395",
            api="responses",
            exchanges=[exchange(w, RESPONSES, req, r.body(41, 187, 0))],
            party="parser",
            rules=("reasoning-missing",),
            what="Responses drops the gemma4 reasoning parser's output",
            direct=True,
        )
    )

    # vLLM rejects tool_choice "required" without tools (ResponsesRequest.check_tool_usage).
    w = Wire("responses-required-tool-choice-without-tools", "openai/gpt-oss-120b", "0.32.0")
    req = _req(w.model, "List three prime numbers.", tool_choice="required")
    msg = "Tool choice 'required' must be specified with 'tools' parameter. (parameter=tool_choice)"
    out.append(
        case(
            w.case,
            sources=VLLM_RESPONSES,
            api="responses",
            exchanges=[
                exchange(
                    w, RESPONSES, req, error_body(msg, 400, "BadRequestError", "tool_choice"), status=400
                )
            ],
            party="caller",
            rules=("http-client-error", "request-empty-tools"),
            what="tool_choice required without tools is refused",
            direct=True,
        )
    )

    # https://github.com/vllm-project/vllm/issues/54224: input_item_parsing backfills a synthetic id only
    # when the key is absent; an explicit "id": null on an assistant message (which OpenAI accepts) fails
    # validation and the client gets a 400 with a long validation dump.
    w = Wire("responses-explicit-null-item-id-refused", "Qwen/Qwen3-32B", "0.27.0")
    req = {
        "model": w.model,
        "input": [
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "Be brief."}],
            },
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Name a river in Spain."}],
            },
            {
                "type": "message",
                "role": "assistant",
                "id": None,
                "status": "completed",
                "content": [{"type": "output_text", "text": "The Ebro.", "annotations": []}],
            },
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Another one?"}]},
        ],
    }
    msg = (
        "2 validation errors for ResponsesRequest\ninput.list[...].3.ResponseOutputMessage.id\n  Input should be "
        "a valid string [type=string_type, input_value=None, input_type=NoneType]"
    )
    out.append(
        case(
            w.case,
            sources=(
                "https://github.com/vllm-project/vllm/issues/54224",
                "https://github.com/UKGovernmentBEIS/inspect_ai/pull/5109",
            ),
            api="responses",
            exchanges=[exchange(w, RESPONSES, req, error_body(msg, 400, "BadRequestError"), status=400)],
            party="engine",
            rules=("http-client-error",),
            what="vLLM refuses an explicit null id that OpenAI accepts",
            direct=True,
        )
    )

    # --- legal shapes -------------------------------------------------------------------------------

    # an empty tools list is legal on /v1/responses: vLLM sets tool_choice to none and answers
    w = Wire("legal-responses-empty-tools-list", "openai/gpt-oss-120b", "0.32.0")
    req = _req(w.model, "Suggest a name for a grey cat.", tools=[])
    r = Responses(w, {**req, "tool_choice": "none"}).reasoning("A short name.").text("Ash.")
    out.append(
        _legal(
            w,
            VLLM_RESPONSES,
            "empty tools on /v1/responses: 200 and an answer",
            [exchange(w, RESPONSES, req, r.body(19, 12, 4))],
        )
    )

    w = Wire("legal-responses-stream-empty-tools", "openai/gpt-oss-20b", "0.32.0")
    req = _req(w.model, "Suggest a name for a ginger dog.", tools=[], stream=True)
    r = (
        Responses(w, {**req, "tool_choice": "none"})
        .start()
        .reasoning("Pick one.")
        .text("Rusty.")
        .completed(20, 9, 3)
    )
    out.append(
        _legal(
            w,
            VLLM_RESPONSES,
            "empty tools on a streamed Responses request",
            [exchange(w, RESPONSES, req, r.frames())],
        )
    )

    # arguments may arrive only in function_call_arguments.done, with no delta before it
    w = Wire("legal-responses-arguments-only-in-done", "moonshotai/Kimi-K3", "0.32.0")
    req = _req(w.model, "Translate 'thank you' to Japanese.", tools=[TRANSLATE], stream=True)
    r = (
        Responses(w, req)
        .start()
        .reasoning("Use the tool.")
        .call("translate", done_args='{"text": "thank you", "target": "ja"}')
        .completed(77, 25, 4)
    )
    out.append(
        _legal(
            w,
            OPENAI_RESPONSES_STREAMING,
            "a call whose arguments come only in .done",
            [exchange(w, RESPONSES, req, r.frames())],
        )
    )

    # an event type the checker does not know is forward-compatible, never an error
    w = Wire("legal-responses-unknown-event-type", "moonshotai/Kimi-K2-Thinking", "0.32.0")
    req = _req(w.model, "Name a fjord in Norway.", stream=True)
    r = Responses(w, req).start()
    r.raw(
        {
            "type": "response.reasoning_summary_part.added",
            "item_id": f"rs_{w.hex('x')}",
            "output_index": 0,
            "summary_index": 0,
            "part": {"type": "summary_text", "text": ""},
        }
    )
    r.text("Geirangerfjord.").completed(15, 6)
    out.append(
        _legal(
            w,
            OPENAI_RESPONSES_STREAMING,
            "an unknown event type is skipped",
            [exchange(w, RESPONSES, req, r.frames())],
        )
    )

    w = Wire("legal-responses-k2-reasoning-then-call-stream", "moonshotai/Kimi-K2-Thinking", "0.32.0", tp=8)
    req = _req(w.model, "Is it sunny in Lima?", tools=[WEATHER], stream=True)
    r = (
        Responses(w, req)
        .start()
        .reasoning("Check ", "Lima.")
        .call("get_current_weather", '{"location": ', '"Lima"}', call_id="functions.get_current_weather:0")
        .completed(90, 22, 3)
    )
    out.append(
        _legal(
            w,
            VLLM_RESPONSES_EVENTS,
            "K2 reasoning item, then a call with the model's id",
            [exchange(w, RESPONSES, req, r.frames())],
        )
    )

    w = Wire("legal-responses-reasoning-then-text-stream", "Qwen/Qwen3-32B", "0.32.0")
    req = _req(w.model, "Give me a synonym for 'quick'.", stream=True)
    r = Responses(w, req).start().reasoning("Synonyms: fast, rapid.").text("Rapid", ".").completed(18, 15, 7)
    out.append(
        _legal(
            w,
            VLLM_RESPONSES_EVENTS,
            "reasoning then text, streamed",
            [exchange(w, RESPONSES, req, r.frames())],
        )
    )

    w = Wire("legal-responses-nonstream-function-call", "moonshotai/Kimi-K2-Instruct-0905", "0.32.0")
    req = _req(w.model, "Weather in Reykjavik in celsius?", tools=[WEATHER])
    r = Responses(w, req).call(
        "get_current_weather",
        '{"location": "Reykjavik", "unit": "celsius"}',
        call_id="functions.get_current_weather:0",
    )
    out.append(
        _legal(
            w, VLLM_RESPONSES, "a function call, not streamed", [exchange(w, RESPONSES, req, r.body(88, 20))]
        )
    )

    # max_output_tokens reached: status incomplete, reason max_output_tokens
    w = Wire("legal-responses-incomplete-max-output-tokens", "meta-llama/Llama-3.1-8B-Instruct", "0.32.0")
    req = _req(w.model, "Describe the water cycle in detail.", max_output_tokens=12, stream=True)
    r = (
        Responses(w, req)
        .start()
        .text("Water evaporates from oceans,", " rises, cools")
        .completed(16, 12, status="incomplete")
    )
    out.append(
        _legal(
            w,
            OPENAI_RESPONSES_STREAMING,
            "max_output_tokens: response.incomplete",
            [exchange(w, RESPONSES, req, r.frames())],
        )
    )

    w = Wire("legal-responses-text-format-json-schema", "Qwen/Qwen3-8B", "0.32.0")
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
        "required": ["city", "country"],
        "additionalProperties": False,
    }
    req = _req(
        w.model,
        "Where is the Eiffel Tower? JSON.",
        text={"format": {"type": "json_schema", "name": "place", "schema": schema, "strict": True}},
    )
    r = Responses(w, req).text('{"city": "Paris", "country": "France"}')
    out.append(
        _legal(
            w,
            "https://platform.openai.com/docs/guides/structured-outputs",
            "text.format json_schema honoured",
            [exchange(w, RESPONSES, req, r.body(30, 14))],
        )
    )

    # the second turn: the call's output goes back as function_call_output, the model answers
    w = Wire("legal-responses-function-call-output-turn", "moonshotai/Kimi-K2-Instruct-0905", "0.32.0")
    req = {
        "model": w.model,
        "tools": [WEATHER],
        "input": [
            {"role": "user", "content": "Do I need an umbrella in Dublin?"},
            {
                "type": "function_call",
                "call_id": "functions.get_current_weather:0",
                "name": "get_current_weather",
                "arguments": '{"location": "Dublin"}',
            },
            {
                "type": "function_call_output",
                "call_id": "functions.get_current_weather:0",
                "output": '{"rain": "80%"}',
            },
        ],
    }
    r = Responses(w, req).text("Yes, 80% chance of rain in Dublin: take an umbrella.")
    out.append(
        _legal(
            w,
            "https://platform.openai.com/docs/guides/function-calling",
            "function_call_output turn",
            [exchange(w, RESPONSES, req, r.body(140, 16))],
        )
    )

    w = Wire("legal-responses-parallel-calls-false-one-call", "moonshotai/Kimi-K2.5", "0.32.0")
    req = _req(
        w.model,
        "Translate 'yes' to French and to Spanish.",
        tools=[TRANSLATE],
        parallel_tool_calls=False,
        stream=True,
    )
    r = (
        Responses(w, req)
        .start()
        .reasoning("Two translations; one call at a time.")
        .call("translate", '{"text": "yes", "target": "fr"}', call_id="functions.translate:0")
        .completed(95, 40, 9)
    )
    out.append(
        _legal(
            w,
            "https://github.com/vllm-project/vllm/blob/main/vllm/entrypoints/serve/utils/tool_calls_utils.py",
            "parallel_tool_calls false: one call streamed",
            [exchange(w, RESPONSES, req, r.frames())],
        )
    )

    # include_reasoning false: reasoning is generated but not sent
    w = Wire("legal-responses-include-reasoning-false", "Qwen/Qwen3-32B", "0.32.0")
    req = _req(w.model, "Spell 'necessary' backwards.", include_reasoning=False, stream=True)
    r = Responses(w, req).start().text("yrassecen").completed(17, 60, 51)
    out.append(
        _legal(
            w,
            VLLM_RESPONSES,
            "include_reasoning false: no reasoning item",
            [exchange(w, RESPONSES, req, r.frames())],
        )
    )
    return out


def _legal(w: Wire, sources: str | tuple[str, ...], what: str, exchanges: list[Any]) -> Case:
    return case(
        w.case, sources=sources, api="responses", exchanges=exchanges, party=None, what=what, direct=True
    )
