#!/usr/bin/env bash
# Recipe for lmstack's built-in default model (models/default/): a ~6.8M-parameter llama-style
# model with its own 8192-token byte-level BPE, trained with `lmstack train` on this CPU.
# Corpus (Debian packages, see docs/formats/shards.md for the data format), ~4.6 MB of text:
#   fortunes     1:1.99.1  /usr/share/games/fortunes/: the English files listed in EN below
#                (quotes, prose, songs and poems); BSD licence (fortune-mod, Debian copyright)
#   fortunes-zh  2.98      /usr/share/games/fortunes/{tang300,song100,chinese}: Tang poems, Song
#                ci and modern Chinese sayings (the collection GPL-3+, Yu Guanghui)
# The trained weights are a derivative of that text: ship them with the GPL-3+ notice.
# Usage: apt-get install fortunes fortunes-zh && tools/train/train_default_model.sh [OUT]
# Cost: ~46 MFLOP per token (6N + 12·L·T·d); 600 steps × 8192 tokens ≈ 4.9 M tokens (about
# 4 epochs), ~47 min at ~1750 tok/s on 2 quiet cores (lmstack bench train --model ...).
set -euo pipefail
L=${LMSTACK:-build/release/lmstack}
OUT=${1:-runs/default}
FORTUNES=${FORTUNES:-/usr/share/games/fortunes}
mkdir -p "$OUT/tok" "$OUT/corpus"
# 1. corpus: fortune files use a line "%" between entries; strip ANSI colour escapes and the
#    backspace overstrike (x^Hx bold, _^Hx underline) of the old English files
EN="art computers cookie definitions education food fortunes humorists kids law linux literature
    love medicine men-women miscellaneous people pets platitudes politics pratchett riddles science
    songs-poems sports tao wisdom work"
for f in $EN tang300 song100 chinese; do
  sed -e 's/\x1b\[[0-9;]*m//g' -e 's/.\x08//g' "$FORTUNES/$f" > "$OUT/corpus/$f.txt"
done
# 2. tokenizer (special token <|endoftext|> is the EOS between documents)
$L train-tokenizer --input "$OUT"/corpus/*.txt --vocab-size 8192 --special '<|endoftext|>' \
  --out "$OUT/tok/tokenizer.json"
# The model is a text continuer, not an instruction follower: its chat template joins the
# messages' contents by newlines, so `chat` and /v1/chat/completions continue the user's text.
cat > "$OUT/tok/tokenizer_config.json" <<'JSON'
{"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "add_bos_token": false,
 "chat_template": "{% for message in messages %}{{ message['content'] }}\n{% endfor %}"}
JSON
# 3. shards: every fortune / poem is one document
$L prepare-data --tokenizer "$OUT/tok" --input "$OUT"/corpus/*.txt --split-on % \
  --val-fraction 0.05 --out "$OUT/data"
# 4. model shape: llama, 6 layers, hidden 256, 8 heads (4 kv), SwiGLU 768, tied embeddings
cat > "$OUT/config.json" <<'JSON'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 8192,
 "hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 6,
 "num_attention_heads": 8, "num_key_value_heads": 4, "max_position_embeddings": 512,
 "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu",
 "tie_word_embeddings": true, "bos_token_id": 0, "eos_token_id": 0}
JSON
# 5. train (Ctrl-C saves; rerun the same command with --resume to continue bit-exactly)
$L doctor --json --out "$OUT/doctor.json" --quick
$L train --init-config "$OUT/config.json" --data "$OUT/data" --out "$OUT/run" \
  --steps 600 --batch 16 --seq 256 --grad-accum 2 --lr 1e-3 --min-lr 1e-4 --warmup 30 \
  --weight-decay 0.1 --grad-clip 1.0 --dtype bf16 --seed 0 --eval-every 50 --save-every 100 \
  --log "$OUT/run/log.jsonl" --machine "$OUT/doctor.json" "${@:2}"
$L plot "$OUT/run/log.jsonl" --out "$OUT/loss.svg"
# 6. install: the newest checkpoint is a Hugging Face directory
CKPT="$OUT/run/$(cat "$OUT/run/latest")"
rm -rf models/default && mkdir -p models/default
cp "$CKPT"/{config.json,model.safetensors,tokenizer.json} models/default/
cp "$OUT/tok/tokenizer_config.json" models/default/   # with the chat template
$L generate --prompt "床前明月光" --max-tokens 64
$L generate --prompt "The secret of life" --max-tokens 64
