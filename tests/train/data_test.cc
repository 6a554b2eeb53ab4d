// Shards round-trip, corrupt and short shards are refused with the file named, and the loader
// serves every window once per epoch in an order fixed by (seed, position).
#include "lmstack/train/data.h"

#include <algorithm>
#include <set>

#include <gtest/gtest.h>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "test_util.h"

namespace lmstack::train {
namespace {

std::string make_data_dir(const std::string& name, int64_t num_tokens, int64_t vocab) {
  const std::string dir = test::temp_dir(name);
  std::vector<int32_t> tokens(static_cast<size_t>(num_tokens));
  for (int64_t i = 0; i < num_tokens; ++i)
    tokens[static_cast<size_t>(i)] = static_cast<int32_t>(i % vocab);
  const size_t half = tokens.size() / 2;
  write_shard(path_join(dir, "train-00000.bin"),
              {tokens.begin(), tokens.begin() + static_cast<int64_t>(half)}, vocab);
  write_shard(path_join(dir, "train-00001.bin"),
              {tokens.begin() + static_cast<int64_t>(half), tokens.end()}, vocab);
  DataManifest m;
  m.vocab_size = vocab;
  m.train_shards = {"train-00000.bin", "train-00001.bin"};
  m.train_tokens = num_tokens;
  write_data_manifest(dir, m);
  return dir;
}

TEST(ShardTest, RoundTripsNarrowAndWide) {
  const std::string dir = test::temp_dir("shard_roundtrip");
  const std::vector<int32_t> small = {0, 1, 65535, 7};
  write_shard(path_join(dir, "a.bin"), small, 65536);
  EXPECT_EQ(read_file(path_join(dir, "a.bin")).size(), 32u + 4 * 2);
  EXPECT_EQ(read_shard(path_join(dir, "a.bin")).tokens, small);
  const std::vector<int32_t> wide = {0, 150000, 3};
  write_shard(path_join(dir, "b.bin"), wide, 151936);
  const Shard s = read_shard(path_join(dir, "b.bin"));
  EXPECT_EQ(s.tokens, wide);
  EXPECT_EQ(s.vocab_size, 151936);
  EXPECT_THROW(write_shard(path_join(dir, "c.bin"), {5}, 5), RequestError);
}

TEST(ShardTest, RefusesCorruptShards) {
  const std::string dir = test::temp_dir("shard_corrupt");
  const std::string path = path_join(dir, "s.bin");
  write_shard(path, {1, 2, 3}, 10);
  const std::string good = read_file(path);
  auto expect_error = [&](const std::string& bytes, const std::string& needle) {
    write_file_atomic(path, bytes);
    try {
      read_shard(path);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  };
  expect_error(good.substr(0, 20), "shorter than the 32-byte shard header");
  expect_error(good.substr(0, good.size() - 1), "header says 3 tokens");
  expect_error(good + "xx", "header says 3 tokens");
  std::string bad = good;
  bad[0] = 'X';
  expect_error(bad, "bad magic");
  bad = good;
  bad[8] = 9;
  expect_error(bad, "version 9");
  bad = good;
  bad[12] = 7;
  expect_error(bad, "unknown token dtype 7");
  bad = good;
  bad[32] = 11;
  expect_error(bad, "outside the recorded vocabulary");
}

TEST(TokenLoaderTest, EpochIsAPermutationFixedBySeed) {
  const std::string dir = make_data_dir("loader_perm", 1001, 50);
  TokenLoader a(dir, "train", 10, 7, true), b(dir, "train", 10, 7, true),
      c(dir, "train", 10, 8, true);
  ASSERT_EQ(a.num_windows(), 100);
  std::set<int64_t> seen;
  std::vector<int64_t> order_a, order_c;
  for (uint64_t p = 0; p < 100; ++p) {
    seen.insert(a.window_at(p));
    order_a.push_back(a.window_at(p));
    EXPECT_EQ(a.window_at(p), b.window_at(p));
    order_c.push_back(c.window_at(p));
  }
  EXPECT_EQ(seen.size(), 100u);
  EXPECT_NE(order_a, order_c);
  std::vector<int64_t> second;
  for (uint64_t p = 100; p < 200; ++p) second.push_back(a.window_at(p));
  EXPECT_NE(order_a, second);  // a new permutation per epoch
}

TEST(TokenLoaderTest, BatchesAreShiftedWindowsAndResume) {
  const std::string dir = make_data_dir("loader_batch", 401, 1000);
  TokenLoader a(dir, "train", 8, 3, true);
  std::vector<int32_t> in, tg;
  a.next_batch(4, in, tg);
  ASSERT_EQ(in.size(), 32u);
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(tg[i], in[i] + 1);  // ids are i % 1000
  for (size_t b = 0; b < 4; ++b) EXPECT_EQ(in[b * 8] % 8, 0);          // window starts at k*T
  a.next_batch(4, in, tg);
  TokenLoader resumed(dir, "train", 8, 3, true);
  resumed.set_position({4});
  std::vector<int32_t> in2, tg2;
  resumed.next_batch(4, in2, tg2);
  EXPECT_EQ(in, in2);
  EXPECT_EQ(tg, tg2);
  EXPECT_THROW(TokenLoader(dir, "train", 401, 1, true), ConfigError);
}

}  // namespace
}  // namespace lmstack::train
