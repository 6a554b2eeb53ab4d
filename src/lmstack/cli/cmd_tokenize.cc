// `lmstack tokenize`: token ids, tokens or counts of a text or file, and the statistics that
// check the glossary's rules of thumb (characters and words per token, tokens per CJK char).
#include <cstdio>

#include "lmstack/cli/command.h"
#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/core/json.h"
#include "lmstack/tokenizer/text_stats.h"
#include "lmstack/tokenizer/tokenizer.h"
#include "lmstack/tokenizer/unicode.h"

namespace lmstack::cli {
namespace {

using tokenizer::SpecialMode;
using tokenizer::TextStats;
using tokenizer::Tokenizer;

struct TokenizeOptions {
  std::string tokenizer, encoding, text, file, format = "ids", special = "error";
  bool lines = false, stats = false, json = false;
};

// A token's bytes as a quoted string with C escapes (\n, \t, \", \\, \xNN for bytes that are
// not printable ASCII or part of valid UTF-8).
std::string escaped_token(std::string_view bytes) {
  std::string out = "\"";
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  for (size_t i = 0; i < bytes.size();) {
    const tokenizer::Utf8Char c = tokenizer::decode_utf8(p + i, bytes.size() - i);
    const char ch = bytes[i];
    if (ch == '\n')
      out += "\\n";
    else if (ch == '\r')
      out += "\\r";
    else if (ch == '\t')
      out += "\\t";
    else if (ch == '"' || ch == '\\')
      out += std::string("\\") + ch;
    else if (c.cp == tokenizer::kInvalidCodePoint || c.cp < 0x20 || c.cp == 0x7F)
      out += fmt::format("\\x{:02x}", p[i]);
    else
      out.append(bytes.substr(i, c.len));
    i += c.len;
  }
  return out + "\"";
}

std::string render(const Tokenizer& tok, const std::vector<int32_t>& ids, const std::string& fmt_) {
  if (fmt_ == "count") return std::to_string(ids.size());
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ' ';
    out += fmt_ == "tokens" ? escaped_token(tok.token_bytes(ids[i])) : std::to_string(ids[i]);
  }
  return out;
}

Json stats_json(const TextStats& s) {
  return {{"bytes", s.bytes},
          {"chars", s.chars},
          {"words", s.words},
          {"tokens", s.tokens},
          {"cjk_chars", s.cjk_chars},
          {"bytes_per_token", s.bytes_per_token()},
          {"chars_per_token", s.chars_per_token()},
          {"words_per_token", s.words_per_token()},
          {"tokens_per_cjk_char", s.tokens_per_cjk_char()}};
}

void print_stats(const TextStats& s) {
  std::printf("bytes            %lld\n", static_cast<long long>(s.bytes));
  std::printf("characters       %lld\n", static_cast<long long>(s.chars));
  std::printf("words            %lld\n", static_cast<long long>(s.words));
  std::printf("tokens           %lld\n", static_cast<long long>(s.tokens));
  std::printf("bytes/token      %.3f\n", s.bytes_per_token());
  std::printf("chars/token      %.3f   (rule of thumb: ~4 for English)\n", s.chars_per_token());
  std::printf("words/token      %.3f   (rule of thumb: ~0.75 for English)\n", s.words_per_token());
  if (s.cjk_chars)
    std::printf("tokens/CJK char  %.3f   (rule of thumb: 1-2 for Chinese; %lld CJK chars)\n",
                s.tokens_per_cjk_char(), static_cast<long long>(s.cjk_chars));
  else
    std::printf("tokens/CJK char  -       (no CJK characters)\n");
}

SpecialMode special_mode(const std::string& s) {
  return s == "allow"  ? SpecialMode::kAllow
         : s == "text" ? SpecialMode::kAsText
                       : SpecialMode::kError;
}

int run(const TokenizeOptions& o) {
  const Tokenizer tok = Tokenizer::load(o.tokenizer, o.encoding);
  const std::string input = o.file.empty() ? o.text : read_file(o.file);
  if (const size_t bad = tokenizer::count_invalid_utf8(input))
    std::fprintf(stderr,
                 "lmstack: note: %s has %zu invalid UTF-8 byte(s), the first at byte %zu; they are "
                 "encoded as raw bytes (%s), so decoding gives the input back exactly\n",
                 o.file.empty() ? "--text" : o.file.c_str(), bad,
                 tokenizer::first_invalid_utf8(input),
                 tok.is_byte_level() ? "byte-level BPE" : "byte fallback");
  std::vector<std::string> parts;
  if (o.lines) {
    for (size_t pos = 0; pos < input.size();) {
      const size_t eol = input.find('\n', pos);
      const size_t end = eol == std::string::npos ? input.size() : eol + 1;
      parts.push_back(input.substr(pos, end - pos));
      pos = end;
    }
  } else {
    parts.push_back(input);
  }
  TextStats total;
  Json lines_json = Json::array();
  for (const std::string& part : parts) {
    const std::vector<int32_t> ids = tok.encode(part, special_mode(o.special));
    if (o.stats) accumulate(total, tokenizer::text_stats(tok, ids));
    if (o.json) {
      Json j = {{"tokens", ids.size()}};
      if (o.format == "ids") j["ids"] = ids;
      if (o.format == "tokens") {
        Json t = Json::array();
        for (int32_t id : ids) t.push_back(tokenizer::replace_invalid_utf8(tok.token_bytes(id)));
        j["token_text"] = t;
        j["ids"] = ids;
      }
      lines_json.push_back(j);
    } else {
      std::printf("%s\n", render(tok, ids, o.format).c_str());
    }
  }
  if (o.json) {
    Json out = o.lines ? Json{{"lines", lines_json}} : lines_json[0];
    out["tokenizer"] = tok.name();
    if (o.stats) out["stats"] = stats_json(total);
    std::printf("%s\n", out.dump().c_str());
  } else if (o.stats) {
    print_stats(total);
  }
  return 0;
}

std::function<int()> setup(CLI::App& app) {
  auto o = std::make_shared<TokenizeOptions>();
  app.add_option("--tokenizer", o->tokenizer,
                 "tokenizer.json, model directory, GPT-2 directory (encoder.json + vocab.bpe) or "
                 ".tiktoken file")
      ->required();
  app.add_option("--encoding", o->encoding,
                 "encoding of a .tiktoken file (gpt2, r50k_base, cl100k_base, o200k_base, "
                 "llama3; default: from the file name)");
  auto* text = app.add_option("--text", o->text, "text to tokenize");
  auto* file = app.add_option("--file", o->file,
                              "file to tokenize (bytes as they are: invalid UTF-8 is encoded "
                              "byte by byte and noted on stderr)");
  text->excludes(file);
  app.add_option("--format", o->format, "ids (default), tokens (quoted bytes) or count")
      ->check(CLI::IsMember({"ids", "tokens", "count"}));
  app.add_flag("--lines", o->lines, "encode each line (with its newline) separately");
  app.add_option("--special", o->special,
                 "special-token strings in the input: error (default), allow, text")
      ->check(CLI::IsMember({"allow", "text", "error"}));
  app.add_flag("--stats", o->stats,
               "print bytes, characters, words, tokens, bytes/token, words/token, tokens/CJK char");
  app.add_flag("--json", o->json, "print one JSON object");
  return [o, text, file] {
    if (text->count() == 0 && file->count() == 0)  // --text '' encodes the empty string
      throw_error<RequestError>("tokenize: give --text or --file");
    return run(*o);
  };
}

const RegisterCommand kRegister{
    {"tokenize", "encode text with a BPE tokenizer (tiktoken, GPT-2, tokenizer.json)",
     "  lmstack tokenize --tokenizer cl100k_base.tiktoken --text 'Hello world'\n"
     "  lmstack tokenize --tokenizer models/llama3 --file a.txt --format count --stats\n"
     "  lmstack tokenize --tokenizer gpt2/ --file a.txt --lines --format tokens\n"
     "  lmstack tokenize --tokenizer o200k_base.tiktoken --text '<|endoftext|>' --special allow",
     setup}};

}  // namespace
}  // namespace lmstack::cli
