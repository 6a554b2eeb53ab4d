// ChatTemplate: the public face of the Jinja interpreter (jinja_*.cc). Parsing tokenizes and
// builds the tree once; each render() makes a fresh Context over the caller's JSON, so
// renders share nothing mutable.
#include "lmstack/tokenizer/chat_template.h"

#include "lmstack/core/error.h"
#include "lmstack/tokenizer/jinja_context.h"
#include "lmstack/tokenizer/jinja_parser.h"
#include "lmstack/tokenizer/tokenizer_impl.h"

namespace lmstack::tokenizer {

struct ChatTemplate::Tree {
  jinja::Body body;
};

ChatTemplate ChatTemplate::parse(const std::string& source, const std::string& name) {
  ChatTemplate t;
  t.name_ = name;
  auto tree = std::make_shared<Tree>();
  tree->body = jinja::parse_template(jinja::tokenize(source, name), name);
  t.tree_ = std::move(tree);
  return t;
}

template <class J>
std::string ChatTemplate::render_json(const J& context) const {
  if (!context.is_object())
    throw_error<RequestError>("{}: render context must be a JSON object, got {}", name_,
                              context.type_name());
  jinja::Scope root(nullptr);
  jinja::Context ctx(&root);
  std::string out;
  try {
    for (const auto& [key, value] : context.items()) root.set(key, jinja::from_json(value));
    jinja::exec_body(tree_->body, ctx, out);
  } catch (const jinja::RenderError& e) {
    throw_error<RequestError>("{}:{}:{}: {}", name_, ctx.loc.line, ctx.loc.column, e.what());
  }
  return out;
}

std::string ChatTemplate::render(const Json& context) const { return render_json(context); }
std::string ChatTemplate::render(const nlohmann::ordered_json& context) const {
  return render_json(context);
}

const std::map<std::string, std::string>& chat_templates(const Tokenizer& tokenizer) {
  return tokenizer.impl().chat_templates;
}

const std::string& chat_template_for(const Tokenizer& tokenizer, bool with_tools) {
  const TokenizerImpl& t = tokenizer.impl();
  if (t.chat_templates.empty()) return t.chat_template;
  if (auto it = t.chat_templates.find("tool_use"); with_tools && it != t.chat_templates.end())
    return it->second;
  if (auto it = t.chat_templates.find("default"); it != t.chat_templates.end()) return it->second;
  std::string names;
  for (const auto& [name, text] : t.chat_templates) names += (names.empty() ? "" : ", ") + name;
  throw_error<ConfigError>("{}: the model has chat templates named [{}] and no 'default'{}", t.name,
                           names,
                           !with_tools && t.chat_templates.count("tool_use")
                               ? " (only requests with tools use 'tool_use')"
                               : "");
}

namespace {

// RequestError when `j` nests deeper than the interpreter's values may, found without
// recursion: copying it below recurses once per level, and serve parses tool-call arguments
// (a JSON string inside the body) into these messages unbounded (issue 13).
template <class J>
void check_depth(const J& j, const char* what) {
  std::vector<std::pair<const J*, int>> stack = {{&j, 1}};
  while (!stack.empty()) {
    const auto [v, depth] = stack.back();
    stack.pop_back();
    if (depth > jinja::kMaxValueDepth)
      throw_error<RequestError>("{} nest deeper than {} levels (kMaxValueDepth)", what,
                                jinja::kMaxValueDepth);
    if (v->is_structured())
      for (const auto& child : *v) stack.emplace_back(&child, depth + 1);
  }
}

template <class J>
std::string render_chat_json(const ChatTemplate& chat_template, const J& messages, const J& tools,
                             bool add_generation_prompt, const std::string& bos_token,
                             const std::string& eos_token, const J& variables) {
  check_depth(messages, "the messages");
  check_depth(tools, "the tools");
  check_depth(variables, "the template variables");
  J context = J::object();
  context["messages"] = messages;
  context["tools"] = tools;  // transformers always passes tools and documents (None if absent)
  context["documents"] = nullptr;
  context["add_generation_prompt"] = add_generation_prompt;
  context["bos_token"] = bos_token;
  context["eos_token"] = eos_token;
  // As apply_chat_template(**kwargs): extra keys become variables and override the above.
  if (variables.is_object())
    for (const auto& [key, value] : variables.items()) context[key] = value;
  return chat_template.render(context);
}

}  // namespace

std::string render_chat(const ChatTemplate& chat_template, const Json& messages,
                        bool add_generation_prompt, const std::string& bos_token,
                        const std::string& eos_token) {
  return render_chat_json(chat_template, messages, Json(nullptr), add_generation_prompt, bos_token,
                          eos_token, Json(nullptr));
}

std::string render_chat(const ChatTemplate& chat_template, const nlohmann::ordered_json& messages,
                        const nlohmann::ordered_json& tools, bool add_generation_prompt,
                        const std::string& bos_token, const std::string& eos_token,
                        const nlohmann::ordered_json& variables) {
  return render_chat_json(chat_template, messages, tools, add_generation_prompt, bos_token,
                          eos_token, variables);
}

}  // namespace lmstack::tokenizer
