// Fuzz target: the KV transfer message of disaggregated serving (serve/kv_transfer.h), read
// as a decode server reads what a prefill server sent: against the layout of the seed
// corpus's model (2 layers, 2 kv heads of 4 dims, bf16, vocabulary 96). FormatError is the
// expected refusal; a valid input is re-encoded and must give back the same bytes.
#include "fuzz_common.h"
#include "lmstack/serve/kv_transfer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lmstack::serve::KvLayout layout;
  layout.num_layers = 2;
  layout.kv_heads = 2;
  layout.head_dim = 4;
  layout.dtype = lmstack::DType::kBF16;
  layout.vocab_size = 96;
  layout.layer_token_bytes = 32;
  const std::string_view bytes = lmstack::fuzz::as_text(data, size);
  lmstack::fuzz::run_one([&] {
    const lmstack::serve::KvHandoff h = lmstack::serve::decode_kv_message(bytes, layout);
    if (lmstack::serve::encode_kv_message(h) != bytes) __builtin_trap();
  });
  return 0;
}
