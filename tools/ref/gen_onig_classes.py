#!/usr/bin/env python3
"""The code points that `\\w`, `\\d` and `\\s` match in Hugging Face `tokenizers` 0.23.3 (PyPI; its
regexes run on Oniguruma), as ranges, so regex_splitter_test.cc can check lmstack's PCRE2
translation of these escapes code point by code point.

Writes tests/data/tokenizer/onig_classes.txt: lines "<escape> <first hex> <last hex>".
regenerate: /work/venv-ref/bin/python tools/ref/gen_onig_classes.py
"""
import os

from tokenizers import Regex, pre_tokenizers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CPS = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]


def members(rx, cps=CPS):
    """The code points of cps that Split(rx, removed) removes: the ones rx matches as single
    characters."""
    split = pre_tokenizers.Split(Regex(rx), behavior="removed")
    out = []
    for i in range(0, len(cps), 8192):
        part = cps[i:i + 8192]
        kept = set()
        for _, (b, e) in split.pre_tokenize_str("".join(map(chr, part))):
            kept.update(range(b, e))
        out += [c for k, c in enumerate(part) if k not in kept]
    return out


def ranges(cps):
    r = []
    for c in cps:
        if r and r[-1][1] + 1 == c:
            r[-1][1] = c
        else:
            r.append([c, c])
    return r


def main():
    with open(os.path.join(ROOT, "tests/data/tokenizer/onig_classes.txt"), "w") as f:
        f.write("# escape first last (hex): code points tokenizers 0.23.3 (Oniguruma) matches\n")
        for esc in ("w", "d", "s"):
            for a, b in ranges(members("\\" + esc)):
                f.write(f"\\{esc} {a:X} {b:X}\n")


if __name__ == "__main__":
    main()
