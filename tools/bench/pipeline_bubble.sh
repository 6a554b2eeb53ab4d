#!/usr/bin/env bash
# The pipeline figures of issue 15: for P = 2 and 4 stages and each schedule, the bubble the
# run measured ((step time - forward/backward compute time) / compute time, mean over ranks,
# median over steps after the first) beside the formula (P-1)/m, (P-1)/(v·m) interleaved, and
# stage 0's peak activation bytes against one micro-batch's (1F1B: <= P micro-batches).
# Usage: tools/bench/pipeline_bubble.sh OUTDIR [STEPS]
# Ranks share the machine's cores (2 here: P = 4 is oversubscribed), so the measured bubble
# includes the time ranks wait for a core, not only for their neighbours; see docs.
set -uo pipefail
L=${LMSTACK:-build/release/lmstack}
OUT=${1:?OUTDIR}; STEPS=${2:-4}
# yield_when_idle: a rank waiting in MPI_Wait gives its core to the others instead of spinning.
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader --mca btl_vader_single_copy_mechanism none --mca mpi_yield_when_idle 1"
mkdir -p "$OUT"
# A byte-level vocabulary (init-model's 259 tokens, vocab 512) keeps the last stage's lm_head
# small beside 4 layers, so the stages are nearly equal, as the formula assumes.
$L init-model --preset tiny-llama --out "$OUT/tok" > /dev/null
$L prepare-data --tokenizer "$OUT/tok" --input README.md docs/*.md --out "$OUT/data" -t 1 > /dev/null
python3 - "$OUT" <<'PY'
import json, sys
c = json.load(open("models/default/config.json"))
c.update(hidden_size=256, intermediate_size=768, num_hidden_layers=8, num_attention_heads=8,
         num_key_value_heads=4, head_dim=32, tie_word_embeddings=False, vocab_size=512)
json.dump(c, open(sys.argv[1] + "/pp.json", "w"), indent=1)
PY
run() {  # name np flags...
  local name=$1 np=$2; shift 2
  rm -rf "$OUT/$name"
  $MPI -np "$np" $L train --init-config "$OUT/pp.json" --data "$OUT/data" --steps "$STEPS" \
    --batch 2 --seq 64 --lr 1e-4 --threads 1 --out "$OUT/$name" --keep 1 --log "$OUT/$name.jsonl" \
    --trace "$OUT/$name.trace.json" "$@" > "$OUT/$name.txt" 2>&1 || echo "FAILED $name"
}
for m in 4 8 16; do
  run p2_gpipe_m$m 2 --pp 2 --pp-schedule gpipe --grad-accum $m
  run p2_1f1b_m$m 2 --pp 2 --pp-schedule 1f1b --grad-accum $m
  run p2_inter_m$m 2 --pp 2 --pp-schedule interleaved --pp-chunks 2 --grad-accum $m
  run p4_1f1b_m$m 4 --pp 4 --pp-schedule 1f1b --grad-accum $m
  run p4_inter_m$m 4 --pp 4 --pp-schedule interleaved --pp-chunks 2 --grad-accum $m
done
python3 - "$OUT" <<'PY'
import json, statistics, sys, glob, os
out = sys.argv[1]
print("| run | P | v | m | bubble measured | formula | simulated | stage-0 peak act / one micro-batch | µbatches held |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for path in sorted(glob.glob(out + "/p*.jsonl")):
    lines = [json.loads(l)["measured"]["parallel"] for l in open(path) if l.strip()]
    if not lines: continue
    later = lines[1:] or lines
    p = lines[-1]; r0 = p["ranks"][0]
    print(f"| {os.path.basename(path)[:-6]} | {p['stages']} | {p['chunks']} | {p['micro_batches']} | "
          f"{statistics.median(x['bubble_measured'] for x in later):.3f} | {p['bubble_formula']:.3f} | "
          f"{p['bubble_simulated']:.3f} | {r0['peak_activation_bytes'] / r0['micro_batch_activation_bytes']:.2f} | "
          f"{r0['max_micro_batches_held']} |")
PY
