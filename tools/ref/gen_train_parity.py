#!/usr/bin/env python3
"""PyTorch reference training run for tests/train/parity_test.cc (float64 autograd).

For one tiny architecture (llama: GQA + untied head; qwen2: q/k/v biases + tied; gpt2:
LayerNorm, learned positions, GELU, Conv1D, tied) it draws initial weights and token windows
with NumPy (seeded), writes them as a Hugging Face directory, then trains with
torch.optim.AdamW (decay on 2-D tensors only), clip_grad_norm_, gradient accumulation and
warmup + cosine learning rate, using the forward of tools/ref/gen_model_logits.py. Writes to
<out>/<arch>/:
  model/             config.json + model.safetensors (f32): the initial weights
  tokens.npy         int32 [steps, accum, batch, seq + 1]: the windows of every micro-batch
  losses.npy         float32 [steps]: mean loss of each step (before its update)
  grads1.safetensors f32 gradients of step 1 (after accumulation, before clipping), HF names
  final.safetensors  f32 weights after the last step, HF names
  hparams.json       the optimizer and schedule settings
Usage: /usr/bin/python3 tools/ref/gen_train_parity.py --arch llama --out tests/data/train
"""
import argparse, json, math, os, struct, sys
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_model_logits as ref  # noqa: E402

torch.set_default_dtype(torch.float64)
V, C, F, L, H, HKV, MAXPOS = 64, 32, 64, 2, 4, 2, 64
HP = dict(steps=20, accum=2, batch=2, seq=16, lr=3e-3, min_lr=3e-4, warmup=4, beta1=0.9,
          beta2=0.95, eps=1e-8, weight_decay=0.1, grad_clip=0.5)


def config_for(arch):
    if arch == "gpt2":
        return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": V,
                "n_embd": C, "n_inner": 4 * C, "n_layer": L, "n_head": H, "n_positions": MAXPOS,
                "n_ctx": MAXPOS, "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new",
                "tie_word_embeddings": True, "bos_token_id": 0, "eos_token_id": 0,
                "torch_dtype": "float32"}
    cls = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}[arch]
    return {"architectures": [cls], "model_type": arch, "vocab_size": V, "hidden_size": C,
            "intermediate_size": F, "num_hidden_layers": L, "num_attention_heads": H,
            "num_key_value_heads": HKV, "max_position_embeddings": MAXPOS, "rms_norm_eps": 1e-5,
            "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": arch == "qwen2",
            "bos_token_id": 0, "eos_token_id": 0, "torch_dtype": "float32"}


