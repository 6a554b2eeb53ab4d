// Shard files, data.json, and the deterministic window loader (see data.h; the byte layout is
// docs/formats/shards.md). Header: magic "LMSTOKS\0", u32 version, u32 dtype (1 = u16, 2 = u32),
// u64 token count, u64 vocabulary size, then the ids, all little-endian.
#include "lmstack/train/data.h"

#include <bit>
#include <cstring>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/core/json.h"

namespace lmstack::train {
namespace {

static_assert(std::endian::native == std::endian::little, "shards are read by memcpy");

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}
template <class T>
T get(const std::string& in, size_t offset) {
  T v;
  std::memcpy(&v, in.data() + offset, sizeof(T));
  return v;
}

}  // namespace

void write_shard(const std::string& path, const std::vector<int32_t>& tokens, int64_t vocab_size) {
  const bool narrow = vocab_size <= 65536;
  std::string out;
  out.reserve(kShardHeaderBytes + tokens.size() * (narrow ? 2 : 4));
  out.append(kShardMagic, sizeof(kShardMagic));
  put<uint32_t>(out, kShardVersion);
  put<uint32_t>(out, static_cast<uint32_t>(narrow ? ShardDType::kU16 : ShardDType::kU32));
  put<uint64_t>(out, tokens.size());
  put<uint64_t>(out, static_cast<uint64_t>(vocab_size));
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t t = tokens[i];
    if (t < 0 || t >= vocab_size)
      throw_error<RequestError>("{}: token {} at index {} is outside the vocabulary of {}", path, t,
                                i, vocab_size);
    if (narrow)
      put<uint16_t>(out, static_cast<uint16_t>(t));
    else
      put<uint32_t>(out, static_cast<uint32_t>(t));
  }
  write_file_atomic(path, out);
}

Shard read_shard(const std::string& path) {
  const std::string data = read_file(path);
  if (data.size() < static_cast<size_t>(kShardHeaderBytes))
    throw_error<FormatError>("{}: {} bytes is shorter than the {}-byte shard header", path,
                             data.size(), kShardHeaderBytes);
  if (std::memcmp(data.data(), kShardMagic, sizeof(kShardMagic)) != 0)
    throw_error<FormatError>("{}: not a token shard (bad magic; expected \"LMSTOKS\")", path);
  const uint32_t version = get<uint32_t>(data, 8), dtype = get<uint32_t>(data, 12);
  if (version != kShardVersion)
    throw_error<FormatError>("{}: shard version {} (this lmstack reads {})", path, version,
                             kShardVersion);
  if (dtype != 1 && dtype != 2)
    throw_error<FormatError>("{}: unknown token dtype {} (1 = u16, 2 = u32)", path, dtype);
  const uint64_t count = get<uint64_t>(data, 16);
  Shard shard;
  shard.vocab_size = static_cast<int64_t>(get<uint64_t>(data, 24));
  const size_t width = dtype == 1 ? 2 : 4;
  const size_t payload = data.size() - kShardHeaderBytes;
  if (count > payload / width || payload != count * width)
    throw_error<FormatError>("{}: header says {} tokens ({} bytes) but {} bytes follow it", path,
                             count, count * width, payload);
  shard.tokens.resize(count);
  const char* p = data.data() + kShardHeaderBytes;
  for (uint64_t i = 0; i < count; ++i) {
    uint32_t t;
    if (width == 2) {
      uint16_t v;
      std::memcpy(&v, p + i * 2, 2);
      t = v;
    } else {
      std::memcpy(&t, p + i * 4, 4);
    }
    if (static_cast<int64_t>(t) >= shard.vocab_size)
      throw_error<FormatError>("{}: token {} at index {} is outside the recorded vocabulary of {}",
                               path, t, i, shard.vocab_size);
    shard.tokens[i] = static_cast<int32_t>(t);
  }
  return shard;
}

