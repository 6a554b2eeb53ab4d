#!/usr/bin/env python3
"""PyTorch reference training run of tiny MoE models for tests/train/moe_parity_test.cc
(float64 autograd, the MoE MLP written by hand from transformers' MixtralSparseMoeBlock,
Qwen2MoeSparseMoeBlock and DeepseekV3TopkRouter; attention from gen_model_logits.py).

Cases: mixtral (top-2 of 4, softmax, renormalized), qwen2_moe (top-2 of 4, not renormalized,
sigmoid-gated shared expert, layer 1 a dense MLP, q/k/v biases) and qwen3_moe_v3routing (a
Qwen3-MoE model whose router is DeepSeek-V3's: sigmoid scores, e_score_correction_bias for the
selection only, 4 groups of 2 with the best 2 groups by their top-2 sum, renormalized, x 2.5;
the C++ test applies routing.json to the loaded config). The objective of each micro-batch is
CE_sum / (B·T·accum) + coef · aux / accum with transformers' load_balancing_loss_func: router
rows of every sparse layer and sequence concatenated, aux = E · Σ_e f_e · P_e, f_e the routed
(row, slot) share of e, P_e the mean softmax probability. Writes <out>/<case>/ as
gen_train_parity.py does (model/, tokens.npy, losses.npy, aux.npy [steps], grads1, final,
hparams.json) plus routing.json.

--check DIR compares this forward with transformers' logits of tests/data/model/moe_compat
(mixtral, qwen2_moe, qwen3_moe; tf457) so the reference does not rest on lmstack's reading.
Usage: /usr/bin/python3 tools/ref/gen_moe_train_parity.py --case mixtral --out tests/data/train
       /usr/bin/python3 tools/ref/gen_moe_train_parity.py --check tests/data/model/moe_compat
"""
import argparse, json, os, sys
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_model_logits as ref  # noqa: E402
import gen_train_parity as tp  # noqa: E402

torch.set_default_dtype(torch.float64)
V, C, L, H, HKV = 64, 32, 2, 4, 2
HP = dict(steps=12, accum=2, batch=2, seq=16, lr=3e-3, min_lr=3e-4, warmup=3, beta1=0.9,
          beta2=0.95, eps=1e-8, weight_decay=0.1, grad_clip=1.0, aux_coef=0.02)
V3ROUTING = dict(score="sigmoid", num_groups=4, topk_groups=2, group_top2_sum=True,
                 routed_scale=2.5, norm_topk_prob=True)


def config_for(case):
    base = {"vocab_size": V, "hidden_size": C, "num_hidden_layers": L, "num_attention_heads": H,
            "num_key_value_heads": HKV, "max_position_embeddings": 64, "rms_norm_eps": 1e-5,
            "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": False,
            "bos_token_id": 0, "eos_token_id": 0, "torch_dtype": "float32",
            "router_aux_loss_coef": HP["aux_coef"]}
    if case == "mixtral":
        return {**base, "architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
                "intermediate_size": 24, "num_local_experts": 4, "num_experts_per_tok": 2}
    if case == "qwen2_moe":
        return {**base, "architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe",
                "intermediate_size": 40, "num_experts": 4, "num_experts_per_tok": 2,
                "moe_intermediate_size": 16, "shared_expert_intermediate_size": 24,
                "norm_topk_prob": False, "decoder_sparse_step": 1, "mlp_only_layers": [1],
                "qkv_bias": True}
    return {**base, "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
            "head_dim": C // H, "intermediate_size": 40, "num_experts": 8,
            "num_experts_per_tok": 2, "moe_intermediate_size": 8, "norm_topk_prob": True,
            "decoder_sparse_step": 1, "mlp_only_layers": []}


def moe_spec(cfg):
    """Per-architecture MoE facts: names, sizes, sparse layers."""
    arch = cfg["architectures"][0]
    mix = arch == "MixtralForCausalLM"
    e = cfg.get("num_local_experts", cfg.get("num_experts"))
    sparse = [i for i in range(cfg["num_hidden_layers"])
              if i not in cfg.get("mlp_only_layers", []) and
              (i + 1) % cfg.get("decoder_sparse_step", 1) == 0]
    return dict(block="block_sparse_moe." if mix else "mlp.", names=("w1", "w3", "w2") if mix else
                ("gate_proj", "up_proj", "down_proj"), E=e, k=cfg["num_experts_per_tok"],
                F=cfg["intermediate_size"] if mix else cfg["moe_intermediate_size"],
                S=cfg.get("shared_expert_intermediate_size", 0), sparse=sparse,
                norm=True if mix else cfg.get("norm_topk_prob", False))


