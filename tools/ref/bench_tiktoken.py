#!/usr/bin/env python3
"""Single-thread (wall and per CPU-second) and batch (~4 KB chunks) encode throughput of PyPI tiktoken on a file, for comparison with
`lmstack bench tokenizer`: same file, same encoding (built from the local rank file and the
encodings.json pattern, as the goldens are), same machine. Prints one JSON line per encoding.

usage: python3 tools/ref/bench_tiktoken.py --file F [--encoding cl100k_base ...] [--threads 2]
"""
import argparse
import json
import os
import statistics
import time

import tiktoken
from tiktoken.load import load_tiktoken_bpe

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build(name, shared):
    info = json.load(open(os.path.join(shared, "peers/tokenizers/encodings.json")))["encodings"]
    e = info["r50k_base" if name == "gpt2" else name]
    ranks = load_tiktoken_bpe(os.path.join(shared, "peers/tokenizers", e["file"]))
    return tiktoken.Encoding(name, pat_str=e["pat_str"], mergeable_ranks=ranks,
                             special_tokens=e["special_tokens"])


def median_mbs(fn, nbytes, runs, clock=time.perf_counter):
    fn()  # warm-up
    times = []
    for _ in range(runs):
        t = clock()
        fn()
        times.append(clock() - t)
    return nbytes / statistics.median(times) / 1e6


def chunks_of(text, target=4096):
    """~4 KB chunks cut after a newline, as `lmstack bench tokenizer` makes them."""
    out, pos = [], 0
    while pos < len(text):
        nl = text.find("\n", min(len(text), pos + target))
        end = len(text) if nl < 0 else nl + 1
        out.append(text[pos:end])
        pos = end
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--file", required=True)
    ap.add_argument("--encoding", nargs="+", default=["cl100k_base", "o200k_base"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--shared", default=os.path.join(ROOT, "../shared"))
    args = ap.parse_args()
    raw = open(args.file, "rb").read()
    text = raw.decode("utf-8", errors="replace")
    chunks = chunks_of(text)
    for name in args.encoding:
        enc = build(name, args.shared)
        single = median_mbs(lambda: enc.encode_ordinary(text), len(raw), args.runs)
        cpu = median_mbs(lambda: enc.encode_ordinary(text), len(raw), args.runs, time.thread_time)
        batch = median_mbs(lambda: enc.encode_ordinary_batch(chunks, num_threads=args.threads),
                           len(raw), args.runs)
        print(json.dumps({"encoding": name, "file": os.path.basename(args.file),
                          "bytes": len(raw), "tokens": len(enc.encode_ordinary(text)),
                          "tiktoken_mb_s": round(single, 2),
                          "tiktoken_mb_per_cpu_s": round(cpu, 2),
                          f"tiktoken_batch_{args.threads}t_mb_s": round(batch, 2)}))


if __name__ == "__main__":
    main()
