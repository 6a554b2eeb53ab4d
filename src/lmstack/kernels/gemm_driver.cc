// The blocked GEMM driver (Goto & van de Geijn 2008; the BLIS loop nest) shared by linear()
// for prefill and by gemm_f32(). op(A) is packed once per call into MR-row panels (alpha
// folded in); then each thread takes a range of N panels (or of M panels when N is too
// narrow to split) and, per NC x KC block of B, packs it into NR-column f32 panels (the
// bf16/f16 conversion happens here, once per element per call) and sweeps the microkernel
// over it. KC = 384 keeps an MR x KC A panel (21 KiB) in L1 and a KC x NC B block (768 KiB)
// in L2 (2 MiB per core here); 384 beat 256 by 4% at K = 2048 (fewer C round trips).
// Block-quantized B (WeightType kQ8_0 ...) is first dequantized, an NC x KC block at a time
// with KC = 256 (a multiple of every block size), into a row-major f32 scratch that the f32
// packer then reads, so each weight element is decoded once per call per thread.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "lmstack/core/thread_pool.h"
#include "lmstack/kernels/gemm_blocking.h"
#include "lmstack/kernels/gemm_kernels.h"
#include "lmstack/kernels/quant.h"

namespace lmstack::kernels {
namespace {

constexpr int64_t kKc = 384;
constexpr int64_t kKcQuant = 256;
constexpr int64_t kNc = 512;

// Rows [n0, n0 + nc), columns [k0, k0 + kc) of quantized B [N, K] (row length k) as f32
// [nc, kc]; k0 and kc are multiples of the block size.
void dequantize_block(WeightType wt, const void* b, int64_t k, int64_t n0, int64_t nc, int64_t k0,
                      int64_t kc, float* out) {
  const DType t = weight_dtype(wt);
  const int64_t row_bytes = dtype_bytes(t, k), skip = dtype_bytes(t, k0);
  const auto* base = static_cast<const uint8_t*>(b);
  for (int64_t r = 0; r < nc; ++r)
    dequantize_row(t, base + (n0 + r) * row_bytes + skip, out + r * kc, kc);
}

// Per-thread scratch (gemm_scratch) kept for the thread's life: 4 * M * K bytes of packed A on
// a calling thread (8 MiB at M 512, K 4096), 4 * KC * (NC + NR) bytes (~0.8 MiB) of packed B
// on every thread.
struct Job {
  const GemmIsa* isa;
  int64_t m, n, k;
  const float* ap;  // packed A: panel ip at ap + ip * k * MR
  WeightType bt;
  const void* b;
  int64_t ldb;
  bool b_nt;
  float* c;
  int64_t ldc;
  bool add;
};

// M panels [ip0, ip1) x columns [j0, j1) of C.
void run_block(const Job& job, int64_t ip0, int64_t ip1, int64_t j0, int64_t j1) {
  thread_local std::vector<float> b_buf, deq_buf;
  const GemmIsa& isa = *job.isa;
  const int64_t mr = isa.mr, nr = isa.nr;
  const bool quant = is_quantized(weight_dtype(job.bt));
  const int64_t kc_max = quant ? kKcQuant : kKc;
  float* bp = gemm_scratch(b_buf, kc_max * (kNc + nr));
  float* deq = quant ? gemm_scratch(deq_buf, kKcQuant * kNc) : nullptr;
  for (int64_t jc = j0; jc < j1; jc += kNc) {
    const int64_t nc = std::min(kNc, j1 - jc);
    for (int64_t pc = 0; pc < job.k; pc += kc_max) {
      const int64_t kc = std::min(kc_max, job.k - pc);
      if (quant) {
        dequantize_block(job.bt, job.b, job.ldb, jc, nc, pc, kc, deq);
        isa.pack_b_nt(WeightType::kF32, deq, kc, 0, nc, 0, kc, bp);
      } else if (job.b_nt)
        isa.pack_b_nt(job.bt, job.b, job.ldb, jc, nc, pc, kc, bp);
      else
        isa.pack_b_nn(static_cast<const float*>(job.b), job.ldb, jc, nc, pc, kc, bp);
      const bool add = job.add || pc > 0;
      for (int64_t ip = ip0; ip < ip1; ++ip) {
        const float* ap = job.ap + ip * job.k * mr + pc * mr;
        const int rows = static_cast<int>(std::min(mr, job.m - ip * mr));
        for (int64_t jr = 0; jr < nc; jr += nr) {
          const int cols = static_cast<int>(std::min(nr, nc - jr));
          isa.micro(kc, ap, bp + jr / nr * kc * nr, job.c + ip * mr * job.ldc + jc + jr, job.ldc,
                    rows, cols, add);
        }
      }
    }
  }
}

}  // namespace

void gemm_blocked(ThreadPool& pool, const GemmIsa& isa, int64_t m, int64_t n, int64_t k,
                  float alpha, const float* a, int64_t lda, bool trans_a, WeightType bt,
                  const void* b, int64_t ldb, bool b_nt, float* c, int64_t ldc, bool add) {
  if (m <= 0 || n <= 0 || k <= 0) return;
  thread_local std::vector<float> a_buf;
  const int64_t mp = (m + isa.mr - 1) / isa.mr, np = (n + isa.nr - 1) / isa.nr;
  float* ap = gemm_scratch(a_buf, mp * isa.mr * k);
  pool.parallel_for(mp, [&](int64_t begin, int64_t end) {
    for (int64_t ip = begin; ip < end; ++ip) {
      const int64_t i0 = ip * isa.mr;
      isa.pack_a(trans_a ? a + i0 : a + i0 * lda, lda, trans_a,
                 static_cast<int>(std::min<int64_t>(isa.mr, m - i0)), k, alpha,
                 ap + ip * k * isa.mr);
    }
  });
  const Job job{&isa, m, n, k, ap, bt, b, ldb, b_nt, c, ldc, add};
  split_over_threads(
      pool, mp, np, isa.nr, n,
      [&](int64_t ip0, int64_t ip1, int64_t j0, int64_t j1) { run_block(job, ip0, ip1, j0, j1); });
}

}  // namespace lmstack::kernels
