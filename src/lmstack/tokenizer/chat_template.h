// Chat templates: renders the Jinja template of a Hugging Face tokenizer_config.json
// ("chat_template") into the prompt text a model expects, exactly as transformers'
// apply_chat_template does (jinja2 ImmutableSandboxedEnvironment with trim_blocks and
// lstrip_blocks, plus raise_exception, strftime_now and HF's tojson). `serve` and `chat`
// build prompts with it. Reference: tools/ref/gen_chat_templates.py renders the same
// templates with Python jinja2; tests compare byte for byte.
//
// Supported: text, {{ }}, {# #}, whitespace control (- and +), if/elif/else, for (with
// else, `if` filter, tuple unpacking, loop.index/index0/revindex/revindex0/first/last/length/
// previtem/nextitem/cycle, break/continue), set (name, tuple, ns.attr, block set), macro
// (positional/keyword parameters with defaults), filter blocks, {% generation %}; literals,
// lists, tuples, dicts, attribute/subscript/slice access, arithmetic, ~, comparisons (chained),
// and/or/not, in/not in, inline if/else; filters abs attr capitalize count d default e escape
// first float indent int items join last length list lower map max min reject rejectattr
// replace reverse round safe select selectattr sort string sum title tojson trim unique upper
// wordcount; jinja2's tests; str methods strip lstrip rstrip split startswith endswith upper
// lower title capitalize replace find count splitlines join isdigit; dict get items keys
// values; globals range namespace dict raise_exception strftime_now.
// Unsupported (FormatError at parse, or RequestError at render, naming the construct):
// other tags (raw, include, import, extends, block, call, with, autoescape, ...), recursive
// loops, macro varargs/caller, *args/**kwargs, other filters, tests and methods, `%` string
// formatting, non-string dict keys. upper/lower/title/capitalize change ASCII letters only;
// integers are 64-bit. Dicts from a Json context iterate in sorted key order (see the
// ordered_json overload).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lmstack/core/json.h"

namespace lmstack::tokenizer {

namespace jinja {
struct Stmt;
}
class Tokenizer;

class ChatTemplate {
 public:
  // Parses a template once. Throws FormatError "<name>:<line>:<col>: <what>" on a syntax
  // error or an unsupported construct ("... unsupported construct 'raw'").
  static ChatTemplate parse(const std::string& source, const std::string& name = "chat_template");

  // Renders with `context`, a JSON object whose members become template variables
  // (usually messages, add_generation_prompt, bos_token, eos_token, tools). Throws
  // RequestError "<name>:<line>:<col>: <what>" when rendering fails, including
  // "raise_exception: <message>" when the template rejects the conversation, and
  // RequestError if context is not an object.
  // Thread safety: const and reentrant; any number of threads may render one template.
  std::string render(const Json& context) const;
  // The same with insertion-ordered objects: dicts (tool schemas, tool-call arguments)
  // iterate and serialize (tojson) in the caller's key order, as Python's json.loads gives
  // transformers. Use it when prompts must equal Hugging Face's byte for byte.
  std::string render(const nlohmann::ordered_json& context) const;

  const std::string& name() const { return name_; }

 private:
  struct Tree;
  template <class J>
  std::string render_json(const J& context) const;
  std::string name_;
  std::shared_ptr<const Tree> tree_;
};

// A model's chat templates, found as transformers 4.5x / 5.x finds them beside the tokenizer
// (Tokenizer::load): chat_template.jinja ("default") and additional_chat_templates/<name>.jinja
// replace tokenizer_config.json's "chat_template" (a string, or a list of {name, template});
// without either, a processor's chat_template.json. Tokenizer::chat_template() is the default.
//
// The chat template files in `dir` that transformers reads instead of tokenizer_config.json's
// template (chat_template.jinja, additional_chat_templates/*.jinja): relative path -> text,
// sorted by path. Tokenizer::load takes its templates from them; model writers (init-model,
// quantize) copy them along with the tokenizer.
std::vector<std::pair<std::string, std::string>> chat_template_files(const std::string& dir);

// All templates by name when the model has several (transformers' dict form); empty when it
// has one or none.
const std::map<std::string, std::string>& chat_templates(const Tokenizer& tokenizer);
// The template apply_chat_template uses (transformers' get_chat_template): "tool_use" when
// tools are given and the model has it, else the default; "" if the model has none. Throws
// ConfigError naming the templates when the model has named ones but none applies.
const std::string& chat_template_for(const Tokenizer& tokenizer, bool with_tools);

// Renders `messages` (a JSON array of {role, content, ...}) with the variables transformers'
// apply_chat_template passes: add_generation_prompt, bos_token, eos_token, and tools and
// documents set to null.
std::string render_chat(const ChatTemplate& chat_template, const Json& messages,
                        bool add_generation_prompt, const std::string& bos_token,
                        const std::string& eos_token);
// The same in the client's key order (dicts in messages and tools serialize through tojson as
// sent, as Python's json.loads hands them to transformers), with `tools` (null, or an array of
// tool schemas) passed as the template's `tools` variable. Serving uses this one. `variables`
// (an object, or null) adds template variables that override the ones above, as
// apply_chat_template's **kwargs do (OpenAI-compatible servers' chat_template_kwargs, e.g.
// Qwen3's enable_thinking).
std::string render_chat(const ChatTemplate& chat_template, const nlohmann::ordered_json& messages,
                        const nlohmann::ordered_json& tools, bool add_generation_prompt,
                        const std::string& bos_token, const std::string& eos_token,
                        const nlohmann::ordered_json& variables = nullptr);

}  // namespace lmstack::tokenizer
