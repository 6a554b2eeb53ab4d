#!/usr/bin/env bash
# Disaggregated vs colocated serving on one host (docs/disaggregation.md): starts a colocated
# `lmstack serve`, runs `lmstack bench serve` at concurrency 1 and 4, stops it, then does the
# same through a router in front of a prefill and a decode server, and prints each decode
# server's KV transfer counters next to calc's KV bytes per token. The servers run one after
# the other, so the two setups never share the CPU with each other (the roles of the
# disaggregated stack do share it).
# Usage: scripts/bench_disagg.sh MODEL_DIR [NUM_PROMPTS] [INPUT_LEN] [OUTPUT_LEN] [THREADS]
# ORDER=disaggregated-first runs the disaggregated stack first (alternate runs on a busy host).
set -euo pipefail
model=${1:?model directory}
num=${2:-16} input=${3:-128} output=${4:-32} threads=${5:-2}
bin=${LMSTACK:-build/release/lmstack}
work=$(mktemp -d)
flags="--kv-memory 256MiB --threads $threads --http-workers 8 --no-prefix-cache"
pids=()
port=
start() {  # NAME ARGS...: starts a server and waits for it; its port is left in $port
  local name=$1; shift
  "$bin" serve "$@" > "$work/$name.log" 2>&1 &
  pids+=($!)  # not in a $(...) subshell, so stop_all sees it
  for _ in $(seq 600); do
    port=$(grep -o 'on http://127.0.0.1:[0-9]*' "$work/$name.log" | head -1 | grep -o '[0-9]*$' || true)
    [ -n "$port" ] && return
    sleep 0.1
  done
  echo "$name did not start: $work/$name.log" >&2; exit 1
}
stop_all() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; pids=(); }
trap stop_all EXIT
bench() {  # LABEL PORT CONCURRENCY
  echo "== $1, concurrency $3"
  "$bin" bench serve --url "http://127.0.0.1:$2" --num-prompts "$num" --input-len "$input" \
    --output-len "$output" --max-concurrency "$3" --seed 1 | grep -Ei 'requests|ttft|tpot|output tok|throughput'
}
colocated() {
  start colocated --model "$model" --port 0 $flags
  bench colocated "$port" 1
  bench colocated "$port" 4
  stop_all
}
disaggregated() {
  local prefill decode router
  start prefill --model "$model" --port 0 --role prefill $flags
  prefill=$port
  start decode --model "$model" --port 0 --role decode --prefill "http://127.0.0.1:$prefill" $flags
  decode=$port
  start router --role router --port 0 --prefill "http://127.0.0.1:$prefill" \
    --decode "http://127.0.0.1:$decode"
  router=$port
  bench disaggregated "$router" 1
  bench disaggregated "$router" 4
  grep 'calc predicts' "$work/decode.log"
  curl -s "http://127.0.0.1:$decode/metrics" |
    grep -E '^lmstack:(kv_transfer|kv_transfers|prompt_tokens_total|num_requests)'
  curl -s "http://127.0.0.1:$prefill/metrics" |
    grep -E '^lmstack:(kv_transfer_bytes|kv_transfers_total|prompt_tokens_total)'
  stop_all
}
if [ "${ORDER:-}" = disaggregated-first ]; then disaggregated; colocated; else colocated; disaggregated; fi
