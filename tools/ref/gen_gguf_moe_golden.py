#!/usr/bin/env python3
"""Golden GGUF files of the MoE / MLA models for tests/model/gguf_moe_test.cc.

Independent of lmstack: the weights are the transformers-written tiny checkpoints in
tests/data/model/moe_compat (tools/ref/gen_moe_compat.py), read with a small safetensors
parser, and the files are written by llama.cpp's gguf-py (GGUFWriter, gguf.quants) with the
architecture names, keys and tensor layout of llama.cpp's convert_hf_to_gguf.py:
  Mixtral    -> "llama": Q/K rows permuted, experts stacked into blk.N.ffn_{gate,up,down}_exps
                (3-D [E, F, C]), router blk.N.ffn_gate_inp, expert_count / expert_used_count.
  Qwen2-MoE  -> "qwen2moe": + expert_feed_forward_length, expert_shared_feed_forward_length,
                ffn_gate_inp_shexp and ffn_{gate,up,down}_shexp; layers in mlp_only_layers keep
                the dense ffn_{gate,up,down}.
  Qwen3-MoE  -> "qwen3moe": + attn_{q,k}_norm, no shared expert.
  DeepSeek-V2/V3 -> "deepseek2": MLA as llama.cpp's absorbed MQA (head_count_kv 1, key_length
                kv_lora_rank + rope dims, value_length kv_lora_rank, key_length_mla /
                value_length_mla the per-head dims), kv_b_proj split into attn_k_b [H, r, nope]
                (transposed) and attn_v_b [H, v, r] (DeepseekV2Model.modify_tensors),
                leading_dense_block_count, expert_shared_count, expert_weights_scale,
                expert_weights_norm (only when true), expert_group_count / _used_count,
                expert_gating_func (softmax V2, sigmoid V3: the scoring_func of the real
                checkpoints; the tiny configs leave it at the transformers default), and V3's
                e_score_correction_bias as blk.N.exp_probs_b.bias.
Routers and 1-D tensors stay F32 (as convert_hf_to_gguf.py keeps them); a matrix whose rows are
not whole quantization blocks is stored as F16 (convert's fallback). No tokenizer keys: the
checkpoints have no tokenizer.

  /work/venv-gguf/bin/python tools/ref/gen_gguf_moe_golden.py   (gguf-py 0.19.0, numpy)
"""
import json
import os
import struct

