#!/usr/bin/env python3
"""Expected RoPE inverse frequencies for tests/kernels/rope_test.cc, derived in float64 NumPy
from the Hugging Face definitions (modeling_rope_utils: default, linear, llama3). Prints C++
initializers to paste into the test; no files are written.

Usage: python3 tools/ref/gen_rope_inv_freq.py
"""
import math

import numpy as np


def default(dim, theta):
    return 1.0 / theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)


def llama3(inv_freq, factor, low_ff, high_ff, old_ctx):
    low_wavelen = old_ctx / low_ff
    high_wavelen = old_ctx / high_ff
    out = []
    for f in inv_freq:
        wavelen = 2 * math.pi / f
        if wavelen < high_wavelen:
            out.append(f)
        elif wavelen > low_wavelen:
            out.append(f / factor)
        else:
            smooth = (old_ctx / wavelen - low_ff) / (high_ff - low_ff)
            out.append((1 - smooth) * f / factor + smooth * f)
    return np.array(out)


def show(name, values):
    print(f"// {name}")
    print("{" + ", ".join(f"{v:.9e}" for v in values) + "}")


if __name__ == "__main__":
    show("default dim 8 theta 10000", default(8, 10000.0))
    show("linear dim 8 theta 10000 factor 4", default(8, 10000.0) / 4)
    # Llama 3.1 8B: head dim 128, theta 500000, factor 8, low 1, high 4, original 8192.
    show("llama3 dim 128 theta 500000 (8, 1, 4, 8192)",
         llama3(default(128, 500000.0), 8.0, 1.0, 4.0, 8192))
