#!/usr/bin/env python3
"""PyTorch float64 reference training of DeepSeek multi-head latent attention (MLA) models for
tests/train/mla_train_test.cc, hand-written from transformers' DeepseekV2Attention /
DeepseekV3Attention (and its RoPE / YaRN helpers), not from lmstack's code.

Before writing anything, the forward is checked against transformers' own logits: the
tests/data/model/yarn/deepseek_v{2,3}/tf5 goldens (MLA + MoE, YaRN; written by
tools/ref/gen_yarn_golden.py with transformers 5.25) and tests/data/model/moe_compat/
deepseek_v{2,3}/tf5 (default RoPE). The MoE layers there get a hand-written router and experts
only for this check. V2 rotates complex pairs (2i, 2i+1); V3 with rope_interleave
de-interleaves and rotates halves, as transformers does (lmstack rotates the pairs in place).

Cases (MLA + dense SwiGLU MLP: n_routed_experts null; training of MoE is not covered here):
  v2  DeepseekV2ForCausalLM, q_proj (no q latent), interleaved RoPE, default rope
  v3  DeepseekV3ForCausalLM, q latent (q_a_proj, q_a_layernorm, q_b_proj), YaRN factor 4,
      original_max_position_embeddings 8, mscale 1.0 != mscale_all_dim 0.5
Both have v_head_dim 8 < qk 12, so lmstack's zero-padding of V is exercised. The training run
is tools/ref/gen_train_parity.py's (AdamW, clipping, accumulation, warmup + cosine); files as
there, under <out>/mla_<case>/.
Usage: /usr/bin/python3 tools/ref/gen_mla_train_parity.py --case v3 --out tests/data/train
       /usr/bin/python3 tools/ref/gen_mla_train_parity.py --check   (cross-check only)
"""
import argparse, json, math, os, sys
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_model_logits as ref  # noqa: E402
import gen_train_parity as tp  # noqa: E402

torch.set_default_dtype(torch.float64)
DT = torch.float64
LATENT_EPS = 1e-6  # DeepseekV2RMSNorm / V3RMSNorm default, used by q_a and kv_a layernorms
V, C, F, L, H, R, QR, DN, DR, DV = 64, 32, 48, 2, 4, 16, 12, 8, 4, 8
HP = dict(tp.HP, steps=12)


def yarn_mscale(scale, m=1.0):
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0


def rope_params(cfg):
    return cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}


