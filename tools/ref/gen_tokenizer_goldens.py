#!/usr/bin/env python3
"""Golden token ids for tests/tokenizer, from PyPI tiktoken (the reference) run on the local
rank files in shared/peers/tokenizers (no network).

Writes into tests/data/tokenizer/:
  constructed_edge_cases.txt        copy of the corpus's CC0 edge-case file
  fuzz_cases.txt                    seeded random lines over tricky characters (contractions,
                                    U+017F, marks, digits of many scripts, CR/LF, spaces)
  goldens/<enc>.<case>.ids          full ids (MIT encodings only): edge.ordinary (every
                                    special-token string as text), edge.allow (specials
                                    allowed), fuzz (one line of ids per fuzz line)
  corpus_goldens.tsv                encoding, case, bytes, tokens, FNV-1a 64 of the ids (as
                                    little-endian uint32) for every corpus file and, for
                                    llama3 (Meta licence: no ids committed), the cases above

Every encoding is also run with tiktoken's own current pattern spelling (possessive
quantifiers) and must give the same ids as the encodings.json pattern.

regenerate: python3 tools/ref/gen_tokenizer_goldens.py [--shared ../shared]
"""
import argparse
import json
import os
import random
import shutil
import struct

import tiktoken
import tiktoken_ext.openai_public as openai_public
from tiktoken.load import load_tiktoken_bpe

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests/data/tokenizer")
MIT_ENCODINGS = ["r50k_base", "cl100k_base", "o200k_base"]


def fnv64(ids):
    h = 0xCBF29CE484222325
    for b in struct.pack(f"<{len(ids)}I", *ids):
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def fuzz_lines(n=400, seed=1234):
    rng = random.Random(seed)
    pieces = ["a", "B", "xyz", "Hello", "WORLD", "camelCase", "'", "'s", "'S", "'ll", "'LL", "'re",
              "'ve", "'d", "'m", "'t", "'\u017f", "ſ", "0", "12", "345", "67890", "١٢", "१२३",
              "½", "①", " ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\n\n", " \n", "\u00a0",
              "\u3000", "\u2028", "\u0085", "\u200b", ".", ",", "!?", "...", "/", "//", "-", "_",
              "(", ")", "\"", "é", "e\u0301", "\u0301", "\u0301\u0301", "A\u0301", "ǅ", "ʰ",
              "中", "文字", "日本語", "한국", "ひらがな", "カタカナ", "Ωμέγα", "Привет",
              "مرحبا", "नमस्ते", "สวัสดี", "👍", "👍🏽", "👨‍👩‍👧", "🇨🇳", "1️⃣", "❤️", "\ufeff",
              "\ufffd", "𝔘", "𐐀", "\U0010FFFF", "ﬁ", "ＡＢＣ", "１２３", "<|endoftext|>", "<|eot",
              "$", "€", "%", "#", "@", "\\", "~", "`", "^", "|", "ǈ", "ᾈ", "ß", "İ", "ı"]
    out = []
    for _ in range(n):
        k = rng.randint(1, 14)
        line = "".join(rng.choice(pieces) for _ in range(k)).replace("\n", " ").replace("\r", " ")
        out.append(line)
    # Newlines inside lines would break the one-line-per-case file; CR/LF runs are covered by
    # the edge-case file and the corpus. Long runs exercise the O(n log n) merge path.
    out += ["a" * 3000, " " * 500 + "x", "1" * 700, "ab" * 900, "😀" * 300, "\u0301" * 200]
    return out


def encodings(shared):
    info = json.load(open(os.path.join(shared, "peers/tokenizers/encodings.json")))["encodings"]
    for name in MIT_ENCODINGS + ["llama3"]:
        e = info[name]
        ranks = load_tiktoken_bpe(os.path.join(shared, "peers/tokenizers", e["file"]))
        specials = e["special_tokens"]
        enc = tiktoken.Encoding(name, pat_str=e["pat_str"], mergeable_ranks=ranks,
                                special_tokens=specials)
        yield name, enc, ranks, specials


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(ROOT, "../shared"))
    args = ap.parse_args()
    tok_dir = os.path.join(args.shared, "peers/tokenizers")
    corpus = os.path.join(tok_dir, "corpus")
    os.makedirs(os.path.join(OUT, "goldens"), exist_ok=True)
    shutil.copyfile(os.path.join(corpus, "constructed_edge_cases.txt"),
                    os.path.join(OUT, "constructed_edge_cases.txt"))
    fuzz = fuzz_lines()
    with open(os.path.join(OUT, "fuzz_cases.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(fuzz) + "\n")
    edge = open(os.path.join(corpus, "constructed_edge_cases.txt"), encoding="utf-8",
                newline="").read()
    files = sorted(f for f in os.listdir(corpus) if f.endswith(".txt") and f != "SOURCES.md")
    # tiktoken's own pattern spellings (possessive quantifiers): must split identically.
    possessive = {"r50k_base": openai_public.r50k_pat_str}
    rows = []
    for name, enc, ranks, specials in encodings(args.shared):
        alt_pat = possessive.get(name)
        if name in ("cl100k_base", "llama3"):
            alt_pat = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|"""
                       r""" ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""")
        alt = tiktoken.Encoding(name + "_alt", pat_str=alt_pat, mergeable_ranks=ranks,
                                special_tokens=specials) if alt_pat else None
        cases = {"edge.ordinary": enc.encode_ordinary(edge),
                 "edge.allow": enc.encode(edge, allowed_special="all")}
        fuzz_ids = [enc.encode_ordinary(line) for line in fuzz]
        for fname in files:
            text = open(os.path.join(corpus, fname), encoding="utf-8", newline="").read()
            ids = enc.encode_ordinary(text)
            if alt is not None:
                assert alt.encode_ordinary(text) == ids, (name, fname)
            assert enc.decode(ids) == text
            rows.append((name, fname, len(text.encode()), len(ids), fnv64(ids)))
        if name == "llama3":
            for case, ids in cases.items():
                rows.append((name, case, len(edge.encode()), len(ids), fnv64(ids)))
            flat = [i for ids in fuzz_ids for i in ids]
            rows.append((name, "fuzz", sum(len(l.encode()) for l in fuzz), len(flat), fnv64(flat)))
            continue
        for case, ids in cases.items():
            with open(os.path.join(OUT, "goldens", f"{name}.{case}.ids"), "w") as f:
                f.write(" ".join(map(str, ids)) + "\n")
        with open(os.path.join(OUT, "goldens", f"{name}.fuzz.ids"), "w") as f:
            for ids in fuzz_ids:
                f.write(" ".join(map(str, ids)) + "\n")
    with open(os.path.join(OUT, "corpus_goldens.tsv"), "w") as f:
        f.write("# encoding\tcase\tbytes\ttokens\tfnv1a64(ids as uint32 LE)\n")
        f.write("# regenerate: python3 tools/ref/gen_tokenizer_goldens.py\n")
        for r in rows:
            f.write("\t".join(map(str, r)) + "\n")
    print(f"wrote {len(rows)} corpus goldens and ids for {MIT_ENCODINGS}")


if __name__ == "__main__":
    main()
