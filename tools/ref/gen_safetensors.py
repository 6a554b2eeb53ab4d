#!/usr/bin/env python3
"""Writes tests/data/model/reference.safetensors with Hugging Face's own safetensors package,
so lmstack's reader is checked against an independent writer (tests/model/safetensors_test.cc,
ReadsTheReferenceFileFromPython). Values are closed-form; bf16 is built from the top 16 bits
of exactly representable f32 values because NumPy has no bfloat16.

Usage: pip install safetensors numpy; python3 tools/ref/gen_safetensors.py
"""
import os

import numpy as np
from safetensors import TensorSpec, serialize_file

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "model",
                   "reference.safetensors")


def spec(dtype, array, keep):
    keep.append(array)  # the serializer reads raw pointers: keep every buffer alive
    return TensorSpec(dtype=dtype, shape=list(array.shape), data_ptr=array.ctypes.data,
                      data_len=array.nbytes)


def main():
    keep = []
    a = (np.arange(12, dtype=np.float32) * 0.5 - 2.0).reshape(3, 4)
    b_f32 = np.array([1.0, -2.5, 3.140625, 0.0, 65280.0, -0.0078125], dtype=np.float32)
    b = (b_f32.view(np.uint32) >> 16).astype(np.uint16).reshape(2, 3)  # exact in bf16
    c = np.array([1.0, -0.5, 65504.0, 2.0**-24, 1.0 / 3.0], dtype=np.float16)
    d = np.array([[-7, 0], [7, 1000]], dtype=np.int32)
    e = np.array([-128, -1, 0, 127], dtype=np.int8)
    f = np.array([1, -(2**40)], dtype=np.int64)
    g = np.zeros((0, 3), dtype=np.float32)
    tensors = {
        "a.f32": spec("float32", a, keep),
        "b.bf16": spec("bfloat16", b, keep),
        "c.f16": spec("float16", c, keep),
        "d.i32": spec("int32", d, keep),
        "e.i8": spec("int8", e, keep),
        "f.i64": spec("int64", f, keep),
        "g.empty": spec("float32", g, keep),
    }
    serialize_file(tensors, OUT, metadata={"generator": "tools/ref/gen_safetensors.py"})
    print("wrote", os.path.normpath(OUT), os.path.getsize(OUT), "bytes")


if __name__ == "__main__":
    main()
