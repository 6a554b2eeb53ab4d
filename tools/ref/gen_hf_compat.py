#!/usr/bin/env python3
"""Goldens for tests/model/hf_compat_test.cc and tests/train/sliding_window_test.cc: the same
tiny random models saved by transformers 4.57 and by transformers 5.x.

Pinned versions: transformers 4.57.6 (with tokenizers 0.22.2, huggingface_hub 0.36.2, from
/work/pydeps/tf457 first on PYTHONPATH) and transformers 5.24.0 (the /work/venv-ref venv);
torch 2.15.0, numpy 2.x, safetensors 0.8.0.

Each case builds its config with the version's own config class, passing RoPE the way that
version spells it (5.x: rope_parameters; 4.57: rope_theta + rope_scaling), so config.json is
exactly what `save_pretrained` of that version writes. The weights are drawn with NumPy
(seed per case, tensors in sorted-name order), so both versions hold the same numbers. Then,
with transformers' own model in float64 and eager attention:
  <case>/tf<ver>/config.json, model.safetensors   save_pretrained output (f32)
  <case>/tf<ver>.logits.npy   float32 [T, V]: logits of every position of tokens.npy
  <case>/tf<ver>.greedy.npy   int32 [16]: greedy continuation (full forward per step, no cache)
  <case>/tokens.npy           int32 [48]: the prompt
and for the sliding-window cases, from the 5.x run, the training goldens (loss and gradients
of the mean next-token cross-entropy over a [2, 40] batch, by torch autograd in float64):
  <case>/train_tokens.npy     int32 [2, 41]
  <case>/tf5.train.safetensors  f32 gradients (HF names) and "loss" [1]

Cases: llama with Llama 3 RoPE scaling; mistral with sliding_window 8 (every layer); qwen2 with
use_sliding_window, window 8, max_window_layers 1 (layer 0 full, layer 1 windowed); qwen3 with
rope_theta 1e6, explicit head_dim and tied embeddings; gpt2.

Usage (both runs write into the same tree; the second checks nothing, the C++ test compares):
  /work/venv-ref/bin/python tools/ref/gen_hf_compat.py --out tests/data/model/hf_compat
  PYTHONPATH=/work/pydeps/tf457 /work/venv-ref/bin/python tools/ref/gen_hf_compat.py \
      --out tests/data/model/hf_compat
"""
import argparse
import os

import numpy as np
import torch
import transformers
from safetensors.torch import save_file

TF5 = int(transformers.__version__.split(".")[0]) >= 5
TAG = "tf5" if TF5 else "tf457"
V, C, F, L, H, HKV, MAXPOS = 80, 32, 48, 2, 4, 2, 128
PROMPT, NEW, TRAIN_B, TRAIN_T = 48, 16, 2, 40

LLAMA3 = {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 32}
CASES = {
    "llama_rope_llama3": ("LlamaConfig", "LlamaForCausalLM", 500000.0, LLAMA3, {}),
    "mistral_window8": ("MistralConfig", "MistralForCausalLM", 10000.0, None,
                        {"sliding_window": 8}),
    "qwen2_window8": ("Qwen2Config", "Qwen2ForCausalLM", 10000.0, None,
                      {"use_sliding_window": True, "sliding_window": 8, "max_window_layers": 1}),
    "qwen3_tied": ("Qwen3Config", "Qwen3ForCausalLM", 1000000.0, None,
                   {"head_dim": 16, "tie_word_embeddings": True}),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", None, None, {}),
}
WINDOWED = {"mistral_window8", "qwen2_window8"}


