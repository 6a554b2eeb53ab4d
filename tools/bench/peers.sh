#!/usr/bin/env bash
# lmstack beside its peers, built here and measured in the same run (issue 20 item 1):
#   inference: llama.cpp's `llama-bench -t T -p 512 -n 128` and `lmstack bench prefill|decode`
#              on the very GGUF files `lmstack convert` writes, runs alternating;
#   training:  `lmstack bench train` and PyTorch (tools/ref/bench_train_torch.py), same model,
#              batch and dtype, alternating.
# llama.cpp is built from the llama-cpp-python source distribution on PyPI (its vendor/llama.cpp;
# CPU only, -DGGML_NATIVE=ON, only the llama-bench target) and PyTorch is the PyPI wheel in a
# venv; both live in the cache directory, outside the repository, and are reused.
# Prints the table model x type x {prefill, decode} (lmstack, llama.cpp, ratio, % of this
# machine's limit as `lmstack doctor` measured it) plus training, and writes a JSON copy to
# bench/results/<cpu-model>-<isa>.json (isa: avx512 or avx2). docs/bench_peers.md shows a run
# and explains the columns.
#
# Usage: tools/bench/peers.sh [--models smollm-135m,smollm-360m] [--types f32,f16,q8_0,q4_0]
#          [--reps 3] [--threads 2] [--prompt 512] [--gen 128] [--skip-train] [--skip-infer]
#          [--train-dtypes f32] [--isa native|avx2] [--cache DIR] [--out FILE.json] [--work DIR]
# --isa avx2 on an AVX-512 machine measures every tool's AVX2 code on it: lmstack with
# LMSTACK_DISABLE_FEATURES=avx512f, llama.cpp built for AVX2+FMA+F16C (GGML_NATIVE off),
# PyTorch with ATEN_CPU_CAPABILITY=avx2 and ONEDNN_MAX_CPU_ISA=AVX2; the JSON is named
# <cpu>-avx2-forced.json, apart from a real AVX2 machine's <cpu>-avx2.json.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
COMMAND="tools/bench/peers.sh $*"
MODELS=smollm-135m
TYPES=f32,f16,q8_0,q4_0
REPS=3
THREADS=2
PROMPT=512
GEN=128
SKIP_TRAIN=0
SKIP_INFER=0
TRAIN_DTYPES=f32
ISA=native
TRAIN_BATCH=16
TRAIN_SEQ=256
LLAMA_CPP_PYTHON=0.3.36
CACHE=${LMSTACK_PEERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lmstack/peers}
OUT=""
WORK=""
L=${LMSTACK:-$ROOT/build/release/lmstack}

die() { echo "peers.sh: error: $*" >&2; exit 1; }
say() { echo "== $*" >&2; }
usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }

while [ $# -gt 0 ]; do
  case $1 in
    --models) MODELS=$2; shift 2 ;;
    --types) TYPES=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --prompt) PROMPT=$2; shift 2 ;;
    --gen) GEN=$2; shift 2 ;;
    --skip-train) SKIP_TRAIN=1; shift ;;
    --skip-infer) SKIP_INFER=1; shift ;;
    --train-dtypes) TRAIN_DTYPES=$2; shift 2 ;;
    --isa) ISA=$2; shift 2 ;;
    --train-batch) TRAIN_BATCH=$2; shift 2 ;;
    --train-seq) TRAIN_SEQ=$2; shift 2 ;;
    --cache) CACHE=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "peers.sh: unknown option $1" >&2; usage 2 ;;
  esac
done
[[ $REPS =~ ^[1-9][0-9]*$ ]] || die "--reps must be a positive integer, got '$REPS'"
[[ $ISA =~ ^(native|avx2)$ ]] || die "--isa must be native or avx2, got '$ISA'"
if [ "$ISA" = avx2 ]; then
  # Only this process tree sees these: lmstack's dispatch, PyTorch's ATen and oneDNN.
  export LMSTACK_DISABLE_FEATURES=avx512f ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2
fi
command -v python3 > /dev/null || die "python3 is needed (Debian: python3)"
command -v cmake > /dev/null || die "cmake is needed (bash scripts/setup.sh)"
mkdir -p "$CACHE"

