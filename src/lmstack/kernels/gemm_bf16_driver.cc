// The blocked driver of the bf16 GEMM: gemm_driver.cc's loop nest (Goto & van de Geijn 2008)
// over k-pair panels (gemm_kernels.h GemmBf16Isa). A separate file rather than a template of
// the f32 driver so that the f32 path, used by inference and f32 training, stays as it was.
// op(A) is packed (rounded to bf16) once per call; each thread then packs its NC x KC blocks
// of B and sweeps the microkernel. KC = 768 k steps: a pair is 4 bytes, so the 14 x 768 A
// panel (21 KiB, L1) and the 768 x 512 B block (768 KiB, L2) take the bytes of the f32
// driver's KC = 384 blocks; 768 beat 384 by 8-15% on the default model's dX (K 768) and
// lm_head dW (K 512) products (BM_GemmBf16, 1 thread, CPU time, two runs each).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "lmstack/core/thread_pool.h"
#include "lmstack/kernels/gemm_blocking.h"
#include "lmstack/kernels/gemm_kernels.h"

namespace lmstack::kernels {
namespace {

constexpr int64_t kKc = 768;  // even: a block boundary never splits a pair
constexpr int64_t kNc = 512;
constexpr int64_t kPackRows = 64;  // even, as kKc

struct Job {
  const GemmBf16Isa* isa;
  int64_t m, n, k;
  const uint32_t* ap;  // packed A: panel ip at ap + ip * kp * MR, kp = ceil(k / 2)
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
  thread_local std::vector<uint32_t> b_buf;
  const GemmBf16Isa& isa = *job.isa;
  const int64_t mr = isa.mr, nr = isa.nr, kp = (job.k + 1) / 2;
  uint32_t* bp = gemm_scratch(b_buf, kKc / 2 * (kNc + nr));
  for (int64_t jc = j0; jc < j1; jc += kNc) {
    const int64_t nc = std::min(kNc, j1 - jc);
    for (int64_t pc = 0; pc < job.k; pc += kKc) {
      const int64_t kc = std::min(kKc, job.k - pc), panel = (kc + 1) / 2 * nr;
      if (job.b_nt)
        isa.pack_b_nt(job.bt, job.b, job.ldb, jc, nc, pc, kc, bp);
      else
        isa.pack_b_nn(job.bt, job.b, job.ldb, jc, nc, pc, kc, bp);
      const bool add = job.add || pc > 0;
      for (int64_t ip = ip0; ip < ip1; ++ip) {
        const uint32_t* ap = job.ap + ip * kp * mr + pc / 2 * mr;
        const int rows = static_cast<int>(std::min(mr, job.m - ip * mr));
        for (int64_t jr = 0; jr < nc; jr += nr) {
          const int cols = static_cast<int>(std::min(nr, nc - jr));
          isa.micro(kc, ap, bp + jr / nr * panel, job.c + ip * mr * job.ldc + jc + jr, job.ldc,
                    rows, cols, add);
        }
      }
    }
  }
}

}  // namespace

void gemm_blocked_bf16(ThreadPool& pool, const GemmBf16Isa& isa, int64_t m, int64_t n, int64_t k,
                       float alpha, const float* a, int64_t lda, bool trans_a, WeightType bt,
                       const void* b, int64_t ldb, bool b_nt, float* c, int64_t ldc, bool add) {
  if (m <= 0 || n <= 0 || k <= 0) return;
  thread_local std::vector<uint32_t> a_buf;
  const int64_t mp = (m + isa.mr - 1) / isa.mr, np = (n + isa.nr - 1) / isa.nr;
  const int64_t kp = (k + 1) / 2;
  uint32_t* ap = gemm_scratch(a_buf, mp * isa.mr * kp);
  // A stored [K, M] (trans_a, the dW = dYᵀ · X product) is packed kPackRows rows at a time
  // for all of a thread's panels, so it is read along its rows; one panel after another
  // strode through all K rows (M = 768: a 3 KiB stride) and took 23% of that GEMM's time.
  const int64_t k_step = trans_a ? kPackRows : k;
  pool.parallel_for(mp, [&](int64_t begin, int64_t end) {
    for (int64_t k0 = 0; k0 < k; k0 += k_step) {
      for (int64_t ip = begin; ip < end; ++ip) {
        const int64_t i0 = ip * isa.mr;
        isa.pack_a(trans_a ? a + k0 * lda + i0 : a + i0 * lda, lda, trans_a,
                   static_cast<int>(std::min<int64_t>(isa.mr, m - i0)), std::min(k_step, k - k0),
                   alpha, ap + ip * kp * isa.mr + k0 / 2 * isa.mr);
      }
    }
  });
  const Job job{&isa, m, n, k, ap, bt, b, ldb, b_nt, c, ldc, add};
  split_over_threads(
      pool, mp, np, isa.nr, n,
      [&](int64_t ip0, int64_t ip1, int64_t j0, int64_t j1) { run_block(job, ip0, ip1, j0, j1); });
}

}  // namespace lmstack::kernels