import numpy as np
import gguf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "tests/data/model/moe_compat")
OUT = os.path.join(ROOT, "tests/data/model/gguf_moe")
Q = gguf.GGMLQuantizationType


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, t = e["data_offsets"]
        raw = data[base + b:base + t]
        if e["dtype"] == "F32":
            a = np.frombuffer(raw, dtype=np.float32)
        elif e["dtype"] == "BF16":  # exact: bf16 is the top half of an f32
            a = (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError((name, e["dtype"]))
        out[name] = a.reshape(e["shape"])
    return out


def permute(w, n_head):
    """convert_hf_to_gguf.py LlamaModel.permute: halves -> interleaved pairs per head."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def head_dim(cfg):
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def attention(arch, cfg, t, p, b):
    if arch == "deepseek2":
        return mla(cfg, t, p, b)
    out = []
    for hf, g in [("q_proj", "attn_q"), ("k_proj", "attn_k"), ("v_proj", "attn_v")]:
        for kind in ("weight", "bias"):
            key = f"{p}self_attn.{hf}.{kind}"
            if key not in t:
                continue
            w = t[key]
            if arch == "llama" and hf != "v_proj":
                w = permute(w, cfg["num_attention_heads"] if hf == "q_proj"
                            else cfg["num_key_value_heads"])
            out.append((f"{b}{g}.{kind}", w))
    out.append((b + "attn_output.weight", t[p + "self_attn.o_proj.weight"]))
    if p + "self_attn.q_norm.weight" in t:
        out += [(b + "attn_q_norm.weight", t[p + "self_attn.q_norm.weight"]),
                (b + "attn_k_norm.weight", t[p + "self_attn.k_norm.weight"])]
    return out


def mla(cfg, t, p, b):
    a = p + "self_attn."
    out = []
    if cfg.get("q_lora_rank"):
        out += [(b + "attn_q_a.weight", t[a + "q_a_proj.weight"]),
                (b + "attn_q_a_norm.weight", t[a + "q_a_layernorm.weight"]),
                (b + "attn_q_b.weight", t[a + "q_b_proj.weight"])]
    else:
        out.append((b + "attn_q.weight", t[a + "q_proj.weight"]))
    out += [(b + "attn_kv_a_mqa.weight", t[a + "kv_a_proj_with_mqa.weight"]),
            (b + "attn_kv_a_norm.weight", t[a + "kv_a_layernorm.weight"])]
    H, nope, v = cfg["num_attention_heads"], cfg["qk_nope_head_dim"], cfg["v_head_dim"]
    kv_b = t[a + "kv_b_proj.weight"].reshape(H, nope + v, -1)
    out += [(b + "attn_k_b.weight", kv_b[:, :nope, :].transpose(0, 2, 1).copy()),
            (b + "attn_v_b.weight", kv_b[:, nope:, :].copy()),
            (b + "attn_output.weight", t[a + "o_proj.weight"])]
    return out


def mlp(arch, cfg, t, p, b):
    names = {"llama": ("block_sparse_moe.", "w1", "w3", "w2", None)}.get(
        arch, ("mlp.", "gate_proj", "up_proj", "down_proj",
               "shared_experts." if arch == "deepseek2" else "shared_expert."))
    block, gate, up, down, shared = names
    if p + block + "gate.weight" not in t:  # a dense layer
        return [(b + "ffn_gate.weight", t[p + "mlp.gate_proj.weight"]),
                (b + "ffn_up.weight", t[p + "mlp.up_proj.weight"]),
                (b + "ffn_down.weight", t[p + "mlp.down_proj.weight"])]
    E = sum(1 for k in t if k.startswith(p + block + "experts.") and k.endswith(gate + ".weight"))
    stack = lambda w: np.stack([t[f"{p}{block}experts.{e}.{w}.weight"] for e in range(E)])
    out = [(b + "ffn_gate_inp.weight", t[p + block + "gate.weight"])]
    if p + block + "gate.e_score_correction_bias" in t:
        out.append((b + "exp_probs_b.bias", t[p + block + "gate.e_score_correction_bias"]))
    out += [(b + "ffn_gate_exps.weight", stack(gate)), (b + "ffn_up_exps.weight", stack(up)),
            (b + "ffn_down_exps.weight", stack(down))]
    if shared and p + block + shared + "gate_proj.weight" in t:
        s = p + block + shared
        if p + block + "shared_expert_gate.weight" in t:
            out.append((b + "ffn_gate_inp_shexp.weight", t[p + block + "shared_expert_gate.weight"]))
        out += [(b + "ffn_gate_shexp.weight", t[s + "gate_proj.weight"]),
                (b + "ffn_up_shexp.weight", t[s + "up_proj.weight"]),
                (b + "ffn_down_shexp.weight", t[s + "down_proj.weight"])]
    return out


def gguf_tensors(arch, cfg, t):
    out = [("token_embd.weight", t["model.embed_tokens.weight"])]
    for i in range(cfg["num_hidden_layers"]):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        out.append((b + "attn_norm.weight", t[p + "input_layernorm.weight"]))
        out += attention(arch, cfg, t, p, b)
        out.append((b + "ffn_norm.weight", t[p + "post_attention_layernorm.weight"]))
        out += mlp(arch, cfg, t, p, b)
    out.append(("output_norm.weight", t["model.norm.weight"]))
    if "lm_head.weight" in t and not cfg.get("tie_word_embeddings"):
        out.append(("output.weight", t["lm_head.weight"]))
    return out


def add_keys(w, arch, cfg, file_type):
    w.add_name("lmstack golden " + arch)
    w.add_file_type(file_type)
    w.add_vocab_size(cfg["vocab_size"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_rope_freq_base(cfg.get("rope_theta") or cfg["rope_parameters"]["rope_theta"])
    w.add_expert_count(cfg.get("num_local_experts") or cfg.get("num_experts")
                       or cfg["n_routed_experts"])
    w.add_expert_used_count(cfg["num_experts_per_tok"])
    if arch != "deepseek2":
        w.add_head_count_kv(cfg["num_key_value_heads"])
        w.add_rope_dimension_count(head_dim(cfg))
        w.add_key_length(head_dim(cfg))
        w.add_value_length(head_dim(cfg))
    if arch in ("qwen2moe", "qwen3moe"):
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    if arch == "qwen2moe":
        w.add_expert_shared_feed_forward_length(cfg["shared_expert_intermediate_size"])
    if arch == "deepseek2":
        r, rope = cfg["kv_lora_rank"], cfg["qk_rope_head_dim"]
        w.add_head_count_kv(1)  # llama.cpp runs MLA as MQA over the latent
        w.add_rope_dimension_count(rope)
        w.add_key_length(r + rope)
        w.add_value_length(r)
        w.add_key_length_mla(cfg["qk_nope_head_dim"] + rope)
        w.add_value_length_mla(cfg["v_head_dim"])
        w.add_leading_dense_block_count(cfg["first_k_dense_replace"])
        if cfg.get("q_lora_rank"):
            w.add_q_lora_rank(cfg["q_lora_rank"])
        w.add_kv_lora_rank(r)
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
        w.add_expert_shared_count(cfg["n_shared_experts"])
        w.add_expert_weights_scale(cfg["routed_scaling_factor"])
        v3 = cfg["architectures"][0] == "DeepseekV3ForCausalLM"
        if cfg.get("norm_topk_prob"):
            w.add_expert_weights_norm(True)
        w.add_expert_group_count(cfg["n_group"])
        w.add_expert_group_used_count(cfg["topk_group"])
        w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID if v3
                                 else gguf.ExpertGatingFuncType.SOFTMAX)


def stored(name, a, qtype):
    """(array, raw_dtype) as convert_hf_to_gguf.py stores a tensor for output type qtype."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    if a.ndim == 1 or qtype == Q.F32 or name.endswith(("ffn_gate_inp.weight",
                                                        "ffn_gate_inp_shexp.weight")):
        return a, None
    if qtype == Q.F16 or (qtype == Q.Q8_0 and a.shape[-1] % 32 != 0):
        return a.astype(np.float16), None
    return gguf.quants.quantize(a, qtype), qtype


