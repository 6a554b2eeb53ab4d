// Normalizer steps against values worked out from the Unicode data (UAX #15 decompositions,
// SpecialCasing) and `tokenizers`' definitions; the pipeline goldens (hf_pipelines_test.cc)
// check them on whole files.
#include "lmstack/tokenizer/normalizer.h"

#include <gtest/gtest.h>

namespace lmstack::tokenizer {
namespace {

std::string norm(NormalizerStep::Kind kind, std::string s) {
  apply_normalizer({kind, "", ""}, s);
  return s;
}

using K = NormalizerStep::Kind;

TEST(Normalizer, UnicodeForms) {
  const std::string e_acute = "\xC3\xA9", e_comb = "e\xCC\x81";
  EXPECT_EQ(norm(K::kNfc, e_comb + "x"), e_acute + "x");
  EXPECT_EQ(norm(K::kNfd, e_acute), e_comb);
  EXPECT_EQ(norm(K::kNfkc,
                 "\xEF\xAC\x81"
                 "\xE2\x91\xA0"
                 "\xEF\xBC\xA1"),
            "fi1A");                                         // ﬁ ① Ａ
  EXPECT_EQ(norm(K::kNfc, "\xEF\xAC\x81"), "\xEF\xAC\x81");  // compatibility stays under NFC
  EXPECT_EQ(norm(K::kNfkd, "\xC2\xBD"),
            "1\xE2\x81\x84"
            "2");  // ½ -> 1 ⁄ 2
  // Hangul jamo L V T compose to one syllable (한).
  EXPECT_EQ(norm(K::kNfc, "\xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB"), "\xED\x95\x9C");
  // Canonical reordering: dot below (ccc 220) before circumflex (ccc 230).
  EXPECT_EQ(norm(K::kNfd, "a\xCC\x82\xCC\xA3"), "a\xCC\xA3\xCC\x82");
}

TEST(Normalizer, RunsBetweenInertCharactersNormalizeAsTheWhole) {
  // 中 e U+0301 Ａ 0xFF U+0301 x: e + acute compose; a lone acute stays.
  EXPECT_EQ(norm(K::kNfc,
                 "\xE4\xB8\xAD"
                 "e\xCC\x81\xEF\xBC\xA1\xFF\xCC\x81x"),
            "\xE4\xB8\xAD\xC3\xA9\xEF\xBC\xA1\xFF\xCC\x81x");
  // Under NFKC fullwidth Ａ becomes A first, then composes with the acute: Á.
  EXPECT_EQ(norm(K::kNfkc, "\xEF\xBC\xA1\xCC\x81"), "\xC3\x81");
}

TEST(Normalizer, InvalidBytesPassThrough) {
  EXPECT_EQ(norm(K::kNfc,
                 "e\xCC\x81\xFF"
                 "e\xCC\x81"),
            "\xC3\xA9\xFF\xC3\xA9");
  EXPECT_EQ(norm(K::kLowercase,
                 "A\xFF"
                 "B"),
            "a\xFF"
            "b");
}

TEST(Normalizer, LowercaseIsPerCharacter) {
  EXPECT_EQ(norm(K::kLowercase, "ABC \xC3\x84"), "abc \xC3\xA4");
  EXPECT_EQ(norm(K::kLowercase, "\xC4\xB0"), "i\xCC\x87");  // İ -> i + combining dot above
  // Σ is σ even at the end of a word: no final-sigma rule, as Rust char::to_lowercase.
  EXPECT_EQ(norm(K::kLowercase, "\xCE\xA3\xCE\x91\xCE\xA3"), "\xCF\x83\xCE\xB1\xCF\x83");
}

TEST(Normalizer, StripStripAccentsReplacePrepend) {
  EXPECT_EQ(norm(K::kStrip, "\xE3\x80\x80 a b\t\n"), "a b");  // U+3000 is White_Space
  NormalizerStep left{K::kStrip, "", ""};
  left.strip_right = false;
  std::string s = "  a  ";
  apply_normalizer(left, s);
  EXPECT_EQ(s, "a  ");
  EXPECT_EQ(norm(K::kStripAccents, "e\xCC\x81\xE0\xA4\xA8\xE0\xA4\xBF"),
            "e\xE0\xA4\xA8");  // drops Mn U+0301 and Mc U+093F (is_combining_mark)
  NormalizerStep re{K::kReplace, "", "_"};
  re.regex = std::make_shared<RegexSplitter>(R"(\s+)");
  s = "a  b\t\nc";
  apply_normalizer(re, s);
  EXPECT_EQ(s, "a_b_c");
  s = "";
  apply_normalizer({K::kPrepend, "\xE2\x96\x81", ""}, s);
  EXPECT_EQ(s, "");  // nothing to prepend to
  s = "x";
  apply_normalizer({K::kPrepend, "\xE2\x96\x81", ""}, s);
  EXPECT_EQ(s, "\xE2\x96\x81x");
}

}  // namespace
}  // namespace lmstack::tokenizer
