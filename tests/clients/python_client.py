"""The official Python MCP SDK (PyPI `mcp`) as a client of `vak serve` over stdio.

Runs in both protocol eras (the 2025-11-25 `initialize` handshake, and the stateless 2026-07-28
revision), lists the tools, calls every bundled tool with valid arguments and checks the
structured results, then checks that bad arguments come back as `isError` with the schema's
pointers and an unknown tool as a JSON-RPC error. Last, a tool the policy marks `ask = true`:
the client answers vak's elicitation (approve once, then decline), and a stateless request, which
has no way to be asked, is refused as `approval_required`.

    python python_client.py VAK_BINARY

Exit status 0 when every check passed; the last line is `N passed, M failed`.
"""

import http.server
import os
import sys
import tempfile
import threading

import anyio
from mcp import Client, StdioServerParameters, types

CHECKS = {"passed": 0, "failed": 0}


def check(what, ok, detail=""):
    if ok:
        CHECKS["passed"] += 1
        print(f"ok    {what}")
    else:
        CHECKS["failed"] += 1
        print(f"FAIL  {what} {detail}")


def text_of(result):
    return "\n".join(getattr(c, "text", "") for c in result.content)


class Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"<html><title>vak</title><body>The sandbox keeps receipts.</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def setup(tmp):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    root = os.path.join(tmp, "project")
    os.makedirs(root)
    policy = os.path.join(tmp, "policy.toml")
    with open(policy, "w") as f:
        f.write(
            f"""
[tools.clock]
capabilities.clock = {{ zones = ["*"] }}

[tools.stats]

[tools.compare]

[tools.research]
capabilities.http = {{ origins = ["http://127.0.0.1:{port}"], allow_addresses = ["127.0.0.1"] }}

[tools.replace]
capabilities.workspace = {{ roots = [{{ name = "project", path = "{root}", mode = "read-write" }}] }}
"""
        )
    return policy, port


def figure(name, value):
    return {
        "name": name,
        "period": {"start": "2026-11-01", "end": "2026-11-30"},
        "unit": "ms",
        "basis": "p99",
        "value": value,
    }


async def session(vak, policy, state, port, mode):
    params = StdioServerParameters(
        command=vak,
        args=["--policy", policy, "--state-dir", state, "serve"],
        env={k: v for k, v in os.environ.items() if k.startswith(("VAK_", "PATH", "HOME"))},
    )
    async with Client(params, mode=mode) as c:
        era = f"[{mode}]"
        check(f"{era} negotiated {c.protocol_version}", c.protocol_version in ("2025-11-25", "2026-07-28"))
        tools = {t.name: t for t in (await c.list_tools()).tools}
        check(f"{era} tools/list", set(tools) == {"clock", "compare", "replace", "research", "stats"}, sorted(tools))
        check(f"{era} clock is read-only", tools["clock"].annotations.read_only_hint is True)
        check(f"{era} replace is destructive", tools["replace"].annotations.destructive_hint is True)
        check(f"{era} research is open-world", tools["research"].annotations.open_world_hint is True)
        check(f"{era} clock has an output schema", tools["clock"].output_schema is not None)

        calls = {
            "clock": {"zone": "Europe/Paris"},
            "stats": {"values": [4, 8, 15, 16, 23, 42]},
            "compare": {"baseline": figure("latency", 120.0), "current": figure("latency", 96.0)},
            "research": {"urls": [f"http://127.0.0.1:{port}/page"]},
            "replace": {"root": "project", "path": "notes.txt", "find": "red", "replace": "blue"},
        }
        for name, args in calls.items():
            r = await c.call_tool(name, args)
            meta = r.meta or {}
            check(f"{era} {name} completes", r.is_error is False, text_of(r)[:300])
            check(f"{era} {name} has structured content", isinstance(r.structured_content, dict))
            check(f"{era} {name} has a call id", str(meta.get("dev.vak/call_id", "")).startswith("call_"), meta)
            check(f"{era} {name} has a document", bool(text_of(r)))
            if name in ("clock", "research", "replace"):
                check(f"{era} {name} has receipts", len(meta.get("dev.vak/receipts", [])) > 0)
        paris = await c.call_tool("clock", {"zone": "Europe/Paris"})
        check(f"{era} clock payload names its zone", paris.structured_content.get("zone") == "Europe/Paris")

        bad = await c.call_tool("clock", {"zone": 42})
        check(f"{era} bad arguments are isError", bad.is_error is True)
        check(f"{era} the violation names its pointer", "/zone" in text_of(bad), text_of(bad))
        missing = await c.call_tool("stats", {})
        check(f"{era} a missing argument is isError", missing.is_error is True)
        try:
            await c.call_tool("no_such_tool", {})
            check(f"{era} an unknown tool is a protocol error", False, "no error raised")
        except Exception as e:  # the SDK raises its MCPError for a JSON-RPC error
            check(f"{era} an unknown tool is a protocol error", "no_such_tool" in str(e), repr(e))


async def approvals(vak, tmp):
    policy = os.path.join(tmp, "approve.toml")
    with open(policy, "w") as f:
        f.write("[tools.stats]\nask = true\n")
    params = StdioServerParameters(
        command=vak,
        args=["--policy", policy, "--state-dir", os.path.join(tmp, "state-approve"), "serve"],
        env={k: v for k, v in os.environ.items() if k.startswith(("VAK_", "PATH", "HOME"))},
    )
    answers = ["accept", "decline"]
    asked = []

    async def on_elicit(context, request):
        asked.append(getattr(request, "message", ""))
        action = answers.pop(0) if answers else "decline"
        if action == "accept":
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action="decline")

    args = {"values": [1, 2, 3]}
    async with Client(params, mode="legacy", elicitation_callback=on_elicit) as c:
        yes = await c.call_tool("stats", args)
        check("[approval] approved through elicitation completes", yes.is_error is False, text_of(yes)[:300])
        check("[approval] the person was asked once", len(asked) == 1, asked)
        check("[approval] the question names the tool and arguments", "`stats`" in asked[0] and '"values"' in asked[0], asked[:1])
        no = await c.call_tool("stats", args)
        check("[approval] the same call is asked again", len(asked) == 2, asked)
        check("[approval] declined is refused at permission", no.is_error is True and "approval_denied" in text_of(no) and "permission" in text_of(no), text_of(no)[:300])
    # A stateless client that does not declare elicitation cannot be asked: -32021 names it (with
    # elicitation, the approval is an input-required round: tests/e2e/mcp_rounds/approvals.rs).
    async with Client(params, mode="2026-07-28") as c:
        name = "[approval] a stateless client without elicitation gets -32021 naming it"
        try:
            r = await c.call_tool("stats", args)
            check(name, False, text_of(r)[:300])
        except Exception as e:  # the SDK raises its MCPError for a JSON-RPC error
            code, data = getattr(e, "code", None), getattr(e, "data", None) or {}
            check(name, code == -32021 and "elicitation" in data.get("requiredCapabilities", {}), repr(e))


async def main():
    vak = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        policy, port = setup(tmp)
        for mode in ("legacy", "2026-07-28"):
            with open(os.path.join(tmp, "project", "notes.txt"), "w") as f:
                f.write("the colour is red\n")
            state = os.path.join(tmp, f"state-{mode}")
            await session(vak, policy, state, port, mode)
        await approvals(vak, tmp)
    print(f"{CHECKS['passed']} passed, {CHECKS['failed']} failed")
    sys.exit(1 if CHECKS["failed"] else 0)


anyio.run(main)
