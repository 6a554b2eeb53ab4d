#!/usr/bin/env bash
# The measurements behind the closing notes of issues 6-8, in one run on a quiet machine:
# training vs PyTorch, serving at concurrency 1/4/16/64 and with a shared prefix, decode and
# prefill per weight type. Usage: tools/bench/closing_tables.sh OUTDIR [TORCH_PYTHON]
# Needs bench models made by `lmstack init-model --preset smollm-135m|smollm-360m|tinyllama-1.1b
# --out $BM/<name>` (BM defaults to /tmp/bm) and a PyTorch for the training comparison.
set -uo pipefail
L=${LMSTACK:-build/release/lmstack}
OUT=${1:?OUTDIR}; PY=${2:-python3}; BM=${BM:-/tmp/bm}
mkdir -p "$OUT"
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
$L doctor --json --out "$OUT/doctor.json" > /dev/null

# 1. training: the default model's shape, same batch and dtype in both (issue 6.4)
$L init-model --arch llama --config models/default/config.json --dtype f32 --out "$OUT/train_init" > /dev/null
for dt in bf16 f32; do
  for r in 1 2; do
    log "lmstack train $dt run $r"; $L bench train --model "$OUT/train_init" --batch 16 --seq 256 \
      --dtype $dt --steps 3 --machine "$OUT/doctor.json" 2>&1 | tail -2 | tee -a "$OUT/summary.txt"
    log "torch train $dt run $r"; $PY tools/ref/bench_train_torch.py --model "$OUT/train_init" \
      --batch 16 --seq 256 --dtype $dt --threads 2 --steps 3 2>&1 | tail -1 | tee -a "$OUT/summary.txt"
  done
done

# 2. serving (issue 7.5): output tok/s vs concurrency; TTFT with a shared 1024-token prefix
for m in models/default "$BM/smollm-135m"; do
  for cn in "1 16" "4 32" "16 64" "64 128"; do
    set -- $cn
    log "serve $m concurrency $1"; $L bench serve --model "$m" --input-len 128 --output-len 128 \
      --max-concurrency $1 --num-prompts $2 --json > "$OUT/serve_$(basename $m)_c$1.json" 2>&1
  done
done
for pc in "" --no-prefix-cache; do
  log "serve shared-prefix $pc"; $L bench serve --model "$BM/smollm-135m" --dataset shared-prefix \
    --shared-prefix-len 1024 --input-len 64 --output-len 16 --num-prompts 16 --max-concurrency 1 \
    $pc --json > "$OUT/serve_prefix${pc:+_off}.json" 2>&1
done

# 3. decode and prefill per weight type (issue 8.5)
for m in smollm-360m tinyllama; do
  for t in bf16 q8_0 q4_0 q4_k int4_g128; do
    dir="$BM/$m"; [ $t != bf16 ] && dir="$OUT/q_${m}_$t" && \
      $L quantize --model "$BM/$m" --type $t --out "$dir" > "$OUT/quantize_${m}_$t.txt" 2>&1
    log "decode $m $t"; $L bench decode --model "$dir" --ctx 128 --steps 32 --machine "$OUT/doctor.json" 2>&1 | tail -1 | tee -a "$OUT/summary.txt"
    log "prefill $m $t"; $L bench prefill --model "$dir" --ctx 512 --repeats 3 --machine "$OUT/doctor.json" 2>&1 | tail -1 | tee -a "$OUT/summary.txt"
  done
done
