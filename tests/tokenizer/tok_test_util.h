// Helpers for the tokenizer tests: committed data under tests/data/tokenizer, the shared
// corpus (../shared/peers/tokenizers, absent in a clean clone), cached tokenizers, id files.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "lmstack/core/file.h"
#include "lmstack/tokenizer/tokenizer.h"
#include "test_util.h"

namespace lmstack::tokenizer::test {

inline std::string data_path(const std::string& rel) {
  return lmstack::test::source_path("tests/data/tokenizer/" + rel);
}

// shared/peers/tokenizers, or "" when ../shared is absent (a clean clone). When ../shared is
// there (CI checks it out beside the clone) the path is returned whether or not it exists, so
// that a missing corpus fails the tests that need it instead of skipping them.
inline std::string peers_dir() {
  const std::string s = lmstack::test::shared_dir();
  return s.empty() ? "" : s + "/peers/tokenizers";
}

// The corpus tests' guard: skips, saying so, only when ../shared is absent; fails when ../shared
// exists but its tokenizer corpus does not (a skip there would hide a regression).
#define LMSTACK_REQUIRE_PEERS(dir)                                                   \
  const std::string dir = ::lmstack::tokenizer::test::peers_dir();                   \
  if (dir.empty())                                                                   \
    GTEST_SKIP() << "../shared is absent (clean clone): the corpus and the Llama 3 " \
                    "vocabulary are not in the repository";                          \
  ASSERT_TRUE(::lmstack::is_directory(dir + "/corpus"))                              \
      << dir << "/corpus is missing although ../shared exists"

// Loads each encoding once per process: "gpt2" (encoder.json + vocab.bpe), "r50k_base",
// "cl100k_base", "o200k_base" from tests/data; "llama3" from shared (caller checks).
inline const Tokenizer& cached(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, Tokenizer> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  std::string path = name == "gpt2"     ? data_path("gpt2")
                     : name == "llama3" ? peers_dir() + "/llama3.tiktoken"
                                        : data_path(name + ".tiktoken");
  return cache.emplace(name, Tokenizer::load(path)).first->second;
}

// Whitespace-separated ids, one vector per line.
inline std::vector<std::vector<int32_t>> read_id_lines(const std::string& path) {
  std::vector<std::vector<int32_t>> out;
  const std::string text = read_file(path);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::vector<int32_t> ids;
    for (size_t i = pos; i < eol;) {
      while (i < eol && text[i] == ' ') ++i;
      if (i >= eol) break;
      ids.push_back(std::stoi(text.substr(i, eol - i)));
      while (i < eol && text[i] != ' ') ++i;
    }
    out.push_back(std::move(ids));
    pos = eol + 1;
  }
  return out;
}

inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    lines.push_back(text.substr(pos, eol - pos));
    pos = eol + 1;
  }
  return lines;
}

// FNV-1a 64 of the ids as little-endian uint32 (tools/ref/gen_tokenizer_goldens.py fnv64).
inline std::string fnv64(const std::vector<int32_t>& ids) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (int32_t id : ids)
    for (int k = 0; k < 4; ++k)
      h = (h ^ ((static_cast<uint32_t>(id) >> (8 * k)) & 0xFF)) * 0x100000001B3ull;
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// First index where two id sequences differ, with context, for failure messages.
inline std::string first_difference(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  if (i == a.size() && i == b.size()) return "identical";
  std::string s = "first difference at index " + std::to_string(i) + ": got";
  for (size_t k = i; k < a.size() && k < i + 8; ++k) s += " " + std::to_string(a[k]);
  s += " | expected";
  for (size_t k = i; k < b.size() && k < i + 8; ++k) s += " " + std::to_string(b[k]);
  return s + " (sizes " + std::to_string(a.size()) + " vs " + std::to_string(b.size()) + ")";
}

}  // namespace lmstack::tokenizer::test
