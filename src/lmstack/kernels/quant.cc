// Reference block codecs for q8_0, q4_0 and int4_g*, plus quant.h's row/matrix entry points.
// q8_0 and q4_0 follow ggml's quantize_row_q8_0_ref / quantize_row_q4_0_ref arithmetic (f32
// scale, f32 reciprocal, round-half-away / trunc(+8.5)), which gguf-py reproduces, so the
// bytes match gguf.quants.quantize exactly (tests/kernels/quant_test.cc). Error bounds:
//   q8_0: q = round(x / d) with d = amax/127, so |x - d q| <= d/2; storing d as f16 adds
//         |d - d16| * 127 <= 127 d 2^-11.
//   int4_g*: s = f16 rounded up of (hi - lo)/15 over [lo, hi] = [min(0, x), max(0, x)], so
//         15 s >= hi - lo; zero = round(-lo/s) puts lo and hi within s/2 of the grid ends:
//         |x - s (q - zero)| <= s/2.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "lmstack/core/error.h"
#include "lmstack/core/half.h"
#include "lmstack/kernels/quant.h"
#include "lmstack/kernels/quant_blocks.h"
#include "lmstack/kernels/quant_ref.h"
#include "lmstack/kernels/quant_repack.h"

namespace lmstack::kernels {
namespace qref {

uint16_t f16_round_up(float v) {
  uint16_t h = f32_to_f16(v);
  if (f16_to_f32(h) < v && h < 0x7bffu) ++h;  // positive f16 bit patterns order like values
  return h;
}

void quantize_q8_0(const float* x, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32, dst += qblock::kQ8_0Bytes) {
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    qblock::store_u16(dst, f32_to_f16(d));
    for (int i = 0; i < 32; ++i) {
      const float scaled = x[i] * id;
      dst[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(std::round(scaled)));
    }
  }
}

void dequantize_q8_0(const uint8_t* src, float* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, y += 32, src += qblock::kQ8_0Bytes) {
    const float d = f16_to_f32(qblock::load_u16(src));
    for (int i = 0; i < 32; ++i) y[i] = d * static_cast<float>(static_cast<int8_t>(src[2 + i]));
  }
}

void quantize_q4_0(const float* x, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32, dst += qblock::kQ4_0Bytes) {
    float amax = 0.0f, max = 0.0f;  // the signed value of largest magnitude (first one)
    for (int i = 0; i < 32; ++i) {
      if (std::fabs(x[i]) > amax) {
        amax = std::fabs(x[i]);
        max = x[i];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    qblock::store_u16(dst, f32_to_f16(d));
    uint8_t q[32];
    for (int i = 0; i < 32; ++i) {
      const float scaled = x[i] * id;
      const float shifted = scaled + 8.5f;
      q[i] = static_cast<uint8_t>(std::min(15, static_cast<int>(std::trunc(shifted))));
    }
    for (int i = 0; i < 16; ++i) dst[2 + i] = static_cast<uint8_t>(q[i] | (q[i + 16] << 4));
  }
}

void dequantize_q4_0(const uint8_t* src, float* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, y += 32, src += qblock::kQ4_0Bytes) {
    const float d = f16_to_f32(qblock::load_u16(src));
    for (int i = 0; i < 16; ++i) {
      y[i] = d * static_cast<float>((src[2 + i] & 15) - 8);
      y[i + 16] = d * static_cast<float>((src[2 + i] >> 4) - 8);
    }
  }
}

void quantize_int4(int group, const float* x, uint8_t* dst, int64_t n) {
  const int bytes = qblock::kInt4HeaderBytes + group / 2;
  for (int64_t g = 0; g < n / group; ++g, x += group, dst += bytes) {
    float lo = 0.0f, hi = 0.0f;
    for (int i = 0; i < group; ++i) {
      lo = std::min(lo, x[i]);
      hi = std::max(hi, x[i]);
    }
    const uint16_t s16 = f16_round_up((hi - lo) / 15.0f);
    const float s = f16_to_f32(s16);
    const float is = s != 0.0f ? 1.0f / s : 0.0f;
    const int zero = std::clamp(static_cast<int>(std::lround(-lo * is)), 0, 15);
    qblock::store_u16(dst, s16);
    dst[2] = static_cast<uint8_t>(zero);
    dst[3] = 0;
    uint8_t* qs = dst + qblock::kInt4HeaderBytes;
    for (int c = 0; c < group / 32; ++c) {
      uint8_t q[32];
      for (int i = 0; i < 32; ++i)
        q[i] = static_cast<uint8_t>(
            std::clamp(static_cast<int>(std::lround(x[32 * c + i] * is)) + zero, 0, 15));
      for (int i = 0; i < 16; ++i) qs[16 * c + i] = static_cast<uint8_t>(q[i] | (q[i + 16] << 4));
    }
  }
}

void dequantize_int4(int group, const uint8_t* src, float* y, int64_t n) {
  const int bytes = qblock::kInt4HeaderBytes + group / 2;
  for (int64_t g = 0; g < n / group; ++g, y += group, src += bytes) {
    const float s = f16_to_f32(qblock::load_u16(src));
    const int zero = src[2];
    const uint8_t* qs = src + qblock::kInt4HeaderBytes;
    for (int c = 0; c < group / 32; ++c) {
      for (int i = 0; i < 16; ++i) {
        y[32 * c + i] = s * static_cast<float>((qs[16 * c + i] & 15) - zero);
        y[32 * c + i + 16] = s * static_cast<float>((qs[16 * c + i] >> 4) - zero);
      }
    }
  }
}

}  // namespace qref

