// The KV transfer message (serve/kv_transfer.h): CRC-32 against the published check value and
// zlib's, a round trip, and every kind of damage refused with a message naming it: each byte
// flipped, each truncation, trailing bytes, another version, another model or KV dtype; and a
// message written independently (Python struct + zlib.crc32, fuzz/corpus/kv_transfer) reads
// back and re-encodes to the same bytes.
#include "lmstack/serve/kv_transfer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <numeric>
#include <sstream>

#include "lmstack/core/error.h"

namespace lmstack::serve {
namespace {

KvLayout layout() {
  KvLayout l;
  l.num_layers = 2;
  l.kv_heads = 2;
  l.head_dim = 4;
  l.dtype = DType::kBF16;
  l.vocab_size = 96;
  l.layer_token_bytes = 2 * 2 * 4 * 2;  // K and V, 2 heads x 4 dims of bf16
  return l;
}

KvHandoff handoff(size_t tokens = 5) {
  KvHandoff h;
  h.layout = layout();
  h.seed = 0x1234567890ABCDEFull;
  h.rng_draws = 1;
  h.prompt.resize(tokens);
  std::iota(h.prompt.begin(), h.prompt.end(), 3);
  h.first.token = 42;
  h.first.logprob = -0.25f;
  h.first.top = {{42, -0.25f}, {7, -1.5f}};
  h.kv.resize(h.layout.num_layers * tokens * h.layout.layer_token_bytes);
  for (size_t i = 0; i < h.kv.size(); ++i) h.kv[i] = static_cast<uint8_t>(i * 31 + 7);
  return h;
}

// The FormatError message decode_kv_message throws, or "" when it accepts the bytes.
std::string refusal(const std::string& bytes, const KvLayout& expected = layout()) {
  try {
    decode_kv_message(bytes, expected);
    return "";
  } catch (const FormatError& e) {
    return e.what();
  }
}

TEST(KvTransfer, RoundTripKeepsEveryField) {
  const KvHandoff h = handoff();
  const std::string bytes = encode_kv_message(h);
  EXPECT_EQ(bytes.size(), kv_message_bytes(h.layout, h.prompt.size(), h.first.top.size()));
  // Stated overhead: 64 header + 4 per prompt token + 8 per top logprob + 4 per section CRC.
  EXPECT_EQ(bytes.size(), 64 + 4 * 5 + 8 * 2 + 4 + h.kv.size() + 4 * 2);
  const KvHandoff back = decode_kv_message(bytes, layout());
  EXPECT_EQ(back.layout, h.layout);
  EXPECT_EQ(back.seed, h.seed);
  EXPECT_EQ(back.rng_draws, h.rng_draws);
  EXPECT_EQ(back.prompt, h.prompt);
  EXPECT_EQ(back.first.token, 42);
  EXPECT_EQ(back.first.logprob, -0.25f);
  ASSERT_EQ(back.first.top.size(), 2u);
  EXPECT_EQ(back.first.top[1].token, 7);
  EXPECT_EQ(back.first.top[1].logprob, -1.5f);
  EXPECT_EQ(back.kv, h.kv);
  EXPECT_EQ(std::memcmp(bytes.data(), "LMKV", 4), 0);
}

TEST(KvTransfer, EveryFlippedByteIsRefused) {
  const std::string good = encode_kv_message(handoff());
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x01);
    EXPECT_NE(refusal(bad), "") << "byte " << i << " flipped was accepted";
  }
  std::string bad = good;
  bad[good.size() - 10] ^= 0x10;  // inside the last layer's rows
  EXPECT_NE(refusal(bad).find("layer 1 KV checksum mismatch"), std::string::npos) << refusal(bad);
  bad = good;
  bad[kKvHeaderBytes] ^= 0x10;  // the first prompt token
  EXPECT_NE(refusal(bad).find("token section checksum"), std::string::npos) << refusal(bad);
  bad = good;
  bad[44] ^= 0x10;  // the seed
  EXPECT_NE(refusal(bad).find("header checksum"), std::string::npos) << refusal(bad);
}

TEST(KvTransfer, EveryTruncationAndTrailingBytesAreRefused) {
  const std::string good = encode_kv_message(handoff());
  for (size_t n = 0; n < good.size(); ++n)
    EXPECT_NE(refusal(good.substr(0, n)).find("truncated"), std::string::npos) << n << " bytes";
  EXPECT_NE(refusal(good + "x").find("trailing bytes"), std::string::npos);
}

TEST(KvTransfer, WrongMagicVersionOrModelIsRefusedByName) {
  const std::string good = encode_kv_message(handoff());
  std::string bad = good;
  bad[0] = 'X';
  EXPECT_NE(refusal(bad).find("bad magic"), std::string::npos);
  bad = good;
  bad[4] = 2;  // version 2, checked before the CRC so the message names the version
  EXPECT_NE(refusal(bad).find("version 2 is not supported"), std::string::npos) << refusal(bad);
  KvLayout other = layout();
  other.num_layers = 3;
  EXPECT_NE(refusal(good, other).find("num_layers is 2 on the prefill server, 3"),
            std::string::npos)
      << refusal(good, other);
  other = layout();
  other.dtype = DType::kI8;
  EXPECT_NE(refusal(good, other).find("kv_dtype is bf16 on the prefill server, int8"),
            std::string::npos)
      << refusal(good, other);
  other = layout();
  other.head_dim = 8;
  EXPECT_NE(refusal(good, other).find("head_dim"), std::string::npos);
}

TEST(KvTransfer, ReadsTheIndependentlyWrittenMessage) {
  std::ifstream in(LMSTACK_SOURCE_DIR "/fuzz/corpus/kv_transfer/five_tokens_two_top.bin",
                   std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  ASSERT_EQ(bytes.str().size(), 432u);
  const KvHandoff h = decode_kv_message(bytes.str(), layout());
  EXPECT_EQ(h.prompt, (std::vector<int32_t>{3, 4, 5, 6, 7}));
  EXPECT_EQ(h.first.token, 42);
  EXPECT_EQ(h.seed, 7u);
  EXPECT_EQ(h.rng_draws, 1u);
  ASSERT_EQ(h.kv.size(), 2u * 5 * 32);
  EXPECT_EQ(h.kv[1], 38);                  // layer 0, byte 1: 1*31 + 7
  EXPECT_EQ(h.kv[160], (131 + 7) & 0xFF);  // layer 1, byte 0
  EXPECT_EQ(encode_kv_message(h), bytes.str());
}

TEST(KvTransfer, OneTokenAndNoLogprobsRoundTrip) {
  KvHandoff h = handoff(1);
  h.first.top.clear();
  const KvHandoff back = decode_kv_message(encode_kv_message(h), layout());
  EXPECT_EQ(back.prompt, h.prompt);
  EXPECT_EQ(back.kv, h.kv);
  EXPECT_TRUE(back.first.top.empty());
}

}  // namespace
}  // namespace lmstack::serve
