// Flash attention over a paged KV cache: the tiling, scheduling and split-context combine
// around the per-ISA inner loops of attention_leaf.h.
//  - Work item = (sequence, kv head, tile of queries): all query heads that share the kv head
//    (GQA) are rows of one tile, so each gathered K/V chunk serves rows = queries × group.
//    Keys are visited in chunks of kChunk with a running max and sum per row, rescaling the
//    accumulator (FlashAttention-2, Dao 2023, Alg. 1); causal tiles stop at their last query
//    and, under a sliding window, start at the window of their first query.
//  - When there are too few items to occupy the threads (decode), each tile's context is cut
//    into slices that produce partial (max, sum, unnormalized output), merged afterwards
//    (flash-decoding, Dao et al. 2023): O = Σ_s e^(m_s - M)·O_s / Σ_s e^(m_s - M)·l_s.
//  - int8 pools (PagedKv::dtype), and bf16 pools under more than kPackRows rows, are widened
//    chunk by chunk into the tile's scratch by the leaf's loaders; a bf16 pool under decode's
//    few rows is read in place by the leaf's bf16 loops, which widen in registers
//    (gather_chunk decides, ChunkRows carries the choice to the leaf).
// Legend: T query rows, H query heads, Hkv kv heads, G = H / Hkv, D head dim.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "lmstack/core/error.h"
#include "lmstack/kernels/attention_flash.h"

namespace lmstack::kernels {
namespace {

constexpr int kChunk = 64;        // keys per chunk (one K and one V pointer array)
constexpr int kTileRows = 128;    // target rows (queries × group heads) per tile
constexpr int kMinTileRows = 16;  // the smallest tiles made to feed more threads
// Shortest context slice worth a thread of its own: one chunk. A small model's decode has
// fewer kv heads than 2x the threads (smollm-135m: 3 on 2 threads), so without slicing its
// short contexts one thread ran two heads while the other waited.
constexpr int kMinSliceKeys = kChunk;
constexpr int kPackRows = 4;  // tiles with more rows copy each K/V chunk (pack_chunk)

struct Problem {
  float* out;
  const float* q;
  const PagedKv* kv;
  const AttentionBatch* batch;
  int heads, group;
  float scale;
};

struct WorkItem {
  int seq, kv_head;
  int q0, q1;              // the tile's queries within the sequence, [q0, q1)
  int key_begin, key_end;  // the context slice this item covers
  int64_t partial;         // offset of its (m, l, O) in the partial buffer; -1: write output
  int64_t cost() const { return int64_t{q1 - q0} * (key_end - key_begin); }
};

// The items of one tile whose context was sliced, combined after all items ran.
struct SlicedTile {
  size_t first_item;
  int num_slices;
};

struct Scratch {
  std::vector<float> buf;
  float *q, *o, *s, *m, *l, *alpha, *k_pack, *v_pack;
  void reserve(int rows, int d) {
    const size_t need = static_cast<size_t>(rows) * (2 * d + kChunk + 3) + 2 * kChunk * d;
    if (buf.size() < need) buf.resize(need);
    q = buf.data();
    o = q + static_cast<size_t>(rows) * d;
    s = o + static_cast<size_t>(rows) * d;
    m = s + static_cast<size_t>(rows) * kChunk;
    l = m + rows;
    alpha = l + rows;
    k_pack = alpha + rows;
    v_pack = k_pack + static_cast<size_t>(kChunk) * d;
  }
};

// Copies the chunk's f32 K and V rows into contiguous buffers and points kp/vp there. Tiles of
// more than one row group re-read every row; in the pool, rows of one kv head are Hkv·D
// floats apart, which for Hkv·D·4 = 4096 bytes puts all of them in one L1 set.
void pack_chunk(int n, int d, const float** kp, const float** vp, float* k_pack, float* v_pack) {
  const size_t row_bytes = static_cast<size_t>(d) * sizeof(float);
  for (int j = 0; j < n; ++j) {
    std::memcpy(k_pack + static_cast<size_t>(j) * d, kp[j], row_bytes);
    std::memcpy(v_pack + static_cast<size_t>(j) * d, vp[j], row_bytes);
    kp[j] = k_pack + static_cast<size_t>(j) * d;
    vp[j] = v_pack + static_cast<size_t>(j) * d;
  }
}

int64_t first_position(const AttentionBatch& b, int s) {
  return b.context_len[s] - (b.query_start[s + 1] - b.query_start[s]);
}

// Row indices of kv head `kvh` in the pool [blocks, bs, Hkv] for context positions pos,
// pos + 1, ...: one division for the first, then a step per position (a block's slots are
// consecutive). Decode visits every cached key once per step, where a division per key showed.
class RowWalk {
 public:
  RowWalk(const PagedKv& kv, const int32_t* blocks, int kvh, int64_t pos)
      : kv_(kv),
        blocks_(blocks),
        kvh_(kvh),
        block_(pos / kv.block_size),
        offset_(pos % kv.block_size) {}
  int64_t next() {
    const int64_t slot = int64_t{blocks_[block_]} * kv_.block_size + offset_;
    if (++offset_ == kv_.block_size) offset_ = 0, ++block_;
    return slot * kv_.kv_heads + kvh_;
  }

