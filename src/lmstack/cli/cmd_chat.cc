// `lmstack chat`: an interactive terminal chat. The conversation is rendered through the
// model's chat template every turn; the Generator reuses the KV of the unchanged prefix, so
// only the new turn is prefilled. /reset clears the history, /stats shows speed and context
// use, Ctrl-C stops a reply, Ctrl-D leaves.
#include <cstdio>
#include <iostream>

#include "lmstack/cli/command.h"
#include "lmstack/cli/generate_report.h"
#include "lmstack/cli/model_session.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/model/generate.h"
#include "lmstack/tokenizer/chat_template.h"

namespace lmstack::cli {
namespace {

struct ChatOptions {
  std::string model, system;
  int threads = 1, ctx = 2048;
  std::string kv_dtype = "f32";
  model::SamplingParams sampling;
};

struct ChatStats {
  double last_prefill_tok_s = 0, last_decode_tok_s = 0;
  int last_cached = 0;
};

void print_stats(const ChatStats& st, const model::Generator& gen) {
  std::printf(
      "[stats] prefill %.1f tok/s (%d prompt tokens reused from the KV cache), decode "
      "%.1f tok/s; context %d / %d tokens\n",
      st.last_prefill_tok_s, st.last_cached, st.last_decode_tok_s, gen.cached_tokens(),
      gen.max_context());
}

int run_chat(ChatOptions o) {
  ModelSession s = load_session(o.model);
  if (tokenizer::chat_template_for(s.tokenizer, false).empty())
    throw_error<ConfigError>("{}: the model has no chat_template; use `lmstack generate`",
                             s.model.path);
  const auto tmpl =
      tokenizer::ChatTemplate::parse(tokenizer::chat_template_for(s.tokenizer, false));
  ThreadPool pool(o.threads);
  repack_for_decode(s, pool);
  o.ctx = std::min(o.ctx, s.model.config.max_position);
  model::Generator gen(s.model.config, s.model.weights, pool, o.ctx, 16,
                       model::parse_kv_dtype(o.kv_dtype));
  Json messages = Json::array();
  if (!o.system.empty()) messages.push_back({{"role", "system"}, {"content", o.system}});
  const Json initial = messages;
  ChatStats stats;
  install_interrupt_handler();
  std::printf(
      "lmstack chat: %s (%d-token context, %s KV). /reset, /stats, Ctrl-C stops a reply, "
      "Ctrl-D quits.\n",
      s.model.path.c_str(), o.ctx, o.kv_dtype.c_str());
  std::string line;
  while (true) {
    std::printf("> ");
    std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;
    if (line == "/reset") {
      messages = initial;
      gen.reset();
      std::printf("[history cleared]\n");
      continue;
    }
    if (line == "/stats") {
      print_stats(stats, gen);
      continue;
    }
    if (line.empty()) continue;
    messages.push_back({{"role", "user"}, {"content", line}});
    const std::string rendered = tokenizer::render_chat(
        tmpl, messages, true, s.tokenizer.bos_token(), s.tokenizer.eos_token());
    const auto prompt = s.tokenizer.encode(rendered, tokenizer::SpecialMode::kAllow);
    model::SamplingParams sp = o.sampling;
    sp.max_tokens = std::min(sp.max_tokens, o.ctx - static_cast<int>(prompt.size()));
    if (sp.max_tokens <= 0) {
      std::printf("[the conversation fills the %d-token context: /reset]\n", o.ctx);
      messages.erase(messages.end() - 1);
      continue;
    }
    tokenizer::Tokenizer::IncrementalDecoder detok(s.tokenizer);
    model::GenerateCallbacks cb;
    cb.detokenize = [&](int32_t id) { return detok.push(id); };
    cb.on_token = [&](const model::GeneratedToken& t) {
      std::fputs(t.text.c_str(), stdout);
      std::fflush(stdout);
      return !interrupted();
    };
    clear_interrupt();
    model::GenerateResult r = gen.generate(prompt, sp, s.eos_ids, cb);
    r.text += detok.flush();
    std::printf("%s\n", r.finish_reason == "cancelled" ? " [stopped]" : "");
    messages.push_back({{"role", "assistant"}, {"content", r.text}});
    stats.last_cached = r.cached_prompt_tokens;
    stats.last_prefill_tok_s =
        (r.prompt_tokens - r.cached_prompt_tokens) / std::max(r.prefill_seconds, 1e-9);
    stats.last_decode_tok_s =
        r.tokens.size() > 1 ? (r.tokens.size() - 1) / std::max(r.decode_seconds, 1e-9) : 0;
  }
  std::printf("\n");
  return 0;
}

std::function<int()> setup(CLI::App& app) {
  auto o = std::make_shared<ChatOptions>();
  o->sampling.temperature = 0.7f;
  o->sampling.top_p = 0.95f;
  o->sampling.max_tokens = 512;
  add_model_option(app, o->model);
  app.add_option("--system", o->system, "system prompt");
  app.add_option("--ctx", o->ctx, "context window in tokens")->capture_default_str();
  add_kv_dtype_option(app, o->kv_dtype);
  app.add_option("--max-tokens", o->sampling.max_tokens, "reply length limit")
      ->capture_default_str();
  app.add_option("--temperature", o->sampling.temperature, "0 = greedy")->capture_default_str();
  app.add_option("--top-p", o->sampling.top_p, "nucleus mass")->capture_default_str();
  app.add_option("--top-k", o->sampling.top_k, "top-k (0 = off)");
  app.add_option("--seed", o->sampling.seed, "sampling seed");
  add_threads_option(app, o->threads);
  return [o] { return run_chat(*o); };
}

const RegisterCommand kRegister{
    {"chat", "interactive terminal chat through the chat template",
     "  lmstack chat\n  lmstack chat -m DIR --system 'Be brief.' --temperature 0", setup}};

}  // namespace
}  // namespace lmstack::cli
