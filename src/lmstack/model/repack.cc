// repack_for_decode (repack.h): pick the q4_0 / q4_K matrices, size one arena, repack in
// parallel.
#include "lmstack/model/repack.h"

#include <vector>

#include "lmstack/kernels/quant_repack.h"

namespace lmstack::model {
namespace {

constexpr int64_t kAlign = 64;  // each matrix starts on a cache line

bool tied(const ModelWeights& w) {  // const raw_data(): the tensors may be read-only mappings
  return w.lm_head.defined() && w.lm_head.raw_data() == w.embed.raw_data();
}

std::vector<Tensor*> repackable(ModelWeights& w) {
  std::vector<Tensor*> out;
  const auto add = [&](Tensor& t) {
    if (t.defined() && t.rank() == 2 && kernels::x16_pays_off(t.dtype())) out.push_back(&t);
  };
  for (LayerWeights& l : w.layers) {
    if (!l.mla) {  // MLA reads wq / wo through its own path (mla.h)
      add(l.wq);
      add(l.wo);
    }
    add(l.wk);
    add(l.wv);
    add(l.w_gate);
    add(l.w_up);
    add(l.w_down);
  }
  // A tied lm_head is the embedding: repacked once (the embedding lookup reads the groups).
  add(tied(w) ? w.embed : w.lm_head);
  return out;
}

}  // namespace

RepackStats repack_for_decode(ModelWeights& weights, ThreadPool& pool) {
  const std::vector<Tensor*> todo = repackable(weights);
  RepackStats stats;
  std::vector<int64_t> at(todo.size() + 1, 0);
  for (size_t i = 0; i < todo.size(); ++i) {
    at[i + 1] = at[i] + (todo[i]->nbytes() + kAlign - 1) / kAlign * kAlign;
    stats.bytes += todo[i]->nbytes();
  }
  if (todo.empty()) return stats;
  const Tensor arena = Tensor::zeros(Shape{at.back()}, DType::kI8, MemoryCategory::kWeights);
  std::vector<Tensor> packed(todo.size());
  pool.parallel_for(static_cast<int64_t>(todo.size()), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const auto u = static_cast<size_t>(i);
      const Tensor dst = arena.slice(at[u], at[u] + todo[u]->nbytes());
      packed[u] = kernels::repack_x16(*todo[u], dst);
    }
  });
  const bool was_tied = tied(weights);
  for (size_t i = 0; i < todo.size(); ++i) {
    todo[i]->drop_mapped_pages();  // read once to repack: out of the resident set
    *todo[i] = packed[i];
  }
  if (was_tied) weights.lm_head = weights.embed;
  stats.tensors = static_cast<int>(todo.size());
  return stats;
}

}  // namespace lmstack::model