 private:
  const PagedKv& kv_;
  const int32_t* blocks_;
  int kvh_;
  int64_t block_, offset_;
};

// Points k[j], v[j] at the rows of kv head `kvh` for context positions [j0, j0 + n) of a
// pool of T, and for an int8 pool fills their scales.
template <class T>
void point_rows(const PagedKv& kv, const int32_t* blocks, int kvh, int64_t j0, int n, const T** k,
                const T** v, float* k_scale = nullptr, float* v_scale = nullptr) {
  RowWalk walk(kv, blocks, kvh, j0);
  for (int j = 0; j < n; ++j) {
    const int64_t row = walk.next();
    k[j] = static_cast<const T*>(kv.k) + row * kv.head_dim;
    v[j] = static_cast<const T*>(kv.v) + row * kv.head_dim;
    if (k_scale) k_scale[j] = kv.k_scale[row], v_scale[j] = kv.v_scale[row];
  }
}

// The K and V rows of one chunk as the leaf reads them: f32 rows (kp/vp: in the pool, or
// copied or widened into the scratch), or a bf16 pool's rows in place (kb/vb).
struct ChunkRows {
  const float* kp[kChunk];
  const float* vp[kChunk];
  const uint16_t* kb[kChunk];
  const uint16_t* vb[kChunk];
  bool bf16 = false;  // kb/vb hold the rows

