#!/usr/bin/env python3
"""Goldens for tests/model/moe_compat_test.cc: tiny random Mixtral, Qwen2-MoE, Qwen3-MoE,
DeepSeek-V2 and DeepSeek-V3 models saved by transformers 4.57 and by transformers 5.x, with
transformers' own float64 logits, greedy tokens and router choices.

Pinned versions: transformers 4.57.6 (/work/venv) and 5.24.0 (/work/venv-moe, which reads
torch 2.15.0, numpy 2.x and safetensors 0.8.0 from /work/venv through a .pth file).

Each case builds its config with the version's own config class (5.x: rope_parameters; 4.57:
rope_theta) and lets `save_pretrained` write config.json and the tensor names (both versions
write the per-expert layout, experts.<j>.<proj>.weight, even though 5.x holds fused expert
tensors in memory). The weights are then drawn with NumPy (seed per case, tensors in
sorted-name order of the saved file) and written back, so both versions hold the same numbers,
and the model is reloaded with from_pretrained (5.x converting to its fused layout) in float64
with eager attention:
  <case>/tf<ver>/config.json, model.safetensors   f32
  <case>/tf<ver>.logits.npy    float32 [T, V]: logits of every position of tokens.npy
  <case>/tf<ver>.greedy.npy    int32 [32]: greedy continuation (full forward per step)
  <case>/tf<ver>.router.npy    int32 [sparse layers, T, k]: each token's experts, ascending
  <case>/tokens.npy            int32 [48]: the prompt
and from the 5.x run the same model in bfloat16 (weights rounded once, config dtype bfloat16):
  <case>/tf5_bf16/..., tf5_bf16.logits.npy, tf5_bf16.greedy.npy, tf5_bf16.router.npy
whose reference is the float64 forward of the bf16-rounded weights.

Usage (both runs write into the same tree):
  /work/venv/bin/python tools/ref/gen_moe_compat.py --out tests/data/model/moe_compat
  /work/venv-moe/bin/python tools/ref/gen_moe_compat.py --out tests/data/model/moe_compat
"""
import argparse
import json
import os
import shutil

import numpy as np
import torch
import transformers
from safetensors.numpy import load_file, save_file

TF5 = int(transformers.__version__.split(".")[0]) >= 5
TAG = "tf5" if TF5 else "tf457"
V, C, H, HKV, MAXPOS = 80, 32, 4, 2, 256
PROMPT, NEW = 48, 32

COMMON = dict(vocab_size=V, hidden_size=C, num_attention_heads=H, num_key_value_heads=HKV,
              max_position_embeddings=MAXPOS, rms_norm_eps=1e-5, bos_token_id=0, eos_token_id=1,
              tie_word_embeddings=False)
# num_key_value_heads = heads, as DeepSeek's checkpoints set it (transformers' eager MLA
# repeats K/V by heads / num_key_value_heads, which must be 1 since keys are already per head).
MLA = dict(kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8,
           num_key_value_heads=H)
CASES = {
    # top-2 of 4 on both layers, softmax over the chosen logits
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", 1e6,
                dict(num_hidden_layers=2, intermediate_size=24, num_local_experts=4,
                     num_experts_per_tok=2)),
    # layer 1 dense (mlp_only_layers), shared expert with its sigmoid gate, no renormalization
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM", 1e4,
                  dict(num_hidden_layers=3, intermediate_size=40, num_experts=4,
                       num_experts_per_tok=2, moe_intermediate_size=16,
                       shared_expert_intermediate_size=24, decoder_sparse_step=1,
                       mlp_only_layers=[1], norm_topk_prob=False)),
    # every second layer sparse (decoder_sparse_step 2), q/k norm, renormalized top-3 of 6
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", 1e6,
                  dict(num_hidden_layers=2, intermediate_size=40, num_experts=6,
                       num_experts_per_tok=3, moe_intermediate_size=16, decoder_sparse_step=1,
                       head_dim=16, norm_topk_prob=True)),
    # MLA without q latent, first layer dense, group-limited top-2 of 8 in 2 of 4 groups
    "deepseek_v2": ("DeepseekV2Config", "DeepseekV2ForCausalLM", 1e4,
                    dict(num_hidden_layers=3, intermediate_size=40, n_routed_experts=8,
                         num_experts_per_tok=2, moe_intermediate_size=16, n_shared_experts=1,
                         first_k_dense_replace=1, q_lora_rank=None, n_group=4, topk_group=2,
                         topk_method="group_limited_greedy", routed_scaling_factor=1.5, **MLA)),
    # MLA with q latent, sigmoid scores + e_score_correction_bias, top-2-sum groups
    "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM", 1e4,
                    dict(num_hidden_layers=3, intermediate_size=40, n_routed_experts=8,
                         num_experts_per_tok=3, moe_intermediate_size=16, n_shared_experts=2,
                         first_k_dense_replace=1, q_lora_rank=12, n_group=4, topk_group=2,
                         routed_scaling_factor=2.5, norm_topk_prob=True, **MLA)),
}


