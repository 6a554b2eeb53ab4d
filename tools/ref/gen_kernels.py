#!/usr/bin/env python3
"""PyTorch goldens for tests/kernels/pytorch_parity_test.cc: inputs, outputs and autograd
gradients of the non-matmul kernels, each computed the way Hugging Face computes it in f32
(LlamaRMSNorm, nn.LayerNorm, apply_rotary_pos_emb with rotate_half and the llama3 inv_freq,
GPT-J's rotate_every_two, SiLU·up, gelu_new, softmax, eager causal attention with repeat_kv).
Writes tests/data/kernels/<op>_<tensor>.npy (float32 / int32); gradients use a fixed upstream
gradient saved as <op>_dy.npy.

Usage: python3 tools/ref/gen_kernels.py   (seed 1234; torch 1.13, CPU)
"""
import math
import os

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "kernels")
rng = np.random.default_rng(1234)


def save(name, array):
    arr = np.ascontiguousarray(array.detach().numpy() if torch.is_tensor(array) else array)
    if arr.dtype == np.float64:
        arr = arr.astype(np.float32)
    np.save(os.path.join(OUT, name + ".npy"), arr)


def leaf(shape, lo=-1.0, hi=1.0):
    return torch.tensor(rng.uniform(lo, hi, shape).astype(np.float32), requires_grad=True)


def backward(op, y, inputs):
    dy = torch.tensor(rng.uniform(-1, 1, tuple(y.shape)).astype(np.float32))
    y.backward(dy)
    save(op + "_y", y)
    save(op + "_dy", dy)
    for name, t in inputs.items():
        save(op + "_" + name, t)
        save(op + "_d" + name, t.grad)


def rmsnorm():
    x, w = leaf((5, 67), -2, 2), leaf((67,), 0.5, 1.5)
    var = x.pow(2).mean(-1, keepdim=True)
    y = w * (x * torch.rsqrt(var + 1e-6))
    backward("rmsnorm", y, {"x": x, "w": w})


def layernorm():
    x, g, b = leaf((5, 67), -2, 3), leaf((67,), 0.5, 1.5), leaf((67,))
    y = torch.nn.functional.layer_norm(x, (67,), g, b, 1e-5)
    backward("layernorm", y, {"x": x, "g": g, "b": b})


def llama3_inv_freq(dim, theta, factor, low, high, old_ctx):
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    low_wavelen, high_wavelen = old_ctx / low, old_ctx / high
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_ctx / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled)


def rope():
    positions = torch.tensor([0, 1, 17, 500, 8191, 70000], dtype=torch.int32)
    save("rope_positions", positions.numpy())
    # Llama 3.1: rotate_half over the whole head, llama3-scaled frequencies.
    inv_freq = llama3_inv_freq(64, 500000.0, 8.0, 1.0, 4.0, 8192)
    save("rope_llama3_inv_freq", inv_freq)
    x = leaf((6, 3, 64))
    freqs = positions.float()[:, None] @ inv_freq[None, :]  # as HF: f32 matmul
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
    rot = torch.cat((-x[..., 32:], x[..., :32]), dim=-1)
    save("rope_llama3_x", x)
    save("rope_llama3_y", x * cos + rot * sin)
    # GPT-J: interleaved pairs over the first 32 of 64 dims, default frequencies.
    inv = 1.0 / (10000.0 ** (torch.arange(0, 32, 2, dtype=torch.int64).float() / 32))
    save("rope_gptj_inv_freq", inv)
    angle = positions.float()[:, None] @ inv[None, :]
    sin, cos = torch.repeat_interleave(angle.sin(), 2, -1), torch.repeat_interleave(angle.cos(), 2, -1)
    x = leaf((6, 3, 64))
    xr = x[..., :32]
    every_two = torch.stack((-xr[..., 1::2], xr[..., ::2]), dim=-1).flatten(-2)
    save("rope_gptj_x", x)
    save("rope_gptj_y", torch.cat((xr * cos[:, None] + every_two * sin[:, None], x[..., 32:]), -1))


def activations():
    gate, up = leaf((301,), -8, 8), leaf((301,), -2, 2)
    backward("silu_mul", torch.nn.functional.silu(gate) * up, {"gate": gate, "up": up})
    x = leaf((301,), -8, 8)
    gelu = 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
    backward("gelu", gelu, {"x": x})
    x = leaf((4, 67), -6, 6)
    backward("softmax", torch.softmax(x, dim=-1), {"x": x})


def attention():
    b, t, h, hkv, d = 2, 9, 4, 2, 16
    q, k, v = leaf((b, t, h, d), -2, 2), leaf((b, t, hkv, d), -2, 2), leaf((b, t, hkv, d))
    # HF eager attention: [B, H, T, D], repeat_kv, additive causal mask, f32 softmax.
    qh = q.transpose(1, 2)
    kh = torch.repeat_interleave(k.transpose(1, 2), h // hkv, dim=1)
    vh = torch.repeat_interleave(v.transpose(1, 2), h // hkv, dim=1)
    scores = qh @ kh.transpose(-1, -2) / math.sqrt(d)
    mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
    out = (torch.softmax(scores + mask, dim=-1) @ vh).transpose(1, 2).contiguous()
    backward("attention", out, {"q": q, "k": k, "v": v})


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(1234)
    rmsnorm()
    layernorm()
    rope()
    activations()
    attention()