  void scores(const AttentionLeaf& leaf, float* s, const float* q, int rows, int n, int d) const {
    if (bf16)
      leaf.scores_bf16(s, kChunk, q, rows, kb, n, d);
    else
      leaf.scores(s, kChunk, q, rows, kp, n, d);
  }
  void accumulate(const AttentionLeaf& leaf, float* o, const float* alpha, const float* p, int rows,
                  int n, int d) const {
    if (bf16)
      leaf.accumulate_bf16(o, alpha, p, kChunk, rows, vb, n, d);
    else
      leaf.accumulate(o, alpha, p, kChunk, rows, vp, n, d);
  }
};

// Points c at the K and V rows of kv head `kvh` for context positions [j0, j0 + n), read by
// `rows` query rows. An f32 pool is read in place, copied to the scratch for more than
// kPackRows rows (pack_chunk); a bf16 pool is read in place for up to kPackRows rows (decode:
// each row read once, and a widened chunk, 2·kChunk·D floats, would not stay in L1), else
// widened into k_pack/v_pack, as an int8 pool always is: the pool itself is never converted,
// so a step reads 2 (bf16) or ~1 (int8) bytes per cached value.
void gather_chunk(const AttentionLeaf& leaf, const PagedKv& kv, const int32_t* blocks, int kvh,
                  int64_t j0, int n, int rows, ChunkRows& c, float* k_pack, float* v_pack) {
  const int d = kv.head_dim;
  c.bf16 = kv.dtype == DType::kBF16 && rows <= kPackRows;
  if (c.bf16) {
    point_rows(kv, blocks, kvh, j0, n, c.kb, c.vb);
    return;
  }
  if (kv.dtype == DType::kF32) {
    point_rows(kv, blocks, kvh, j0, n, c.kp, c.vp);
    if (rows > kPackRows) pack_chunk(n, d, c.kp, c.vp, k_pack, v_pack);
    return;
  }
  for (int j = 0; j < n; ++j) {
    c.kp[j] = k_pack + static_cast<size_t>(j) * d;
    c.vp[j] = v_pack + static_cast<size_t>(j) * d;
  }
  // One loader call per chunk for K and one for V (not per row).
  if (kv.dtype == DType::kBF16) {
    const uint16_t* krows[kChunk];
    const uint16_t* vrows[kChunk];
    point_rows(kv, blocks, kvh, j0, n, krows, vrows);
    leaf.load_bf16(k_pack, krows, n, d);
    leaf.load_bf16(v_pack, vrows, n, d);
  } else {
    const int8_t* krows[kChunk];
    const int8_t* vrows[kChunk];
    float kscale[kChunk], vscale[kChunk];
    point_rows(kv, blocks, kvh, j0, n, krows, vrows, kscale, vscale);
    leaf.load_i8(k_pack, krows, kscale, n, d);
    leaf.load_i8(v_pack, vrows, vscale, n, d);
  }
}

// Asks for the K and V rows (and int8 scales) of positions [j0, j0 + n) ahead of use. Rows of
// one kv head are Hkv·D values apart (often a page), a stride the hardware prefetchers do not
// follow.
void prefetch_chunk(const PagedKv& kv, const int32_t* blocks, int kvh, int64_t j0, int n) {
  const int64_t row_bytes = dtype_bytes(kv.dtype, kv.head_dim);
  RowWalk walk(kv, blocks, kvh, j0);
  for (int j = 0; j < n; ++j) {
    const int64_t offset = walk.next() * row_bytes;
    const char* k = static_cast<const char*>(kv.k) + offset;
    const char* v = static_cast<const char*>(kv.v) + offset;
    for (int64_t line = 0; line < row_bytes; line += 64) {
      __builtin_prefetch(k + line, 0, 2);
      __builtin_prefetch(v + line, 0, 2);
    }
    if (kv.dtype == DType::kI8) {
      __builtin_prefetch(kv.k_scale + offset / row_bytes, 0, 2);
      __builtin_prefetch(kv.v_scale + offset / row_bytes, 0, 2);
    }
  }
}

// Runs one work item: its rows against its key slice, with the online softmax.
void run_item(const AttentionLeaf& leaf, const Problem& p, const WorkItem& it, Scratch& sc,
              float* partials) {
  const AttentionBatch& b = *p.batch;
  const int d = p.kv->head_dim, g = p.group, rows = (it.q1 - it.q0) * g;
  const int64_t q_row0 = b.query_start[it.seq] + it.q0;
  const int64_t pos0 = first_position(b, it.seq) + it.q0;  // position of the tile's row 0
  const int32_t* blocks = b.block_table + int64_t{it.seq} * b.max_blocks_per_seq;
  // The first chunk's misses overlap the set-up below; later chunks are asked for one ahead.
  prefetch_chunk(*p.kv, blocks, it.kv_head, it.key_begin,
                 static_cast<int>(std::min<int64_t>(kChunk, it.key_end - it.key_begin)));
  sc.reserve(rows, d);
  for (int r = 0; r < rows; ++r) {
    const float* src = p.q + ((q_row0 + r / g) * p.heads + it.kv_head * g + r % g) * d;
    for (int e = 0; e < d; ++e) sc.q[r * d + e] = src[e] * p.scale;
  }
  std::fill(sc.o, sc.o + static_cast<size_t>(rows) * d, 0.0f);
  std::fill(sc.m, sc.m + rows, -INFINITY);
  std::fill(sc.l, sc.l + rows, 0.0f);
  ChunkRows chunk;
  for (int64_t j0 = it.key_begin; j0 < it.key_end; j0 += kChunk) {
    const int n = static_cast<int>(std::min<int64_t>(kChunk, it.key_end - j0));
    // Rows before r0 sit at positions < j0: the whole chunk is in their future.
    const int r0 = static_cast<int>(std::max<int64_t>(0, j0 - pos0)) * g;
    gather_chunk(leaf, *p.kv, blocks, it.kv_head, j0, n, rows - r0, chunk, sc.k_pack, sc.v_pack);
    if (j0 + kChunk < it.key_end)
      prefetch_chunk(*p.kv, blocks, it.kv_head, j0 + kChunk,
                     static_cast<int>(std::min<int64_t>(kChunk, it.key_end - j0 - kChunk)));
    chunk.scores(leaf, sc.s + r0 * kChunk, sc.q + r0 * d, rows - r0, n, d);
    for (int r = r0; r < rows; ++r) {
      const int64_t pos = pos0 + r / g;
      const auto end = static_cast<int>(std::min<int64_t>(n, pos - j0 + 1));
      const auto begin =
          static_cast<int>(std::clamp<int64_t>(attention_window_start(pos, b.window) - j0, 0, n));
      float* row = sc.s + r * kChunk;
      if (begin >= end) {  // the chunk lies wholly before this row's sliding window
        std::fill(row, row + n, 0.0f);
        sc.alpha[r] = 1.0f;
        continue;
      }
      // Keys before the window (begin > 0 only under one) get weight 0; the leaf sees the rest.
      std::fill(row, row + begin, 0.0f);
      sc.alpha[r] = leaf.softmax_row(row + begin, end - begin, n - begin, sc.m + r, sc.l + r);
    }
    chunk.accumulate(leaf, sc.o + r0 * d, sc.alpha + r0, sc.s + r0 * kChunk, rows - r0, n, d);
  }
  if (it.partial >= 0) {
    float* dst = partials + it.partial;
    std::copy(sc.m, sc.m + rows, dst);
    std::copy(sc.l, sc.l + rows, dst + rows);
    std::copy(sc.o, sc.o + static_cast<size_t>(rows) * d, dst + 2 * rows);
    return;
  }
  for (int r = 0; r < rows; ++r) {
    float* dst = p.out + ((q_row0 + r / g) * p.heads + it.kv_head * g + r % g) * d;
    const float inv_l = 1.0f / sc.l[r];
    for (int e = 0; e < d; ++e) dst[e] = sc.o[r * d + e] * inv_l;
  }
}

// Merges the partial results of one sliced tile into the output.
void combine_tile(const Problem& p, const std::vector<WorkItem>& items, const SlicedTile& t,
                  const float* partials) {
  const WorkItem& first = items[t.first_item];
  const int d = p.kv->head_dim, g = p.group, rows = (first.q1 - first.q0) * g;
  const int64_t q_row0 = p.batch->query_start[first.seq] + first.q0;
  for (int r = 0; r < rows; ++r) {
    float max_m = -INFINITY;
    for (int s = 0; s < t.num_slices; ++s)
      max_m = std::max(max_m, partials[items[t.first_item + s].partial + r]);
    float* dst = p.out + ((q_row0 + r / g) * p.heads + first.kv_head * g + r % g) * d;
    std::fill(dst, dst + d, 0.0f);
    float sum = 0;
    for (int s = 0; s < t.num_slices; ++s) {
      const float* part = partials + items[t.first_item + s].partial;
      if (part[r] == -INFINITY) continue;  // the slice lies wholly in this row's future
      const float w = std::exp(part[r] - max_m);
      sum += w * part[rows + r];
      const float* o = part + 2 * rows + static_cast<int64_t>(r) * d;
      for (int e = 0; e < d; ++e) dst[e] += w * o[e];
    }
    for (int e = 0; e < d; ++e) dst[e] /= sum;
  }
}

// Cuts the batch into tiles and, when tiles are fewer than the threads can use, slices
// long contexts. Returns the partial-buffer size in floats.
int64_t plan_items(const Problem& p, int num_threads, std::vector<WorkItem>& items,
                   std::vector<SlicedTile>& sliced) {
  const AttentionBatch& b = *p.batch;
  const int64_t want_items = 2 * int64_t{num_threads};
  // Big tiles re-read K/V least; smaller ones (down to kMinTileRows) when there are too few
  // tiles to keep the threads busy.
  int tile_queries = std::max(1, kTileRows / p.group);
  auto count_tiles = [&](int tq) {
    int64_t n = 0;
    for (int s = 0; s < b.num_seqs; ++s)
      n += (b.query_start[s + 1] - b.query_start[s] + tq - 1) / tq;
    return n * p.kv->kv_heads;
  };
  while (tile_queries * p.group > kMinTileRows && count_tiles(tile_queries) < want_items)
    tile_queries = std::max(1, tile_queries / 2);
  std::vector<WorkItem> tiles;
  for (int s = 0; s < b.num_seqs; ++s) {
    const int q_len = b.query_start[s + 1] - b.query_start[s];
    const int64_t pos_first = first_position(b, s);
    for (int q0 = 0; q0 < q_len; q0 += tile_queries) {
      const int q1 = std::min(q_len, q0 + tile_queries);
      // Under a sliding window the tile's first query sees the earliest key any row needs.
      const auto key_begin = static_cast<int>(attention_window_start(pos_first + q0, b.window));
      for (int h = 0; h < p.kv->kv_heads; ++h)
        tiles.push_back({s, h, q0, q1, key_begin, static_cast<int>(pos_first + q1), -1});
    }
  }
  const int64_t max_slices = num_threads > 1 && std::ssize(tiles) < want_items
                                 ? (want_items + std::ssize(tiles) - 1) / std::ssize(tiles)
                                 : 1;
  int64_t partial_floats = 0;
  for (const WorkItem& t : tiles) {
    const int64_t keys = t.key_end - t.key_begin;
    const int64_t slices =
        std::min<int64_t>(max_slices, (keys + kMinSliceKeys - 1) / kMinSliceKeys);
    if (slices <= 1) {
      items.push_back(t);
      continue;
    }
    // Slices are whole chunks long, so only the last is ragged.
    const int64_t per = (keys + slices - 1) / slices;
    const auto len = static_cast<int>((per + kChunk - 1) / kChunk * kChunk);
    const int rows = (t.q1 - t.q0) * p.group;
    SlicedTile st{items.size(), 0};
    for (int k0 = t.key_begin; k0 < t.key_end; k0 += len, ++st.num_slices) {
      items.push_back(
          {t.seq, t.kv_head, t.q0, t.q1, k0, std::min(t.key_end, k0 + len), partial_floats});
      partial_floats += int64_t{rows} * (2 + p.kv->head_dim);
    }
    sliced.push_back(st);
  }
  return partial_floats;
}

void check_batch(const PagedKv& kv, const AttentionBatch& b, int heads) {
  LMSTACK_CHECK(is_kv_dtype(kv.dtype), "KV cache dtype {}", dtype_name(kv.dtype));
  LMSTACK_CHECK(kv.dtype != DType::kI8 || (kv.k_scale != nullptr && kv.v_scale != nullptr),
                "int8 KV pool without scales");
  LMSTACK_CHECK(kv.kv_heads > 0 && heads % kv.kv_heads == 0, "heads {} kv_heads {}", heads,
                kv.kv_heads);
  for (int s = 0; s < b.num_seqs; ++s) {
    const int64_t q_len = b.query_start[s + 1] - b.query_start[s], ctx = b.context_len[s];
    LMSTACK_CHECK(q_len >= 0 && q_len <= ctx, "sequence {}: {} queries, context {}", s, q_len, ctx);
    LMSTACK_CHECK((ctx + kv.block_size - 1) / kv.block_size <= b.max_blocks_per_seq,
                  "sequence {}: context {} needs more than {} blocks", s, ctx,
                  b.max_blocks_per_seq);
  }
}

}  // namespace

void flash_paged_attention(const AttentionLeaf& leaf, ThreadPool& pool, float* out, const float* q,
                           const PagedKv& kv, const AttentionBatch& batch, int heads, float scale) {
  check_batch(kv, batch, heads);
  const Problem p{out, q, &kv, &batch, heads, heads / kv.kv_heads, scale};
  std::vector<WorkItem> items;
  std::vector<SlicedTile> sliced;
  std::vector<float> partials(
      static_cast<size_t>(plan_items(p, pool.num_threads(), items, sliced)));
  // Longest first, taken dynamically: causal tiles differ in length up to the context.
  std::vector<int32_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return items[a].cost() > items[b].cost(); });
  std::atomic<size_t> next{0};
  auto worker = [&](int) {
    thread_local Scratch scratch;
    for (size_t i = next.fetch_add(1); i < order.size(); i = next.fetch_add(1))
      run_item(leaf, p, items[static_cast<size_t>(order[i])], scratch, partials.data());
  };
  // A single item (one short sequence with one kv head) is not worth waking the pool.
  if (order.size() == 1)
    worker(0);
  else
    pool.run_on_all(worker);
  if (sliced.empty()) return;
  // A merge is rows·slices·D multiply-adds (~0.1 µs for decode's tiles): only many tiles are
  // worth waking the pool again.
  pool.parallel_for(
      std::ssize(sliced),
      [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t)
          combine_tile(p, items, sliced[static_cast<size_t>(t)], partials.data());
      },
      /*grain=*/16);
}

}  // namespace lmstack::kernels
