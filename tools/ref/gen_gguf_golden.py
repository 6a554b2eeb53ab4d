#!/usr/bin/env python3
"""Golden GGUF files for tests/model/gguf_*_test.cc and tests/tokenizer/gguf_vocab_test.cc.

Independent of lmstack's GGUF code: models come from `lmstack init-model` (seeded HF
directories, read here with a small safetensors parser), and the GGUF files are written by
llama.cpp's own gguf-py (GGUFWriter, gguf.quants.quantize) with the keys, tensor names, Q/K row
permutation and rope_freqs table of llama.cpp's convert_hf_to_gguf.py, re-derived here.
Tokenizers: a SentencePiece BPE model trained with the `sentencepiece` package (the "llama"
vocabulary; reference ids from sentencepiece's encoder) and two byte-level BPE tokenizer.json
files trained with HF `tokenizers` (Qwen2's and GPT-2's split; reference ids from `tokenizers`).

  python3 tools/ref/gen_gguf_golden.py --lmstack build/gguf/lmstack
"""
import argparse
import codecs
import contextlib
import io
import json
import math
import os
import subprocess
import tempfile

import numpy as np
import gguf
import sentencepiece as spm
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

# The safetensors reader and llama.cpp's Q/K permutation, shared with the MoE goldens.
from gen_gguf_moe_golden import permute, read_safetensors

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests/data/model/gguf")
CORPUS = [os.path.join(ROOT, "tests/data/tokenizer/fuzz_cases.txt"),
          os.path.join(ROOT, "tests/data/tokenizer/constructed_edge_cases.txt")]
SEED = 7
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
            r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
SAMPLES = [
    "Beautiful is better than ugly. Explicit is better than implicit.",
    "Hello world! It's 2024-01-01, and 12345 apples cost $3.14.",
    "  leading spaces, trailing spaces   ",
    "naïve café résumé Ångström",
    "中文标点，emoji 👍🏽 and tabs\there\nnew line",
    "<|im_start|>user\nhi there<|im_end|>",
    "",
]


def init_model(lmstack, config, tmp, name, tokenizer=None):
    d = os.path.join(tmp, name)
    cfg_path = os.path.join(tmp, name + ".in.json")
    with open(cfg_path, "w") as f:
        json.dump(config, f)
    cmd = [lmstack, "init-model", "--config", cfg_path, "--dtype", "f32", "--seed", str(SEED),
           "--out", d]
    if tokenizer:
        cmd += ["--tokenizer", tokenizer]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(d, "config.json")) as f:
        written = json.load(f)
    return written, read_safetensors(os.path.join(d, "model.safetensors"))


def llama3_factors(cfg):
    rs, base = cfg["rope_scaling"], cfg["rope_theta"]
    dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    out = []
    for freq in freqs:
        wl = 2 * math.pi / freq
        if wl < old / hi:
            out.append(1.0)
        elif wl > old / lo:
            out.append(factor)
        else:
            s = (old / wl - lo) / (hi - lo)
            out.append(1 / ((1 - s) / factor + s))
    return np.array(out, dtype=np.float32)


def gguf_tensors(arch, cfg, t):
    """HF tensors -> (gguf name, array) in llama.cpp's naming."""
    out = []
    if arch == "gpt2":
        p = "transformer."
        out += [("token_embd.weight", t[p + "wte.weight"]),
                ("position_embd.weight", t[p + "wpe.weight"])]
        for i in range(cfg["n_layer"]):
            h, b = f"{p}h.{i}.", f"blk.{i}."
            out += [(b + "attn_norm.weight", t[h + "ln_1.weight"]),
                    (b + "attn_norm.bias", t[h + "ln_1.bias"]),
                    (b + "attn_qkv.weight", t[h + "attn.c_attn.weight"].T.copy()),
                    (b + "attn_qkv.bias", t[h + "attn.c_attn.bias"]),
                    (b + "attn_output.weight", t[h + "attn.c_proj.weight"].T.copy()),
                    (b + "attn_output.bias", t[h + "attn.c_proj.bias"]),
                    (b + "ffn_norm.weight", t[h + "ln_2.weight"]),
                    (b + "ffn_norm.bias", t[h + "ln_2.bias"]),
                    (b + "ffn_up.weight", t[h + "mlp.c_fc.weight"].T.copy()),
                    (b + "ffn_up.bias", t[h + "mlp.c_fc.bias"]),
                    (b + "ffn_down.weight", t[h + "mlp.c_proj.weight"].T.copy()),
                    (b + "ffn_down.bias", t[h + "mlp.c_proj.bias"])]
        out += [("output_norm.weight", t[p + "ln_f.weight"]),
                ("output_norm.bias", t[p + "ln_f.bias"])]
        return out
    names = {"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
             "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
             "self_attn.o_proj.weight": "attn_output.weight", "self_attn.q_proj.bias": "attn_q.bias",
             "self_attn.k_proj.bias": "attn_k.bias", "self_attn.v_proj.bias": "attn_v.bias",
             "self_attn.q_norm.weight": "attn_q_norm.weight",
             "self_attn.k_norm.weight": "attn_k_norm.weight",
             "post_attention_layernorm.weight": "ffn_norm.weight",
             "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
             "mlp.down_proj.weight": "ffn_down.weight"}
    out.append(("token_embd.weight", t["model.embed_tokens.weight"]))
    if cfg.get("rope_scaling") and cfg["rope_scaling"].get("rope_type") == "llama3":
        out.append(("rope_freqs.weight", llama3_factors(cfg)))
    for i in range(cfg["num_hidden_layers"]):
        for hf, g in names.items():
            key = f"model.layers.{i}.{hf}"
            if key not in t:
                continue
            w = t[key]
            if arch == "llama" and g in ("attn_q.weight", "attn_q.bias"):
                w = permute(w, cfg["num_attention_heads"])
            if arch == "llama" and g in ("attn_k.weight", "attn_k.bias"):
                w = permute(w, cfg["num_key_value_heads"])
            out.append((f"blk.{i}.{g}", w))
    out.append(("output_norm.weight", t["model.norm.weight"]))
    if "lm_head.weight" in t:
        out.append(("output.weight", t["lm_head.weight"]))
    return out


