#!/usr/bin/env python3
"""What transformers' AutoTokenizer makes of `lmstack train-tokenizer --out DIR`.

Runs lmstack train-tokenizer on tests/data/tokenizer/fuzz_cases.txt for each case below, keeps
the directory under tests/data/tokenizer/trained/<case>/, loads it with
AutoTokenizer.from_pretrained and writes tests/data/tokenizer/trained/goldens.json: per case
the arguments, the bos/eos/pad tokens and ids transformers reads, and its ids for a few texts
(special tokens included). The C++ test (tests/tokenizer/bpe_trainer_config_test.cc) retrains
with the same arguments, checks the files are the same bytes, and that lmstack reads the same
tokens and ids.

Pinned: transformers 5.24.0, tokenizers 0.23.3 (tests/data/MANIFEST).
Usage: /work/venv-ref/bin/python tools/ref/gen_trained_tokenizer_hf.py [--lmstack build/release/lmstack]
"""
import argparse
import json
import os
import shutil
import subprocess

from transformers import AutoTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "data", "tokenizer", "trained")
CORPUS = "tests/data/tokenizer/fuzz_cases.txt"

CASES = {
    # name: train-tokenizer arguments after --input CORPUS --vocab-size 400
    "chatml_default_roles": ["--special", "<|endoftext|>,<|im_start|>,<|im_end|>"],
    "llama_style_roles": ["--special", "<unk>,<s>,</s>,<pad>"],
    "explicit_roles": ["--special", "<|endoftext|>,<|im_start|>,<|im_end|>,<|pad|>",
                       "--eos", "<|im_end|>", "--bos", "<|im_start|>", "--pad", "<|endoftext|>"],
}
TEXTS = ["Hello world, 123!", "<|im_start|>user\nhi<|im_end|>", "<s>caf\u00e9</s><pad>",
         "  spaces\tand\nnewlines  "]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lmstack", default=os.path.join(ROOT, "build/release/lmstack"))
    args = ap.parse_args()
    goldens = []
    for name, extra in CASES.items():
        d = os.path.join(OUT, name)
        shutil.rmtree(d, ignore_errors=True)
        argv = ["train-tokenizer", "--input", CORPUS, "--vocab-size", "400", *extra, "--out", d]
        subprocess.run([args.lmstack, *argv], check=True, cwd=ROOT, capture_output=True)
        hf = AutoTokenizer.from_pretrained(d)
        case = {"case": name, "args": extra, "vocab_size": len(hf)}
        for role in ("bos", "eos", "pad"):
            case[role + "_token"] = getattr(hf, role + "_token")
            case[role + "_token_id"] = getattr(hf, role + "_token_id")
        case["ids"] = [hf.encode(t, add_special_tokens=True) for t in TEXTS]
        case["texts"] = TEXTS
        goldens.append(case)
    with open(os.path.join(OUT, "goldens.json"), "w", encoding="utf-8") as f:
        json.dump(goldens, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
