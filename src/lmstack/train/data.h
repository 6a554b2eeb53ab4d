// Token shards and the batch loader of training. A shard is a small header then little-endian
// token ids (docs/formats/shards.md); a data directory holds train-*.bin and val-*.bin shards
// plus data.json. The loader cuts the concatenated train shards into windows of T + 1 tokens
// (stride T: inputs are the first T, targets the last T) and serves them in an order that is a
// pure function of (seed, position): each epoch is a Fisher-Yates permutation of the windows
// driven by splitmix64, so a resumed run replays the same batches. Not here: tokenization
// (cli/cmd_prepare_data.cc), distributed sampling (dist/).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lmstack::train {

inline constexpr char kShardMagic[8] = {'L', 'M', 'S', 'T', 'O', 'K', 'S', '\0'};
inline constexpr uint32_t kShardVersion = 1;
inline constexpr int kShardHeaderBytes = 32;

// Token width in a shard: 2 bytes (vocabularies up to 65,536) or 4 bytes.
enum class ShardDType : uint32_t { kU16 = 1, kU32 = 2 };

// Writes tokens as one shard (atomically, through core/file.h). vocab_size is recorded so a
// loader can refuse a shard made for another tokenizer; dtype kU16 is chosen automatically
// when vocab_size <= 65536. Throws IoError on write failure, RequestError for an id outside
// [0, vocab_size).
void write_shard(const std::string& path, const std::vector<int32_t>& tokens, int64_t vocab_size);

struct Shard {
  int64_t vocab_size = 0;
  std::vector<int32_t> tokens;
};
// Reads a shard. Throws FormatError naming the file and what is wrong: bad magic, unknown
// version or dtype, a header shorter than 32 bytes, a payload shorter or longer than the
// header's token count, or a token >= the recorded vocabulary size.
Shard read_shard(const std::string& path);

// data.json of a data directory.
struct DataManifest {
  int64_t vocab_size = 0;
  int32_t eos_id = -1;
  std::string tokenizer;                              // the tokenizer path prepare-data used
  std::vector<std::string> train_shards, val_shards;  // file names relative to the directory
  int64_t train_tokens = 0, val_tokens = 0;
};
void write_data_manifest(const std::string& dir, const DataManifest& m);
// Throws IoError / FormatError / ConfigError naming data.json and the field.
DataManifest read_data_manifest(const std::string& dir);

// splitmix64 (Steele et al. 2014): the deterministic generator of the data order.
uint64_t splitmix64(uint64_t& state);

// Where the loader is: windows served so far since the start of training.
struct DataPosition {
  uint64_t windows_served = 0;
};

class TokenLoader {
 public:
  // Concatenates the split's shards ("train" or "val") of `dir`. Throws ConfigError when the
  // split holds fewer than seq + 1 tokens, FormatError for a bad shard.
  TokenLoader(const std::string& dir, const std::string& split, int seq, uint64_t seed,
              bool shuffle);

  int64_t num_windows() const { return num_windows_; }
  int64_t num_tokens() const { return static_cast<int64_t>(tokens_.size()); }
  int64_t vocab_size() const { return vocab_size_; }
  // Fills inputs and targets [batch, seq] with the next `batch` windows and advances.
  void next_batch(int batch, std::vector<int32_t>& inputs, std::vector<int32_t>& targets);
  // The window index served at global position `p` (epoch p / W, permuted within it).
  int64_t window_at(uint64_t p);
  DataPosition position() const { return position_; }
  void set_position(DataPosition p) { position_ = p; }

 private:
  void build_epoch(uint64_t epoch);

  std::vector<int32_t> tokens_;
  int64_t vocab_size_ = 0;
  int seq_;
  uint64_t seed_;
  bool shuffle_;
  int64_t num_windows_ = 0;
  uint64_t epoch_built_ = UINT64_MAX;
  std::vector<int64_t> order_;
  DataPosition position_;
};

}  // namespace lmstack::train
