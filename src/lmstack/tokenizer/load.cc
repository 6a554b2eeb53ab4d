// Tokenizer::load: finds the tokenizer files behind a path and reads tokenizer_config.json.
#include <filesystem>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/core/gguf.h"
#include "lmstack/core/json.h"
#include "lmstack/tokenizer/tokenizer_impl.h"

namespace lmstack::tokenizer {
namespace {

namespace fs = std::filesystem;

// A token field of tokenizer_config.json: "text", {"content": "text", ...} or null.
std::string token_text(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return "";
}

void apply_tokenizer_config(const std::string& dir, TokenizerImpl& t) {
  const std::string path = path_join(dir, "tokenizer_config.json");
  if (file_exists(path)) {
    const Json c = read_json_file(path);
    if (!c.is_object()) throw_error<FormatError>("{}: expected a JSON object", path);
    if (c.contains("bos_token")) t.bos_token = token_text(c["bos_token"]);
    if (c.contains("eos_token")) t.eos_token = token_text(c["eos_token"]);
    t.add_bos_token = optional<bool>(c, "add_bos_token", t.add_bos_token, path);
    const Json& tmpl = c.value("chat_template", Json());
    if (tmpl.is_string()) {
      t.chat_template = tmpl.get<std::string>();
    } else if (tmpl.is_array()) {  // [{"name": "default", "template": ...}, ...]
      for (const Json& e : tmpl)
        if (e.is_object() && (t.chat_template.empty() || e.value("name", "") == "default"))
          t.chat_template = e.value("template", "");
    }
  }
  const std::string jinja = path_join(dir, "chat_template.jinja");
  if (t.chat_template.empty() && file_exists(jinja)) t.chat_template = read_file(jinja);
}

// The encoding a rank file stands for: the hint, else its name (cl100k_base.tiktoken), else
// Meta's tokenizer.model convention (Llama 3).
std::string encoding_for(const std::string& path, const std::string& hint) {
  if (!hint.empty()) return hint;
  const std::string stem = fs::path(path).stem().string();
  if (stem == "tokenizer") return "llama3";
  return stem;
}

std::shared_ptr<TokenizerImpl> load_rank_file(const std::string& path, const std::string& hint) {
  const std::string data = read_file(path);
  if (!data.empty() && data.find('\n') > 4096)  // a SentencePiece protobuf, not tiktoken text
    throw_error<FormatError>(
        "{}: not a tiktoken rank file (a SentencePiece .model? load the "
        "model's tokenizer.json instead)",
        path);
  return build_tiktoken(data, encoding_for(path, hint), path);
}

std::shared_ptr<TokenizerImpl> load_directory(const std::string& dir, const std::string& hint) {
  const std::string json = path_join(dir, "tokenizer.json");
  if (file_exists(json)) return build_hf_json(read_file(json), json);
  const std::string enc = path_join(dir, "encoder.json"), bpe = path_join(dir, "vocab.bpe");
  if (file_exists(enc) && file_exists(bpe)) return build_gpt2(read_file(enc), read_file(bpe), dir);
  std::vector<std::string> rank_files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".tiktoken" || e.path().filename() == "tokenizer.model")
      rank_files.push_back(e.path().string());
  const std::string meta = path_join(dir, "original/tokenizer.model");  // Meta's layout
  if (file_exists(meta)) rank_files.push_back(meta);
  if (rank_files.size() == 1) return load_rank_file(rank_files[0], hint);
  throw_error<IoError>(
      "{}: {} (looked for tokenizer.json, encoder.json + vocab.bpe, "
      "tokenizer.model, *.tiktoken)",
      dir, rank_files.empty() ? "no tokenizer found" : "several rank files");
}

}  // namespace

Tokenizer Tokenizer::load(const std::string& path, const std::string& encoding_hint) {
  std::shared_ptr<TokenizerImpl> t;
  std::string dir;
  if (is_directory(path)) {
    t = load_directory(path, encoding_hint);
    dir = path;
  } else {
    if (!file_exists(path)) throw_error<IoError>("{}: no such file or directory", path);
    dir = fs::path(path).parent_path().string();
    if (dir.empty()) dir = ".";
    const std::string name = fs::path(path).filename().string();
    if (fs::path(path).extension() == ".gguf")
      return from_gguf(GgufFile(path));  // everything is in the file's metadata
    if (name == "encoder.json" || name == "vocab.bpe")
      t = load_directory(dir, encoding_hint);
    else if (fs::path(path).extension() == ".json")
      t = build_hf_json(read_file(path), path);
    else
      t = load_rank_file(path, encoding_hint);
  }
  apply_tokenizer_config(dir, *t);
  return Tokenizer(std::move(t));
}

}  // namespace lmstack::tokenizer
