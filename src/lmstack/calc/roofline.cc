// Roofline (Williams, Waterman & Patterson 2009): attainable FLOP/s = min(peak, AI x bandwidth),
// AI = FLOPs / bytes moved to and from memory, ridge point = peak / bandwidth.
#include <fmt/format.h>

#include <algorithm>

#include "lmstack/calc/params.h"
#include "lmstack/calc/reports.h"

namespace lmstack::calc {

RooflinePoint gemm_point(double m, double n, double k, const std::string& dtype) {
  return {fmt::format("gemm {:.0f}x{:.0f}x{:.0f}", m, n, k), 2 * m * n * k,
          (m * k + k * n + m * n) * dtype_bytes(dtype)};
}

RooflinePoint attention_point(double b, double heads, double s, double d,
                              const std::string& dtype) {
  return {fmt::format("attention b{:.0f} h{:.0f} s{:.0f} d{:.0f}", b, heads, s, d),
          b * heads * 2 * (2 * s * s * d) / 2, 4 * b * heads * s * d * dtype_bytes(dtype)};
}

RooflinePoint decode_point(const ModelShape& m, const HardwareSpec& hw, const std::string& dtype,
                           double batch, double context) {
  const ParamCount p = count_parameters(m);
  const DecodeBound d = decode_bound(m, p, hw, dtype, dtype, batch, context);
  const TokenFlops f = token_flops(m, p, context, AttnConvention::kLlmc);
  return {fmt::format("decode {} batch {:.0f}", m.name, batch),
          batch * (f.matmul_forward + 2 * f.attention_forward),
          d.weight_bytes_read + d.kv_bytes_read};
}

Report roofline_report(const HardwareSpec& hw, const RooflineOptions& o) {
  const double peak = hw.compute_flops(o.dtype), bw = hw.memory_bw;
  if (!(peak > 0 && bw > 0))
    throw_error<ConfigError>("{}: no peak FLOP/s or bandwidth known for {}", hw.name, o.dtype);
  Report r;
  r.title = fmt::format("calc roofline on {} ({})", hw.name, o.dtype);
  Section& m = r.section("machine", "Machine");
  add_row(m, "peak_flops", "peak", peak, "FLOP/s", fmt::format("dense {}", o.dtype));
  add_row(m, "bandwidth", "memory bandwidth", bw, "B/s", hw.is_cpu ? "DRAM read" : "HBM");
  add_row(m, "ridge", "ridge point", peak / bw, "", "peak / bandwidth (FLOP/byte)");
  for (size_t i = 0; i < o.points.size(); ++i) {
    const RooflinePoint& pt = o.points[i];
    Section& s = r.section(fmt::format("point{}", i), pt.label);
    const std::string k = fmt::format("p{}_", i);
    const double ai = pt.flops / pt.bytes, att = std::min(peak, ai * bw);
    add_row(s, k + "flops", "FLOPs", pt.flops, "FLOP", "");
    add_row(s, k + "bytes", "bytes moved", pt.bytes, "B", "each operand once");
    add_row(s, k + "intensity", "arithmetic intensity", ai, "", "FLOPs / bytes",
            fmt::format("{:.4g} / {:.4g}", pt.flops, pt.bytes));
    add_row(s, k + "attainable", "attainable", att, "FLOP/s", "min(peak, AI x bandwidth)");
    add_row(s, k + "time_s", "time bound", pt.flops / att, "s", "FLOPs / attainable");
    add_text(s, k + "bound", "bound", ai < peak / bw ? "memory" : "compute", "AI vs ridge point");
  }
  return r;
}

}  // namespace lmstack::calc
