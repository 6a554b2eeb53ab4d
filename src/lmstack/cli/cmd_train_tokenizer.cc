// `lmstack train-tokenizer`: byte-level BPE training (bpe_trainer.h) to a Hugging Face
// tokenizer.json, then a check that lmstack loads it and what it compresses to. `--out DIR`
// writes DIR/tokenizer.json and DIR/tokenizer_config.json (EOS/BOS/PAD among --special, by
// --eos/--bos/--pad or pick_special_roles' rule), a directory AutoTokenizer, prepare-data and
// init-model load; `--out FILE.json` writes the tokenizer.json alone (no config beside it, so
// other files in that folder are not affected).
#include <cstdio>

#include "lmstack/cli/command.h"
#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/tokenizer/bpe_trainer.h"
#include "lmstack/tokenizer/tokenizer.h"

namespace lmstack::cli {
namespace {

struct TrainTokenizerOptions {
  std::vector<std::string> inputs, specials;
  tokenizer::BpeTrainerOptions trainer;
  tokenizer::TokenizerConfigOptions config;
  std::string out;
};

std::string or_none(const std::string& token) { return token.empty() ? "none" : token; }

int run(TrainTokenizerOptions& o) {
  std::vector<std::string> texts;
  size_t bytes = 0;
  for (const std::string& f : o.inputs) {
    texts.push_back(read_file(f));
    bytes += texts.back().size();
  }
  for (const std::string& s : o.specials)  // "--special a,b" and "--special a --special b"
    for (size_t pos = 0; pos <= s.size();) {
      const size_t comma = std::min(s.find(',', pos), s.size());
      if (comma > pos) o.trainer.special_tokens.push_back(s.substr(pos, comma - pos));
      pos = comma + 1;
    }
  o.trainer.progress = [](int done, int total) {
    std::fprintf(stderr, "\rtrain-tokenizer: %d / %d merges", done, total);
  };
  tokenizer::BpeTrainerStats st;
  const tokenizer::TrainedTokenizer trained =
      tokenizer::train_bpe_tokenizer(texts, o.trainer, o.config, &st);
  std::fprintf(stderr, "\n");
  const bool to_dir = o.out.size() < 5 || o.out.substr(o.out.size() - 5) != ".json";
  if (to_dir) {
    make_directories(o.out);
    write_file_atomic(path_join(o.out, "tokenizer.json"), trained.tokenizer_json);
    write_file_atomic(path_join(o.out, "tokenizer_config.json"),
                      trained.tokenizer_config.dump(2) + "\n");
  } else {
    write_file_atomic(o.out, trained.tokenizer_json);
  }
  const auto tok = tokenizer::Tokenizer::load(o.out);
  size_t tokens = 0;
  for (const std::string& t : texts)
    tokens += tok.encode(t, tokenizer::SpecialMode::kAsText).size();
  std::printf("input        %zu file(s), %.2f MB, %lld words (%lld distinct)\n", texts.size(),
              bytes / 1e6, static_cast<long long>(st.num_words),
              static_cast<long long>(st.num_unique_words));
  std::printf("vocabulary   %d tokens (256 bytes + %d merges + %zu special)%s\n", st.vocab_size,
              st.num_merges, o.trainer.special_tokens.size(),
              st.vocab_size < o.trainer.vocab_size ? " - pairs ran out before the size asked" : "");
  std::printf("time         %.2f s (%.2f MB/s)\n", st.seconds, bytes / 1e6 / st.seconds);
  std::printf("compression  %.3f bytes/token on the training text (%zu tokens)\n",
              tokens ? double(bytes) / tokens : 0.0, tokens);
  std::printf("specials     eos %s, bos %s, pad %s%s\n", or_none(trained.roles.eos).c_str(),
              or_none(trained.roles.bos).c_str(), or_none(trained.roles.pad).c_str(),
              to_dir ? "" : " (not written: --out DIR writes them to tokenizer_config.json)");
  std::printf("wrote        %s\n", o.out.c_str());
  return 0;
}

std::function<int()> setup(CLI::App& app) {
  auto o = std::make_shared<TrainTokenizerOptions>();
  app.add_option("--input", o->inputs, "training text files")->required()->expected(1, -1);
  app.add_option("--vocab-size", o->trainer.vocab_size,
                 "vocabulary size: 256 bytes + merges + special tokens")
      ->required()
      ->check(CLI::Range(256, 1 << 24));
  app.add_option("--pattern", o->trainer.pattern,
                 "pre-tokenizer: gpt2 (default), cl100k, o200k, llama3")
      ->check(CLI::IsMember({"gpt2", "cl100k", "o200k", "llama3"}));
  app.add_option("--special", o->specials,
                 "special tokens, comma-separated (ids after the merges)");
  app.add_option("--min-frequency", o->trainer.min_frequency,
                 "never merge a pair seen fewer times (default 2)");
  app.add_option("--eos", o->config.roles.eos,
                 "the EOS token among --special (default: <|endoftext|>, </s>, ... else the "
                 "first special)");
  app.add_option("--bos", o->config.roles.bos,
                 "the BOS token among --special (default: <s>, <|begin_of_text|>, ... else EOS)");
  app.add_option("--pad", o->config.roles.pad,
                 "the PAD token among --special (default: <pad>, <|pad|>, ... else none)");
  app.add_option("--out", o->out,
                 "output directory (tokenizer.json + tokenizer_config.json), or a FILE.json "
                 "for the tokenizer.json alone")
      ->required();
  return [o] { return run(*o); };
}

const RegisterCommand kRegister{
    {"train-tokenizer", "train a byte-level BPE tokenizer and write a tokenizer.json",
     "  lmstack train-tokenizer --input corpus.txt --vocab-size 32000 --special '</s>' --out tok/\n"
     "  lmstack train-tokenizer --input corpus.txt --vocab-size 32000 --out tokenizer.json\n"
     "  lmstack train-tokenizer --input a.txt b.txt --vocab-size 8192 --pattern o200k \\\n"
     "      --special '<|endoftext|>,<|im_start|>,<|im_end|>' --out tok.json",
     setup}};

}  // namespace
}  // namespace lmstack::cli
