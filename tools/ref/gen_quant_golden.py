#!/usr/bin/env python3
"""Golden data for tests/kernels/quant_test.cc, from llama.cpp's gguf-py (pip `gguf`), an
implementation independent of lmstack's codecs.

For Q8_0 and Q4_0 (which gguf-py can quantize): <t>_input.npy (random f32 rows, [4, 256]),
<t>_bytes.bin (gguf.quants.quantize of them) and <t>_dequant.npy (gguf.quants.dequantize of
those bytes). For Q4_K and Q6_K (dequantize only): <t>_bytes.bin holds random but valid blocks
(random bytes with the f16 super-scales set to finite values of a realistic size) and
<t>_dequant.npy gguf-py's decoding of them. Run from the repo root:
    python3 tools/ref/gen_quant_golden.py
"""
import os

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

OUT = "tests/data/kernels/quant"
ROWS, COLS = 4, 512
rng = np.random.default_rng(1234)


def random_rows():
    x = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    x[0, :32] = 0.0                      # an all-zero block: d = 0
    x[1, 32:64] = 0.25                   # a constant block
    x[2, 64:96] *= 1e-6                  # a tiny-scale block (f16 subnormal scales)
    x[3, 96:128] = np.float32(3.0) * np.sign(x[3, 96:128])  # ties in |max|
    return x


def write(name, qtype, data, dequant):
    data.tofile(os.path.join(OUT, f"{name}_bytes.bin"))
    np.save(os.path.join(OUT, f"{name}_dequant.npy"), dequant.astype(np.float32))


def quantizable(name, qtype):
    x = random_rows()
    np.save(os.path.join(OUT, f"{name}_input.npy"), x)
    q = quants.quantize(x, qtype)
    write(name, qtype, q, quants.dequantize(q, qtype))


def random_kquant_blocks(qtype, block_bytes, scale_offsets):
    blocks = rng.integers(0, 256, size=(ROWS * COLS // 256, block_bytes), dtype=np.uint8)
    for at in scale_offsets:  # finite positive f16 super-scales around 1e-3 .. 1e-2
        d = rng.uniform(1e-3, 1e-2, size=blocks.shape[0]).astype(np.float16)
        blocks[:, at:at + 2] = d.view(np.uint8).reshape(-1, 2)
    data = blocks.reshape(ROWS, -1)
    return data, quants.dequantize(data, qtype)


def main():
    os.makedirs(OUT, exist_ok=True)
    quantizable("q8_0", T.Q8_0)
    quantizable("q4_0", T.Q4_0)
    write("q4_K", T.Q4_K, *random_kquant_blocks(T.Q4_K, 144, [0, 2]))
    write("q6_K", T.Q6_K, *random_kquant_blocks(T.Q6_K, 210, [208]))


if __name__ == "__main__":
    main()
