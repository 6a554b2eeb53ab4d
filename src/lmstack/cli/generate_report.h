// The end-of-run summary of generate/chat: speed against this machine's limits (decode vs
// the memory-bandwidth roofline, prefill vs peak FLOP/s) and bytes held against calc's
// prediction, plus the --trace printers and Ctrl-C handling shared by generate and chat.
#pragma once

#include <string>
#include <vector>

#include "lmstack/cli/model_session.h"
#include "lmstack/core/json.h"
#include "lmstack/model/generate.h"

namespace lmstack::cli {

struct GenerateReport {
  int prompt_tokens = 0, generated_tokens = 0, threads = 0;
  double prefill_tok_s = 0, decode_tok_s = 0;
  double decode_bytes_per_token = 0;  // weights + KV read per decode step (mean context)
  double decode_gbs = 0;              // achieved: bytes per token x tok/s
  double dram_gbs = 0, llc_gbs = 0, llc_bytes = 0;
  double prefill_gflops = 0, peak_gflops = 0;
  double weights_bytes = 0, kv_bytes = 0;          // held (ledger)
  double weights_predicted = 0, kv_predicted = 0;  // calc
  // Weight bytes one decode token read (MoE: only the chosen experts, as counted by the
  // forward) and calc's active-parameter figure for them.
  double decode_weight_bytes = 0, decode_weight_predicted = 0;
  bool moe = false;
  std::string weights_dtype, finish_reason;
  std::string kv_dtype = "f32";  // f32 | bf16 | int8 (--kv-dtype)
  int kv_context = 0;
};

GenerateReport make_generate_report(const ModelSession& s, const model::Generator& gen,
                                    const model::GenerateResult& r, const MachineReport& machine,
                                    int threads);
void print_generate_report(const GenerateReport& r);
Json generate_report_json(const GenerateReport& r, const model::GenerateResult& result);
// Writes lmstack.run.v1 metrics (docs/formats/run_metrics.md) for `calc check`.
void write_run_metrics_file(const std::string& path, const ModelSession& s,
                            const GenerateReport& r);

void print_trace_tokens(const tokenizer::Tokenizer& tok, const std::vector<int32_t>& ids);
void print_trace_line(const model::LayerTrace& t);
void print_trace_top5(const tokenizer::Tokenizer& tok, const std::vector<float>& logits);

// SIGINT sets a flag instead of killing the process, so a reply can stop cleanly.
void install_interrupt_handler();
bool interrupted();
void clear_interrupt();

}  // namespace lmstack::cli
