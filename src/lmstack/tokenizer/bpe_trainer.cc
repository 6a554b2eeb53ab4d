// BPE trainer (see bpe_trainer.h). The merge loop follows Sennrich et al. 2016 ("Neural
// Machine Translation of Rare Words with Subword Units", Algorithm 1) with the incremental
// pair statistics of its reference implementation (subword-nmt learn_bpe.py).
#include "lmstack/tokenizer/bpe_trainer.h"

#include <queue>
#include <string_view>
#include <unordered_map>

#include "lmstack/core/error.h"
#include "lmstack/core/json.h"
#include "lmstack/core/timer.h"
#include "lmstack/tokenizer/byte_level.h"
#include "lmstack/tokenizer/scanners.h"

namespace lmstack::tokenizer {
namespace {

using PairKey = uint64_t;
PairKey pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
int32_t left_of(PairKey k) { return static_cast<int32_t>(k >> 32); }
int32_t right_of(PairKey k) { return static_cast<int32_t>(k & 0xFFFFFFFF); }

struct Word {
  std::vector<int32_t> symbols;
  int64_t count;
};

ScannerSpec pattern_spec(const std::string& name) {
  if (name == "gpt2" || name == "r50k" || name == "r50k_base") return {ScannerKind::kGpt2, 0};
  if (name == "cl100k" || name == "cl100k_base" || name == "llama3")
    return {ScannerKind::kCl100k, 3};
  if (name == "o200k" || name == "o200k_base") return {ScannerKind::kO200k, 3};
  throw_error<ConfigError>("unknown pre-tokenizer pattern '{}' (gpt2, cl100k, o200k, llama3)",
                           name);
}

class Trainer {
 public:
  explicit Trainer(std::vector<Word> words) : words_(std::move(words)), seen_(words_.size(), -1) {
    for (uint32_t w = 0; w < words_.size(); ++w) {
      const auto& s = words_[w].symbols;
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        const PairKey k = pair_key(s[i], s[i + 1]);
        counts_[k] += words_[w].count;
        where_[k].push_back(w);
      }
    }
    for (const auto& [k, c] : counts_) heap_.push({c, k});
  }

  // The most frequent pair with at least min_count occurrences, or false.
  bool next_pair(int64_t min_count, PairKey& out) {
    while (!heap_.empty()) {
      const Entry e = heap_.top();
      heap_.pop();
      const auto it = counts_.find(e.key);
      if (it == counts_.end() || it->second != e.count) continue;  // stale entry
      if (e.count < min_count) return false;
      out = e.key;
      return true;
    }
    return false;
  }

  // Replaces every occurrence of `pair` by `merged` and updates the pair statistics of the
  // words it touches (their old pairs out, their new pairs in).
  void apply(PairKey pair, int32_t merged, int merge_no) {
    const int32_t a = left_of(pair), b = right_of(pair);
    std::unordered_map<PairKey, int64_t> delta;
    std::vector<uint32_t> list;
    list.swap(where_[pair]);
    for (uint32_t w : list) {
      if (seen_[w] == merge_no) continue;  // listed twice
      seen_[w] = merge_no;
      auto& s = words_[w].symbols;
      const int64_t c = words_[w].count;
      bool found = false;
      for (size_t i = 0; i + 1 < s.size() && !found; ++i) found = s[i] == a && s[i + 1] == b;
      if (!found) continue;
      for (size_t i = 0; i + 1 < s.size(); ++i) delta[pair_key(s[i], s[i + 1])] -= c;
      size_t out = 0;
      for (size_t i = 0; i < s.size(); ++out) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
          s[out] = merged, i += 2;
        } else {
          s[out] = s[i++];
        }
      }
      s.resize(out);
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        const PairKey k = pair_key(s[i], s[i + 1]);
        delta[k] += c;
        if (s[i] == merged || s[i + 1] == merged) where_[k].push_back(w);
      }
    }
    where_.erase(pair);
    for (const auto& [k, d] : delta) {
      if (d == 0) continue;
      int64_t& c = counts_[k];
      c += d;
      if (c <= 0) {
        counts_.erase(k);
      } else {
        heap_.push({c, k});
      }
    }
  }

 private:
  struct Entry {
    int64_t count;
    PairKey key;
    bool operator<(const Entry& o) const {  // max-heap: higher count, then smaller pair
      return count != o.count ? count < o.count : key > o.key;
    }
  };
  std::vector<Word> words_;
  std::vector<int> seen_;
  std::unordered_map<PairKey, int64_t> counts_;
  std::unordered_map<PairKey, std::vector<uint32_t>> where_;
  std::priority_queue<Entry> heap_;
};

