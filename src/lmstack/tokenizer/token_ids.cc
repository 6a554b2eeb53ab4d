// Token id validation (see token_ids.h).
#include "lmstack/tokenizer/token_ids.h"

#include "lmstack/core/error.h"

namespace lmstack::tokenizer {

int32_t checked_token_id(int64_t id, std::string_view source) {
  if (id < 0) throw_error<FormatError>("{}: token id {} is negative", source, id);
  if (id > kMaxTokenId)
    throw_error<FormatError>("{}: token id {} exceeds the limit of {} (no real vocabulary is near)",
                             source, id, kMaxTokenId);
  return static_cast<int32_t>(id);
}

void check_token_id_density(int64_t max_id, size_t num_tokens, std::string_view source) {
  const int64_t limit = 2 * static_cast<int64_t>(num_tokens) + kMaxUnusedTokenIds;
  if (max_id >= limit)
    throw_error<FormatError>(
        "{}: token id {} is far beyond the vocabulary ({} tokens; ids must stay below {})", source,
        max_id, num_tokens, limit);
}

}  // namespace lmstack::tokenizer
