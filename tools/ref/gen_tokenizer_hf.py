#!/usr/bin/env python3
"""Hugging Face tokenizer.json fixtures and their golden ids from PyPI `tokenizers` (the
reference for tokenizer.json files). Training text: the committed CC0 edge-case file and
the generated fuzz lines (tests/data/tokenizer), so every fixture is ours to commit.

Writes into tests/data/tokenizer/hf/:
  sp_llama2.json      SentencePiece-converted style (Llama 2 / TinyLlama): Prepend + Replace
                      normalizer, byte_fallback with <0xNN> tokens, unk, fuse_unk,
                      Replace/ByteFallback/Fuse/Strip decoder, <s> post-processor
  sp_metaspace.json   the same model with a Metaspace(prepend_scheme=first) pre-tokenizer
                      (newer Mistral conversions)
  bytelevel_regex.json  byte-level with Digits + a Split regex no scanner implements (PCRE2)
  lmstack_trained.json  written by `lmstack train-tokenizer` (cl100k pattern, 1000 tokens,
                      2 specials) from the same text: the trainer test retrains and expects
                      these exact bytes
  <name>.ids          HF ids (add_special_tokens=False) of each fuzz line, then the edge file
  corpus.tsv          for lmstack_trained.json: file, bytes, tokens, FNV-1a 64 of HF's ids on
                      every shared corpus file (needs --shared)

regenerate: python3 tools/ref/gen_tokenizer_hf.py --lmstack build/release/lmstack
"""
import argparse
import json
import os
import struct
import subprocess

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests/data/tokenizer")
OUT = os.path.join(DATA, "hf")


def fnv64(ids):
    h = 0xCBF29CE484222325
    for b in struct.pack(f"<{len(ids)}I", *ids):
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def texts():
    fuzz = open(os.path.join(DATA, "fuzz_cases.txt"), encoding="utf-8", newline="").read()
    edge = open(os.path.join(DATA, "constructed_edge_cases.txt"), encoding="utf-8",
                newline="").read()
    return fuzz.split("\n")[:-1], edge


def sp_llama2(lines, edge):
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=["<unk>", "<s>", "</s>"],
                                  limit_alphabet=150, show_progress=False)
    tok.train_from_iterator(lines + edge.split("\n"), trainer)
    j = json.loads(tok.to_str())
    # Llama 2 keeps <0x00>..<0xFF> in the model vocab right after the 3 specials.
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab.update({f"<0x{b:02X}>": 3 + b for b in range(256)})
    for t, i in sorted(j["model"]["vocab"].items(), key=lambda kv: kv[1]):
        if i >= 3:
            vocab[t] = i + 256
    j["model"]["vocab"] = vocab
    j["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                   {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                 {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "<s>", "type_id": 1}},
                 {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
    return j


def sp_metaspace(llama2):
    j = json.loads(json.dumps(llama2))
    j["normalizer"] = None
    j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first",
                          "split": False}
    # Newer Mistral conversions keep Llama 2's decoder (byte fallback needs it).
    return j


def bytelevel_regex(lines, edge):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.Split(Regex(r" ?\p{L}+| ?[^\s\p{L}\p{N}]+|\s+"), "isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=800, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(lines + edge.split("\n"), trainer)
    return json.loads(tok.to_str())


def write_ids(name, tok, lines, edge):
    with open(os.path.join(OUT, name + ".ids"), "w") as f:
        for text in lines + [edge]:
            f.write(" ".join(map(str, tok.encode(text, add_special_tokens=False).ids)) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lmstack", default=os.path.join(ROOT, "build/release/lmstack"))
    ap.add_argument("--shared", default=os.path.join(ROOT, "../shared"))
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    lines, edge = texts()
    llama2 = sp_llama2(lines, edge)
    fixtures = {"sp_llama2": llama2, "sp_metaspace": sp_metaspace(llama2),
                "bytelevel_regex": bytelevel_regex(lines, edge)}
    for name, j in fixtures.items():
        path = os.path.join(OUT, name + ".json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(j, f, ensure_ascii=False, indent=1)
        write_ids(name, Tokenizer.from_file(path), lines, edge)
    trained = os.path.join(OUT, "lmstack_trained.json")
    subprocess.run([args.lmstack, "train-tokenizer", "--input",
                    os.path.join(DATA, "fuzz_cases.txt"),
                    os.path.join(DATA, "constructed_edge_cases.txt"), "--vocab-size", "1000",
                    "--pattern", "cl100k", "--special", "<|endoftext|>,<|pad|>",
                    "--out", trained], check=True, stdout=subprocess.DEVNULL)
    tok = Tokenizer.from_file(trained)
    write_ids("lmstack_trained", tok, lines, edge)
    corpus = os.path.join(args.shared, "peers/tokenizers/corpus")
    with open(os.path.join(OUT, "corpus.tsv"), "w") as f:
        f.write("# file\tbytes\ttokens\tfnv1a64 of HF tokenizers' ids with lmstack_trained.json\n")
        for name in sorted(os.listdir(corpus)):
            if not name.endswith(".txt"):
                continue
            text = open(os.path.join(corpus, name), encoding="utf-8", newline="").read()
            ids = tok.encode(text, add_special_tokens=False).ids
            f.write(f"{name}\t{len(text.encode())}\t{len(ids)}\t{fnv64(ids)}\n")
    print("wrote", sorted(os.listdir(OUT)))


if __name__ == "__main__":
    main()
