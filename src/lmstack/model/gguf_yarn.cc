// RoPE scaling keys in GGUF, as llama.cpp's convert_hf_to_gguf.py writes them and llama.cpp
// reads them: `linear` (type, factor) and `yarn` (type, factor, original_context_length, the
// betas when not 32 / 1; for deepseek2 also yarn_log_multiplier = 0.1 · mscale_all_dim).
// llama.cpp's deepseek2 assumes mscale == mscale_all_dim (its cos/sin magnitude is then 1) and
// folds mscale(factor, mscale_all_dim)² into the softmax scale; its other arches put
// 0.1 · ln(factor) + 1 on cos/sin, which is transformers' factor when no mscale is given. A
// yarn config outside those forms is refused by the writer instead of written wrong.
#include "lmstack/core/error.h"
#include "lmstack/model/gguf_internal.h"

namespace lmstack::model::gguf_detail {

void write_rope_scaling_keys(GgufWriter& w, const std::string& a, const ModelConfig& c) {
  const RopeScaling& s = c.rope_scaling;
  if (s.type == "linear") {
    w.set(a + ".rope.scaling.type", GgufValue::string("linear"));
    w.set(a + ".rope.scaling.factor", GgufValue::f32(s.factor));
  }
  if (s.type != "yarn") return;
  const bool deepseek = c.mla.enabled();
  const bool representable =
      s.attention_factor == 0 && s.truncate &&
      (deepseek ? s.mscale == s.mscale_all_dim : s.mscale == 0 && s.mscale_all_dim == 0);
  if (!representable)
    throw_error<ConfigError>(
        "convert: this yarn rope_scaling (mscale {}, mscale_all_dim {}, attention_factor {}, "
        "truncate {}) has no GGUF form llama.cpp reads the same way ({})",
        s.mscale, s.mscale_all_dim, s.attention_factor, s.truncate,
        deepseek ? "deepseek2 needs mscale == mscale_all_dim"
                 : "only factor, original_max_position_embeddings and the betas");
  w.set(a + ".rope.scaling.type", GgufValue::string("yarn"));
  w.set(a + ".rope.scaling.factor", GgufValue::f32(s.factor));
  w.set(a + ".rope.scaling.original_context_length",
        GgufValue::u32(static_cast<uint32_t>(s.original_max_position > 0 ? s.original_max_position
                                                                         : c.max_position)));
  if (s.beta_fast > 0 && s.beta_fast != 32)
    w.set(a + ".rope.scaling.yarn_beta_fast", GgufValue::f32(s.beta_fast));
  if (s.beta_slow > 0 && s.beta_slow != 1)
    w.set(a + ".rope.scaling.yarn_beta_slow", GgufValue::f32(s.beta_slow));
  if (deepseek && s.mscale_all_dim != 0)
    w.set(a + ".rope.scaling.yarn_log_multiplier", GgufValue::f32(0.1f * s.mscale_all_dim));
}

Json rope_scaling_from_gguf(const GgufFile& f, const std::string& a) {
  const std::string scaling = f.get_string(a + ".rope.scaling.type", "none");
  if (scaling == "none") return nullptr;
  if (scaling != "linear" && scaling != "yarn")
    throw_error<ConfigError>("{}: {}.rope.scaling.type '{}' is not supported (none, linear, yarn)",
                             f.path(), a, scaling);
  const float factor = f.get_float(a + ".rope.scaling.factor");
  if (scaling == "linear") return Json{{"rope_type", "linear"}, {"factor", factor}};
  if (f.has(a + ".rope.scaling.attn_factor") || f.has(a + ".rope.scaling.yarn_attn_factor") ||
      f.has(a + ".rope.scaling.yarn_ext_factor"))
    throw_error<ConfigError>(
        "{}: {}.rope.scaling attn_factor / yarn_attn_factor / yarn_ext_factor are not supported",
        f.path(), a);
  Json r = {
      {"rope_type", "yarn"},
      {"factor", factor},
      {"original_max_position_embeddings", f.get_int(a + ".rope.scaling.original_context_length")},
      {"beta_fast", f.get_float(a + ".rope.scaling.yarn_beta_fast", 32.0)},
      {"beta_slow", f.get_float(a + ".rope.scaling.yarn_beta_slow", 1.0)}};
  if (f.has(a + ".rope.scaling.yarn_log_multiplier")) {
    if (a != "deepseek2")
      throw_error<ConfigError>("{}: {}.rope.scaling.yarn_log_multiplier is only read for deepseek2",
                               f.path(), a);
    const double m = f.get_float(a + ".rope.scaling.yarn_log_multiplier") / 0.1;
    r["mscale"] = m;
    r["mscale_all_dim"] = m;
  }
  return r;
}

}  // namespace lmstack::model::gguf_detail
