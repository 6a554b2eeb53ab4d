#!/usr/bin/env python3
"""Reference forward pass in PyTorch (float64) for the architectures lmstack runs, written
from the Hugging Face modeling code's semantics: Llama/Mistral (RMSNorm, rotate-half RoPE with
default/linear/llama3 scaling, GQA, SwiGLU), Qwen2 (+ q/k/v biases), Qwen3 (+ per-head q/k
RMSNorm), GPT-2 (learned positions, LayerNorm, Conv1D, gelu_new). It reads an HF directory
(config.json + model.safetensors, parsed by hand: 8-byte header length, JSON, raw data) and
writes golden data for tests/model/parity_test.cc:

  <out>/<name>.logits.npy   float32 [T, V]: logits of every position of --tokens
  <out>/<name>.greedy.npy   int32 [N]: greedy continuation of --tokens (full recompute/step)

Usage: /usr/bin/python3 tools/ref/gen_model_logits.py --model DIR --name NAME --out DIR
       [--tokens 1,2,3] [--greedy 32]
"""
import argparse, json, math, os, struct
import numpy as np
import torch

DT = torch.float64
SAFE_DTYPES = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "I64": np.int64}


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        raw = data[base + a:base + b]
        if info["dtype"] == "BF16":
            u16 = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
            arr = u16.view(np.float32)
        else:
            arr = np.frombuffer(raw, dtype=SAFE_DTYPES[info["dtype"]])
        out[name] = torch.from_numpy(arr.astype(np.float64).reshape(info["shape"]))
    return out


def load_dir(d):
    cfg = json.load(open(os.path.join(d, "config.json")))
    w = {}
    idx = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(idx):
        for f in sorted(set(json.load(open(idx))["weight_map"].values())):
            w.update(load_safetensors(os.path.join(d, f)))
    else:
        w.update(load_safetensors(os.path.join(d, "model.safetensors")))
    return cfg, w


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def inv_freq_for(cfg, dim):
    theta = cfg.get("rope_theta", 10000.0)
    inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=DT) / dim))
    rs = cfg.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type", "default"))
    if kind == "linear":
        inv = inv / rs["factor"]
    elif kind == "llama3":
        factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        low_wl, high_wl = old / lo, old / hi
        wl = 2 * math.pi / inv
        scaled = torch.where(wl > low_wl, inv / factor, inv)
        smooth = (old / wl - lo) / (hi - lo)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        mid = (wl >= high_wl) & (wl <= low_wl)
        inv = torch.where(mid, smoothed, scaled)
    return inv


def rope(x, pos, inv):  # x [T, H, D], rotate-half pairs (i, i + D/2)
    ang = pos[:, None].to(DT) * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1)[:, None, :]
    sin = torch.cat([ang.sin(), ang.sin()], -1)[:, None, :]
    h = x.shape[-1] // 2
    rot = torch.cat([-x[..., h:], x[..., :h]], -1)
    return x * cos + rot * sin


def attention(q, k, v):  # [T, H, D], [T, Hkv, D]: causal, GQA by repeating kv heads
    t, h, d = q.shape
    rep = h // k.shape[1]
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    s = torch.einsum("thd,shd->hts", q, k) / math.sqrt(d)
    mask = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
    s = s.masked_fill(mask, float("-inf"))
    return torch.einsum("hts,shd->thd", torch.softmax(s, -1), v)


def llama_forward(cfg, w, ids):
    arch = cfg["architectures"][0]
    c, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads", nh)
    hd = cfg.get("head_dim") or c // nh
    eps = cfg.get("rms_norm_eps", 1e-6)
    inv = inv_freq_for(cfg, hd)
    t = len(ids)
    pos = torch.arange(t)
    x = w["model.embed_tokens.weight"][torch.tensor(ids)]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        def proj(name):
            y = h @ w[p + f"self_attn.{name}_proj.weight"].T
            b = p + f"self_attn.{name}_proj.bias"
            return y + w[b] if b in w else y
        q, k, v = proj("q").view(t, nh, hd), proj("k").view(t, nkv, hd), proj("v").view(t, nkv, hd)
        if arch == "Qwen3ForCausalLM":
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps)
        q, k = rope(q, pos, inv), rope(k, pos, inv)
        a = attention(q, k, v).reshape(t, nh * hd)
        x = x + a @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        g = h @ w[p + "mlp.gate_proj.weight"].T
        u = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(g) * u) @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return x @ head.T


def gpt2_forward(cfg, w, ids):
    pre = "transformer." if "transformer.wte.weight" in w else ""
    c, nh = cfg["n_embd"], cfg["n_head"]
    hd, eps, t = c // nh, cfg.get("layer_norm_epsilon", 1e-5), len(ids)
    ln = lambda x, n: torch.nn.functional.layer_norm(x, (c,), w[n + ".weight"], w[n + ".bias"], eps)
    x = w[pre + "wte.weight"][torch.tensor(ids)] + w[pre + "wpe.weight"][:t]
    for i in range(cfg["n_layer"]):
        p = f"{pre}h.{i}."
        h = ln(x, p + "ln_1")
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]  # Conv1D: x @ W
        q, k, v = [z.reshape(t, nh, hd) for z in qkv.split(c, -1)]
        a = attention(q, k, v).reshape(t, c)
        x = x + a @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h = ln(x, p + "ln_2")
        f = h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"]
        f = 0.5 * f * (1 + torch.tanh(math.sqrt(2 / math.pi) * (f + 0.044715 * f ** 3)))
        x = x + f @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = ln(x, pre + "ln_f")
    return x @ w[pre + "wte.weight"].T


def forward(cfg, w, ids):
    if cfg["architectures"][0] == "GPT2LMHeadModel":
        return gpt2_forward(cfg, w, ids)
    return llama_forward(cfg, w, ids)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokens", default="1,5,9,200,17,3,44,101,7,250,99,12,8,64,33,2")
    ap.add_argument("--greedy", type=int, default=32)
    a = ap.parse_args()
    cfg, w = load_dir(a.model)
    ids = [int(s) for s in a.tokens.split(",")]
    with torch.no_grad():
        logits = forward(cfg, w, ids)
        np.save(os.path.join(a.out, a.name + ".logits.npy"), logits.numpy().astype(np.float32))
        seq = list(ids)
        for _ in range(a.greedy):
            seq.append(int(torch.argmax(forward(cfg, w, seq)[-1])))
        np.save(os.path.join(a.out, a.name + ".greedy.npy"),
                np.array(seq[len(ids):], dtype=np.int32))


if __name__ == "__main__":
    main()
