// PCRE2-backed pre-tokenizer regex (see regex_splitter.h).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "lmstack/tokenizer/regex_splitter.h"

#include <pcre2.h>

#include "lmstack/core/error.h"

namespace lmstack::tokenizer {

namespace {
// Unicode White_Space = \p{Z} + U+0009..U+000D + U+0085 (Rust `regex` \s).
constexpr std::string_view kSpaceMembers = R"(\t-\r\x{85}\p{Z})";
}  // namespace

std::string translate_regex_for_pcre2(std::string_view p) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      ++i;
      if (e == 's') {
        out += in_class ? std::string(kSpaceMembers) : "[" + std::string(kSpaceMembers) + "]";
      } else if (e == 'S' && !in_class) {
        out += "[^" + std::string(kSpaceMembers) + "]";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];  // literal ']' first in class
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

struct RegexSplitter::Impl {
  pcre2_code* code = nullptr;
};

RegexSplitter::RegexSplitter(const std::string& pattern)
    : pattern_(pattern), impl_(std::make_unique<Impl>()) {
  const std::string translated = translate_regex_for_pcre2(pattern);
  int err = 0;
  PCRE2_SIZE offset = 0;
  impl_->code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &offset, nullptr);
  if (impl_->code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    throw_error<ConfigError>("pre-tokenizer regex '{}': {} at offset {}", pattern,
                             reinterpret_cast<const char*>(msg), offset);
  }
  pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter
}

RegexSplitter::~RegexSplitter() { pcre2_code_free(impl_->code); }

void RegexSplitter::find_all(std::string_view text,
                             std::vector<std::pair<uint32_t, uint32_t>>& out) const {
  struct MatchData {
    pcre2_match_data* md;
    pcre2_match_context* ctx;
    pcre2_jit_stack* stack;
    MatchData()
        : md(pcre2_match_data_create(16, nullptr)),
          ctx(pcre2_match_context_create(nullptr)),
          stack(pcre2_jit_stack_create(32 << 10, 8 << 20, nullptr)) {
      pcre2_jit_stack_assign(ctx, nullptr, stack);
    }
    ~MatchData() {
      pcre2_jit_stack_free(stack);
      pcre2_match_context_free(ctx);
      pcre2_match_data_free(md);
    }
  };
  thread_local MatchData data;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    const int rc = pcre2_match(impl_->code, subject, text.size(), pos, 0, data.md, data.ctx);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof(msg));
      throw_error<RequestError>("pre-tokenizer regex '{}' failed at byte {}: {}", pattern_, pos,
                                reinterpret_cast<const char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data.md);
    if (ov[1] > ov[0]) {
      out.emplace_back(static_cast<uint32_t>(ov[0]), static_cast<uint32_t>(ov[1]));
      pos = ov[1];
    } else {  // empty match: step over one character (a UTF-8 lead byte and its continuations)
      pos = ov[0] + 1;
      while (pos < text.size() && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) ++pos;
    }
  }
}

}  // namespace lmstack::tokenizer