std::vector<Word> count_words(const std::vector<std::string>& texts, const ScannerSpec& spec,
                              BpeTrainerStats& stats) {
  std::unordered_map<std::string_view, int64_t> counts;
  std::vector<uint32_t> ends;
  for (const std::string& text : texts) {
    ends.clear();
    scan_pieces(spec, text, ends);
    uint32_t b = 0;
    for (uint32_t e : ends) {
      ++counts[std::string_view(text).substr(b, e - b)];
      b = e;
    }
    stats.num_words += static_cast<int64_t>(ends.size());
  }
  std::vector<Word> words;
  words.reserve(counts.size());
  for (const auto& [piece, count] : counts)
    words.push_back({std::vector<int32_t>(piece.begin(), piece.end()), count});
  for (Word& w : words)
    for (int32_t& s : w.symbols) s &= 0xFF;  // char -> byte value
  stats.num_unique_words = static_cast<int64_t>(words.size());
  return words;
}

std::string to_hf_json(const std::vector<std::string>& token_bytes,
                       const std::vector<std::pair<int32_t, int32_t>>& merges,
                       const BpeTrainerOptions& o) {
  using OJson = nlohmann::ordered_json;
  OJson vocab = OJson::object();
  for (size_t id = 0; id < token_bytes.size(); ++id) vocab[byte_level_encode(token_bytes[id])] = id;
  OJson merge_list = OJson::array();
  for (const auto& [l, r] : merges)
    merge_list.push_back(byte_level_encode(token_bytes[l]) + " " +
                         byte_level_encode(token_bytes[r]));
  OJson added = OJson::array();
  for (size_t i = 0; i < o.special_tokens.size(); ++i)
    added.push_back({{"id", token_bytes.size() + i},
                     {"content", o.special_tokens[i]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  const OJson split = {{"type", "Split"},
                       {"pattern", {{"Regex", scanner_pattern(pattern_spec(o.pattern))}}},
                       {"behavior", "Isolated"},
                       {"invert", false}};
  const OJson byte_level = {{"type", "ByteLevel"},
                            {"add_prefix_space", false},
                            {"trim_offsets", true},
                            {"use_regex", false}};
  OJson j = OJson::object();
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = added;
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {split, byte_level}}};
  j["post_processor"] = nullptr;
  j["decoder"] = byte_level;
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", false},
                {"vocab", vocab},
                {"merges", merge_list}};
  return j.dump(1) + "\n";
}

}  // namespace

std::string train_bpe_to_hf_json(const std::vector<std::string>& texts, const BpeTrainerOptions& o,
                                 BpeTrainerStats* stats_out) {
  Timer timer;
  BpeTrainerStats stats;
  const ScannerSpec spec = pattern_spec(o.pattern);
  const int num_specials = static_cast<int>(o.special_tokens.size());
  if (o.vocab_size < 256 + num_specials)
    throw_error<ConfigError>(
        "vocab size {} cannot hold the 256 byte tokens and {} special "
        "tokens",
        o.vocab_size, num_specials);
  for (int i = 0; i < num_specials; ++i) {
    if (o.special_tokens[i].empty()) throw_error<ConfigError>("empty special token");
    for (int k = 0; k < i; ++k)
      if (o.special_tokens[k] == o.special_tokens[i])
        throw_error<ConfigError>("special token '{}' given twice", o.special_tokens[i]);
  }
  std::vector<std::string> token_bytes;
  for (int b = 0; b < 256; ++b) token_bytes.emplace_back(1, static_cast<char>(b));
  std::vector<std::pair<int32_t, int32_t>> merges;
  const int wanted = o.vocab_size - 256 - num_specials;
  if (wanted > 0) {
    Trainer trainer(count_words(texts, spec, stats));
    // Two merges can spell the same bytes ("a"+"bc", "ab"+"c"): the second reuses the id, as
    // Hugging Face's trainer does, so the vocabulary never holds duplicates.
    std::unordered_map<std::string, int32_t> id_of;
    PairKey pair;
    while (static_cast<int>(token_bytes.size()) < 256 + wanted &&
           trainer.next_pair(std::max<int64_t>(1, o.min_frequency), pair)) {
      std::string bytes = token_bytes[left_of(pair)] + token_bytes[right_of(pair)];
      auto [it, is_new] = id_of.emplace(bytes, static_cast<int32_t>(token_bytes.size()));
      if (is_new) token_bytes.push_back(std::move(bytes));
      merges.emplace_back(left_of(pair), right_of(pair));
      trainer.apply(pair, it->second, static_cast<int>(merges.size()));
      if (o.progress && merges.size() % 1000 == 0)
        o.progress(static_cast<int>(token_bytes.size()) - 256, wanted);
    }
  }
  stats.num_merges = static_cast<int>(merges.size());
  stats.vocab_size = static_cast<int>(token_bytes.size()) + num_specials;
  std::string json = to_hf_json(token_bytes, merges, o);
  stats.seconds = timer.seconds();
  if (stats_out) *stats_out = stats;
  return json;
}

}  // namespace lmstack::tokenizer
