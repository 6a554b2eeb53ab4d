// Decode-time weight layouts. repack_for_decode() replaces each q4_0, q4_K and (with AVX-512,
// kernels::x16_pays_off) q6_K matrix that linear() reads (every dense layer's q/k/v/o and
// gate/up/down, and the lm_head, tied to the embedding or not) with its q4_0x16 / q4_Kx16 / q6_Kx16
// copy (kernels/quant_repack.h: 16 rows interleaved so the decode GEMV runs one row per SIMD lane).
// All copies live in one arena, on transparent huge pages (core/memory.h: one TLB entry per 2 MiB
// instead of per 4 KiB, where the mapped file has 4 KiB pages), and replace the mapped views, whose
// file pages are then dropped from the resident set and from the memory ledger (the file stays
// mapped for the other tensors). Values do not change; only the GEMV's float summation order does.
//
// Call it after any slicing (tensor parallelism) and before building a Decoder. Training,
// quantize and the writers want the file's layout: they never call it. Not repacked: MoE
// experts and MLA projections (their own kernels), an untied embedding (only B rows of it are
// read per step; a tied one is read through dequantize_rows, which knows the layout).
#pragma once

#include <cstdint>

#include "lmstack/core/thread_pool.h"
#include "lmstack/model/weights.h"

namespace lmstack::model {

struct RepackStats {
  int tensors = 0;    // matrices repacked
  int64_t bytes = 0;  // their bytes (the arena's, less alignment padding)
};

RepackStats repack_for_decode(ModelWeights& weights, ThreadPool& pool);

}  // namespace lmstack::model
