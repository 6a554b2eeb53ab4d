// Tokenizer::load: finds the tokenizer files behind a path and reads tokenizer_config.json and
// the chat templates beside it.
#include <algorithm>
#include <filesystem>
#include <map>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/core/gguf.h"
#include "lmstack/core/json.h"
#include "lmstack/tokenizer/chat_template.h"
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

// tokenizer_config.json's "chat_template": a string, or transformers' list of named templates
// [{"name": "default", "template": ...}, {"name": "tool_use", ...}].
std::map<std::string, std::string> config_chat_templates(const Json& c, const std::string& path) {
  std::map<std::string, std::string> out;
  const Json& tmpl = c.value("chat_template", Json());
  if (tmpl.is_string()) {
    out["default"] = tmpl.get<std::string>();
  } else if (tmpl.is_array()) {
    for (size_t i = 0; i < tmpl.size(); ++i) {
      const Json& e = tmpl[i];
      if (!e.is_object() || !e.contains("name") || !e["name"].is_string() ||
          !e.contains("template") || !e["template"].is_string())
        throw_error<FormatError>(
            "{}: chat_template[{}] must be {{\"name\": string, "
            "\"template\": string}}",
            path, i);
      out[e["name"].get<std::string>()] = e["template"].get<std::string>();
    }
  } else if (!tmpl.is_null()) {
    throw_error<FormatError>("{}: chat_template must be a string or a list of named templates",
                             path);
  }
  return out;
}

// The templates chat_template_files() finds, by name as transformers' from_pretrained reads
// them (tokenization_utils_base.py, 4.5x and 5.x): chat_template.jinja is "default" and
// additional_chat_templates/<name>.jinja is <name>; when any exists they replace the
// tokenizer_config.json entry entirely.
std::map<std::string, std::string> file_chat_templates(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (auto& [path, text] : chat_template_files(dir))
    out[path == "chat_template.jinja" ? "default" : fs::path(path).stem().string()] =
        std::move(text);
  return out;
}

// A processor's legacy chat_template.json ({"chat_template": "..."}): transformers'
// AutoProcessor uses it; lmstack takes it only when the tokenizer has no template (a model whose
// template ships only with its processor).
std::map<std::string, std::string> processor_chat_template(const std::string& dir) {
  const std::string path = path_join(dir, "chat_template.json");
  if (!file_exists(path)) return {};
  const Json j = read_json_file(path);
  if (!j.is_object() || !j.contains("chat_template") || !j["chat_template"].is_string())
    throw_error<FormatError>("{}: expected {{\"chat_template\": string}}", path);
  return {{"default", j["chat_template"].get<std::string>()}};
}

void set_chat_templates(std::map<std::string, std::string> templates, TokenizerImpl& t) {
  auto it = templates.find("default");
  t.chat_template = it != templates.end() ? it->second : "";
  // One template named "default" is transformers' plain-string form; anything else its dict.
  if (!(templates.size() == 1 && it != templates.end())) t.chat_templates = std::move(templates);
}

void apply_tokenizer_config(const std::string& dir, TokenizerImpl& t) {
  const std::string path = path_join(dir, "tokenizer_config.json");
  std::map<std::string, std::string> templates;
  if (file_exists(path)) {
    const Json c = read_json_file(path);
    if (!c.is_object()) throw_error<FormatError>("{}: expected a JSON object", path);
    if (c.contains("bos_token")) t.bos_token = token_text(c["bos_token"]);
    if (c.contains("eos_token")) t.eos_token = token_text(c["eos_token"]);
    t.add_bos_token = optional<bool>(c, "add_bos_token", t.add_bos_token, path);
    templates = config_chat_templates(c, path);
  }
  if (auto files = file_chat_templates(dir); !files.empty()) templates = std::move(files);
  if (templates.empty()) templates = processor_chat_template(dir);
  set_chat_templates(std::move(templates), t);
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

std::vector<std::pair<std::string, std::string>> chat_template_files(const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> out;
  const std::string jinja = path_join(dir, "chat_template.jinja");
  if (file_exists(jinja)) out.emplace_back("chat_template.jinja", read_file(jinja));
  const std::string extra = path_join(dir, "additional_chat_templates");
  if (is_directory(extra))
    for (const auto& e : fs::directory_iterator(extra))
      if (e.path().extension() == ".jinja")
        out.emplace_back("additional_chat_templates/" + e.path().filename().string(),
                         read_file(e.path().string()));
  std::sort(out.begin(), out.end());
  return out;
}

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
