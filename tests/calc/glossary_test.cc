// Every figure of the glossary (shared/seed/glossary.en.md) that follows from a formula, plus
// published figures (ZeRO paper, Megatron activation paper, Hugging Face parameter counts),
// reproduced by calc. One table row per figure: what calc computes, the reference value, the
// allowed relative error (0 = exact, or the rounding of the source) and the source.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "lmstack/calc/params.h"
#include "lmstack/calc/predict.h"
#include "lmstack/calc/reports.h"

namespace lmstack::calc {
namespace {

struct Figure {
  const char* what;
  std::function<double()> computed;
  double expected;
  double rel_tol;
  const char* source;
};

double params(const char* preset) {
  return static_cast<double>(count_parameters(model_preset(preset)).total());
}

double part(const char* preset, const char* key) {
  return static_cast<double>(count_parameters(model_preset(preset)).get(key));
}

double report_value(const Report& r, const char* key) {
  const double v = r.value(key);
  EXPECT_FALSE(std::isnan(v)) << "no row " << key;
  return v;
}

double zero_gb(int stage) {  // ZeRO paper: Psi = 7.5B, K = 12, Nd = 64, GB = 1e9
  return zero_state_bytes(7.5e9, TrainPrecision::mixed(), stage, 64).total() / 1e9;
}

ActivationShape gpt3(int tp, bool sp, Recompute rc) {  // GPT-3 175B: s 2048, h 12288, a 96
  return {2048, 1, 12288, 96, 96, tp, 1, 1, sp, rc};
}

Report cluster_1024() { return cluster_report(ClusterOptions{}); }

std::vector<Figure> figures() {
  return {
      // --- glossary section 1: model compute ---
      {"Llama-3-8B embedding params", [] { return part("llama-3-8b", "embedding"); }, 525336576, 0,
       "glossary 1 'Llama-3-8B ~ 525 M' = 128256 x 4096"},
      {"Llama-3-8B params (HF)", [] { return params("llama-3-8b"); }, 8030261248, 0,
       "Hugging Face meta-llama/Meta-Llama-3-8B: 8,030,261,248"},
      {"GPT-2 124M params (HF)", [] { return params("gpt2"); }, 124439808, 0,
       "Hugging Face openai-community/gpt2: 124,439,808"},
      {"SwiGLU MLP share of Llama-2-7B non-embedding params",
       [] {
         return part("llama-2-7b", "mlp") /
                (params("llama-2-7b") - 2 * part("llama-2-7b", "embedding"));
       },
       2.0 / 3, 0.01, "glossary 1 'MLP ~2/3 of parameters'"},
      {"training bytes per param, fp32 Adam",
       [] { return zero_state_bytes(1, TrainPrecision::fp32(), 0, 1).total(); }, 16, 0,
       "glossary 1 '16 B/param: weights 4 + grads 4 + m 4 + v 4'"},
      {"training bytes per param, mixed-precision Adam",
       [] { return zero_state_bytes(1, TrainPrecision::mixed(), 0, 1).total(); }, 16, 0,
       "ZeRO paper sec. 3.1: 2 + 2 + K (K = 12)"},
      {"7B training memory (GB)",
       [] { return zero_state_bytes(7e9, TrainPrecision::fp32(), 0, 1).total() / 1e9; }, 112, 0,
       "glossary 1 '7B -> 112 GB'"},
      {"Llama-2-7B training memory (GB)",
       [] {
         return zero_state_bytes(params("llama-2-7b"), TrainPrecision::fp32(), 0, 1).total() / 1e9;
       },
       112, 0.05, "glossary 1 '7B -> 112 GB' (the real 6.74B model, 16 B/param)"},
      {"Llama-2-7B fp16 weights (GB)",
       [] { return weight_bytes(count_parameters(model_preset("llama-2-7b")), "f16") / 1e9; }, 14,
       0.04, "glossary 1 '7B fp16 ~ 14 GB'"},
      {"bytes per param: fp16 / int8 / int4",
       [] { return dtype_bytes("f16") * 100 + dtype_bytes("int8") * 10 + dtype_bytes("int4"); },
       210.5, 0, "glossary 3 'FP16 2 B -> INT8 1 B -> INT4 0.5 B'"},
      // --- glossary section 3: KV cache ---
      {"Llama-3-8B KV bytes per token (bf16)",
       [] { return kv_bytes_per_token(model_preset("llama-3-8b"), "bf16"); }, 131072, 0,
       "glossary 3 '~128 KB/token' = 2 x 32 x 8 x 128 x 2"},
      {"100 sequences x 8K tokens KV (GiB)",
       [] {
         return kv_bytes_per_token(model_preset("llama-3-8b"), "bf16") * 8192 * 100 / (1 << 30);
       },
       100, 0, "glossary 3 '100 x 8K ~ 100 GB' (exactly 100 GiB = 107 GB)"},
      {"Llama-3-8B KV bytes per token (int8, f32 scale per token per kv head)",
       [] { return kv_bytes_per_token(model_preset("llama-3-8b"), "int8"); }, 2 * 32 * 8 * 132, 0,
       "2 x L x kv_heads x (head_dim x 1 + 4): lmstack --kv-dtype int8 (kv_cache.h)"},
      {"DeepSeek-V3 MLA KV bytes per token (int8)",
       [] { return kv_bytes_per_token(model_preset("deepseek-v3"), "int8"); }, 61 * (576 + 4), 0,
       "one scale per latent row"},
      {"DeepSeek-V3 MLA KV bytes per token (bf16)",
       [] { return kv_bytes_per_token(model_preset("deepseek-v3"), "bf16"); }, 61 * 576 * 2, 0,
       "DeepSeek-V2 paper sec. 2.1: cache (d_c + d_h^R) per layer = 512 + 64"},
      // --- glossary section 4: GPU ---
      {"H100 SXM CUDA cores", [] { return double(hardware_preset("h100-sxm").cuda_cores()); },
       16896, 0, "glossary 4 '132 SM x 128 = 16,896'"},
      {"H100 fp32 TFLOP/s from SMs x cores x 2 x clock",
       [] { return hardware_preset("h100-sxm").fp32_flops_from_clock() / 1e12; }, 67, 0.01,
       "glossary 4 'TFLOPS = SMs x FLOP/clock/SM x clock'; datasheet 67 TF"},
      {"H100 fp16 tensor / fp32 ratio",
       [] {
         auto h = hardware_preset("h100-sxm");
         return h.peak_flops(Precision::kBf16) / h.peak_flops(Precision::kFp32);
       },
       15, 0.02, "glossary 4 '67 TF vs 989 TF (~15x)'"},
      {"H100 fp8 TFLOP/s",
       [] { return hardware_preset("h100-sxm").peak_flops(Precision::kFp8) / 1e12; }, 1979, 0,
       "glossary 4 'FP8 1979 TF'"},
      {"7B fp16 decode time on H100 (ms)",
       [] { return 14e9 / hardware_preset("h100-sxm").memory_bw * 1e3; }, 4.18, 0.002,
       "glossary 4 '14 GB / 3.35 TB/s ~ 4.2 ms' (its '4 us' is a slip)"},
      {"Llama-2-7B fp16 decode step bound on H100 (ms)",
       [] {
         const ModelShape m = model_preset("llama-2-7b");
         return decode_bound(m, count_parameters(m), hardware_preset("h100-sxm"), "f16", "f16", 1,
                             1)
                    .step_time_s() *
                1e3;
       },
       4.2, 0.07, "glossary 4 '~4.2 ms/token' (real model: untied embedding not read)"},
      {"B200 bf16 TF + TB/s",
       [] {
         auto h = hardware_preset("b200");
         return h.peak_flops(Precision::kBf16) / 1e12 + h.memory_bw / 1e12;
       },
       2258, 0, "glossary 4 'B200 2250 TF / 8 TB/s'"},
      {"A100 bf16 TF + TB/s (80 GB)",
       [] {
         auto h = hardware_preset("a100-80g");
         return h.peak_flops(Precision::kBf16) / 1e12 + h.memory_bw / 1e12;
       },
       314, 0.001, "glossary 4 'A100 312 TF / 2.0 TB/s'"},
      {"V100 fp16 TF + TB/s",
       [] {
         auto h = hardware_preset("v100");
         return h.peak_flops(Precision::kBf16) / 1e12 + h.memory_bw / 1e12;
       },
       125.9, 0, "glossary 4 'V100 125 TF / 0.9 TB/s'"},
      {"H200 memory GB + TB/s",
       [] {
         auto h = hardware_preset("h200");
         return h.memory_bytes / 1e9 + h.memory_bw / 1e12;
       },
       145.8, 0, "glossary 4 'H200 141 GB, 4.8 TB/s'"},
      {"NVLink GB/s V100+A100+H100+B200",
       [] {
         double s = 0;
         for (const char* g : {"v100", "a100-40g", "h100-sxm", "b200"})
           s += hardware_preset(g).nvlink_bw / 1e9;
         return s;
       },
       300 + 600 + 900 + 1800, 0, "glossary 4 'V100 300 -> A100 600 -> H100 900 -> B200 1.8 TB/s'"},
      {"NVL72 domain bandwidth (TB/s)",
       [] {
         auto h = hardware_preset("gb200-nvl72");
         return h.nvlink_domain * h.nvlink_bw / 1e12;
       },
       130, 0.01, "glossary 5 '72 GPUs in one NVLink domain, 130 TB/s'"},
      {"H100 ridge point (FLOP/byte)",
       [] {
         return report_value(
             roofline_report(hardware_preset("h100-sxm"), {"bf16", {gemm_point(1, 1, 1, "bf16")}}),
             "ridge");
       },
       989.5 / 3.35, 1e-9, "glossary 4 roofline: peak / bandwidth"},
      // --- glossary section 2 + 5: distributed, network ---
      {"ring all-reduce efficiency, N = 8",
       [] {
         return report_value(comm_report({1e9, 8, "nvlink-h100", 0}), "ring_efficiency");
       },
       1.75, 0, "glossary 2 '2(N-1)/N'"},
      {"ring all-reduce bandwidth term, 1 GB over 4 ranks at 50 GB/s (s)",
       [] { return ring_allreduce_s(1e9, 4, 50e9, 0); }, 2.0 * 3 / 4 * 1e9 / 50e9, 0,
       "Patarasuk & Yuan 2009: 2(N-1)/N x S / B"},
      {"IB NDR per direction (GB/s)", [] { return link_preset("ndr").bw / 1e9; }, 50, 0,
       "glossary 5 'RDMA 400 Gb/s (50 GB/s)'"},
      {"70B fp32 gradients per step (GB)", [] { return params("llama-2-70b") * 4 / 1e9; }, 280,
       0.02, "glossary 5 '70B grads ~ 280 GB/step, volume = 4 x params bytes'"},
      {"bandwidth to move 280 GB per 1 s step (Tb/s)",
       [] {
         return report_value(comm_report({280e9, 128, "ndr", 1.0}), "needed_bits_per_s") / 1e12;
       },
       2.24, 0, "glossary 5 'node needs ~2.2 Tb/s ~ 8 x 400G'"},
      {"1,024 GPUs: nodes", [] { return report_value(cluster_1024(), "nodes"); }, 128, 0,
       "glossary 5 '128 nodes x 8 GPUs'"},
      {"1,024 GPUs: leaf switches (64-port NDR, 1:1)",
       [] { return report_value(cluster_1024(), "leaf_switches"); }, 32, 0,
       "8 rails x ceil(128 nodes / 32 down ports)"},
      {"1,024 GPUs: spine (core) switches",
       [] { return report_value(cluster_1024(), "spine_switches"); }, 16, 0,
       "32 leaves x 32 up / 64 ports; glossary 5 says '~20 core switches' (a rough count)"},
      {"64-port NDR leaf downlink (Tb/s)",
       [] { return report_value(cluster_1024(), "leaf_down_bits") / 1e12; }, 12.8, 0,
       "glossary 5 '64-port NDR leaf ~ 12.8 Tb/s (raw 25.6)'"},
      {"per-node injection (Tb/s)",
       [] { return report_value(cluster_1024(), "injection_bits") / 1e12; }, 3.2, 0,
       "glossary 5 '8 x 400G IB per node'"},
      {"ZeRO-3 per-rank bytes = 16 x params / N",
       [] { return zero_state_bytes(70e9, TrainPrecision::mixed(), 3, 64).total(); },
       16 * 70e9 / 64, 1e-12, "glossary 2 '~ 16 B x params / N under ZeRO-3'"},
      // --- ZeRO paper (Rajbhandari et al. 2020), fig. 1: 7.5B, 64 GPUs; the paper rounds to
      // 0.1 GB, so the tolerance is 0.05 GB relative to each figure ---
      {"ZeRO baseline (GB)", [] { return zero_gb(0); }, 120, 0, "ZeRO paper fig. 1: 120 GB"},
      {"ZeRO stage 1 P_os (GB)", [] { return zero_gb(1); }, 31.4, 0.0016,
       "ZeRO paper fig. 1: 31.4 GB"},
      {"ZeRO stage 2 P_os+g (GB)", [] { return zero_gb(2); }, 16.6, 0.0031,
       "ZeRO paper fig. 1: 16.6 GB"},
      {"ZeRO stage 3 P_os+g+p (GB)", [] { return zero_gb(3); }, 1.9, 0.027,
       "ZeRO paper fig. 1: 1.9 GB"},
      // --- Korthikanti et al. 2022 (Megatron), Table 2, GPT-3 175B per layer ---
      {"activations, no parallelism: sbh(34 + 5as/h)",
       [] { return activation_bytes_per_layer(gpt3(1, false, Recompute::kNone)); },
       2048.0 * 12288 * (34 + 5.0 * 96 * 2048 / 12288), 1e-12, "Korthikanti et al. eq. (1)"},
      {"activations, TP 8: sbh(10 + 24/t + 5as/(ht))",
       [] { return activation_bytes_per_layer(gpt3(8, false, Recompute::kNone)); },
       2048.0 * 12288 * (10 + 3 + 10), 1e-12, "Korthikanti et al. eq. (2)"},
      {"activations, TP 8 + SP: sbh/t (34 + 5as/h)",
       [] { return activation_bytes_per_layer(gpt3(8, true, Recompute::kNone)); },
       2048.0 * 12288 / 8 * 114, 1e-12, "Korthikanti et al. eq. (4)"},
      {"activations, TP 8 + SP + selective: 34 sbh/t",
       [] { return activation_bytes_per_layer(gpt3(8, true, Recompute::kSelective)); },
       2048.0 * 12288 / 8 * 34, 1e-12, "Korthikanti et al. eq. (6)"},
      {"activations, full recomputation: 2sbh",
       [] { return activation_bytes_per_layer(gpt3(1, false, Recompute::kFull)); },
       2.0 * 2048 * 12288, 1e-12, "Korthikanti et al. sec. 4.3"},
      {"SP + selective saves ~5x vs TP alone (GPT-3, t = 8)",
       [] {
         return activation_bytes_per_layer(gpt3(8, false, Recompute::kNone)) /
                activation_bytes_per_layer(gpt3(8, true, Recompute::kSelective));
       },
       5, 0.1, "Korthikanti et al. abstract: 'reduce activation memory by 5x'"},
      // --- FLOPs conventions ---
      {"GPT-2 124M llm.c attention term 6LCT at T = 1024",
       [] {
         const ModelShape m = model_preset("gpt2");
         return 3 *
                token_flops(m, count_parameters(m), 1024, AttnConvention::kLlmc).attention_forward;
       },
       6.0 * 12 * 768 * 1024, 0, "llm.c train_gpt2.cu gpt2_estimate_mfu: 6*L*C*T"},
      {"GPT-2 124M PaLM attention term 12LHQT at T = 1024",
       [] {
         const ModelShape m = model_preset("gpt2");
         return token_flops(m, count_parameters(m), 1024, AttnConvention::kPalm).training() -
                6.0 * count_parameters(m).matmul_active();
       },
       12.0 * 12 * 12 * 64 * 1024, 1e-12, "PaLM paper App. B: 12*L*H*Q*T"},
      {"pipeline bubble (p - 1)/m, p 4, m 8",
       [] {
         TrainOptions o;
         o.tokens = 1e9;
         o.gpus = 4;
         o.pp = 4;
         o.grad_accum = 8;
         return report_value(
             train_report(model_preset("llama-2-7b"), hardware_preset("h100-sxm"), o), "bubble");
       },
       3.0 / 8, 0, "glossary 2 'bubble ~ (P-1)/M'"},
  };
}

TEST(Glossary, EveryFigureReproduces) {
  for (const Figure& f : figures()) {
    const double got = f.computed();
    const double err = f.expected == 0 ? std::fabs(got) : std::fabs(got / f.expected - 1);
    EXPECT_LE(err, f.rel_tol) << f.what << ": calc " << got << ", expected " << f.expected
                              << " (source: " << f.source << ")";
  }
}

}  // namespace
}  // namespace lmstack::calc
