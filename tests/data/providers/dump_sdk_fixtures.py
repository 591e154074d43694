"""Write the provider documents under tests/data/providers/ the way each provider's official
Python SDK prints them: each response is written from the provider's documented shape, read
into the SDK's own type and dumped as a user of that SDK would dump it (`model_dump_json()`,
Gemini's `to_json_dict()`). The REST shapes are kept beside them as the APIs send them.

Run with the SDKs installed (tests/clients/install.sh puts them in target/provider-sdks/venv):
    target/provider-sdks/venv/bin/python tests/data/providers/dump_sdk_fixtures.py
"""

import json
import pathlib

import anthropic.types
import openai.types.chat
import openai.types.responses
from google.genai import types as gemini

HERE = pathlib.Path(__file__).parent


def write(name, text):
    (HERE / name).write_text(text if text.endswith("\n") else text + "\n")
    print("wrote", name)


def rest(name, doc):
    write(name, json.dumps(doc, indent=2))


# OpenAI Chat Completions: two parallel calls, and a text-only answer (no `tool_calls` sent;
# the SDK dumps `"tool_calls": null`).
def chat(message, finish):
    return {
        "id": "chatcmpl-Bq1", "object": "chat.completion", "created": 1767225600,
        "model": "gpt-4.1-2025-04-14", "system_fingerprint": "fp_9d7f8b", "service_tier": "default",
        "choices": [{"index": 0, "finish_reason": finish, "logprobs": None, "message": message}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 40, "total_tokens": 160},
    }


chat_calls = chat({
    "role": "assistant", "content": None, "refusal": None, "annotations": [],
    "tool_calls": [
        {"id": "call_Xq1", "type": "function",
         "function": {"name": "clock", "arguments": "{\"zone\":\"Europe/Paris\"}"}},
        {"id": "call_Xq2", "type": "function",
         "function": {"name": "shapes", "arguments": "{\"times\":3,\"word\":\"hi\"}"}},
    ],
}, "tool_calls")
chat_text = chat({"role": "assistant", "content": "It is a quarter past ten in Paris.",
                  "refusal": None, "annotations": []}, "stop")
rest("openai-chat-rest-parallel.json", chat_calls)
write("openai-chat-sdk-parallel.json",
      openai.types.chat.ChatCompletion.model_validate(chat_calls).model_dump_json(indent=2))
write("openai-chat-sdk-text-only.json",
      openai.types.chat.ChatCompletion.model_validate(chat_text).model_dump_json(indent=2))


# OpenAI Responses: a reasoning item, then two function calls; and a text-only answer.
def response(output):
    return {
        "id": "resp_67c1", "object": "response", "created_at": 1767225600, "status": "completed",
        "model": "gpt-4.1-2025-04-14", "output": output, "parallel_tool_calls": True,
        "tool_choice": "auto", "tools": [], "error": None, "incomplete_details": None,
        "instructions": None, "metadata": {}, "temperature": 1.0, "top_p": 1.0,
        "usage": {"input_tokens": 120, "output_tokens": 40, "total_tokens": 160,
                  "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                  "output_tokens_details": {"reasoning_tokens": 0}},
    }


responses_calls = response([
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "function_call", "id": "fc_1", "call_id": "call_Rq1", "name": "clock",
     "arguments": "{\"zone\":\"UTC\"}", "status": "completed"},
    {"type": "function_call", "id": "fc_2", "call_id": "call_Rq2", "name": "shapes",
     "arguments": "{\"times\":2,\"word\":\"ok\"}", "status": "completed"},
])
responses_text = response([
    {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "Nothing to call.", "annotations": []}]},
])
write("openai-responses-sdk-parallel.json",
      openai.types.responses.Response.model_validate(responses_calls).model_dump_json(indent=2))
write("openai-responses-sdk-text-only.json",
      openai.types.responses.Response.model_validate(responses_text).model_dump_json(indent=2))


# Anthropic Messages: text, then two tool_use blocks; and a text-only answer.
def message(content, stop):
    return {
        "id": "msg_01A", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": content, "stop_reason": stop, "stop_sequence": None,
        "usage": {"input_tokens": 120, "output_tokens": 40},
    }


anthropic_calls = message([
    {"type": "text", "text": "Let me check both."},
    {"type": "tool_use", "id": "toolu_01", "name": "clock", "input": {"zone": "Asia/Tokyo"}},
    {"type": "tool_use", "id": "toolu_02", "name": "shapes", "input": {"times": 1, "word": "yo"}},
], "tool_use")
anthropic_text = message([{"type": "text", "text": "No tool needed."}], "end_turn")
write("anthropic-sdk-parallel.json",
      anthropic.types.Message.model_validate(anthropic_calls).model_dump_json(indent=2))
write("anthropic-sdk-text-only.json",
      anthropic.types.Message.model_validate(anthropic_text).model_dump_json(indent=2))


# Gemini: two parallel function calls with an integral float for an integer argument, as the
# REST API sends them (camelCase) and as the google-genai SDK dumps them (snake_case); and a
# text-only answer.
def candidates(parts, finish="STOP"):
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish,
                        "index": 0}],
        "usageMetadata": {"promptTokenCount": 120, "candidatesTokenCount": 40,
                          "totalTokenCount": 160},
        "modelVersion": "gemini-2.5-flash", "responseId": "r1",
    }


gemini_calls = candidates([
    {"functionCall": {"name": "clock", "args": {"zone": "America/New_York"}}},
    {"functionCall": {"name": "shapes", "args": {"times": 3.0, "word": "hi"}}},
])
gemini_text = candidates([{"text": "It is morning in New York."}])
rest("gemini-rest-parallel.json", gemini_calls)
calls = gemini.GenerateContentResponse.model_validate(gemini_calls)
write("gemini-sdk-parallel.json", calls.model_dump_json(indent=2))
rest("gemini-sdk-parallel-json-dict.json", calls.to_json_dict())
write("gemini-sdk-text-only.json",
      gemini.GenerateContentResponse.model_validate(gemini_text).model_dump_json(indent=2))
