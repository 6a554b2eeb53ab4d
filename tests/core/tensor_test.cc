// Tensor shapes, views, mapped storage, element access and the memory ledger.
#include "lmstack/core/tensor.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include "lmstack/core/file.h"
#include "test_util.h"

namespace lmstack {
namespace {

TEST(Shape, NumelRankAndString) {
  Shape s{2, 3, 4};
  EXPECT_EQ(s.rank(), 3);
  EXPECT_EQ(s.numel(), 24);
  EXPECT_EQ(s.str(), "[2, 3, 4]");
  EXPECT_EQ(Shape{}.numel(), 1);
  EXPECT_TRUE((Shape{2, 3} == Shape{2, 3}));
  EXPECT_FALSE((Shape{2, 3} == Shape{3, 2}));
}

TEST(Tensor, ZerosAndElementAccess) {
  Tensor t = Tensor::zeros({2, 3}, DType::kF32);
  EXPECT_EQ(t.nbytes(), 24);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u) << "64-byte aligned";
  t.set_f32(4, 2.5f);
  EXPECT_EQ(t.at({1, 1}), 2.5f);
  EXPECT_EQ(t.at({0, 0}), 0.0f);
}

TEST(Tensor, Bf16AndF16RoundTripThroughSetGet) {
  for (DType dt : {DType::kBF16, DType::kF16}) {
    Tensor t = Tensor::zeros({4}, dt);
    t.set_f32(0, 1.5f);
    t.set_f32(1, -0.25f);
    EXPECT_EQ(t.get_f32(0), 1.5f);
    EXPECT_EQ(t.get_f32(1), -0.25f);
    EXPECT_EQ(t.nbytes(), 8);
  }
}

TEST(Tensor, SliceSharesStorage) {
  Tensor t = Tensor::from_f32({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  Tensor rows = t.slice(1, 3);
  EXPECT_EQ(rows.shape(), (Shape{2, 2}));
  EXPECT_EQ(rows.at({0, 0}), 2.0f);
  rows.set_f32(0, 42.0f);
  EXPECT_EQ(t.at({1, 0}), 42.0f) << "a view writes through to its base";
  Tensor r = t.reshape({8});
  EXPECT_EQ(r.get_f32(2), 42.0f);
  Tensor c = t.clone();
  c.set_f32(2, 0.0f);
  EXPECT_EQ(t.get_f32(2), 42.0f) << "clone is a deep copy";
}

TEST(Tensor, QuantizedDTypeSizes) {
  EXPECT_EQ(dtype_bytes(DType::kQ8_0, 64), 68);
  EXPECT_EQ(dtype_bytes(DType::kQ4_0, 32), 18);
  EXPECT_EQ(dtype_bytes(DType::kQ4_K, 256), 144);
  EXPECT_EQ(dtype_bytes(DType::kQ6_K, 512), 420);
  EXPECT_TRUE(is_quantized(DType::kQ4_K));
  EXPECT_FALSE(is_quantized(DType::kBF16));
  EXPECT_EQ(parse_dtype("bfloat16"), DType::kBF16);
  EXPECT_EQ(parse_dtype("q4_0"), DType::kQ4_0);
  EXPECT_THROW(parse_dtype("f8"), ConfigError);
}

TEST(Tensor, SummaryNamesDtypeShapeAndStats) {
  Tensor t = Tensor::from_f32({2, 2}, {-1, 2, 0, 3});
  EXPECT_EQ(t.summary(), "Tensor f32 [2, 2] (16 bytes) min -1 max 3 mean 1");
}

TEST(Tensor, MappedFileRegionIsReadOnlyAndCounted) {
  const std::string dir = test::temp_dir("tensor_mapped");
  const std::string path = dir + "/w.bin";
  std::vector<float> v = {1, 2, 3, 4, 5, 6};
  write_file_atomic(path, std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * 4));
  const int64_t before = memory_snapshot().mapped[static_cast<int>(MemoryCategory::kWeights)];
  {
    auto file = std::make_shared<const MappedFile>(path, MemoryCategory::kWeights);
    EXPECT_EQ(memory_snapshot().mapped[static_cast<int>(MemoryCategory::kWeights)], before + 24);
    Tensor t = Tensor::from_mapped(file, 8, {2, 2}, DType::kF32);
    EXPECT_TRUE(t.is_mapped());
    EXPECT_EQ(t.at({1, 1}), 6.0f);
    EXPECT_THROW(Tensor::from_mapped(file, 16, {2, 2}, DType::kF32), FormatError);
  }
  EXPECT_EQ(memory_snapshot().mapped[static_cast<int>(MemoryCategory::kWeights)], before);
  EXPECT_THROW(MappedFile(dir + "/missing.bin", MemoryCategory::kWeights), IoError);
}

// A region copied out of a mapping (model/repack.h) leaves the ledger once: whole pages only,
// and the rest on unmapping, so the count returns to where it started.
TEST(Tensor, DroppedMappedPagesLeaveTheLedger) {
  const std::string dir = test::temp_dir("tensor_dropped");
  const std::string path = dir + "/w.bin";
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  write_file_atomic(path, std::string(3 * page + 100, 'x'));
  const auto mapped = [] {
    return memory_snapshot().mapped[static_cast<int>(MemoryCategory::kWeights)];
  };
  const int64_t before = mapped();
  {
    auto file = std::make_shared<const MappedFile>(path, MemoryCategory::kWeights);
    const auto size = static_cast<int64_t>(3 * page + 100);
    EXPECT_EQ(mapped(), before + size);
    // [page / 2, 3 page + 50) holds pages 1 and 2 whole; the partial first and last stay.
    Tensor::from_mapped(file, page / 2, {static_cast<int64_t>(3 * page - page / 2 + 50)},
                        DType::kI8)
        .drop_mapped_pages();
    EXPECT_EQ(mapped(), before + size - static_cast<int64_t>(2 * page));
    EXPECT_EQ(file->data()[page + 7], 'x') << "a dropped page reads back from the file";
  }
  EXPECT_EQ(mapped(), before);
}

TEST(Memory, LedgerCountsAllocationsPerCategory) {
  const auto kv = MemoryCategory::kKvCache;
  const int64_t before = memory_snapshot().held(kv);
  {
    HostBuffer a(1000, kv);
    Tensor t = Tensor::zeros({10, 10}, DType::kBF16, kv);
    EXPECT_EQ(memory_snapshot().held(kv), before + 1000 + 200);
    EXPECT_GE(memory_peak(kv), before + 1200);
    HostBuffer moved = std::move(a);
    EXPECT_EQ(memory_snapshot().held(kv), before + 1200) << "a move does not double count";
  }
  EXPECT_EQ(memory_snapshot().held(kv), before);
  EXPECT_EQ(memory_category_name(kv), "kv_cache");
}

}  // namespace
}  // namespace lmstack