def add_config_keys(w, arch, cfg, file_type):
    w.add_name("lmstack golden " + arch)
    w.add_file_type(file_type)
    if arch == "gpt2":
        w.add_context_length(cfg["n_positions"])
        w.add_embedding_length(cfg["n_embd"])
        w.add_block_count(cfg["n_layer"])
        w.add_feed_forward_length(cfg["n_inner"])
        w.add_head_count(cfg["n_head"])
        w.add_layer_norm_eps(cfg["layer_norm_epsilon"])
        return
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_rope_dimension_count(hd)
    w.add_key_length(hd)
    w.add_value_length(hd)


def add_bpe_vocab(w, tok_json_path, pre, n_vocab):
    with open(tok_json_path) as f:
        tj = json.load(f)
    tokens = [f"[PAD{i}]" for i in range(n_vocab)]
    types = [gguf.TokenType.UNUSED] * n_vocab
    for text, i in tj["model"]["vocab"].items():
        tokens[i], types[i] = text, gguf.TokenType.NORMAL
    for a in tj["added_tokens"]:
        tokens[a["id"]] = a["content"]
        types[a["id"]] = gguf.TokenType.CONTROL if a["special"] else gguf.TokenType.USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tokens.index("<|endoftext|>"))
    w.add_eos_token_id(tokens.index("<|im_end|>"))
    w.add_add_bos_token(False)
    w.add_chat_template("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
                        "<|im_end|>\n{% endfor %}")


def add_spm_vocab(w, sp):
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        tokens.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        t = gguf.TokenType.NORMAL
        if sp.is_unknown(i):
            t = gguf.TokenType.UNKNOWN
        elif sp.is_control(i):
            t = gguf.TokenType.CONTROL
        elif sp.is_unused(i):
            t = gguf.TokenType.UNUSED
        elif sp.is_byte(i):
            t = gguf.TokenType.BYTE
        types.append(t)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(sp.bos_id())
    w.add_eos_token_id(sp.eos_id())
    w.add_unk_token_id(sp.unk_id())
    w.add_add_bos_token(True)
    w.add_add_space_prefix(True)


