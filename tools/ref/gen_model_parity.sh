#!/usr/bin/env bash
# Regenerates tests/data/model/parity/: for each tiny test preset, `lmstack init-model` writes
# a random model (seed 1; f32 and bf16), and the PyTorch float64 reference
# (tools/ref/gen_model_logits.py) writes its logits for a fixed token list and its 32-token
# greedy continuation. tests/model/parity_test.cc rebuilds the same models with init_model()
# (deterministic across machines) and compares.
# Usage: tools/ref/gen_model_parity.sh [path/to/lmstack]
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-build/release/lmstack}
out=tests/data/model/parity
tmp=$(mktemp -d)
mkdir -p "$out"
for preset in tiny-llama tiny-mistral tiny-qwen2 tiny-qwen3 tiny-gpt2; do
  for dtype in f32 bf16; do
    "$bin" init-model --preset "$preset" --seed 1 --dtype "$dtype" --out "$tmp/$preset-$dtype" >/dev/null
    /usr/bin/python3 tools/ref/gen_model_logits.py --model "$tmp/$preset-$dtype" \
      --name "$preset-$dtype" --out "$out"
  done
done
rm -rf "$tmp"
