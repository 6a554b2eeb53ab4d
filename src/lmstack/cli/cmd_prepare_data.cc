// `lmstack prepare-data`: tokenizes text files into token shards (docs/formats/shards.md) for
// `lmstack train`. Each input file, or each piece between separator lines (--split-on, e.g.
// "%" for fortune files), is one document; every document is followed by the tokenizer's EOS
// (tokenizer_config.json's eos_token, or --eos TOKEN).
// A seeded hash of the document index sends about --val-fraction of them to the val split.
#include <algorithm>
#include <cstdio>

#include "lmstack/cli/command.h"
#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/tokenizer/tokenizer.h"
#include "lmstack/train/data.h"

namespace lmstack::cli {
namespace {

struct PrepareOptions {
  std::string tokenizer, out, split_on, eos;
  std::vector<std::string> inputs;
  double val_fraction = 0.05;
  int64_t shard_tokens = 100'000'000;
  int threads = 1;
};

std::vector<std::string> split_documents(const std::string& text, const std::string& separator) {
  if (separator.empty()) return {text};
  std::vector<std::string> docs;
  std::string cur;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    if (line == separator) {
      if (!cur.empty()) docs.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += line + "\n";
    }
    start = end + 1;
  }
  if (!cur.empty()) docs.push_back(std::move(cur));
  return docs;
}

std::vector<std::string> write_split(const PrepareOptions& o, const std::string& split,
                                     const std::vector<int32_t>& tokens, int64_t vocab) {
  std::vector<std::string> names;
  for (int64_t begin = 0, i = 0; begin < static_cast<int64_t>(tokens.size());
       begin += o.shard_tokens, ++i) {
    const int64_t end =
        std::min<int64_t>(begin + o.shard_tokens, static_cast<int64_t>(tokens.size()));
    names.push_back(fmt::format("{}-{:05d}.bin", split, i));
    train::write_shard(path_join(o.out, names.back()),
                       {tokens.begin() + begin, tokens.begin() + end}, vocab);
  }
  return names;
}

int run(const PrepareOptions& o) {
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(o.tokenizer);
  const std::optional<int32_t> eos = o.eos.empty() ? tok.eos_id() : tok.token_id(o.eos);
  if (!eos && !o.eos.empty())
    throw_error<ConfigError>("{}: --eos '{}' is not a token of this tokenizer", o.tokenizer, o.eos);
  if (!eos)
    throw_error<ConfigError>(
        "{}: the tokenizer has no EOS token to separate documents (tokenizer_config.json "
        "names none): give --eos TOKEN, or train with `train-tokenizer --out DIR`, which "
        "writes one",
        o.tokenizer);
  std::vector<std::string> docs;
  for (const std::string& path : o.inputs)
    for (std::string& d : split_documents(read_file(path), o.split_on))
      docs.push_back(std::move(d));
  ThreadPool pool(o.threads);
  const auto encoded = tok.encode_batch(pool, docs, tokenizer::SpecialMode::kAsText);
  std::vector<int32_t> train_tokens, val_tokens;
  const uint64_t threshold = static_cast<uint64_t>(o.val_fraction * 1e6);
  for (size_t i = 0; i < encoded.size(); ++i) {
    uint64_t state = i;
    const bool val = train::splitmix64(state) % 1000000 < threshold;
    std::vector<int32_t>& dst = val ? val_tokens : train_tokens;
    dst.insert(dst.end(), encoded[i].begin(), encoded[i].end());
    dst.push_back(*eos);
  }
  if (val_tokens.empty() && o.val_fraction > 0) {  // one document: hold out its tail
    const size_t n = static_cast<size_t>(static_cast<double>(train_tokens.size()) * o.val_fraction);
    val_tokens.assign(train_tokens.end() - static_cast<int64_t>(n), train_tokens.end());
    train_tokens.resize(train_tokens.size() - n);
  }
  make_directories(o.out);
  train::DataManifest m;
  m.vocab_size = tok.vocab_size();
  m.eos_id = *eos;
  m.tokenizer = o.tokenizer;
  m.train_shards = write_split(o, "train", train_tokens, m.vocab_size);
  m.val_shards = write_split(o, "val", val_tokens, m.vocab_size);
  m.train_tokens = static_cast<int64_t>(train_tokens.size());
  m.val_tokens = static_cast<int64_t>(val_tokens.size());
  train::write_data_manifest(o.out, m);
  std::printf(
      "%zu documents -> %lld train tokens (%zu shards), %lld val tokens (%zu shards) in %s\n",
      docs.size(), static_cast<long long>(m.train_tokens), m.train_shards.size(),
      static_cast<long long>(m.val_tokens), m.val_shards.size(), o.out.c_str());
  return 0;
}

std::function<int()> setup(CLI::App& app) {
  auto o = std::make_shared<PrepareOptions>();
  app.add_option("--tokenizer", o->tokenizer, "tokenizer: a model directory or tokenizer.json")
      ->required();
  app.add_option("--input", o->inputs, "text files (UTF-8)")->required()->expected(1, -1);
  app.add_option("--out", o->out, "output directory (shards + data.json)")->required();
  app.add_option("--val-fraction", o->val_fraction, "share of documents held out for validation")
      ->check(CLI::Range(0.0, 0.5));
  app.add_option("--eos", o->eos,
                 "the token that ends each document (default: the tokenizer's EOS)");
  app.add_option("--split-on", o->split_on,
                 "a line that separates documents inside a file (e.g. %)");
  app.add_option("--shard-tokens", o->shard_tokens, "tokens per shard file")
      ->check(CLI::PositiveNumber);
  add_threads_option(app, o->threads);
  return [o] { return run(*o); };
}

const RegisterCommand kRegister{
    {"prepare-data", "tokenize text into training shards (docs/formats/shards.md)",
     "  lmstack prepare-data --tokenizer models/default --input book.txt --out data/book\n"
     "  lmstack prepare-data --tokenizer tok.json --input /usr/share/games/fortunes/tang300 "
     "--split-on % --val-fraction 0.05 --out data/poems",
     setup}};

}  // namespace
}  // namespace lmstack::cli