def make_config(case):
    cfg_cls, _, theta, scaling, extra = CASES[case]
    cls = getattr(transformers, cfg_cls)
    if cfg_cls == "GPT2Config":
        return cls(vocab_size=V, n_embd=C, n_layer=L, n_head=H, n_positions=64, n_inner=F,
                   bos_token_id=0, eos_token_id=0)
    kw = dict(vocab_size=V, hidden_size=C, intermediate_size=F, num_hidden_layers=L,
              num_attention_heads=H, num_key_value_heads=HKV, max_position_embeddings=MAXPOS,
              rms_norm_eps=1e-5, bos_token_id=0, eos_token_id=1)
    kw.setdefault("tie_word_embeddings", False)
    kw.update(extra)
    if TF5:
        kw["rope_parameters"] = dict(scaling or {"rope_type": "default"}, rope_theta=theta)
    else:
        kw["rope_theta"] = theta
        if scaling:
            kw["rope_scaling"] = dict(scaling)
    return cls(**kw)


def make_model(case, seed):
    config = make_config(case)
    config._attn_implementation = "eager"
    model = getattr(transformers, CASES[case][1])(config).eval()
    rng = np.random.default_rng(seed)
    tied = config.tie_word_embeddings
    with torch.no_grad():
        for name, p in sorted(model.state_dict(keep_vars=True).items()):
            if tied and name == "lm_head.weight":
                continue
            shape = tuple(p.shape)
            if name.endswith("norm.weight") or name.endswith(("ln_1.weight", "ln_2.weight",
                                                                  "ln_f.weight")):
                vals = 1.0 + 0.1 * rng.standard_normal(shape)
            elif len(shape) == 1:
                vals = 0.1 * rng.standard_normal(shape)
            else:
                fan_in = shape[0] if "transformer.h." in name else shape[-1]  # GPT-2 Conv1D
                std = 0.5 if ("embed" in name or "wte" in name or "wpe" in name) else fan_in ** -0.5
                vals = std * rng.standard_normal(shape)
            p.copy_(torch.from_numpy(vals.astype(np.float32)))
    return model


def greedy(model, ids):
    ids = list(ids)
    out = []
    with torch.no_grad():
        for _ in range(NEW):
            logits = model(torch.tensor([ids])).logits[0, -1]
            out.append(int(torch.argmax(logits)))
            ids.append(out[-1])
    return np.array(out, dtype=np.int32)


def train_golden(model, tokens):
    model.zero_grad()
    inputs = torch.from_numpy(tokens[:, :-1].astype(np.int64))
    targets = torch.from_numpy(tokens[:, 1:].astype(np.int64))
    logits = model(inputs).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             targets.reshape(-1))
    loss.backward()
    grads = {n: p.grad.detach().float().contiguous() for n, p in model.named_parameters()}
    grads["loss"] = loss.detach().float().reshape(1)
    return grads


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    for seed, case in enumerate(CASES, start=1):
        d = os.path.join(args.out, case)
        model = make_model(case, seed)
        model.save_pretrained(os.path.join(d, TAG), safe_serialization=True)
        gen_cfg = os.path.join(d, TAG, "generation_config.json")
        if os.path.exists(gen_cfg):
            os.remove(gen_cfg)
        rng = np.random.default_rng(1000 + seed)
        tokens = rng.integers(0, V, PROMPT).astype(np.int32)
        np.save(os.path.join(d, "tokens.npy"), tokens)
        model = model.double()
        with torch.no_grad():
            logits = model(torch.from_numpy(tokens[None].astype(np.int64))).logits[0]
        np.save(os.path.join(d, f"{TAG}.logits.npy"), logits.float().numpy())
        np.save(os.path.join(d, f"{TAG}.greedy.npy"), greedy(model, tokens))
        if case in WINDOWED and TF5:  # the same numbers under 4.57 (logits are equal)
            train = rng.integers(0, V, (TRAIN_B, TRAIN_T + 1)).astype(np.int32)
            np.save(os.path.join(d, "train_tokens.npy"), train)
            save_file(train_golden(model, train), os.path.join(d, f"{TAG}.train.safetensors"))
        print(f"{case}: transformers {transformers.__version__} -> {d}/{TAG}")


if __name__ == "__main__":
    main()
