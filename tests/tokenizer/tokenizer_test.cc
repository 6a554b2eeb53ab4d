// Tokenizer behaviour beyond the goldens: special-token modes, decode errors, the streaming
// decoder, invalid UTF-8, batch encoding, metadata and loading from each kind of path.
#include "lmstack/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include "lmstack/core/error.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/tokenizer/bpe.h"
#include "lmstack/tokenizer/text_stats.h"
#include "lmstack/tokenizer/tokenizer_impl.h"
#include "lmstack/tokenizer/unicode.h"
#include "tok_test_util.h"

namespace lmstack::tokenizer {
namespace {

using test::cached;

TEST(Tokenizer, SpecialModes) {
  const Tokenizer& tok = cached("cl100k_base");
  const std::string text = "a<|endoftext|>b";
  EXPECT_EQ(tok.encode(text, SpecialMode::kAllow), (std::vector<int32_t>{64, 100257, 65}));
  const auto as_text = tok.encode(text, SpecialMode::kAsText);
  EXPECT_EQ(std::count(as_text.begin(), as_text.end(), 100257), 0);
  EXPECT_EQ(tok.decode(as_text), text);
  try {
    tok.encode(text, SpecialMode::kError);
    FAIL() << "expected RequestError";
  } catch (const RequestError& e) {
    EXPECT_NE(std::string(e.what()).find("'<|endoftext|>' at byte 1"), std::string::npos)
        << e.what();
  }
  // Near misses are ordinary text in every mode.
  EXPECT_NO_THROW(tok.encode("<|endoftext <endoftext|>", SpecialMode::kError));
}

TEST(Tokenizer, DecodeErrorsNameTheId) {
  const Tokenizer& tok = cached("cl100k_base");
  EXPECT_EQ(tok.vocab_size(), 100277);
  for (int32_t bad : {-1, 100277, 100256, 100261}) {
    try {
      tok.decode(std::vector<int32_t>{15339, bad});
      FAIL() << bad;
    } catch (const RequestError& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(bad)), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(tok.token_bytes(100276), "<|endofprompt|>");
  EXPECT_TRUE(tok.is_special(100276));
  EXPECT_FALSE(tok.is_special(15339));
  EXPECT_EQ(tok.token_id("hello"), 15339);
  EXPECT_EQ(tok.token_id("<|fim_middle|>"), 100259);
  EXPECT_FALSE(tok.token_id("no such token at all"));
}

TEST(Tokenizer, InvalidUtf8RoundTripsAndDecodeTextReplaces) {
  const std::string bytes = "ok \xFF\xFE \xC3 \xE4\xB8 \xED\xA0\x80 caf\xE9\n";
  for (const char* enc : {"gpt2", "cl100k_base", "o200k_base"}) {
    const Tokenizer& tok = cached(enc);
    const auto ids = tok.encode(bytes, SpecialMode::kError);
    EXPECT_EQ(tok.decode(ids), bytes) << enc;
    const std::string text = tok.decode_text(ids);
    EXPECT_TRUE(is_valid_utf8(text));
    EXPECT_EQ(text.find("ok "), 0u);
  }
}

TEST(Tokenizer, IncrementalDecoderEmitsWholeCharacters) {
  const Tokenizer& tok = cached("cl100k_base");
  const std::string text = "日本語 emoji 👨‍👩‍👧‍👦 and ok";
  const auto ids = tok.encode(text, SpecialMode::kError);
  auto dec = tok.incremental_decoder();
  std::string out;
  for (int32_t id : ids) {
    const std::string piece = dec.push(id);
    EXPECT_TRUE(is_valid_utf8(piece)) << "partial character after id " << id;
    out += piece;
  }
  out += dec.flush();
  EXPECT_EQ(out, text);
  // Bytes that can never complete come out replaced, and flush() empties a dangling prefix.
  auto d2 = tok.incremental_decoder();
  const int32_t ff = *tok.token_id("\xFF"), e4 = *tok.token_id("\xE4");
  EXPECT_EQ(d2.push(ff), "\xEF\xBF\xBD");
  EXPECT_EQ(d2.push(e4), "");
  EXPECT_EQ(d2.flush(), "\xEF\xBF\xBD");
  EXPECT_THROW(d2.push(-5), RequestError);
}

TEST(Tokenizer, BatchEqualsSequential) {
  const Tokenizer& tok = cached("o200k_base");
  const auto lines = test::split_lines(read_file(test::data_path("fuzz_cases.txt")));
  ThreadPool pool(2);
  const auto batch = tok.encode_batch(pool, lines, SpecialMode::kAsText);
  for (size_t i = 0; i < lines.size(); ++i)
    EXPECT_EQ(batch[i], tok.encode(lines[i], SpecialMode::kAsText));
}

TEST(Tokenizer, LongRunsAreNotQuadratic) {
  // One 1 MB piece: the heap merge path. (Quadratic merging would take minutes here.)
  const Tokenizer& tok = cached("cl100k_base");
  const std::string run(1 << 20, 'a');
  const auto ids = tok.encode(run, SpecialMode::kError);
  EXPECT_EQ(tok.decode(ids), run);
  const std::string no_spaces = [] {
    std::string s;
    for (int i = 0; s.size() < (1 << 20); ++i) s += "abcdefghijklmnopqrstuvwxyz"[i * 7 % 26];
    return s;
  }();
  EXPECT_EQ(tok.decode(tok.encode(no_spaces, SpecialMode::kError)), no_spaces);
}

TEST(Tokenizer, HeapAndLinearMergeAgree) {
  const Tokenizer& tok = cached("o200k_base");
  const BpeModel& bpe = tok.impl().bpe;
  const auto lines = test::split_lines(read_file(test::data_path("fuzz_cases.txt")));
  for (const std::string& l : lines)
    for (const std::string& piece : tok.pre_tokenize(l)) {
      std::vector<int32_t> linear, heap;
      bpe.encode_piece_uncached(piece, linear, false);
      bpe.encode_piece_uncached(piece, heap, true);
      EXPECT_EQ(linear, heap) << piece;
    }
}

TEST(Tokenizer, LoadsEveryKindOfPath) {
  const Tokenizer by_dir = Tokenizer::load(test::data_path("gpt2"));
  EXPECT_EQ(by_dir.name(), "gpt2");
  EXPECT_EQ(by_dir.vocab_size(), 50257);
  EXPECT_EQ(by_dir.num_merges(), 50000u);
  const Tokenizer by_file = Tokenizer::load(test::data_path("gpt2/encoder.json"));
  EXPECT_EQ(by_file.encode("Hello world"), (std::vector<int32_t>{15496, 995}));
  const Tokenizer hinted = Tokenizer::load(test::data_path("r50k_base.tiktoken"), "gpt2");
  EXPECT_EQ(hinted.name(), "gpt2");
  EXPECT_THROW(Tokenizer::load(test::data_path("r50k_base.tiktoken"), "p99k"), ConfigError);
  EXPECT_THROW(Tokenizer::load("/nonexistent/tokenizer.json"), IoError);
}

TEST(Tokenizer, ModelDirectoryReadsTokenizerConfig) {
  const std::string dir = lmstack::test::temp_dir("tok_model_dir");
  write_file_atomic(path_join(dir, "tokenizer.model"),
                    read_file(test::data_path("cl100k_base.tiktoken")));
  write_file_atomic(path_join(dir, "tokenizer_config.json"),
                    R"({"bos_token": {"content": "<|endoftext|>"}, "eos_token": "<|endofprompt|>",
                        "add_bos_token": true, "chat_template": "{{ messages }}"})");
  const Tokenizer tok = Tokenizer::load(dir, "cl100k_base");
  EXPECT_EQ(tok.bos_id(), 100257);
  EXPECT_EQ(tok.eos_id(), 100276);
  EXPECT_TRUE(tok.add_bos_token());
  EXPECT_EQ(tok.chat_template(), "{{ messages }}");
}

TEST(TextStats, CountsAndCjkAttribution) {
  const Tokenizer& tok = cached("cl100k_base");
  const TextStats s = text_stats(tok, tok.encode("Hello big world. 中文", SpecialMode::kError));
  EXPECT_EQ(s.bytes, 23);
  EXPECT_EQ(s.chars, 19);
  EXPECT_EQ(s.words, 4);
  EXPECT_EQ(s.cjk_chars, 2);
  EXPECT_GE(s.cjk_tokens, 1);
  EXPECT_NEAR(s.chars_per_token(), double(s.chars) / s.tokens, 1e-12);
}

}  // namespace
}  // namespace lmstack::tokenizer
