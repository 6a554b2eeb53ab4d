#!/usr/bin/env python3
"""PyTorch training-step throughput for the same model, batch and dtype as
`lmstack bench train` (the comparison of issue 6 item 4). Batched float32 (or bfloat16
autocast) forward of the llama family / gpt2 written with torch ops, cross-entropy, backward,
clip_grad_norm_ and AdamW; prints the median step time and tokens/s of --steps timed steps.
Usage: /usr/bin/python3 tools/ref/bench_train_torch.py --model DIR --batch 4 --seq 128
       [--dtype f32|bf16] [--threads 2] [--steps 3]
"""
import argparse, math, os, sys, time
import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_model_logits as ref  # noqa: E402


def causal_attention(q, k, v):  # [B, H, T, D], kv repeated to H heads
    t = q.shape[2]
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    s = s.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
    return torch.softmax(s, -1) @ v


def llama(cfg, w, ids):
    b, t = ids.shape
    c, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads", nh)
    hd = cfg.get("head_dim") or c // nh
    eps = cfg.get("rms_norm_eps", 1e-6)
    inv = ref.inv_freq_for(cfg, hd).float()
    ang = torch.arange(t).float()[:, None] * inv[None, :]
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
    rope = lambda x: x * cos + torch.cat([-x[..., hd // 2:], x[..., :hd // 2]], -1) * sin
    rms = lambda x, g: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g
    x = w["model.embed_tokens.weight"][ids]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms(x, w[p + "input_layernorm.weight"])
        proj = lambda n: F.linear(h, w[p + f"self_attn.{n}_proj.weight"], w.get(p + f"self_attn.{n}_proj.bias"))
        q = proj("q").view(b, t, nh, hd).transpose(1, 2)
        k = proj("k").view(b, t, nkv, hd).transpose(1, 2)
        v = proj("v").view(b, t, nkv, hd).transpose(1, 2)
        if p + "self_attn.q_norm.weight" in w:
            q, k = rms(q, w[p + "self_attn.q_norm.weight"]), rms(k, w[p + "self_attn.k_norm.weight"])
        q, k = rope(q), rope(k)
        k, v = k.repeat_interleave(nh // nkv, 1), v.repeat_interleave(nh // nkv, 1)
        a = causal_attention(q, k, v).transpose(1, 2).reshape(b, t, nh * hd)
        x = x + F.linear(a, w[p + "self_attn.o_proj.weight"])
        h = rms(x, w[p + "post_attention_layernorm.weight"])
        x = x + F.linear(F.silu(F.linear(h, w[p + "mlp.gate_proj.weight"])) * F.linear(h, w[p + "mlp.up_proj.weight"]),
                         w[p + "mlp.down_proj.weight"])
    x = rms(x, w["model.norm.weight"])
    return F.linear(x, w.get("lm_head.weight", w["model.embed_tokens.weight"]))


def gpt2(cfg, w, ids):
    b, t = ids.shape
    pre = "transformer." if "transformer.wte.weight" in w else ""
    c, nh = cfg["n_embd"], cfg["n_head"]
    ln = lambda x, n: F.layer_norm(x, (c,), w[n + ".weight"], w[n + ".bias"], cfg.get("layer_norm_epsilon", 1e-5))
    x = w[pre + "wte.weight"][ids] + w[pre + "wpe.weight"][:t]
    for i in range(cfg["n_layer"]):
        p = f"{pre}h.{i}."
        qkv = ln(x, p + "ln_1") @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = [z.view(b, t, nh, c // nh).transpose(1, 2) for z in qkv.split(c, -1)]
        a = causal_attention(q, k, v).transpose(1, 2).reshape(b, t, c)
        x = x + a @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        f = F.gelu(ln(x, p + "ln_2") @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"], approximate="tanh")
        x = x + f @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    return ln(x, pre + "ln_f") @ w[pre + "wte.weight"].T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cfg, w64 = ref.load_dir(a.model)
    w = {k: v.float().requires_grad_(True) for k, v in w64.items()}
    fwd = gpt2 if cfg["architectures"][0] == "GPT2LMHeadModel" else llama
    opt = torch.optim.AdamW(list(w.values()), lr=1e-4)
    rng = np.random.default_rng(1)
    vocab = cfg["vocab_size"]
    ids = torch.from_numpy(rng.integers(0, vocab, (a.batch, a.seq)))
    tgt = torch.from_numpy(rng.integers(0, vocab, (a.batch, a.seq)))
    times = []
    for s in range(a.steps + 1):
        t0 = time.perf_counter()
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
            logits = fwd(cfg, w, ids)
        loss = F.cross_entropy(logits.float().view(-1, vocab), tgt.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(w.values()), 1.0)
        opt.step()
        if s > 0:
            times.append(time.perf_counter() - t0)
    step = float(np.median(times))
    print(f"torch {torch.__version__} {a.dtype} threads {a.threads}: step {step:.3f} s, "
          f"{a.batch * a.seq / step:.0f} tok/s")


if __name__ == "__main__":
    main()