# --- lmstack ---------------------------------------------------------------------------------
if [ ! -x "$L" ]; then
  say "building lmstack ($L)"
  (cd "$ROOT" && cmake --preset release > /dev/null && \
    cmake --build build/release -j"$(nproc)" --target lmstack) || die "lmstack build failed"
fi
WORK=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/lmstack-peers.XXXXXX")}
mkdir -p "$WORK"
say "work directory $WORK, cache $CACHE"

say "lmstack doctor (the machine's limits)"
"$L" doctor --json --out "$WORK/doctor.json" > /dev/null || die "lmstack doctor failed"
CPU_MODEL=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cpu"]["model"])' \
  "$WORK/doctor.json")
CPU_SLUG=$(echo "$CPU_MODEL" | tr '[:upper:]' '[:lower:]' | sed -E 's/\((r|tm)\)//g; s/[^a-z0-9]+/-/g; s/^-+|-+$//g')
[ -n "$CPU_SLUG" ] || CPU_SLUG=unknown-cpu
# The model string alone does not tell machine kinds apart ("AMD EPYC" is both a Zen 3 with
# AVX2 only and a Zen 4 with AVX-512): the widest vector ISA goes into the name too.
CPU_ISA=$(python3 -c 'import json,sys; f=json.load(open(sys.argv[1]))["cpu"]["features"]; print("avx512" if "avx512f" in f else "avx2" if "avx2" in f else "sse")' \
  "$WORK/doctor.json")
CPU_SLUG=$CPU_SLUG-$CPU_ISA
if [ "$ISA" = avx2 ]; then
  grep -qw avx512f /proc/cpuinfo && CPU_SLUG=$CPU_SLUG-forced
fi
OUT=${OUT:-$ROOT/bench/results/$CPU_SLUG.json}

# --- llama.cpp (from the llama-cpp-python sdist) ------------------------------------------------
LLAMA_BENCH=""
if [ $SKIP_INFER = 0 ]; then
  SDIST=$CACHE/llama_cpp_python-$LLAMA_CPP_PYTHON.tar.gz
  SRC=$CACHE/llama_cpp_python-$LLAMA_CPP_PYTHON/vendor/llama.cpp
  BLD=$CACHE/llama.cpp-$LLAMA_CPP_PYTHON-$CPU_SLUG   # GGML_NATIVE: one build per CPU kind
  ISA_FLAGS=(-DGGML_NATIVE=ON)
  [ "$ISA" = avx2 ] && ISA_FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON
    -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF)
  LLAMA_BENCH=$BLD/bin/llama-bench
  if [ ! -x "$LLAMA_BENCH" ]; then
    if [ ! -f "$SDIST" ]; then
      say "downloading llama-cpp-python==$LLAMA_CPP_PYTHON (source distribution, PyPI)"
      python3 -m pip download --no-binary :all: --no-deps "llama-cpp-python==$LLAMA_CPP_PYTHON" \
        -d "$CACHE" >&2 || die "pip download of llama-cpp-python==$LLAMA_CPP_PYTHON failed"
    fi
    [ -d "$SRC" ] || tar -xzf "$SDIST" -C "$CACHE" || die "cannot unpack $SDIST"
    [ -f "$SRC/CMakeLists.txt" ] || die "$SRC has no llama.cpp sources"
    say "building llama-bench (CPU, ${ISA_FLAGS[*]}) in $BLD"
    cmake -S "$SRC" -B "$BLD" -DCMAKE_BUILD_TYPE=Release "${ISA_FLAGS[@]}" -DLLAMA_CURL=OFF \
      -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF > "$CACHE/llama-configure.log" 2>&1 ||
      die "llama.cpp configure failed, see $CACHE/llama-configure.log"
    cmake --build "$BLD" -j"$(nproc)" --target llama-bench > "$CACHE/llama-build.log" 2>&1 ||
      die "llama.cpp build failed, see $CACHE/llama-build.log"
  fi
  [ -x "$LLAMA_BENCH" ] || die "no llama-bench at $LLAMA_BENCH"