def tensor_shapes(cfg):
    s, hd = moe_spec(cfg), cfg.get("head_dim") or C // H
    out = [("model.embed_tokens.weight", (V, C), "w")]
    for i in range(L):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", (C,), "n"),
                (p + "self_attn.q_proj.weight", (H * hd, C), "w"),
                (p + "self_attn.k_proj.weight", (HKV * hd, C), "w"),
                (p + "self_attn.v_proj.weight", (HKV * hd, C), "w"),
                (p + "self_attn.o_proj.weight", (C, H * hd), "w"),
                (p + "post_attention_layernorm.weight", (C,), "n")]
        if cfg.get("qkv_bias"):
            out += [(p + f"self_attn.{x}_proj.bias", (n * hd,), "b") for x, n in (("q", H), ("k", HKV), ("v", HKV))]
        if cfg["model_type"] == "qwen3_moe":
            out += [(p + "self_attn.q_norm.weight", (hd,), "n"), (p + "self_attn.k_norm.weight", (hd,), "n")]
        if i not in s["sparse"]:
            f = cfg["intermediate_size"]
            out += [(p + "mlp.gate_proj.weight", (f, C), "w"), (p + "mlp.up_proj.weight", (f, C), "w"),
                    (p + "mlp.down_proj.weight", (C, f), "w")]
            continue
        b = p + s["block"]
        out.append((b + "gate.weight", (s["E"], C), "w"))
        g, u, d = s["names"]
        for j in range(s["E"]):
            x = b + f"experts.{j}."
            out += [(x + g + ".weight", (s["F"], C), "w"), (x + u + ".weight", (s["F"], C), "w"),
                    (x + d + ".weight", (C, s["F"]), "w")]
        if s["S"]:
            x = b + "shared_expert."
            out += [(x + "gate_proj.weight", (s["S"], C), "w"), (x + "up_proj.weight", (s["S"], C), "w"),
                    (x + "down_proj.weight", (C, s["S"]), "w"), (b + "shared_expert_gate.weight", (1, C), "w")]
    return out + [("model.norm.weight", (C,), "n"), ("lm_head.weight", (V, C), "w")]


