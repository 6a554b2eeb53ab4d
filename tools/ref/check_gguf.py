#!/usr/bin/env python3
"""Checks GGUF files written by `lmstack convert` with llama.cpp's own reader (gguf-py):
required keys and their types, tensor names/shapes/types for the architecture, and the
dequantized values against the source Hugging Face directory (F32 exact, F16 to f16 rounding,
quantized types within their block error), after undoing llama.cpp's Q/K row permutation.

  python3 tools/ref/check_gguf.py --lmstack build/gguf/lmstack          # converts and checks
  python3 tools/ref/check_gguf.py FILE.gguf --hf DIR                    # checks one file
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf
from gguf import GGUFReader, GGUFValueType

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_gguf_golden import gguf_tensors, read_safetensors  # noqa: E402

ARCHS = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2",
         "Qwen3ForCausalLM": "qwen3", "GPT2LMHeadModel": "gpt2"}
REQUIRED = {  # key suffix -> GGUF value type llama.cpp expects
    "context_length": GGUFValueType.UINT32, "embedding_length": GGUFValueType.UINT32,
    "block_count": GGUFValueType.UINT32, "feed_forward_length": GGUFValueType.UINT32,
    "attention.head_count": GGUFValueType.UINT32}
LLAMA_REQUIRED = {"attention.head_count_kv": GGUFValueType.UINT32,
                  "attention.layer_norm_rms_epsilon": GGUFValueType.FLOAT32,
                  "rope.freq_base": GGUFValueType.FLOAT32,
                  "rope.dimension_count": GGUFValueType.UINT32}
TOKENIZER = {"tokenizer.ggml.model": GGUFValueType.STRING,
             "tokenizer.ggml.pre": GGUFValueType.STRING,
             "tokenizer.ggml.tokens": GGUFValueType.ARRAY,
             "tokenizer.ggml.token_type": GGUFValueType.ARRAY,
             "tokenizer.ggml.merges": GGUFValueType.ARRAY}
# Max |error| per element as a multiple of the row's max |x| (block scale d = amax/127, amax/8..).
TOLERANCE = {"F32": 0.0, "F16": 1e-3, "BF16": 8e-3, "Q8_0": 1 / 127 * 0.51 + 1e-3,
             "Q4_0": 1 / 8 + 1e-3, "Q4_K": 0.15, "Q6_K": 0.03}
# (Q4_0: ggml clamps the far end of a block's range to 15, so the error reaches d = amax / 8.)


def check_file(path, hf_dir, problems):
    r = GGUFReader(path)
    fields = r.fields
    arch = str(bytes(fields["general.architecture"].parts[-1]), "utf-8")
    with open(os.path.join(hf_dir, "config.json")) as f:
        cfg = json.load(f)
    want_arch = ARCHS[cfg["architectures"][0]]
    if arch != want_arch:
        problems.append(f"{path}: general.architecture {arch}, expected {want_arch}")
    need = {f"{arch}.{k}": t for k, t in REQUIRED.items()}
    if arch != "gpt2":
        need.update({f"{arch}.{k}": t for k, t in LLAMA_REQUIRED.items()})
    else:
        need[f"{arch}.attention.layer_norm_epsilon"] = GGUFValueType.FLOAT32
    need.update(TOKENIZER)
    for key, t in need.items():
        if key not in fields:
            problems.append(f"{path}: missing key {key}")
        elif fields[key].types[0] != t:
            problems.append(f"{path}: key {key} has type {fields[key].types[0].name}, expected {t.name}")
    hf = read_safetensors(os.path.join(hf_dir, "model.safetensors"))
    want = dict(gguf_tensors(arch, cfg, hf))
    got = {t.name: t for t in r.tensors}
    if set(got) != set(want):
        problems.append(f"{path}: tensor names differ: extra {sorted(set(got) - set(want))}, "
                        f"missing {sorted(set(want) - set(got))}")
    worst = 0.0
    for name, t in got.items():
        if name not in want:
            continue
        ref = np.asarray(want[name], dtype=np.float32)
        shape = tuple(int(x) for x in reversed(t.shape))  # GGUF ne is innermost first
        if shape != ref.shape:
            problems.append(f"{path}: {name} shape {shape}, expected {ref.shape}")
            continue
        vals = gguf.quants.dequantize(t.data, t.tensor_type).reshape(ref.shape).astype(np.float32)
        scale = np.max(np.abs(ref), axis=-1, keepdims=True) + 1e-30
        err = float(np.max(np.abs(vals - ref) / scale))
        worst = max(worst, err)
        tol = TOLERANCE.get(t.tensor_type.name)
        if tol is None or err > tol:
            problems.append(f"{path}: {name} ({t.tensor_type.name}) relative error {err:.3g} > {tol}")
    return arch, len(got), len(fields), worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file", nargs="?")
    ap.add_argument("--hf", help="source Hugging Face directory of FILE")
    ap.add_argument("--lmstack", default="build/gguf/lmstack")
    args = ap.parse_args()
    problems = []
    if args.file:
        print(args.file, check_file(args.file, args.hf, problems))
    else:
        tmp = tempfile.mkdtemp(prefix="check_gguf_")
        for preset in ["tiny-llama", "tiny-mistral", "tiny-qwen2", "tiny-qwen3", "tiny-gpt2"]:
            d = os.path.join(tmp, preset)
            subprocess.run([args.lmstack, "init-model", "--preset", preset, "--dtype", "f32",
                            "--seed", "3", "--out", d], check=True, stdout=subprocess.DEVNULL)
            for typ in ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_K", "q6_K"]:
                out = os.path.join(tmp, f"{preset}-{typ}.gguf")
                subprocess.run([args.lmstack, "convert", "--model", d, "--out", out, "--type", typ],
                               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                arch, n_t, n_kv, worst = check_file(out, d, problems)
                print(f"{preset:13s} {typ:5s} arch={arch:6s} tensors={n_t:3d} keys={n_kv:3d} "
                      f"max relative error {worst:.2e}")
    for p in problems:
        print("PROBLEM:", p)
    print("OK" if not problems else f"{len(problems)} problems")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
