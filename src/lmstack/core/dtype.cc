// The dtype table (see dtype.h). Block sizes of the q*_* types follow ggml's GGUF definitions;
// the int4_g* group layout is lmstack's own (documented in dtype.h).
#include "lmstack/core/dtype.h"

#include <array>
#include <cctype>
#include <string>

#include "lmstack/core/error.h"

namespace lmstack {
namespace {

constexpr std::array<DTypeInfo, kNumDTypes> kTable = {{
    {"f32", 1, 4, true},
    {"bf16", 1, 2, true},
    {"f16", 1, 2, true},
    {"i8", 1, 1, false},
    {"i32", 1, 4, false},
    {"q8_0", 32, 34, false},        // f16 d + 32 x int8
    {"q4_0", 32, 18, false},        // f16 d + 16 bytes of nibbles
    {"q4_K", 256, 144, false},      // f16 d, f16 dmin, 12 bytes scales, 128 bytes nibbles
    {"q6_K", 256, 210, false},      // 128 ql + 64 qh + 16 int8 scales + f16 d
    {"int4_g32", 32, 20, false},    // f16 scale, u8 zero, u8 pad, 16 bytes of nibbles
    {"int4_g64", 64, 36, false},    // the same with 2 nibble chunks
    {"int4_g128", 128, 68, false},  // the same with 4 nibble chunks
    {"q4_0x16", 32, 18, false},     // q4_0's bytes, 16 rows interleaved (quant_blocks.h)
    {"q4_Kx16", 256, 144, false},   // q4_K's bytes, 16 rows interleaved (quant_blocks.h)
    {"q6_Kx16", 256, 210, false},   // q6_K's bytes, 16 rows interleaved (quant_blocks.h)
}};

bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

}  // namespace

const DTypeInfo& dtype_info(DType t) {
  LMSTACK_CHECK(static_cast<int>(t) < kNumDTypes, "bad dtype {}", static_cast<int>(t));
  return kTable[static_cast<int>(t)];
}

int64_t dtype_bytes(DType t, int64_t n) {
  const DTypeInfo& info = dtype_info(t);
  LMSTACK_CHECK(n % info.block_size == 0, "{} elements is not a multiple of {}'s block of {}", n,
                info.name, info.block_size);
  return n / info.block_size * info.block_bytes;
}

DType parse_dtype(std::string_view name) {
  if (name == "float32") return DType::kF32;
  if (name == "bfloat16") return DType::kBF16;
  if (name == "float16") return DType::kF16;
  std::string known;
  for (int i = 0; i < kNumDTypes; ++i) {
    if (iequal(kTable[i].name, name)) return static_cast<DType>(i);
    known += (i ? ", " : "") + std::string(kTable[i].name);
  }
  throw_error<ConfigError>("unknown dtype '{}' (known: {})", name, known);
}

}  // namespace lmstack