def tensor_shapes(arch):
    """HF names and shapes; kind 'w' matrix, 'n' norm weight, 'b' bias."""
    out = []
    if arch == "gpt2":
        out += [("transformer.wte.weight", (V, C), "w"), ("transformer.wpe.weight", (MAXPOS, C), "w")]
        for i in range(L):
            p = f"transformer.h.{i}."
            out += [(p + "ln_1.weight", (C,), "n"), (p + "ln_1.bias", (C,), "b"),
                    (p + "attn.c_attn.weight", (C, 3 * C), "w"), (p + "attn.c_attn.bias", (3 * C,), "b"),
                    (p + "attn.c_proj.weight", (C, C), "w"), (p + "attn.c_proj.bias", (C,), "b"),
                    (p + "ln_2.weight", (C,), "n"), (p + "ln_2.bias", (C,), "b"),
                    (p + "mlp.c_fc.weight", (C, 4 * C), "w"), (p + "mlp.c_fc.bias", (4 * C,), "b"),
                    (p + "mlp.c_proj.weight", (4 * C, C), "w"), (p + "mlp.c_proj.bias", (C,), "b")]
        return out + [("transformer.ln_f.weight", (C,), "n"), ("transformer.ln_f.bias", (C,), "b")]
    hd = C // H
    out.append(("model.embed_tokens.weight", (V, C), "w"))
    for i in range(L):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", (C,), "n"),
                (p + "self_attn.q_proj.weight", (H * hd, C), "w"),
                (p + "self_attn.k_proj.weight", (HKV * hd, C), "w"),
                (p + "self_attn.v_proj.weight", (HKV * hd, C), "w")]
        if arch == "qwen2":
            out += [(p + f"self_attn.{x}_proj.bias", (n * hd,), "b") for x, n in (("q", H), ("k", HKV), ("v", HKV))]
        out += [(p + "self_attn.o_proj.weight", (C, H * hd), "w"),
                (p + "post_attention_layernorm.weight", (C,), "n"),
                (p + "mlp.gate_proj.weight", (F, C), "w"), (p + "mlp.up_proj.weight", (F, C), "w"),
                (p + "mlp.down_proj.weight", (C, F), "w")]
    out.append(("model.norm.weight", (C,), "n"))
    if arch == "llama":
        out.append(("lm_head.weight", (V, C), "w"))
    return out


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, arr in tensors.items():
        raw = np.ascontiguousarray(arr, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def lr_at(step):
    if step < HP["warmup"]:
        return HP["lr"] * (step + 1) / HP["warmup"]
    progress = min(1.0, (step - HP["warmup"]) / max(1, HP["steps"] - HP["warmup"]))
    return HP["min_lr"] + 0.5 * (1 + math.cos(math.pi * progress)) * (HP["lr"] - HP["min_lr"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", required=True, choices=["llama", "qwen2", "gpt2"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    init = {}
    for name, shape, kind in tensor_shapes(a.arch):
        if kind == "w":
            init[name] = rng.normal(0, 0.2, shape)
        elif kind == "n":
            init[name] = 1 + rng.normal(0, 0.1, shape)
        else:
            init[name] = rng.normal(0, 0.05, shape)
    init = {k: v.astype(np.float32) for k, v in init.items()}  # what the C++ side reads
    out = os.path.join(a.out, a.arch)
    os.makedirs(os.path.join(out, "model"), exist_ok=True)
    cfg = config_for(a.arch)
    json.dump(cfg, open(os.path.join(out, "model", "config.json"), "w"), indent=2)
    write_safetensors(os.path.join(out, "model", "model.safetensors"), init)
    tokens = rng.integers(0, V, size=(HP["steps"], HP["accum"], HP["batch"], HP["seq"] + 1)).astype(np.int32)
    np.save(os.path.join(out, "tokens.npy"), tokens)
    json.dump(HP, open(os.path.join(out, "hparams.json"), "w"), indent=2)

    w = {k: torch.tensor(v.astype(np.float64), requires_grad=True) for k, v in init.items()}
    decay = [t for t in w.values() if t.dim() == 2]
    no_decay = [t for t in w.values() if t.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": HP["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=HP["lr"], betas=(HP["beta1"], HP["beta2"]), eps=HP["eps"])
    losses = []
    for step in range(HP["steps"]):
        opt.zero_grad()
        total = 0.0
        for m in range(HP["accum"]):
            loss = 0
            for b in range(HP["batch"]):
                win = tokens[step, m, b].tolist()
                logits = ref.forward(cfg, w, win[:-1])
                loss = loss + torch.nn.functional.cross_entropy(logits, torch.tensor(win[1:]), reduction="sum")
            loss = loss / (HP["batch"] * HP["seq"] * HP["accum"])
            loss.backward()
            total += loss.item()
        losses.append(total)
        if step == 0:
            write_safetensors(os.path.join(out, "grads1.safetensors"), {k: t.grad.numpy() for k, t in w.items()})
        torch.nn.utils.clip_grad_norm_(list(w.values()), HP["grad_clip"])
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        opt.step()
    np.save(os.path.join(out, "losses.npy"), np.array(losses, dtype=np.float32))
    write_safetensors(os.path.join(out, "final.safetensors"), {k: t.detach().numpy() for k, t in w.items()})
    print(a.arch, "losses", " ".join(f"{x:.5f}" for x in losses))


if __name__ == "__main__":
    main()
