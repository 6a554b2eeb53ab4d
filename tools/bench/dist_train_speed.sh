#!/usr/bin/env bash
# The speed figures of issue 14 (item 8): training tokens/s in 1 process (2 threads) vs 2 MPI
# ranks (1 thread each, one per core) for the default model's shape and a ~100M-parameter llama,
# the share of communication the backward hides (from the --trace of the 2-rank run), and
# calc check's verdict on the bytes and on the step speed. Usage:
#   tools/bench/dist_train_speed.sh OUTDIR [STEPS_DEFAULT] [STEPS_100M]
set -uo pipefail
L=${LMSTACK:-build/release/lmstack}
OUT=${1:?OUTDIR}; S1=${2:-8}; S2=${3:-3}
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader --mca btl_vader_single_copy_mechanism none"
mkdir -p "$OUT"
$L doctor --json --out "$OUT/doctor.json" > /dev/null
$L prepare-data --tokenizer models/default --input README.md docs/*.md docs/formats/*.md \
  --out "$OUT/data" > /dev/null
python3 - "$OUT" <<'PY'
import json, sys
c = json.load(open("models/default/config.json"))
c.update(hidden_size=768, intermediate_size=2048, num_hidden_layers=12, num_attention_heads=12,
         num_key_value_heads=12, head_dim=64)
json.dump(c, open(sys.argv[1] + "/llama100m.json", "w"), indent=1)
PY
run() {  # name config steps batch
  local common="--init-config $2 --data $OUT/data --steps $3 --batch $4 --seq 256 --lr 1e-4 --machine $OUT/doctor.json"
  rm -rf "$OUT/r1_$1" "$OUT/r2_$1"
  $L train $common --out "$OUT/r1_$1" --threads 2 --log "$OUT/r1_$1.jsonl" --keep 1 > "$OUT/r1_$1.txt" 2>&1
  $MPI -np 2 $L train $common --out "$OUT/r2_$1" --threads 1 --dp 2 --zero ${ZERO:-0} --bucket-mb ${BUCKET_MB:-25} \
    --log "$OUT/r2_$1.jsonl" --trace "$OUT/r2_$1.trace.json" --keep 1 > "$OUT/r2_$1.txt" 2>&1
  $L calc check "$OUT/r2_$1.jsonl" > "$OUT/r2_$1.check.txt" 2>&1
}
run default models/default/config.json "$S1" 16
run 100m "$OUT/llama100m.json" "$S2" 8
python3 - "$OUT" <<'PY'
import json, statistics, sys
out = sys.argv[1]
def steps(path):
    return [json.loads(l)["measured"] for l in open(path) if l.strip()]
print("| shape | params | 1 process, 2 threads tok/s | 2 ranks x 1 thread tok/s | speed-up | comm bytes/step/rank | hidden under backward |")
print("|---|---:|---:|---:|---:|---:|---:|")
for name in ["default", "100m"]:
    a, b = steps(f"{out}/r1_{name}.jsonl"), steps(f"{out}/r2_{name}.jsonl")
    ta = statistics.median(m["tok_s"] for m in a[1:]); tb = statistics.median(m["tok_s"] for m in b[1:])
    hidden = [l for l in open(f"{out}/r2_{name}.txt") if "hidden" in l]
    params = [l for l in open(f"{out}/r1_{name}.txt") if "parameter" in l]
    print(f"| {name} | {params[-1].split('-parameter')[0].split()[-1] if params else '?'} | {ta:.0f} | {tb:.0f} | {tb/ta:.2f}x | {b[-1].get('comm_bytes', 0)/1e6:.1f} MB | {hidden[-1].split(':')[1].split('(')[0].strip() if hidden else '?'} |")
PY
