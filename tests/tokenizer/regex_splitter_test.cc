// RegexSplitter runs tokenizer.json regexes as `tokenizers` (Oniguruma) does: \w \d \s match
// the same code points (tests/data/tokenizer/onig_classes.txt, from tools/ref/gen_onig_classes.py),
// \b uses that word class, Unicode 15+ code points are in their categories, and empty matches are
// split points with Oniguruma's iteration rule.
#include "lmstack/tokenizer/regex_splitter.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "lmstack/core/error.h"
#include "lmstack/tokenizer/unicode.h"
#include "tok_test_util.h"

namespace lmstack::tokenizer {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

Ranges matches(const std::string& pattern, std::string_view text) {
  Ranges m;
  RegexSplitter(pattern).find_all(text, m);
  return m;
}

bool matches_char(const RegexSplitter& re, uint32_t cp) {
  std::string s;
  append_utf8(s, cp);
  Ranges m;
  re.find_all(s, m);
  return m.size() == 1 && m[0] == std::pair<uint32_t, uint32_t>(0, s.size());
}

// Escape -> membership by code point, from the committed `tokenizers` output.
std::map<char, std::vector<bool>> onig_classes() {
  std::map<char, std::vector<bool>> out;
  std::istringstream in(read_file(test::data_path("onig_classes.txt")));
  for (std::string esc, a, b; in >> esc;) {
    if (esc == "#") {
      std::getline(in, a);
      continue;
    }
    in >> a >> b;
    std::vector<bool>& set = out[esc[1]];
    set.resize(0x110000);
    for (uint32_t c = std::stoul(a, nullptr, 16); c <= std::stoul(b, nullptr, 16); ++c)
      set[c] = true;
  }
  return out;
}

TEST(RegexSplitter, WordDigitSpaceClassesMatchOniguruma) {
  const auto golden = onig_classes();
  ASSERT_EQ(golden.size(), 3u);
  // PCRE2 10.42 knows Unicode 14; tokenizers' Oniguruma a later version, whose additions
  // regex_unicode_newer.cc supplies. Every code point is checked.
  for (const auto& [esc, set] : golden) {
    const RegexSplitter re(std::string("\\") + esc);
    int checked = 0, differ = 0;
    std::string first;
    for (uint32_t cp = 0; cp < 0x110000; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      ++checked;
      if (matches_char(re, cp) != set[cp] && differ++ == 0) first = fmt::format("U+{:04X}", cp);
    }
    EXPECT_EQ(differ, 0) << "\\" << esc << ": " << differ << " code points differ, first " << first;
    EXPECT_EQ(checked, 0x110000 - 0x800) << "\\" << esc;
  }
}

TEST(RegexSplitter, CombiningMarksAreWordCharacters) {
  // नि = NA + VOWEL SIGN I (Mc): PCRE2's own \w would stop before the sign.
  EXPECT_EQ(matches(R"(\w+)", "\xE0\xA4\xA8\xE0\xA4\xBF x"), (Ranges{{0, 6}, {7, 8}}));
  EXPECT_EQ(matches(R"(\b)", "ab \xE0\xA4\xA8\xE0\xA4\xBF"),
            (Ranges{{0, 0}, {2, 2}, {3, 3}, {9, 9}}));
  EXPECT_EQ(matches(R"(\h+)", "xBEEFy 09"), (Ranges{{1, 5}, {7, 9}}));  // Oniguruma: hex digit
  EXPECT_EQ(matches(R"([\w-]+)", "a-b c"), (Ranges{{0, 3}, {4, 5}}));
  EXPECT_THROW(RegexSplitter(R"([\W])"), ConfigError);
}

TEST(RegexSplitter, EmptyMatchesFollowOnigurumaIteration) {
  EXPECT_EQ(matches("(?=[A-Z])", "HelloWorld"), (Ranges{{0, 0}, {5, 5}}));
  // After the match "12" an empty match at 2 is dropped; the one at the end is kept.
  EXPECT_EQ(matches(R"(\d*)", "12a"), (Ranges{{0, 2}, {3, 3}}));
  EXPECT_EQ(matches("x*", "ab"), (Ranges{{0, 0}, {1, 1}, {2, 2}}));
}

TEST(RegexSplitter, TranslatesWhitespaceAndReportsErrors) {
  EXPECT_EQ(translate_regex_for_pcre2(R"(\s+|[^\s!])"),
            R"([\t-\r\x{85}\p{Z}]+|[^\t-\r\x{85}\p{Z}!])");
  // A general category also takes the code points Unicode 15+ assigned (PCRE2 10.42: 14).
  EXPECT_EQ(matches(R"(\p{So}+)",
                    "a\xF0\x9F\xAB\xA8"
                    "b"),
            (Ranges{{1, 5}}));  // U+1FAE8
  EXPECT_EQ(matches(R"([^\p{L}\p{So}]+)", "a\xF0\x9F\xAB\xA8!"), (Ranges{{5, 6}}));
  Ranges m;
  RegexSplitter(R"(\s+)").find_all("a\xC2\x85 b", m);  // U+0085 is White_Space
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0], (std::pair<uint32_t, uint32_t>{1, 4}));
  try {
    RegexSplitter bad("(\\p{L}");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("offset"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lmstack::tokenizer
