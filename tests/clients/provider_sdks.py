"""Check vak's tool declarations against each provider's official Python SDK types.

Reads on stdin a JSON object {PROVIDER: {"tools": [...]}} as `vak tools --for PROVIDER` prints it
(openai-chat, openai-responses, anthropic, gemini), and checks every entry:
- OpenAI Chat Completions: a ChatCompletionFunctionToolParam (pydantic reads the SDK's TypedDict,
  and no key the type lacks); a strict entry's parameters are already what the SDK's own strict
  pass (`openai.lib._pydantic._ensure_strict_json_schema`) makes of them;
- OpenAI Responses: a FunctionToolParam, the same strict check;
- Anthropic: a ToolParam with `input_schema.type == "object"`;
- Gemini: a google.genai Tool (its models forbid unknown fields), each declaration's
  `parameters_json_schema` read back unchanged.
Prints one line per failure and `N passed, M failed`; exits 1 on any failure.
"""

import copy
import json
import sys
import typing

import pydantic
from anthropic.types import ToolParam
from google.genai import types as gemini
from openai.lib._pydantic import _ensure_strict_json_schema
from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.responses import FunctionToolParam
from openai.types.shared_params import FunctionDefinition

passed = 0
failed = 0


def fail(where, why):
    global failed
    failed += 1
    print(f"FAIL {where}: {why}")


def keys_known(typed_dict, value, where):
    known = set(typing.get_type_hints(typed_dict, include_extras=True))
    extra = set(value) - known
    if extra:
        raise ValueError(f"{where}: keys the SDK type has no field for: {sorted(extra)}")


def strict_fixpoint(parameters, where):
    again = _ensure_strict_json_schema(copy.deepcopy(parameters), path=(), root=copy.deepcopy(parameters))
    if again != parameters:
        raise ValueError(f"{where}: the SDK's strict pass changes the parameters:\n"
                         f"{json.dumps(parameters, sort_keys=True)}\n{json.dumps(again, sort_keys=True)}")


def check_openai_chat(entry, where):
    pydantic.TypeAdapter(ChatCompletionFunctionToolParam).validate_python(entry)
    keys_known(ChatCompletionFunctionToolParam, entry, where)
    keys_known(FunctionDefinition, entry["function"], where + ".function")
    if entry["function"].get("strict"):
        strict_fixpoint(entry["function"]["parameters"], where)


def check_openai_responses(entry, where):
    pydantic.TypeAdapter(FunctionToolParam).validate_python(entry)
    keys_known(FunctionToolParam, entry, where)
    if entry.get("strict"):
        strict_fixpoint(entry["parameters"], where)


def check_anthropic(entry, where):
    pydantic.TypeAdapter(ToolParam).validate_python(entry)
    keys_known(ToolParam, entry, where)
    if entry["input_schema"].get("type") != "object":
        raise ValueError(f"{where}: input_schema.type is not \"object\"")


def check_gemini(entry, where):
    tool = gemini.Tool.model_validate(entry)
    declared = entry["functionDeclarations"]
    if len(tool.function_declarations or []) != len(declared):
        raise ValueError(f"{where}: declarations lost")
    for fd, raw in zip(tool.function_declarations, declared):
        if fd.parameters is not None:
            raise ValueError(f"{where}.{fd.name}: also has OpenAPI `parameters`")
        if fd.parameters_json_schema != raw["parametersJsonSchema"]:
            raise ValueError(f"{where}.{fd.name}: parametersJsonSchema not read back unchanged")


CHECKS = {
    "openai-chat": check_openai_chat,
    "openai-responses": check_openai_responses,
    "anthropic": check_anthropic,
    "gemini": check_gemini,
}

docs = json.load(sys.stdin)
for provider, doc in docs.items():
    check = CHECKS[provider]
    if set(doc) != {"tools"}:
        fail(provider, f"top-level keys {sorted(doc)} instead of tools")
        continue
    for i, entry in enumerate(doc["tools"]):
        name = entry.get("name") or entry.get("function", {}).get("name") or str(i)
        where = f"{provider}:{name}"
        try:
            check(entry, where)
            passed += 1
        except (pydantic.ValidationError, ValueError, TypeError, KeyError) as e:
            fail(where, e)

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