def route(logits, s, routing, bias):
    """Chosen experts [T, k] and their weights [T, k] (differentiable in logits)."""
    k = s["k"]
    if routing is None:  # Mixtral / Qwen-MoE: softmax over all, top-k, optional renorm
        probs = torch.softmax(logits, -1)
        w, idx = torch.topk(probs, k, -1)
        if s["norm"]:
            w = w / w.sum(-1, keepdim=True)
        return idx, w
    scores = torch.sigmoid(logits)  # DeepseekV3TopkRouter.get_topk_indices
    choice = (scores + bias).detach()
    t, e, g = logits.shape[0], logits.shape[1], routing["num_groups"]
    group = choice.view(t, g, e // g).topk(2, -1)[0].sum(-1)
    keep = torch.zeros(t, g).scatter_(1, torch.topk(group, routing["topk_groups"], -1, sorted=False)[1], 1)
    mask = keep.unsqueeze(-1).expand(t, g, e // g).reshape(t, e)
    idx = torch.topk(choice.masked_fill(mask == 0, 0.0), k, -1, sorted=False)[1]
    w = scores.gather(1, idx)
    w = w / (w.sum(-1, keepdim=True) + 1e-20)
    return idx, w * routing["routed_scale"]


def swiglu(h, w, p, names):
    g, u, d = names
    return (torch.nn.functional.silu(h @ w[p + g + ".weight"].T) * (h @ w[p + u + ".weight"].T)) @ w[p + d + ".weight"].T


def moe_mlp(h, w, b, s, routing, bias, router_logits):
    logits = h @ w[b + "gate.weight"].T
    router_logits.append(logits)
    idx, wt = route(logits, s, routing, bias)
    out = torch.zeros_like(h)
    for e in range(s["E"]):
        rows, slot = torch.where(idx == e)
        if len(rows):
            out = out.index_add(0, rows, wt[rows, slot, None] * swiglu(h[rows], w, b + f"experts.{e}.", s["names"]))
    if s["S"]:
        y = swiglu(h, w, b + "shared_expert.", ("gate_proj", "up_proj", "down_proj"))
        out = out + torch.sigmoid(h @ w[b + "shared_expert_gate.weight"].T) * y
    return out, idx


def forward(cfg, w, ids, routing=None, biases=None, router_logits=None, chosen=None):
    s = moe_spec(cfg)
    arch = cfg["architectures"][0]
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or cfg["hidden_size"] // nh
    eps, t = cfg["rms_norm_eps"], len(ids)
    inv, pos = ref.inv_freq_for(cfg, hd), torch.arange(t)
    router_logits = [] if router_logits is None else router_logits
    chosen = [] if chosen is None else chosen
    x = w["model.embed_tokens.weight"][torch.tensor(ids)]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = ref.rms_norm(x, w[p + "input_layernorm.weight"], eps)
        def proj(name):
            y = h @ w[p + f"self_attn.{name}_proj.weight"].T
            bn = p + f"self_attn.{name}_proj.bias"
            return y + w[bn] if bn in w else y
        q, k, v = proj("q").view(t, nh, hd), proj("k").view(t, nkv, hd), proj("v").view(t, nkv, hd)
        if arch == "Qwen3MoeForCausalLM":
            q = ref.rms_norm(q, w[p + "self_attn.q_norm.weight"], eps)
            k = ref.rms_norm(k, w[p + "self_attn.k_norm.weight"], eps)
        q, k = ref.rope(q, pos, inv), ref.rope(k, pos, inv)
        x = x + ref.attention(q, k, v).reshape(t, nh * hd) @ w[p + "self_attn.o_proj.weight"].T
        h = ref.rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        if i in s["sparse"]:
            y, idx = moe_mlp(h, w, p + s["block"], s, routing, None if biases is None else biases[i], router_logits)
            chosen.append(idx)
            x = x + y
        else:
            x = x + swiglu(h, w, p + "mlp.", ("gate_proj", "up_proj", "down_proj"))
    return ref.rms_norm(x, w["model.norm.weight"], eps) @ w["lm_head.weight"].T


def aux_loss(router_logits, chosen, e):
    """transformers' load_balancing_loss_func, with the routing's own choices as the top-k."""
    logits, idx = torch.cat(router_logits, 0), torch.cat(chosen, 0)
    probs = torch.softmax(logits, -1)
    tokens_per_expert = torch.nn.functional.one_hot(idx, e).double().mean(0)  # [k, E]
    return e * torch.sum(tokens_per_expert * probs.mean(0).unsqueeze(0))


def check(root):
    for case in ("mixtral", "qwen2_moe", "qwen3_moe"):
        cfg, w = ref.load_dir(os.path.join(root, case, "tf457"))
        ids = np.load(os.path.join(root, case, "tokens.npy")).tolist()
        got = forward(cfg, w, ids).numpy()
        want = np.load(os.path.join(root, case, "tf457.logits.npy"))
        print(case, "max |logit - transformers|", float(np.abs(got - want).max()))
        assert np.abs(got - want).max() < 1e-4


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", choices=["mixtral", "qwen2_moe", "qwen3_moe_v3routing"])
    ap.add_argument("--out")
    ap.add_argument("--check")
    ap.add_argument("--seed", type=int, default=4321)
    a = ap.parse_args()
    if a.check:
        return check(a.check)
    rng = np.random.default_rng(a.seed)
    cfg = config_for(a.case)
    s = moe_spec(cfg)
    init = {}
    for name, shape, kind in tensor_shapes(cfg):
        init[name] = {"w": lambda: rng.normal(0, 0.2, shape), "n": lambda: 1 + rng.normal(0, 0.1, shape),
                      "b": lambda: rng.normal(0, 0.05, shape)}[kind]()
    init = {k: v.astype(np.float32) for k, v in init.items()}
    routing, biases = (V3ROUTING, {}) if a.case == "qwen3_moe_v3routing" else (None, None)
    out = os.path.join(a.out, a.case)
    os.makedirs(os.path.join(out, "model"), exist_ok=True)
    json.dump(cfg, open(os.path.join(out, "model", "config.json"), "w"), indent=2)
    tp.write_safetensors(os.path.join(out, "model", "model.safetensors"), init)
    if routing is not None:
        for i in s["sparse"]:
            biases[i] = torch.tensor(rng.normal(0, 0.1, s["E"]).astype(np.float32).astype(np.float64))
        json.dump({**routing, "bias": {str(i): b.tolist() for i, b in biases.items()}},
                  open(os.path.join(out, "routing.json"), "w"), indent=2)
    tokens = rng.integers(0, V, size=(HP["steps"], HP["accum"], HP["batch"], HP["seq"] + 1)).astype(np.int32)
    np.save(os.path.join(out, "tokens.npy"), tokens)
    json.dump(HP, open(os.path.join(out, "hparams.json"), "w"), indent=2)
    bias_names = {f"model.layers.{i}.mlp.gate.e_score_correction_bias": b for i, b in (biases or {}).items()}

    w = {k: torch.tensor(v.astype(np.float64), requires_grad=True) for k, v in init.items()}
    opt = torch.optim.AdamW([{"params": [t for t in w.values() if t.dim() == 2], "weight_decay": HP["weight_decay"]},
                             {"params": [t for t in w.values() if t.dim() != 2], "weight_decay": 0.0}],
                            lr=HP["lr"], betas=(HP["beta1"], HP["beta2"]), eps=HP["eps"])
    # An expert no row chose still gets a zero gradient (not None), so AdamW decays and moves
    # it as lmstack's dense optimizer does.
    for t in w.values():
        t.grad = torch.zeros_like(t)
    losses, auxes = [], []
    for step in range(HP["steps"]):
        opt.zero_grad()
        total, aux_total = 0.0, 0.0
        for m in range(HP["accum"]):
            ce, rl, ch = 0, [], []
            for b in range(HP["batch"]):
                win = tokens[step, m, b].tolist()
                logits = forward(cfg, w, win[:-1], routing, biases, rl, ch)
                ce = ce + torch.nn.functional.cross_entropy(logits, torch.tensor(win[1:]), reduction="sum")
            aux = aux_loss(rl, ch, s["E"])
            loss = ce / (HP["batch"] * HP["seq"] * HP["accum"]) + HP["aux_coef"] * aux / HP["accum"]
            loss.backward()
            total += ce.item() / (HP["batch"] * HP["seq"] * HP["accum"])
            aux_total += aux.item() / HP["accum"]
        losses.append(total)
        auxes.append(aux_total)
        if step == 0:
            g = {k: t.grad.numpy() for k, t in w.items()}
            g.update({n: np.zeros(s["E"]) for n in bias_names})
            tp.write_safetensors(os.path.join(out, "grads1.safetensors"), g)
        torch.nn.utils.clip_grad_norm_(list(w.values()), HP["grad_clip"])
        for grp in opt.param_groups:
            grp["lr"] = lr_at(step)
        opt.step()
    np.save(os.path.join(out, "losses.npy"), np.array(losses, dtype=np.float32))
    np.save(os.path.join(out, "aux.npy"), np.array(auxes, dtype=np.float32))
    final = {k: t.detach().numpy() for k, t in w.items()}
    final.update({n: b.numpy() for n, b in bias_names.items()})
    tp.write_safetensors(os.path.join(out, "final.safetensors"), final)
    print(a.case, "losses", " ".join(f"{x:.5f}" for x in losses))
    print(a.case, "aux", " ".join(f"{x:.5f}" for x in auxes))


def lr_at(step):
    import math
    if step < HP["warmup"]:
        return HP["lr"] * (step + 1) / HP["warmup"]
    progress = min(1.0, (step - HP["warmup"]) / max(1, HP["steps"] - HP["warmup"]))
    return HP["min_lr"] + 0.5 * (1 + math.cos(math.pi * progress)) * (HP["lr"] - HP["min_lr"])


if __name__ == "__main__":
    main()