void write_data_manifest(const std::string& dir, const DataManifest& m) {
  Json j = {{"format", "lmstack.shards.v1"},
            {"vocab_size", m.vocab_size},
            {"eos_id", m.eos_id},
            {"tokenizer", m.tokenizer},
            {"train_shards", m.train_shards},
            {"val_shards", m.val_shards},
            {"train_tokens", m.train_tokens},
            {"val_tokens", m.val_tokens}};
  write_file_atomic(path_join(dir, "data.json"), j.dump(2) + "\n");
}

DataManifest read_data_manifest(const std::string& dir) {
  const std::string path = path_join(dir, "data.json");
  const Json j = read_json_file(path);
  DataManifest m;
  m.vocab_size = require<int64_t>(j, "vocab_size", path);
  m.eos_id = optional<int32_t>(j, "eos_id", -1, path);
  m.tokenizer = optional<std::string>(j, "tokenizer", "", path);
  m.train_shards = require<std::vector<std::string>>(j, "train_shards", path);
  m.val_shards = optional<std::vector<std::string>>(j, "val_shards", {}, path);
  m.train_tokens = optional<int64_t>(j, "train_tokens", 0, path);
  m.val_tokens = optional<int64_t>(j, "val_tokens", 0, path);
  return m;
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

TokenLoader::TokenLoader(const std::string& dir, const std::string& split, int seq, uint64_t seed,
                         bool shuffle)
    : seq_(seq), seed_(seed), shuffle_(shuffle) {
  const DataManifest m = read_data_manifest(dir);
  vocab_size_ = m.vocab_size;
  for (const std::string& name : split == "train" ? m.train_shards : m.val_shards) {
    Shard s = read_shard(path_join(dir, name));
    if (s.vocab_size != m.vocab_size)
      throw_error<FormatError>("{}: vocabulary {} differs from data.json's {}", name, s.vocab_size,
                               m.vocab_size);
    tokens_.insert(tokens_.end(), s.tokens.begin(), s.tokens.end());
  }
  num_windows_ = (static_cast<int64_t>(tokens_.size()) - 1) / seq;
  if (num_windows_ < 1)
    throw_error<ConfigError>("{}: the {} split has {} tokens, fewer than seq + 1 = {}", dir, split,
                             tokens_.size(), seq + 1);
}

void TokenLoader::build_epoch(uint64_t epoch) {
  if (epoch == epoch_built_) return;
  order_.resize(static_cast<size_t>(num_windows_));
  for (int64_t i = 0; i < num_windows_; ++i) order_[static_cast<size_t>(i)] = i;
  if (shuffle_) {
    uint64_t state = seed_ * 0x2545f4914f6cdd1dull + epoch;
    for (int64_t i = num_windows_ - 1; i > 0; --i) {
      const int64_t j = static_cast<int64_t>(splitmix64(state) % static_cast<uint64_t>(i + 1));
      std::swap(order_[static_cast<size_t>(i)], order_[static_cast<size_t>(j)]);
    }
  }
  epoch_built_ = epoch;
}

int64_t TokenLoader::window_at(uint64_t p) {
  const uint64_t w = static_cast<uint64_t>(num_windows_);
  build_epoch(p / w);
  return order_[static_cast<size_t>(p % w)];
}

void TokenLoader::next_batch(int batch, std::vector<int32_t>& inputs,
                             std::vector<int32_t>& targets) {
  const size_t t = static_cast<size_t>(seq_);
  inputs.resize(static_cast<size_t>(batch) * t);
  targets.resize(inputs.size());
  for (int b = 0; b < batch; ++b) {
    const int64_t start = window_at(position_.windows_served++) * seq_;
    const int32_t* src = tokens_.data() + start;
    std::memcpy(&inputs[static_cast<size_t>(b) * t], src, t * sizeof(int32_t));
    std::memcpy(&targets[static_cast<size_t>(b) * t], src + 1, t * sizeof(int32_t));
  }
}

}  // namespace lmstack::train
