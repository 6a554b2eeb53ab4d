#!/usr/bin/env python3
"""Goldens for tests/model/yarn_test.cc: tiny random models with YaRN RoPE scaling (Peng et
al. 2023) saved by transformers, with transformers' own float64 logits and greedy tokens.

Cases (shapes of tools/ref/gen_moe_compat.py, whose helpers write and run them; positions
run to 80, past original_max_position_embeddings 16, so both ends of the YaRN ramp are used):
  qwen2        dense Qwen2, yarn factor 4: attention factor 0.1 ln 4 + 1 on cos/sin
  deepseek_v2  MLA + MoE, yarn factor 4, mscale = mscale_all_dim = 0.707 (DeepSeek-V2-Lite's
               form): attention factor 1, softmax scale x mscale(4, 0.707)^2
  deepseek_v3  MLA + MoE, yarn factor 4, mscale 1.0, mscale_all_dim 0.5: attention factor
               mscale(4, 1) / mscale(4, 0.5) on the rotated dims and the softmax mscale^2

Pinned versions: transformers 5.25.0 (PYTHONPATH=/work/pydeps/tf525 over /work/venv: torch
2.15.0) writes <case>/tf5/; transformers 4.57.6 (/work/venv) writes <case>/tf457/ for qwen2
and deepseek_v3 only: 4.57's DeepseekV2Attention does not apply the mscale_all_dim softmax
correction that DeepSeek's reference code applies (fixed in transformers PR #47435, 5.x), so
its V2 logits are not a reference. Files per <case>/<tag>: config.json, model.safetensors,
<tag>.logits.npy float32 [48, V], <tag>.greedy.npy int32 [32]; <case>/tokens.npy int32 [48].

Usage:
  PYTHONPATH=/work/pydeps/tf525 /work/venv/bin/python tools/ref/gen_yarn_golden.py --out tests/data/model/yarn
  /work/venv/bin/python tools/ref/gen_yarn_golden.py --out tests/data/model/yarn
"""
import argparse
import os
import shutil
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_moe_compat as g  # noqa: E402

YARN = {
    "qwen2": dict(factor=4.0, original_max_position_embeddings=16),
    "deepseek_v2": dict(factor=4.0, original_max_position_embeddings=16, beta_fast=32,
                        beta_slow=1, mscale=0.707, mscale_all_dim=0.707),
    "deepseek_v3": dict(factor=4.0, original_max_position_embeddings=16, beta_fast=32,
                        beta_slow=1, mscale=1.0, mscale_all_dim=0.5),
}
g.CASES["qwen2"] = ("Qwen2Config", "Qwen2ForCausalLM", 1e4,
                    dict(num_hidden_layers=2, intermediate_size=40))
plain_config = g.make_config


def yarn_config(case):
    config = plain_config(case)
    theta = g.CASES[case][2]
    if g.TF5:
        config.rope_parameters = {"rope_type": "yarn", "rope_theta": theta, **YARN[case]}
    else:
        config.rope_scaling = {"rope_type": "yarn", "type": "yarn", **YARN[case]}
    return config


g.make_config = yarn_config


def run(d, tokens, out_prefix):
    """The float64 logits of the prompt and a 32-token greedy continuation."""
    extra = {"experts_implementation": "eager", "use_kernels": False} if g.TF5 else {}
    model = g.transformers.AutoModelForCausalLM.from_pretrained(
        d, dtype=torch.float64, attn_implementation="eager", **extra).eval()
    store = {}
    g.router_hooks(model, store)  # only for its float64 fix-up of DeepSeek's router outputs
    with torch.no_grad():
        logits = model(torch.from_numpy(tokens[None].astype(np.int64))).logits[0]
        ids, out = list(tokens), []
        for _ in range(g.NEW):
            out.append(int(torch.argmax(model(torch.tensor([ids])).logits[0, -1])))
            ids.append(out[-1])
    np.save(out_prefix + ".logits.npy", logits.float().numpy())
    np.save(out_prefix + ".greedy.npy", np.array(out, dtype=np.int32))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.manual_seed(0)
    for seed, case in enumerate(YARN, start=1):
        if not g.TF5 and case == "deepseek_v2":
            continue  # see the docstring
        d = os.path.join(args.out, case)
        os.makedirs(d, exist_ok=True)
        tokens = np.random.default_rng(2000 + seed).integers(0, g.V, g.PROMPT).astype(np.int32)
        np.save(os.path.join(d, "tokens.npy"), tokens)
        sub = os.path.join(d, g.TAG)
        shutil.rmtree(sub, ignore_errors=True)
        g.write_dir(case, 100 + seed, sub, False)
        run(sub, tokens, os.path.join(d, g.TAG))
        print(case, g.TAG, "done")


if __name__ == "__main__":
    main()