def make_config(case):
    cfg_cls, _, theta, extra = CASES[case]
    kw = dict(COMMON)
    kw.update(extra)
    if TF5:
        kw["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}
    else:
        kw["rope_theta"] = theta
    return getattr(transformers, cfg_cls)(**kw)


def draw(name, shape, rng):
    if name.endswith("norm.weight"):
        return 1.0 + 0.1 * rng.standard_normal(shape)
    if len(shape) == 1:  # biases and DeepSeek-V3's e_score_correction_bias
        return 0.1 * rng.standard_normal(shape)
    std = 0.5 if "embed" in name else shape[-1] ** -0.5
    return std * rng.standard_normal(shape)


def write_dir(case, seed, d, bf16):
    """save_pretrained's names and config, our seeded values; returns the directory."""
    config = make_config(case)
    model = getattr(transformers, CASES[case][1])(config)
    model.save_pretrained(d, safe_serialization=True)
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(d, extra)):
            os.remove(os.path.join(d, extra))
    path = os.path.join(d, "model.safetensors")
    names = load_file(path)
    rng = np.random.default_rng(seed)
    tensors = {}
    for name in sorted(names):
        vals = torch.from_numpy(draw(name, names[name].shape, rng).astype(np.float32))
        tensors[name] = vals.to(torch.bfloat16) if bf16 else vals
    from safetensors.torch import save_file as save_torch
    save_torch(tensors, path, metadata={"format": "pt"})
    if bf16:
        cfg_path = os.path.join(d, "config.json")
        cfg = json.load(open(cfg_path))
        cfg["dtype" if "dtype" in cfg else "torch_dtype"] = "bfloat16"
        json.dump(cfg, open(cfg_path, "w"), indent=2, sort_keys=True)


def router_hooks(model, store):
    """Forward hooks on every sparse layer's router: the chosen experts per token."""
    handles = []
    for i, layer in enumerate(model.model.layers):
        mlp = getattr(layer, "block_sparse_moe", None) or layer.mlp
        gate = getattr(mlp, "gate", None)
        if gate is None or not hasattr(mlp, "experts"):
            continue
        k = model.config.num_experts_per_tok

        def hook(_m, _inp, out, i=i, k=k):
            outs = out if isinstance(out, tuple) else (out,)
            idx = [o for o in outs if not o.is_floating_point()]
            chosen = idx[0] if idx else torch.topk(outs[0], k, dim=-1).indices  # logits
            if len(store.get(i, [])) == 0:  # the prompt's forward only
                store.setdefault(i, []).append(chosen.reshape(-1, k).sort(dim=-1).values)
            # DeepSeek's routers compute in float32 whatever the model's dtype; 4.57's V3 then
            # index_adds float64 expert outputs into a float32 sum, which torch refuses. The
            # float32 weights widened to float64 keep their values.
            if isinstance(out, tuple):
                return tuple(o.double() if o.is_floating_point() else o for o in out)
            return None

        handles.append(gate.register_forward_hook(hook))
    return handles


def run(d, tokens, out_prefix):
    # 5.x: the eager per-expert loop (its grouped_mm kernels take no float64).
    extra = {"experts_implementation": "eager"} if TF5 else {}
    model = transformers.AutoModelForCausalLM.from_pretrained(
        d, dtype=torch.float64, attn_implementation="eager", **extra).eval()
    store = {}
    handles = router_hooks(model, store)
    with torch.no_grad():
        logits = model(torch.from_numpy(tokens[None].astype(np.int64))).logits[0]
    router = np.stack([store[i][0].numpy() for i in sorted(store)]).astype(np.int32)
    ids, out = list(tokens), []
    with torch.no_grad():
        for _ in range(NEW):
            step = model(torch.tensor([ids])).logits[0, -1]
            out.append(int(torch.argmax(step)))
            ids.append(out[-1])
    for h in handles:
        h.remove()
    np.save(out_prefix + ".logits.npy", logits.float().numpy())
    np.save(out_prefix + ".greedy.npy", np.array(out, dtype=np.int32))
    np.save(out_prefix + ".router.npy", router)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.manual_seed(0)
    for seed, case in enumerate(CASES, start=1):
        d = os.path.join(args.out, case)
        os.makedirs(d, exist_ok=True)
        tokens = np.random.default_rng(1000 + seed).integers(0, V, PROMPT).astype(np.int32)
        np.save(os.path.join(d, "tokens.npy"), tokens)
        tags = [(TAG, False)] + ([("tf5_bf16", True)] if TF5 else [])
        for tag, bf16 in tags:
            sub = os.path.join(d, tag)
            shutil.rmtree(sub, ignore_errors=True)
            write_dir(case, seed, sub, bf16)
            run(sub, tokens, os.path.join(d, tag))
            print(case, tag, "done")


if __name__ == "__main__":
    main()
