// One micro-batch's saved activations of a StageModel (private to parallel_stage*.cc). Legend:
// N = batch·seq token rows, C hidden, F intermediate per TP rank, H·D and Hkv·D the query and
// KV widths per TP rank, V/T the vocabulary rows per TP rank.
#pragma once

#include <cstdint>
#include <vector>

#include "lmstack/train/parallel_stage.h"

namespace lmstack::train {

// What one layer's backward reads (Korthikanti et al. 2022's per-layer activations, TP slice).
struct LayerSaved {
  std::vector<float> n1, n1_rstd;    // [N, C], [N]: attention norm
  std::vector<float> q, k, v;        // [N, H·D], [N, Hkv·D] x2, after RoPE
  std::vector<float> att;            // [N, H·D] before Wo
  std::vector<float> x_mid;          // [N, C] residual after the attention block
  std::vector<float> n2, n2_rstd;    // MLP norm
  std::vector<float> gate, up, act;  // [N, F]
};

// Scratch buffers of StageModel::scratch (one per concurrent use).
enum StageScratch {
  kScratchDx = 0,
  kScratchDn,
  kScratchPartial,
  kScratchDq,
  kScratchDk,
  kScratchDv,
  kScratchDatt,
  kScratchDgate,
  kScratchDup,
  kScratchDact,
  kScratchGather,    // a norm output gathered over TP (sequence parallel)
  kScratchGatherDy,  // a residual gradient gathered over TP (sequence parallel)
  kScratchReduced,   // this rank's rows of a reduce-scatter
  kScratchEmbed,
};

// Shapes under sequence parallelism: x, n1, n1_rstd, x_mid, n2, n2_rstd, nf and nf_rstd hold
// this rank's N/T token rows only (Korthikanti et al. 2022: the norms' and residuals'
// activations divided by T); the rest hold all N rows of this rank's heads or columns.
struct StageModel::Acts {
  int batch = 0, seq = 0;
  int64_t n = 0;
  std::vector<int32_t> positions, ids;  // [N]; ids kept by the embedding chunk
  std::vector<std::vector<float>> x;    // [layers + 1] x [N, C]: inputs of each layer, output
  std::vector<LayerSaved> layers;
  std::vector<float> nf, nf_rstd, dlogits;  // head: final norm, then dL/dlogits [N, V/T]
  int64_t bytes() const;
};

}  // namespace lmstack::train
