#!/usr/bin/env python3
"""A SentencePiece-style tokenizer directory (as Llama 2 / Mistral / TinyLlama ship) and its ids.

Trains a small SentencePiece BPE model (byte_fallback, split_digits, like Llama 2's) with the
`sentencepiece` package on local text (tests/data/model/heldout_startrek.txt and
calib_linuxcookie.txt), converts it with transformers' LlamaTokenizerFast (the tokenizer.json
that transformers 5.x writes: Metaspace pre-tokenizer, BPE with byte_fallback and merges) and
writes tests/data/tokenizer/spm_llama/{tokenizer.json, tokenizer_config.json} plus
tests/data/tokenizer/spm_llama/goldens.json:
  lines       the test text (tests/data/tokenizer/constructed_edge_cases.txt and fuzz_cases.txt)
  hf_ids      LlamaTokenizerFast ids of each line (no BOS)
  sp_ids      sentencepiece's own ids of each line (they differ from HF only where a line starts
              with a space: Metaspace(prepend_scheme=first) does not add a second U+2581)
  sp_scores / sp_types   the tokenizer.model's score and type of every id (what llama.cpp's
              convert_hf_to_gguf.py would write from it; types: 1 normal, 2 unknown, 3 control,
              6 byte)

Pinned: sentencepiece 0.2.3, transformers 5.24.0, tokenizers 0.23.3 (tests/data/MANIFEST).
Usage: /work/venv-ref/bin/python tools/ref/gen_spm_tokenizer.py   (deterministic, 1 thread)
"""
import json
import os
import shutil
import tempfile

import sentencepiece as spm
from transformers import LlamaTokenizerFast

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "data", "tokenizer", "spm_llama")
TRAIN = ["tests/data/model/heldout_startrek.txt", "tests/data/model/calib_linuxcookie.txt"]
TEST = ["tests/data/tokenizer/constructed_edge_cases.txt", "tests/data/tokenizer/fuzz_cases.txt"]


def read_lines(paths):
    lines = []
    for p in paths:
        with open(os.path.join(ROOT, p), encoding="utf-8", errors="replace") as f:
            lines += [line for line in f.read().split("\n") if line]
    return lines


def sp_type(sp, i):
    if sp.is_unknown(i):
        return 2
    if sp.is_control(i):
        return 3
    if sp.is_byte(i):
        return 6
    return 1


def main():
    tmp = tempfile.mkdtemp()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(read_lines(TRAIN)), model_prefix=os.path.join(tmp, "tokenizer"),
        vocab_size=1000, model_type="bpe", byte_fallback=True, split_digits=True,
        character_coverage=0.9995, allow_whitespace_only_pieces=True,
        remove_extra_whitespaces=False, normalization_rule_name="identity", unk_id=0, bos_id=1,
        eos_id=2, num_threads=1, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(tmp, "tokenizer.model"))
    hf = LlamaTokenizerFast.from_pretrained(tmp)
    shutil.rmtree(OUT, ignore_errors=True)
    hf.save_pretrained(OUT)
    shutil.rmtree(tmp)
    lines = read_lines(TEST)
    goldens = {
        "lines": lines,
        "hf_ids": [hf.encode(t, add_special_tokens=False) for t in lines],
        "sp_ids": [sp.encode(t) for t in lines],
        "sp_scores": [sp.get_score(i) for i in range(sp.get_piece_size())],
        "sp_types": [sp_type(sp, i) for i in range(sp.get_piece_size())],
    }
    with open(os.path.join(OUT, "goldens.json"), "w", encoding="utf-8") as f:
        json.dump(goldens, f, ensure_ascii=False)
        f.write("\n")
    same = sum(a == b for a, b in zip(goldens["hf_ids"], goldens["sp_ids"]))
    print(f"{len(lines)} lines; HF == sentencepiece on {same}")


if __name__ == "__main__":
    main()
