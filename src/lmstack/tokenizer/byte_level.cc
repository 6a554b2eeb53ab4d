// GPT-2 byte-level alphabet (see byte_level.h).
#include "lmstack/tokenizer/byte_level.h"

#include <array>

#include "lmstack/tokenizer/unicode.h"

namespace lmstack::tokenizer {
namespace {

bool stands_for_itself(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Alphabet {
  std::array<uint32_t, 256> to_cp{};
  std::array<int, 0x144> to_byte{};
  Alphabet() {
    to_byte.fill(-1);
    uint32_t extra = 0;
    for (int b = 0; b < 256; ++b) {
      to_cp[b] = stands_for_itself(b) ? b : 256 + extra++;
      to_byte[to_cp[b]] = b;
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

}  // namespace

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) append_utf8(out, alphabet().to_cp[b]);
  return out;
}

std::optional<std::string> byte_level_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  for (size_t i = 0; i < text.size();) {
    const Utf8Char c = decode_utf8(s + i, text.size() - i);
    if (c.cp >= alphabet().to_byte.size() || alphabet().to_byte[c.cp] < 0) return std::nullopt;
    out += static_cast<char>(alphabet().to_byte[c.cp]);
    i += c.len;
  }
  return out;
}

}  // namespace lmstack::tokenizer
