#!/usr/bin/env bash
# The Python and JavaScript rows of `vak bench`: the same measurement as the bundled `stats`
# row (a raw wasmtime fresh-instance call against the whole lifecycle, one thread against every
# core, the memory of as many calls at once as the host takes), for the tools in other
# languages: `tools/py-clock` (componentize-py) and `tools/js-clock` under both of jco's engines
# (QuickJS, `vak build`'s default, and StarlingMonkey).
#
#   bash bench/languages.sh [ROUNDS] [CALLS]     # default 5 rounds of 100 calls
#   MEMORY_RESET=zero bash bench/languages.sh   # vak's --memory-reset (default dirty-pages)
#
# The components are the ones `cargo test -p vak-tests --test languages` builds from source into
# target/lang (it installs componentize-py and jco there, nothing system-wide). When they are
# missing, the script runs that test first; a toolchain that cannot be installed is said, and
# its rows are left out. Run it on a quiet machine: the load is printed before each tool.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"
calls="${2:-100}"
reset="${MEMORY_RESET:-dirty-pages}"
lang="$PWD/target/lang"
work="$PWD/target/bench-languages"
mkdir -p "$work"

# name | tool | component built by the languages test
cases="py_clock|py_clock|$lang/py-clock/py-clock.wasm
js_clock (QuickJS)|js_clock|$lang/js-clock/quickjs/js-clock.wasm
js_clock (StarlingMonkey)|js_clock|$lang/js-clock/starlingmonkey/js-clock.wasm"

missing=0
while IFS='|' read -r _ _ wasm; do [ -f "$wasm" ] || missing=1; done <<<"$cases"
if [ "$missing" = 1 ]; then
  echo "building the Python and JavaScript tools: cargo test -p vak-tests --test languages" >&2
  cargo test -p vak-tests --test languages >&2 || echo "(the languages test failed: rows whose component is missing are left out)" >&2
fi

cargo build --release -p vak-host >&2
vak="$PWD/target/release/vak"
cat >"$work/policy.toml" <<'EOF'
[tools.py_clock]
capabilities.clock = { zones = ["UTC"] }
[tools.js_clock]
capabilities.clock = { zones = ["UTC"] }
EOF

echo "--memory-reset $reset, $rounds rounds of $calls calls"
printf '%-26s %10s %10s %7s %16s %16s %10s  %s\n' tool "raw µs" "vak µs" ratio "raw 1→2 thr" "vak 1→2 thr" "KiB/call" load
while IFS='|' read -r name tool wasm; do
  if [ ! -f "$wasm" ]; then
    printf '%-26s not built (its toolchain is missing)\n' "$name"
    continue
  fi
  dir="$work/$(echo "$name" | tr -c 'a-zA-Z0-9\n' '_')"
  mkdir -p "$dir"
  cp "$wasm" "$dir/$tool.wasm"
  load=$(cut -d' ' -f1 /proc/loadavg)
  "$vak" --no-journal --memory-reset "$reset" --tools "$dir" --policy "$work/policy.toml" --cache-dir "$work/aot" \
    bench "$tool" '{"zone":"UTC"}' --rounds "$rounds" --calls "$calls" --json >"$dir/report.json"
  python3 - "$name" "$load" "$dir/report.json" <<'EOF'
import json, sys
name, load, path = sys.argv[1:]
r = json.load(open(path))
rows = {row["name"]: row for row in r["rows"]}
raw = next(v for k, v in rows.items() if k.startswith("raw wasmtime"))["median_ns"] / 1e3
vak = next(v for k, v in rows.items() if k.startswith("vak: whole lifecycle"))["median_ns"] / 1e3
s, a = r["scaling"], r["at_once"]
per_call = "-"
if a.get("resident_before") is not None and a.get("resident_held") is not None:
    per_call = f'{(a["resident_held"] - a["resident_before"]) / a["calls"] / 1024:,.0f}'
print(f'{name:<26} {raw:10.1f} {vak:10.1f} {r["lifecycle_ratio"]:6.2f}x '
      f'{s["raw_one"]:6.0f}→{s["raw_many"]:<6.0f}{s["raw_ratio"]:.2f}x '
      f'{s["vak_one"]:6.0f}→{s["vak_many"]:<6.0f}{s["vak_ratio"]:.2f}x {per_call:>10}  {load}')
EOF
done <<<"$cases"