fi

# --- PyTorch (PyPI wheel in a venv) ------------------------------------------------------------
TORCH_PY=""
if [ $SKIP_TRAIN = 0 ]; then
  if python3 -c 'import torch, numpy' 2> /dev/null; then
    TORCH_PY=python3
  else
    VENV=$CACHE/torch-venv
    if ! "$VENV/bin/python" -c 'import torch, numpy' 2> /dev/null; then
      say "installing PyTorch from PyPI into $VENV (pip install torch numpy)"
      { python3 -m venv "$VENV" && "$VENV/bin/pip" install -q torch numpy; } >&2 ||
        die "cannot install PyTorch into $VENV (Debian: python3-venv); rerun with --skip-train"
    fi
    TORCH_PY=$VENV/bin/python
  fi
fi

# --- runs --------------------------------------------------------------------------------------
RAW=$WORK/raw.jsonl   # one JSON object a line: {tool, what, model, type, rep, ...result}
: > "$RAW"
record() {  # record TOOL WHAT MODEL TYPE REP FILE: append FILE's JSON (lmstack or llama-bench)
  python3 - "$@" >> "$RAW" << 'EOF' || die "cannot parse $6 (output of $1 $2 $3 $4)"
import json, sys
tool, what, model, typ, rep, path = sys.argv[1:7]
text = open(path).read()
start = min(i for i in (text.find("{"), text.find("[")) if i >= 0)
data = json.loads(text[start:])
print(json.dumps({"tool": tool, "what": what, "model": model, "type": typ, "rep": int(rep),
                  "result": data}))
EOF
}

IFS=, read -ra model_list <<< "$MODELS"
IFS=, read -ra type_list <<< "$TYPES"
IFS=, read -ra train_dtype_list <<< "$TRAIN_DTYPES"

if [ $SKIP_INFER = 0 ]; then
  for m in "${model_list[@]}"; do
    [ -d "$WORK/$m" ] || "$L" init-model --preset "$m" --dtype f32 --out "$WORK/$m" > /dev/null ||
      die "init-model --preset $m failed"
    for t in "${type_list[@]}"; do
      g=$WORK/$m-$t.gguf
      [ -f "$g" ] || "$L" convert --model "$WORK/$m" --type "$t" --out "$g" --threads "$THREADS" \
        > "$WORK/convert-$m-$t.txt" 2>&1 || die "lmstack convert --type $t failed ($WORK/convert-$m-$t.txt)"
    done
  done
  for r in $(seq 1 "$REPS"); do
    for m in "${model_list[@]}"; do
      for t in "${type_list[@]}"; do
        g=$WORK/$m-$t.gguf
        f=$WORK/out-$m-$t-$r
        # Alternate which tool goes first, so a slow spell of the shared machine hits both.
        order="llama lmstack"; [ $((r % 2)) = 0 ] && order="lmstack llama"
        for tool in $order; do
          if [ $tool = llama ]; then
            say "rep $r/$REPS $m $t: llama-bench -t $THREADS -p $PROMPT -n $GEN"
            "$LLAMA_BENCH" -m "$g" -t "$THREADS" -p "$PROMPT" -n "$GEN" -r 1 -o json \
              > "$f-llama.json" 2> "$f-llama.err" ||
              die "llama.cpp could not run $g (an lmstack GGUF it should read): see $f-llama.err"
            record llama.cpp both "$m" "$t" "$r" "$f-llama.json"
          else
            say "rep $r/$REPS $m $t: lmstack bench prefill --ctx $PROMPT, decode --ctx 1 --steps $GEN"
            "$L" bench prefill --model "$g" --ctx "$PROMPT" --repeats 1 --threads "$THREADS" \
              --machine "$WORK/doctor.json" --json > "$f-prefill.json" 2> "$f-prefill.err" ||
              die "lmstack bench prefill failed on $g: see $f-prefill.err"
            record lmstack prefill "$m" "$t" "$r" "$f-prefill.json"
            "$L" bench decode --model "$g" --ctx 1 --steps "$GEN" --threads "$THREADS" \
              --machine "$WORK/doctor.json" --json > "$f-decode.json" 2> "$f-decode.err" ||
              die "lmstack bench decode failed on $g: see $f-decode.err"
            record lmstack decode "$m" "$t" "$r" "$f-decode.json"
          fi
        done
      done
    done
  done
