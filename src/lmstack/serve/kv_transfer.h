// The KV transfer message of prefill/decode disaggregation (docs/disaggregation.md has the
// byte layout): what a prefill server hands a decode server so that the decode server can
// continue a sequence as if it had run the prompt itself. It carries the model fingerprint
// (a decode server of another model or KV dtype refuses it), the prompt, the first token the
// prefill sampled with its logprobs, the sampler's seed and RNG position, and every layer's
// K/V rows of the prompt's tokens in the cache's dtype (int8 rows keep their f32 scales).
// Rows go per token, not per block, so the two sides may use different block sizes.
// Each section ends in a CRC-32 (IEEE 802.3, the zlib polynomial) of its bytes.
//
// Not here: sockets and retries (http_routes.cc, kv_client.h), the engine hooks (engine.h).
// Thread safety: free functions over values; no shared state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lmstack/core/crc32.h"  // the checksum of every section
#include "lmstack/core/tensor.h"
#include "lmstack/model/sampler.h"

namespace lmstack::serve {

inline constexpr uint32_t kKvMagic = 0x564B4D4C;  // "LMKV" little-endian
inline constexpr uint16_t kKvVersion = 1;
// Bytes of the fixed header, its CRC included (docs/disaggregation.md).
inline constexpr size_t kKvHeaderBytes = 64;
// Refused above this many prompt tokens or top logprobs: a corrupt count must not make the
// reader allocate before it has checked the message's length.
inline constexpr uint32_t kKvMaxTokens = 1u << 24;
inline constexpr uint32_t kKvMaxTop = 64;

// What must match between the two servers for the rows to mean the same thing.
struct KvLayout {
  uint32_t num_layers = 0;
  uint32_t kv_heads = 0;  // per layer, as the cache stores them (MLA: 1)
  uint32_t head_dim = 0;  // per row (MLA: kv_lora_rank + qk_rope_head_dim)
  DType dtype = DType::kF32;
  uint32_t vocab_size = 0;
  uint32_t layer_token_bytes = 0;  // one token's K and V rows (and scales) in one layer
  bool operator==(const KvLayout&) const = default;
};

// A prefilled sequence, as the prefill engine exports it and the decode engine imports it.
struct KvHandoff {
  KvLayout layout;
  uint64_t seed = 0;       // the request's sampling seed (a decode server must not pick its own)
  uint64_t rng_draws = 0;  // Sampler::num_rng_draws() after the first token
  std::vector<int32_t> prompt;
  model::SampleResult first;  // the first generated token (may be EOS) and its logprobs
  // num_layers × prompt.size() × layer_token_bytes, layer-major then token-major.
  std::vector<uint8_t> kv;
};

// Bytes of the message for a handoff of this shape: kKvHeaderBytes + the token section
// (4·T + 8·top + 4) + per layer (T·layer_token_bytes + 4).
uint64_t kv_message_bytes(const KvLayout& layout, uint64_t num_tokens, uint64_t num_top);

// The message. LMSTACK_CHECKs that kv has the size the layout and prompt say.
std::string encode_kv_message(const KvHandoff& h);

// Validates and reads a message. Throws FormatError naming what is wrong (truncated, bad
// magic, unsupported version, header/token/layer checksum, a model or dtype other than
// `expected`, a count past its limit, trailing bytes); never reads past `bytes`.
KvHandoff decode_kv_message(std::string_view bytes, const KvLayout& expected);

}  // namespace lmstack::serve
