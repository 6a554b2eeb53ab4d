// Each hand-written scanner splits exactly like its regex run by PCRE2 (with the Rust/Python
// \s translated), on the committed edge-case and fuzz files and, when ../shared is present, on
// every valid UTF-8 file of the corpus.
#include "lmstack/tokenizer/scanners.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "lmstack/core/error.h"
#include "lmstack/tokenizer/regex_splitter.h"
#include "lmstack/tokenizer/unicode.h"
#include "tok_test_util.h"

namespace lmstack::tokenizer {
namespace {

using Pieces = std::vector<std::pair<uint32_t, uint32_t>>;

Pieces scanner_pieces(const ScannerSpec& spec, std::string_view text) {
  std::vector<uint32_t> ends;
  scan_pieces(spec, text, ends);
  Pieces p;
  uint32_t b = 0;
  for (uint32_t e : ends) p.emplace_back(b, e), b = e;
  return p;
}

::testing::AssertionResult same_split(const ScannerSpec& spec, std::string_view text,
                                      const std::string& what) {
  const Pieces got = scanner_pieces(spec, text);
  Pieces want;
  RegexSplitter(scanner_pattern(spec)).find_all(text, want);
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  if (i == got.size() && i == want.size()) return ::testing::AssertionSuccess();
  auto show = [&](const Pieces& p) {
    return i < p.size() ? "'" + std::string(text.substr(p[i].first, p[i].second - p[i].first)) +
                              "' at byte " + std::to_string(p[i].first)
                        : std::string("(end)");
  };
  return ::testing::AssertionFailure()
         << what << ": piece " << i << ": scanner " << show(got) << ", regex " << show(want);
}

const ScannerSpec kSpecs[] = {{ScannerKind::kGpt2, 0},
                              {ScannerKind::kCl100k, 3},
                              {ScannerKind::kCl100k, 1},
                              {ScannerKind::kO200k, 3}};

TEST(Scanners, KnownPatternSpellingsMapToScanners) {
  for (const ScannerSpec& s : kSpecs) EXPECT_EQ(scanner_for_pattern(scanner_pattern(s)), s);
  // tiktoken's current (possessive) cl100k spelling.
  EXPECT_EQ(
      scanner_for_pattern(
          R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s)"),
      (ScannerSpec{ScannerKind::kCl100k, 3}));
  EXPECT_FALSE(scanner_for_pattern(R"(\p{L}+|\s+)"));
}

TEST(Scanners, HandPickedCases) {
  const char* cases[] = {"don't DON'T it\xC5\xBF 'll",
                         "  \n\n  x",
                         "a\r\n\r\nb",
                         "x   ",
                         "\xCC\x81"
                         "abc A\xCC\x81"
                         "b ABCdef'S",
                         "12345 \xD9\xA1\xD9\xA2\xD9\xA3",
                         "   ",
                         "\t\tword",
                         "a/b//\n",
                         "",
                         "'",
                         "''s",
                         "\xE3\x80\x80x"};
  for (const ScannerSpec& s : kSpecs)
    for (const char* c : cases) EXPECT_TRUE(same_split(s, c, scanner_pattern(s)));
}

TEST(Scanners, CommittedFilesMatchPcre2) {
  for (const char* f : {"constructed_edge_cases.txt", "fuzz_cases.txt"}) {
    const std::string text = read_file(test::data_path(f));
    for (const ScannerSpec& s : kSpecs) EXPECT_TRUE(same_split(s, text, f));
  }
}

TEST(Scanners, CorpusMatchesPcre2) {
  LMSTACK_REQUIRE_PEERS(peers);
  int checked = 0;
  for (const auto& e : std::filesystem::directory_iterator(peers + "/corpus")) {
    const std::string text = read_file(e.path().string());
    if (!is_valid_utf8(text)) continue;  // PCRE2 cannot match across invalid UTF-8
    for (const ScannerSpec& s : kSpecs)
      EXPECT_TRUE(same_split(s, text, e.path().filename().string()));
    ++checked;
  }
  EXPECT_GE(checked, 10) << "corpus files in " << peers << "/corpus";
}

TEST(Scanners, InvalidBytesAreOtherCharacters) {
  // Each invalid byte behaves like U+FFFD (a symbol): it joins a run of punctuation.
  const std::string text = "ab\xFF\xFE!cd \xC3 x";
  const Pieces p = scanner_pieces({ScannerKind::kCl100k, 3}, text);
  std::vector<std::string> got;
  for (auto [b, e] : p) got.push_back(text.substr(b, e - b));
  EXPECT_EQ(got, (std::vector<std::string>{"ab", "\xFF\xFE!", "cd", " \xC3", " x"}));
}

TEST(Unicode, AsciiClassesAndUtf8) {
  EXPECT_EQ(char_class('a'), kClassLetter | kClassLowerish);
  EXPECT_EQ(char_class('Q'), kClassLetter | kClassUpperish);
  EXPECT_EQ(char_class('7'), kClassNumber);
  EXPECT_EQ(char_class(' '), kClassSpace);
  EXPECT_EQ(char_class(0x85), kClassSpace);
  EXPECT_EQ(char_class(0x4E2D), kClassLetter | kClassUpperish | kClassLowerish);  // Lo
  EXPECT_EQ(char_class(0x0301), kClassUpperish | kClassLowerish);                 // Mn
  EXPECT_EQ(contraction_fold(0x17F), 's');
  EXPECT_EQ(count_invalid_utf8("a\xC0\xAF\xED\xA0\x80\xF4\x90\x80\x80"), 9u);
  EXPECT_EQ(incomplete_utf8_suffix("a\xE4\xB8"), 2u);
  EXPECT_EQ(incomplete_utf8_suffix("a\xE4\xB8\xAD"), 0u);
  EXPECT_EQ(incomplete_utf8_suffix("a\xED\xA0"), 0u);  // surrogate: can never complete
  EXPECT_EQ(replace_invalid_utf8("a\xFF"), "a\xEF\xBF\xBD");
}

}  // namespace
}  // namespace lmstack::tokenizer