def inv_freq_and_factor(cfg):
    """transformers' _compute_default / _compute_yarn_parameters for dim = qk_rope_head_dim."""
    rs, dim = rope_params(cfg), cfg["qk_rope_head_dim"]
    base = rs.get("rope_theta", cfg.get("rope_theta", 10000.0))
    pos_freqs = base ** (torch.arange(0, dim, 2, dtype=DT) / dim)
    if rs.get("rope_type", rs.get("type", "default")) != "yarn":
        return 1.0 / pos_freqs, 1.0
    factor, orig = rs["factor"], rs["original_max_position_embeddings"]
    fast, slow = rs.get("beta_fast", 32), rs.get("beta_slow", 1)
    corr = lambda rot: (dim * math.log(orig / (rot * 2 * math.pi))) / (2 * math.log(base))
    low, high = max(math.floor(corr(fast)), 0), min(math.ceil(corr(slow)), dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(dim // 2, dtype=DT) - low) / (high - low)).clamp(0, 1)
    extra = 1 - ramp
    inv = (1 / (factor * pos_freqs)) * (1 - extra) + (1 / pos_freqs) * extra
    m, m_all = rs.get("mscale"), rs.get("mscale_all_dim")
    if rs.get("attention_factor") is not None:
        af = rs["attention_factor"]
    elif m and m_all:
        af = yarn_mscale(factor, m) / yarn_mscale(factor, m_all)
    else:
        af = yarn_mscale(factor)
    return inv, af


def softmax_scale(cfg):
    rs = rope_params(cfg)
    s = (cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]) ** -0.5
    if rs.get("rope_type", rs.get("type")) == "yarn" and rs.get("mscale_all_dim"):
        s *= yarn_mscale(rs["factor"], rs["mscale_all_dim"]) ** 2
    return s


def apply_rope(cfg, x, pos, inv, af):
    """x [T, heads, dr] -> rotated, times the attention factor (cos and sin carry it)."""
    ang = pos[:, None].to(DT) * inv[None, :]
    t, h, d = x.shape
    v3 = cfg["model_type"] == "deepseek_v3"
    if not v3:  # DeepSeek-V2: view_as_complex over pairs (2i, 2i+1) times e^{i·ang}
        xc = torch.view_as_complex(x.reshape(t, h, d // 2, 2).contiguous())
        rot = torch.polar(torch.full_like(ang, af), ang)[:, None, :]
        return torch.view_as_real(xc * rot).reshape(t, h, d)
    if cfg.get("rope_interleave", True):  # V3: de-interleave, then rotate halves
        x = x.view(t, h, d // 2, 2).transpose(-1, -2).reshape(t, h, d)
    cos = torch.cat([ang.cos(), ang.cos()], -1)[:, None, :] * af
    sin = torch.cat([ang.sin(), ang.sin()], -1)[:, None, :] * af
    rot = torch.cat([-x[..., d // 2:], x[..., :d // 2]], -1)
    return x * cos + rot * sin


def mla(cfg, w, p, h, pos):
    t, nh = h.shape[0], cfg["num_attention_heads"]
    dn, dr, dv, r = (cfg[k] for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
                                      "kv_lora_rank"))
    a = p + "self_attn."
    if cfg.get("q_lora_rank"):
        ql = ref.rms_norm(h @ w[a + "q_a_proj.weight"].T, w[a + "q_a_layernorm.weight"], LATENT_EPS)
        q = ql @ w[a + "q_b_proj.weight"].T
    else:
        q = h @ w[a + "q_proj.weight"].T
    q_nope, q_pe = q.view(t, nh, dn + dr).split([dn, dr], -1)
    c, k_pe = (h @ w[a + "kv_a_proj_with_mqa.weight"].T).split([r, dr], -1)
    kv = ref.rms_norm(c, w[a + "kv_a_layernorm.weight"], LATENT_EPS) @ w[a + "kv_b_proj.weight"].T
    k_nope, v = kv.view(t, nh, dn + dv).split([dn, dv], -1)
    inv, af = inv_freq_and_factor(cfg)
    q_pe, k_pe = apply_rope(cfg, q_pe, pos, inv, af), apply_rope(cfg, k_pe.view(t, 1, dr), pos, inv, af)
    qh = torch.cat([q_nope, q_pe], -1)
    kh = torch.cat([k_nope, k_pe.expand(t, nh, dr)], -1)
    s = torch.einsum("thd,shd->hts", qh, kh) * softmax_scale(cfg)
    s = s.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
    o = torch.einsum("hts,shd->thd", torch.softmax(s, -1), v).reshape(t, nh * dv)
    return o @ w[a + "o_proj.weight"].T


def swiglu(w, p, x):
    g, u = x @ w[p + "gate_proj.weight"].T, x @ w[p + "up_proj.weight"].T
    return (torch.nn.functional.silu(g) * u) @ w[p + "down_proj.weight"].T


def moe(cfg, w, p, x):
    """DeepseekV2MoE (softmax, greedy / group_limited_greedy) or DeepseekV3MoE (sigmoid, bias
    for selection, groups by the sum of their best two, renormalized); cross-check only."""
    t, e, k = x.shape[0], cfg["n_routed_experts"], cfg["num_experts_per_tok"]
    logits = x @ w[p + "mlp.gate.weight"].T
    ng, tg = cfg.get("n_group", 1), cfg.get("topk_group", 1)
    if cfg["model_type"] == "deepseek_v3":
        scores = logits.sigmoid()
        choice = scores + w[p + "mlp.gate.e_score_correction_bias"]
        group = choice.view(t, ng, -1).topk(2, -1)[0].sum(-1)
    else:
        scores = choice = logits.softmax(-1)
        group = choice.view(t, ng, -1).max(-1)[0]
    if cfg.get("topk_method", "greedy") != "greedy" or cfg["model_type"] == "deepseek_v3":
        keep = torch.zeros_like(group).scatter(1, group.topk(tg, -1)[1], 1)
        keep = keep[:, :, None].expand(t, ng, e // ng).reshape(t, e)
        choice = choice.masked_fill(keep == 0, 0.0)
    idx = choice.topk(k, -1)[1]
    wt = scores.gather(1, idx)
    if cfg["model_type"] == "deepseek_v3" and cfg.get("norm_topk_prob"):
        wt = wt / (wt.sum(-1, keepdim=True) + 1e-20)
    wt = wt * cfg.get("routed_scaling_factor", 1.0)
    out = torch.zeros_like(x)
    for j in range(e):
        rows, slot = (idx == j).nonzero(as_tuple=True)
        if len(rows):
            out[rows] += wt[rows, slot, None] * swiglu(w, p + f"mlp.experts.{j}.", x[rows])
    if cfg.get("n_shared_experts"):
        out = out + swiglu(w, p + "mlp.shared_experts.", x)
    return out


def forward(cfg, w, ids):
    eps, t = cfg["rms_norm_eps"], len(ids)
    pos = torch.arange(t)
    x = w["model.embed_tokens.weight"][torch.tensor(ids)]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        x = x + mla(cfg, w, p, ref.rms_norm(x, w[p + "input_layernorm.weight"], eps), pos)
        h = ref.rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        x = x + (swiglu(w, p + "mlp.", h) if p + "mlp.gate_proj.weight" in w else moe(cfg, w, p, h))
    return ref.rms_norm(x, w["model.norm.weight"], eps) @ w["lm_head.weight"].T


def cross_check():
    """The reference forward against transformers' logits (MLA + MoE checkpoints)."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tests/data/model")
    for sub in ("yarn/deepseek_v2", "yarn/deepseek_v3", "moe_compat/deepseek_v2",
                "moe_compat/deepseek_v3"):
        d = os.path.join(root, sub)
        cfg, w = ref.load_dir(os.path.join(d, "tf5"))
        ids = np.load(os.path.join(d, "tokens.npy")).tolist()
        with torch.no_grad():
            got = forward(cfg, w, ids).numpy()
        want = np.load(os.path.join(d, "tf5.logits.npy"))
        err = np.abs(got - want).max() / np.abs(want).max()
        print(f"cross-check {sub}: max |ref - transformers| / max |logit| = {err:.2e}")
        assert err < 1e-5, sub


def config_for(case):
    v3 = case == "v3"
    cfg = {"architectures": ["DeepseekV3ForCausalLM" if v3 else "DeepseekV2ForCausalLM"],
           "model_type": "deepseek_v3" if v3 else "deepseek_v2", "vocab_size": V,
           "hidden_size": C, "intermediate_size": F, "num_hidden_layers": L,
           "num_attention_heads": H, "num_key_value_heads": H, "max_position_embeddings": 64,
           "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu",
           "tie_word_embeddings": False, "attention_bias": False, "n_routed_experts": None,
           "q_lora_rank": QR if v3 else None, "kv_lora_rank": R, "qk_nope_head_dim": DN,
           "qk_rope_head_dim": DR, "v_head_dim": DV, "bos_token_id": 0, "eos_token_id": 0,
           "torch_dtype": "float32"}
    if v3:
        cfg["rope_interleave"] = True
        cfg["rope_scaling"] = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8,
                               "beta_fast": 32, "beta_slow": 1, "mscale": 1.0,
                               "mscale_all_dim": 0.5}
    return cfg


def tensor_shapes(case):
    out = [("model.embed_tokens.weight", (V, C), "w")]
    for i in range(L):
        p, a = f"model.layers.{i}.", f"model.layers.{i}.self_attn."
        out.append((p + "input_layernorm.weight", (C,), "n"))
        if case == "v3":
            out += [(a + "q_a_proj.weight", (QR, C), "w"), (a + "q_a_layernorm.weight", (QR,), "n"),
                    (a + "q_b_proj.weight", (H * (DN + DR), QR), "w")]
        else:
            out.append((a + "q_proj.weight", (H * (DN + DR), C), "w"))
        out += [(a + "kv_a_proj_with_mqa.weight", (R + DR, C), "w"),
                (a + "kv_a_layernorm.weight", (R,), "n"),
                (a + "kv_b_proj.weight", (H * (DN + DV), R), "w"),
                (a + "o_proj.weight", (C, H * DV), "w"),
                (p + "post_attention_layernorm.weight", (C,), "n"),
                (p + "mlp.gate_proj.weight", (F, C), "w"), (p + "mlp.up_proj.weight", (F, C), "w"),
                (p + "mlp.down_proj.weight", (C, F), "w")]
    return out + [("model.norm.weight", (C,), "n"), ("lm_head.weight", (V, C), "w")]


def train(case, out_root, seed):
    rng = np.random.default_rng(seed)
    init = {}
    for name, shape, kind in tensor_shapes(case):
        init[name] = rng.normal(0, 0.2, shape) if kind == "w" else 1 + rng.normal(0, 0.1, shape)
    init = {k: v.astype(np.float32) for k, v in init.items()}
    out = os.path.join(out_root, "mla_" + case)
    os.makedirs(os.path.join(out, "model"), exist_ok=True)
    cfg = config_for(case)
    json.dump(cfg, open(os.path.join(out, "model", "config.json"), "w"), indent=2)
    tp.write_safetensors(os.path.join(out, "model", "model.safetensors"), init)
    tokens = rng.integers(0, V, size=(HP["steps"], HP["accum"], HP["batch"], HP["seq"] + 1)).astype(np.int32)
    np.save(os.path.join(out, "tokens.npy"), tokens)
    json.dump(HP, open(os.path.join(out, "hparams.json"), "w"), indent=2)
    w = {k: torch.tensor(v.astype(np.float64), requires_grad=True) for k, v in init.items()}
    opt = torch.optim.AdamW([{"params": [t for t in w.values() if t.dim() == 2], "weight_decay": HP["weight_decay"]},
                             {"params": [t for t in w.values() if t.dim() != 2], "weight_decay": 0.0}],
                            lr=HP["lr"], betas=(HP["beta1"], HP["beta2"]), eps=HP["eps"])
    losses = []
    for step in range(HP["steps"]):
        opt.zero_grad()
        total = 0.0
        for m in range(HP["accum"]):
            loss = 0
            for b in range(HP["batch"]):
                win = tokens[step, m, b].tolist()
                loss = loss + torch.nn.functional.cross_entropy(forward(cfg, w, win[:-1]), torch.tensor(win[1:]), reduction="sum")
            loss = loss / (HP["batch"] * HP["seq"] * HP["accum"])
            loss.backward()
            total += loss.item()
        losses.append(total)
        if step == 0:
            tp.write_safetensors(os.path.join(out, "grads1.safetensors"), {k: t.grad.numpy() for k, t in w.items()})
        torch.nn.utils.clip_grad_norm_(list(w.values()), HP["grad_clip"])
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        opt.step()
    np.save(os.path.join(out, "losses.npy"), np.array(losses, dtype=np.float32))
    tp.write_safetensors(os.path.join(out, "final.safetensors"), {k: t.detach().numpy() for k, t in w.items()})
    print(case, "losses", " ".join(f"{x:.5f}" for x in losses))


def lr_at(step):  # gen_train_parity.lr_at with this file's step count
    if step < HP["warmup"]:
        return HP["lr"] * (step + 1) / HP["warmup"]
    progress = min(1.0, (step - HP["warmup"]) / max(1, HP["steps"] - HP["warmup"]))
    return HP["min_lr"] + 0.5 * (1 + math.cos(math.pi * progress)) * (HP["lr"] - HP["min_lr"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", choices=["v2", "v3"])
    ap.add_argument("--out")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--check", action="store_true", help="only the cross-check against transformers")
    a = ap.parse_args()
    cross_check()
    if not a.check:
        train(a.case, a.out, a.seed)


if __name__ == "__main__":
    main()
