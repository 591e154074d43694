"""The official Python MCP SDK (PyPI `mcp`) driving vak's 2026-07-28 input-required rounds.

A stateless client (`mode="2026-07-28"`, no handshake) calls an elicitation tool and a sampling
tool; vak answers each with an input-required result, the SDK answers the form and the
completion through its `elicitation_callback` and `sampling_callback` (canned answers), and sends
the call again with the answers and the opaque `requestState`.

    python python_rounds.py http URL_A URL_B
    python python_rounds.py stdio VAK [VAK_ARGS...]

Over HTTP the rounds alternate between two nodes (round 1 to A, round 2 to B, round 3 to A...).
The SDK's `Client` binds one URL for its life, so there is one client per node, and the SDK's
own round driver (`run_input_required_driver`, the loop `Client.call_tool` runs) is given a
`retry` that sends each round through the next node's session: the `requestState` is handed
across as the SDK hands it between rounds, byte for byte. Over stdio, one `VAK VAK_ARGS serve`
takes headerless 2026-07-28 requests, driven the same way, then once by `Client.call_tool`.

Prints a line `round TOOL N NODE CALL_ID` for each round (NODE is `a`/`b`, or `stdio`) and a
check per result; exit status 0 when every check passed; the last line is `N passed, M failed`.
"""

import os
import sys

import anyio
from mcp import Client, StdioServerParameters, types
from mcp.client._input_required import run_input_required_driver
from mcp.client.context import ClientRequestContext

CHECKS = {"passed": 0, "failed": 0}
VERSION = "2026-07-28"


def check(what, ok, detail=""):
    if ok:
        CHECKS["passed"] += 1
        print(f"ok    {what}")
    else:
        CHECKS["failed"] += 1
        print(f"FAIL  {what} {detail}")


def text_of(result):
    return "\n".join(getattr(c, "text", "") for c in result.content)


class Answers:
    """The SDK callbacks: a canned form answer and a canned completion, and what was asked."""

    def __init__(self):
        self.asked = []

    async def elicit(self, context, params):
        self.asked.append(("elicitation", getattr(params, "message", "")))
        return types.ElicitResult(action="accept", content={"username": "ada", "email": "ada@example.org"})

    async def sample(self, context, params):
        prompt = params.messages[0].content
        self.asked.append(("sampling", getattr(prompt, "text", "")))
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="Paris"),
            model="canned-1",
            stop_reason="endTurn",
        )

    def client(self, server):
        return Client(
            server,
            mode=VERSION,
            elicitation_callback=self.elicit,
            sampling_callback=self.sample,
        )


def call_id(result):
    return str((result.meta or {}).get("dev.vak/call_id", "-"))


CALLS = [
    ("test_elicitation", {"message": "Who are you?"}),
    ("test_sampling", {"prompt": "Capital of France?"}),
]


def check_results(where, results, answers):
    elicited, sampled = results["test_elicitation"], results["test_sampling"]
    check(f"[{where}] the form was asked once", [a for a in answers.asked if a[0] == "elicitation"] == [("elicitation", "Who are you?")], answers.asked)
    check(f"[{where}] the completion was asked once", [a for a in answers.asked if a[0] == "sampling"] == [("sampling", "Capital of France?")], answers.asked)
    check(f"[{where}] the elicitation tool completes", elicited.is_error is False, text_of(elicited)[:300])
    text = text_of(elicited)
    check(f"[{where}] it read the form's answer", "action: accept" in text and "ada@example.org" in text, text[:300])
    check(f"[{where}] the sampling tool completes", sampled.is_error is False, text_of(sampled)[:300])
    check(f"[{where}] it read the completion", text_of(sampled) == "LLM response: Paris", text_of(sampled)[:300])


async def rounds(where, nodes, answers):
    """Each tool called through input-required rounds, round i sent to `nodes[(i - 1) % len]`."""
    results = {}
    for name, args in CALLS:
        legs = []

        async def send(node, responses, state, name=name, args=args):
            label, client = node
            result = await client.session.call_tool(
                name, args, input_responses=responses, request_state=state, allow_input_required=True
            )
            legs.append(label)
            print(f"round {name} {len(legs)} {label} {call_id(result)}")
            return result

        async def retry(responses, state):
            return await send(nodes[len(legs) % len(nodes)], responses, state)

        async def dispatch(key, request):
            # The SDK's callback table, as `Client.call_tool` dispatches an input request.
            session = nodes[0][1].session
            meta = request.params.meta if request.params else None
            ctx = ClientRequestContext(session=session, request_id=key, meta=meta)
            return await session.dispatch_input_request(ctx, request)

        first = await send(nodes[0], None, None)
        check(f"[{where}] {name} round 1 is input-required", isinstance(first, types.InputRequiredResult), repr(first)[:300])
        results[name] = await run_input_required_driver(first, dispatch=dispatch, retry=retry)
        expected = [nodes[i % len(nodes)][0] for i in range(2)]
        check(f"[{where}] {name} took two rounds, on {' then '.join(expected)}", legs == expected, legs)
    check_results(where, results, answers)


async def over_http(url_a, url_b):
    answers = Answers()
    async with answers.client(url_a) as a, answers.client(url_b) as b:
        await rounds("http", [("a", a), ("b", b)], answers)


async def over_stdio(vak, vak_args):
    answers = Answers()
    params = StdioServerParameters(
        command=vak,
        args=[*vak_args, "serve"],
        env={k: v for k, v in os.environ.items() if k.startswith(("VAK_", "PATH", "HOME"))},
    )
    async with answers.client(params) as c:
        check(f"[stdio] speaks {VERSION} without a handshake", c.protocol_version == VERSION, c.protocol_version)
        await rounds("stdio", [("stdio", c)], answers)
        # `Client.call_tool` runs the same rounds itself, with the same callbacks.
        again = await c.call_tool("test_sampling", {"prompt": "Capital of France?"})
        check("[stdio] Client.call_tool drives the rounds itself", text_of(again) == "LLM response: Paris", text_of(again)[:300])


async def main():
    if len(sys.argv) == 4 and sys.argv[1] == "http":
        await over_http(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 3 and sys.argv[1] == "stdio":
        await over_stdio(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(__doc__)
    print(f"{CHECKS['passed']} passed, {CHECKS['failed']} failed")
    sys.exit(1 if CHECKS["failed"] else 0)


anyio.run(main)