def write(path, arch, cfg, tensors, qtype):
    file_type = {Q.F32: 0, Q.F16: 1, Q.Q8_0: 7, Q.BF16: 32}[qtype]
    w = gguf.GGUFWriter(path, arch)
    add_keys(w, arch, cfg, file_type)
    if qtype == Q.Q8_0:
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    for name, a in tensors:
        data, raw = stored(name, a, qtype)
        if raw is None:
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, data, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    os.makedirs(OUT, exist_ok=True)
    arches = {"mixtral": "llama", "qwen2_moe": "qwen2moe", "qwen3_moe": "qwen3moe",
              "deepseek_v2": "deepseek2", "deepseek_v3": "deepseek2"}
    # bf16 files from the bf16 checkpoints (the same weights, so transformers' bf16 goldens
    # apply), and one q8_0 Mixtral from the f32 checkpoint.
    jobs = [(case, "tf5_bf16", Q.BF16, case + "_bf16") for case in arches]
    jobs.append(("mixtral", "tf5", Q.Q8_0, "mixtral_q8_0"))
    for case, version, qtype, name in jobs:
        d = os.path.join(SRC, case, version)
        with open(os.path.join(d, "config.json")) as f:
            cfg = json.load(f)
        t = read_safetensors(os.path.join(d, "model.safetensors"))
        arch = arches[case]
        path = os.path.join(OUT, name + ".gguf")
        write(path, arch, cfg, gguf_tensors(arch, cfg, t), qtype)
        print(name, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