namespace {

struct Codec {
  DType type;
  void (*quantize)(const float*, uint8_t*, int64_t);
  void (*dequantize)(const uint8_t*, float*, int64_t);
};

constexpr Codec kCodecs[] = {
    {DType::kQ8_0, qref::quantize_q8_0, qref::dequantize_q8_0},
    {DType::kQ4_0, qref::quantize_q4_0, qref::dequantize_q4_0},
    {DType::kQ4_K, qref::quantize_q4_k, qref::dequantize_q4_k},
    {DType::kQ6_K, qref::quantize_q6_k, qref::dequantize_q6_k},
    {DType::kInt4G32,
     [](const float* x, uint8_t* d, int64_t n) { qref::quantize_int4(32, x, d, n); },
     [](const uint8_t* s, float* y, int64_t n) { qref::dequantize_int4(32, s, y, n); }},
    {DType::kInt4G64,
     [](const float* x, uint8_t* d, int64_t n) { qref::quantize_int4(64, x, d, n); },
     [](const uint8_t* s, float* y, int64_t n) { qref::dequantize_int4(64, s, y, n); }},
    {DType::kInt4G128,
     [](const float* x, uint8_t* d, int64_t n) { qref::quantize_int4(128, x, d, n); },
     [](const uint8_t* s, float* y, int64_t n) { qref::dequantize_int4(128, s, y, n); }},
};
// Not counted: the 5 plain types and q4_0x16 / q4_Kx16 / q6_Kx16, layouts of Q4_0 / Q4_K /
// Q6_K (quant_repack.h) with no rows of their own to code.
static_assert(std::size(kCodecs) == static_cast<size_t>(kNumDTypes) - 8,
              "every block-quantized dtype needs a codec");

const Codec* find_codec(DType t) {
  for (const Codec& c : kCodecs)
    if (c.type == t) return &c;
  return nullptr;
}

void check_row(const char* what, DType t, int64_t n) {
  if (!is_row_codec_dtype(t))
    throw_error<ConfigError>("{}: dtype {} is not a float or block-quantized type", what,
                             dtype_name(t));
  const int block = dtype_info(t).block_size;
  if (n < 0 || n % block != 0)
    throw_error<ConfigError>("{}: row of {} elements is not a multiple of {}'s block of {}", what,
                             n, dtype_name(t), block);
}

}  // namespace

bool is_row_codec_dtype(DType t) {
  return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16 || find_codec(t) != nullptr;
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  check_row("quantize_row", t, n);
  if (t == DType::kF32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * 4);
  } else if (t == DType::kBF16) {
    convert_f32_to_bf16(src, static_cast<uint16_t*>(dst), n);
  } else if (t == DType::kF16) {
    convert_f32_to_f16(src, static_cast<uint16_t*>(dst), n);
  } else {
    find_codec(t)->quantize(src, static_cast<uint8_t*>(dst), n);
  }
}

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  check_row("dequantize_row", t, n);
  if (t == DType::kF32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * 4);
  } else if (t == DType::kBF16) {
    convert_bf16_to_f32(static_cast<const uint16_t*>(src), dst, n);
  } else if (t == DType::kF16) {
    convert_f16_to_f32(static_cast<const uint16_t*>(src), dst, n);
  } else {
    find_codec(t)->dequantize(static_cast<const uint8_t*>(src), dst, n);
  }
}

Tensor quantize_matrix(ThreadPool& pool, const float* w, int64_t rows, int64_t n, DType t,
                       MemoryCategory cat) {
  check_row("quantize_matrix", t, n);
  Tensor out = Tensor::zeros(Shape{rows, n}, t, cat);
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  const int64_t row_bytes = dtype_bytes(t, n);
  pool.parallel_for(rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) quantize_row(t, w + r * n, dst + r * row_bytes, n);
  });
  return out;
}

void dequantize_rows(const Tensor& w, int64_t row_begin, int64_t row_end, float* dst) {
  LMSTACK_CHECK(w.rank() == 2, "dequantize_rows: tensor must be 2-D, got {}", w.shape().str());
  LMSTACK_CHECK(0 <= row_begin && row_begin <= row_end && row_end <= w.dim(0),
                "dequantize_rows: rows [{}, {}) outside [0, {})", row_begin, row_end, w.dim(0));
  const int64_t n = w.dim(1), row_bytes = dtype_bytes(w.dtype(), n);
  const auto* src = static_cast<const uint8_t*>(w.raw_data());
  if (is_row_interleaved(w.dtype())) {
    const DType base = row_interleaved_base(w.dtype());
    std::vector<uint8_t> plain(static_cast<size_t>(row_bytes));
    for (int64_t r = row_begin; r < row_end; ++r) {
      x16_rows_to_plain(w.dtype(), src, w.dim(0), n, r, r + 1, plain.data());
      dequantize_row(base, plain.data(), dst + (r - row_begin) * n, n);
    }
    return;
  }
  for (int64_t r = row_begin; r < row_end; ++r)
    dequantize_row(w.dtype(), src + r * row_bytes, dst + (r - row_begin) * n, n);
}

}  // namespace lmstack::kernels
