// GPT-2's byte-level alphabet (bytes_to_unicode in openai/gpt-2 encoder.py): printable Latin-1
// bytes stand for themselves, the other 68 bytes for U+0100..U+0143 (space = U+0120 'Ġ').
// encoder.json, vocab.bpe and byte-level tokenizer.json files spell tokens this way; lmstack
// converts them to raw bytes on load and back when it writes a tokenizer.json.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace lmstack::tokenizer {

// Raw bytes -> the alphabet's UTF-8 spelling.
std::string byte_level_encode(std::string_view bytes);
// The alphabet's spelling -> raw bytes; nullopt if a character is outside the alphabet.
std::optional<std::string> byte_level_decode(std::string_view text);

}  // namespace lmstack::tokenizer
