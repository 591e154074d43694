#!/usr/bin/env bash
# Install the real MCP clients the tests drive `vak serve` with, into target/mcp-clients:
# - the official Python SDK (PyPI `mcp`) in a virtualenv;
# - the official conformance suite (npm `@modelcontextprotocol/conformance`), with Node 26 from
#   npm (`node@26`), since the suite needs a newer Node than many machines have: the `latest`
#   release, and the newest prerelease (which runs the 2026-07-28 requirement set) under the
#   alias `conformance-next`;
# - the providers' official Python SDKs (PyPI `openai`, `anthropic`, `google-genai`) in a
#   virtualenv of their own under target/provider-sdks: the declaration tests read what
#   `vak tools --for` prints with their types (tests/clients/provider_sdks.py).
# The tests skip, saying so, when these are absent. Re-running is cheap: installed pieces stay.
set -euo pipefail
cd "$(dirname "$0")/../.."
dest="target/mcp-clients"
mkdir -p "$dest"

MCP_PY_VERSION="2.3.0"
OPENAI_VERSION="3.51.0"
ANTHROPIC_VERSION="2.10.0"
GOOGLE_GENAI_VERSION="3.3.0"
CONFORMANCE_VERSION="0.1.16"
CONFORMANCE_NEXT_VERSION="0.2.0-alpha.12"
NODE_VERSION="26"

if ! "$dest/venv/bin/python" -c "import mcp" >/dev/null 2>&1; then
  echo "installing the Python MCP SDK (mcp==$MCP_PY_VERSION) into $dest/venv"
  python3 -m venv "$dest/venv"
  "$dest/venv/bin/pip" install --quiet --disable-pip-version-check "mcp==$MCP_PY_VERSION"
fi

sdks="target/provider-sdks"
if ! "$sdks/venv/bin/python" -c "import openai, anthropic, google.genai" >/dev/null 2>&1; then
  echo "installing the provider SDKs (openai==$OPENAI_VERSION anthropic==$ANTHROPIC_VERSION google-genai==$GOOGLE_GENAI_VERSION) into $sdks/venv"
  python3 -m venv "$sdks/venv"
  "$sdks/venv/bin/pip" install --quiet --disable-pip-version-check \
    "openai==$OPENAI_VERSION" "anthropic==$ANTHROPIC_VERSION" "google-genai==$GOOGLE_GENAI_VERSION"
fi

if [ ! -x "$dest/node_modules/.bin/conformance" ] || [ ! -x "$dest/node_modules/.bin/node" ] \
   || [ ! -f "$dest/node_modules/conformance-next/dist/index.js" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "npm is not installed: the conformance suite cannot be installed (the test will skip)" >&2
    exit 0
  fi
  echo "installing @modelcontextprotocol/conformance@$CONFORMANCE_VERSION (and @$CONFORMANCE_NEXT_VERSION as conformance-next) and node@$NODE_VERSION into $dest"
  (cd "$dest" && { [ -f package.json ] || echo '{"private":true}' > package.json; } \
    && npm install --silent --no-audit --no-fund \
         "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION" \
         "conformance-next@npm:@modelcontextprotocol/conformance@$CONFORMANCE_NEXT_VERSION" \
         "node@$NODE_VERSION")
fi
echo "MCP clients ready in $dest"
