// Validation of token ids read from vocabulary files (tokenizer.json vocab and added_tokens,
// tiktoken ranks, encoder.json, GGUF). Ids size the tokenizer's tables (one entry per id up
// to the largest), so an id is refused when negative, beyond 32 bits, or so far beyond the
// number of tokens that the table would be mostly empty: a rank of 2,000,000,000 asked for
// 16 GB and an added id of 2^31 wrapped negative and crashed (issue 13).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace lmstack::tokenizer {

// The largest id any loader accepts: 16x the largest real vocabulary (Gemma 3, 262,144).
constexpr int64_t kMaxTokenId = (int64_t{1} << 22) - 1;
// Ids may leave at most this many unused slots beyond twice the number of tokens (tiktoken
// encodings place special tokens past the ranks, o200k's at 199,999-200,018, so a test
// vocabulary of a few hundred ranks with o200k's specials still loads).
constexpr int64_t kMaxUnusedTokenIds = int64_t{1} << 18;

// `id` as an int32 token id; FormatError "<source>: token id N is negative" or "... exceeds
// the limit of kMaxTokenId".
int32_t checked_token_id(int64_t id, std::string_view source);
// FormatError "<source>: token id <max_id> is far beyond the vocabulary (<num_tokens> tokens)"
// unless max_id < 2 * num_tokens + kMaxUnusedTokenIds.
void check_token_id_density(int64_t max_id, size_t num_tokens, std::string_view source);

}  // namespace lmstack::tokenizer