fi

if [ $SKIP_TRAIN = 0 ]; then
  # The default model's shape (models/default, 6.8M parameters), as README's training figures.
  [ -d "$WORK/train_init" ] || "$L" init-model --arch llama --config "$ROOT/models/default/config.json" \
    --dtype f32 --out "$WORK/train_init" > /dev/null || die "init-model for training failed"
  for r in $(seq 1 "$REPS"); do
    for dt in "${train_dtype_list[@]}"; do
      f=$WORK/train-$dt-$r
      order="torch lmstack"; [ $((r % 2)) = 0 ] && order="lmstack torch"
      for tool in $order; do
        if [ $tool = torch ]; then
          say "rep $r/$REPS train $dt: PyTorch batch $TRAIN_BATCH x seq $TRAIN_SEQ"
          "$TORCH_PY" "$ROOT/tools/ref/bench_train_torch.py" --model "$WORK/train_init" \
            --batch "$TRAIN_BATCH" --seq "$TRAIN_SEQ" --dtype "$dt" --threads "$THREADS" --steps 3 \
            > "$f-torch.txt" 2>&1 || die "PyTorch training benchmark failed: see $f-torch.txt"
          python3 - "$dt" "$r" "$f-torch.txt" >> "$RAW" << 'EOF' || die "cannot parse $f-torch.txt"
import json, re, sys
dt, rep, path = sys.argv[1:4]
m = re.search(r"torch (\S+) \S+ threads \d+: step ([\d.]+) s, (\d+) tok/s", open(path).read())
print(json.dumps({"tool": "pytorch", "what": "train", "model": "default", "type": dt,
                  "rep": int(rep), "result": {"version": m[1], "step_s": float(m[2]),
                                              "tok_s": float(m[3])}}))
EOF
        else
          say "rep $r/$REPS train $dt: lmstack bench train batch $TRAIN_BATCH x seq $TRAIN_SEQ"
          "$L" bench train --model "$WORK/train_init" --batch "$TRAIN_BATCH" --seq "$TRAIN_SEQ" \
            --dtype "$dt" --steps 3 --threads "$THREADS" --machine "$WORK/doctor.json" \
            > "$f-lmstack.txt" 2>&1 || die "lmstack bench train failed: see $f-lmstack.txt"
          python3 - "$dt" "$r" "$f-lmstack.txt" >> "$RAW" << 'EOF' || die "cannot parse $f-lmstack.txt"
import json, re, sys
dt, rep, path = sys.argv[1:4]
m = re.search(r"train (\d+) tok/s, ([\d.]+) GFLOP/s .*MFU ([\d.]+)% of (\d+) GFLOP/s",
              open(path).read())
print(json.dumps({"tool": "lmstack", "what": "train", "model": "default", "type": dt,
                  "rep": int(rep), "result": {"tok_s": float(m[1]), "gflops": float(m[2]),
                                              "mfu": float(m[3]) / 100,
                                              "peak_gflops": float(m[4])}}))
EOF
        fi
      done
    done
  done
fi

# --- table and JSON ----------------------------------------------------------------------------
mkdir -p "$(dirname "$OUT")"
python3 "$ROOT/tools/bench/peers_table.py" --raw "$RAW" --doctor "$WORK/doctor.json" \
  --out "$OUT" --threads "$THREADS" --prompt "$PROMPT" --gen "$GEN" --reps "$REPS" \
  --llama-cpp-python "$LLAMA_CPP_PYTHON" --command "$COMMAND" --train-batch "$TRAIN_BATCH" --train-seq "$TRAIN_SEQ" \
  --lmstack-commit "$(git -C "$ROOT" rev-parse --short HEAD 2> /dev/null || echo unknown)" ||
  die "summarising failed (raw results in $RAW)"
say "JSON written to $OUT (raw runs in $WORK)"