def write_gguf(path, arch, cfg, tensors, qtype, vocab):
    file_type = {gguf.GGMLQuantizationType.F32: 0, gguf.GGMLQuantizationType.F16: 1,
                 gguf.GGMLQuantizationType.Q4_0: 2, gguf.GGMLQuantizationType.Q8_0: 7}[qtype]
    w = gguf.GGUFWriter(path, arch)
    add_config_keys(w, arch, cfg, file_type)
    if qtype in (gguf.GGMLQuantizationType.Q4_0, gguf.GGMLQuantizationType.Q8_0):
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    vocab(w)
    for name, a in tensors:
        a = np.ascontiguousarray(a, dtype=np.float32)
        if a.ndim == 1 or qtype == gguf.GGMLQuantizationType.F32:
            w.add_tensor(name, a)
        elif qtype == gguf.GGMLQuantizationType.F16:
            w.add_tensor(name, a.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(a, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def train_bpe(split, path, corpus):
    tok = Tokenizer(models.BPE())
    if split == "qwen2":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_RE), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train(corpus, trainer)
    tok.save(path)
    return tok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lmstack", default=os.path.join(ROOT, "build/gguf/lmstack"))
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="gguf_golden_")
    # English prose (the Zen of Python, stable across Python versions) plus lmstack's
    # tokenizer edge cases and fuzz lines (unicode, digits, whitespace runs, emoji).
    with contextlib.redirect_stdout(io.StringIO()):
        import this  # the module prints the text when imported
    zen = os.path.join(tmp, "zen.txt")
    with open(zen, "w", encoding="utf-8") as f:
        f.write((codecs.decode(this.s, "rot13") + "\n") * 20)
    corpus = [zen] + CORPUS
    bpe_q = train_bpe("qwen2", os.path.join(OUT, "bpe_qwen2.tokenizer.json"), corpus)
    bpe_g = train_bpe("gpt2", os.path.join(OUT, "bpe_gpt2.tokenizer.json"), corpus)
    spm.SentencePieceTrainer.train(
        input=",".join(corpus), model_prefix=os.path.join(tmp, "spm"), vocab_size=512,
        model_type="bpe", byte_fallback=True, character_coverage=0.995,
        normalization_rule_name="identity", add_dummy_prefix=True,
        remove_extra_whitespaces=False, split_digits=True, num_threads=1, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(tmp, "spm.model"))

    samples = SAMPLES + [l for l in open(CORPUS[1], encoding="utf-8").read().split("\n") if l]
    goldens = {"texts": samples,
               "spm": [sp.encode(s) for s in samples],
               "bpe_qwen2": [bpe_q.encode(s, add_special_tokens=False).ids for s in samples],
               "bpe_gpt2": [bpe_g.encode(s, add_special_tokens=False).ids for s in samples]}
    with open(os.path.join(OUT, "tokenizer_goldens.json"), "w", encoding="utf-8") as f:
        json.dump(goldens, f, ensure_ascii=False, indent=0)

    qwen2_cfg = {"architectures": ["Qwen2ForCausalLM"], "vocab_size": 512, "hidden_size": 64,
                 "intermediate_size": 96, "num_hidden_layers": 1, "num_attention_heads": 4,
                 "num_key_value_heads": 2, "max_position_embeddings": 256, "rope_theta": 1e6,
                 "rms_norm_eps": 1e-6, "tie_word_embeddings": True}
    llama_cfg, llama_t = init_model(args.lmstack, {
        "architectures": ["LlamaForCausalLM"], "vocab_size": 512, "hidden_size": 64,
        "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "max_position_embeddings": 256, "rope_theta": 10000.0,
        "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
        "rope_scaling": {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 64}},
        tmp, "llama")
    qwen2_cfg, qwen2_t = init_model(args.lmstack, qwen2_cfg, tmp, "qwen2")
    qwen3_cfg, qwen3_t = init_model(args.lmstack, {
        "architectures": ["Qwen3ForCausalLM"], "vocab_size": 512, "hidden_size": 64,
        "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 32, "max_position_embeddings": 256,
        "rope_theta": 1e6, "rms_norm_eps": 1e-6, "tie_word_embeddings": True}, tmp, "qwen3")
    gpt2_cfg, gpt2_t = init_model(args.lmstack, {
        "architectures": ["GPT2LMHeadModel"], "vocab_size": 512, "n_embd": 64, "n_layer": 2,
        "n_head": 4, "n_inner": 128, "n_positions": 128, "tie_word_embeddings": True}, tmp, "gpt2")

    Q = gguf.GGMLQuantizationType
    bpe_q_vocab = lambda w: add_bpe_vocab(w, os.path.join(OUT, "bpe_qwen2.tokenizer.json"), "qwen2", 512)
    bpe_g_vocab = lambda w: add_bpe_vocab(w, os.path.join(OUT, "bpe_gpt2.tokenizer.json"), "gpt-2", 512)
    jobs = [("llama_f16_spm", "llama", llama_cfg, llama_t, Q.F16, lambda w: add_spm_vocab(w, sp)),
            ("qwen2_f32_bpe", "qwen2", qwen2_cfg, qwen2_t, Q.F32, bpe_q_vocab),
            ("qwen2_q4_0", "qwen2", qwen2_cfg, qwen2_t, Q.Q4_0, bpe_q_vocab),
            ("qwen3_q8_0", "qwen3", qwen3_cfg, qwen3_t, Q.Q8_0, bpe_q_vocab),
            ("gpt2_f16", "gpt2", gpt2_cfg, gpt2_t, Q.F16, bpe_g_vocab)]
    for name, arch, cfg, t, qtype, vocab in jobs:
        write_gguf(os.path.join(OUT, name + ".gguf"), arch, cfg, gguf_tensors(arch, cfg, t), qtype,
                   vocab)
        with open(os.path.join(OUT, name + ".config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
        print(name, os.path.getsize(os.path.join(OUT, name + ".gguf")), "bytes")


if __name__ == "__main__":
    main()
