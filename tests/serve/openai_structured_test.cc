// response_format and forced tool calls end to end through OpenAiApi, the engine (random
// weights, temperature 1, many seeds) and ResponseFormatter: every constrained reply ends with
// EOS, parses and validates against its schema; a forced call's streamed deltas reassemble to
// the non-streamed reply; bad fields are 400s naming the field, and the API keeps serving.
#include <gtest/gtest.h>

#include "api_fixture.h"
#include "lmstack/serve/openai_format.h"

namespace lmstack::serve {
namespace {

using OJson = nlohmann::ordered_json;

// A small validator for the schema keywords json_grammar.h supports ("" when `v` fits).
std::string invalid(const OJson& v, const OJson& s) {
  if (s.contains("enum")) {
    for (const OJson& e : s["enum"])
      if (e == v) return "";
    return "not in enum: " + v.dump();
  }
  const std::string type = s.value("type", "");
  if (type == "object") {
    if (!v.is_object()) return "not an object: " + v.dump();
    for (const OJson& r : s.value("required", OJson::array()))
      if (!v.contains(r.get<std::string>())) return "missing " + r.dump();
    for (const auto& [k, sub] : v.items()) {
      if (!s["properties"].contains(k)) return "unknown key " + k;
      if (std::string why = invalid(sub, s["properties"][k]); !why.empty()) return k + ": " + why;
    }
    return "";
  }
  if (type == "array") {
    if (!v.is_array() || v.size() > s.value("maxItems", 1000u)) return "bad array " + v.dump();
    for (const OJson& x : v)
      if (std::string why = invalid(x, s["items"]); !why.empty()) return why;
    return "";
  }
  if (type == "string")
    return v.is_string() && v.get<std::string>().size() <= 4 * s.value("maxLength", 1000u)
               ? ""
               : "bad string " + v.dump();
  if (type == "integer") return v.is_number_integer() ? "" : "not an integer " + v.dump();
  if (type == "number") return v.is_number() ? "" : "not a number " + v.dump();
  if (type == "boolean") return v.is_boolean() ? "" : "not a boolean " + v.dump();
  return "unexpected schema";
}

const char* kSchema = R"({"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 6},
    "age": {"type": "integer"},
    "score": {"type": "number"},
    "tags": {"type": "array", "items": {"enum": ["a", "bc", 7, null]}, "maxItems": 3},
    "inner": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}},
  "required": ["name", "inner"]})";

class StructuredTest : public test::ApiFixture {
 protected:
  void SetUp() override {
    make_api(/*prefix_cache=*/true);
    ASSERT_TRUE(tok_->eos_id().has_value());
    EngineOptions o = engine_->options();
    o.eos_ids = {*tok_->eos_id()};
    api_.reset();
    // Two threads: the engine samples a step's rows in parallel, constraints included.
    engine_ = std::make_unique<Engine>(model_->config, model_->weights, pool2_, o);
    api_ = std::make_unique<OpenAiApi>(*engine_, *tok_, "tiny");
  }
  // Runs chat bodies together; returns each one's non-streamed response and its SSE text.
  std::vector<std::pair<Json, std::string>> run(const std::vector<std::string>& bodies) {
    std::vector<ApiRequest> requests;
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const std::string& b : bodies) requests.push_back(api_->parse_chat(b));
    for (const ApiRequest& r : requests) streams.push_back(*engine_->submit(r.engine));
    engine_->run_until_idle();
    std::vector<std::pair<Json, std::string>> out;
    for (size_t i = 0; i < requests.size(); ++i) {
      ResponseFormatter whole(requests[i], *tok_, "tiny", "chatcmpl-1", 1);
      ResponseFormatter streamed(requests[i], *tok_, "tiny", "chatcmpl-1", 1);
      std::string sse = streamed.stream_begin();
      while (auto e = streams[i]->next(std::chrono::milliseconds(0))) {
        whole.add(*e);
        sse += streamed.stream_event(*e);
      }
      EXPECT_TRUE(whole.finished());
      out.emplace_back(whole.response(), sse);
    }
    return out;
  }
  // The engine goes before pool2_, which the base class's members would outlive.
  void TearDown() override {
    api_.reset();
    engine_.reset();
  }
  ThreadPool pool2_{2};
  static std::string body(int seed, const std::string& extra) {
    return R"({"model": "tiny", "messages": [{"role": "user", "content": "Give me JSON"}],
               "temperature": 1, "max_tokens": 210, "seed": )" +
           std::to_string(seed) + ", " + extra + "}";
  }
};

TEST_F(StructuredTest, JsonSchemaRepliesAlwaysParseAndValidate) {
  std::vector<std::string> bodies;
  for (int seed = 0; seed < 24; ++seed)
    bodies.push_back(body(seed, std::string(R"("response_format": {"type": "json_schema",
        "json_schema": {"name": "person", "schema": )") +
                                    kSchema + "}}"));
  const OJson schema = OJson::parse(kSchema);
  for (const auto& [r, sse] : run(bodies)) {
    const Json& choice = r["choices"][0];
    const std::string text = choice["message"]["content"].get<std::string>();
    SCOPED_TRACE(text);
    EXPECT_EQ(choice["finish_reason"], "stop");  // ended by EOS, the value complete
    const OJson v = OJson::parse(text);
    EXPECT_EQ(invalid(v, schema), "");
  }
}

TEST_F(StructuredTest, JsonObjectRepliesAreObjectsOrOpenPrefixes) {
  std::vector<std::string> bodies;
  for (int seed = 0; seed < 8; ++seed)
    bodies.push_back(body(seed, R"("response_format": {"type": "json_object"}, "n": 2)"));
  int complete = 0;
  for (const auto& [r, sse] : run(bodies))
    for (const Json& choice : r["choices"]) {
      const std::string text = choice["message"]["content"].get<std::string>();
      SCOPED_TRACE(text);
      JsonMatcher m(std::make_shared<const JsonGrammar>(JsonGrammar::any_object()));
      EXPECT_TRUE(m.feed(text));  // whatever came out is valid so far
      if (choice["finish_reason"] == "stop") {
        EXPECT_TRUE(OJson::parse(text).is_object());
        ++complete;
      } else {
        EXPECT_EQ(choice["finish_reason"], "length");
      }
    }
  EXPECT_GT(complete, 0);
}

TEST_F(StructuredTest, ForcedToolCallsParseAndStreamTheSame) {
  api_->set_tool_call_format(ToolCallFormat::kHermes);
  const std::string tools = R"("tools": [
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
       "properties": {"city": {"type": "string", "maxLength": 5}, "days": {"type": "integer"}},
       "required": ["city"]}}},
      {"type": "function", "function": {"name": "noop", "parameters": {"type": "object",
       "properties": {}}}}])";
  std::vector<std::string> bodies;
  for (int seed = 0; seed < 12; ++seed)
    bodies.push_back(body(seed, tools + (seed % 2 ? R"(, "tool_choice": "required")"
                                                  : R"(, "tool_choice": {"type": "function",
                                                        "function": {"name": "get_weather"}})")));
  int seed = 0;
  for (const auto& [r, sse] : run(bodies)) {
    const Json& choice = r["choices"][0];
    SCOPED_TRACE(choice.dump());
    EXPECT_EQ(choice["finish_reason"], "tool_calls");
    EXPECT_TRUE(choice["message"]["content"].is_null());
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
    const Json& call = choice["message"]["tool_calls"][0];
    EXPECT_EQ(call["type"], "function");
    EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
    if (seed++ % 2 == 0) {
      EXPECT_EQ(call["function"]["name"], "get_weather");
    }
    const OJson args = OJson::parse(call["function"]["arguments"].get<std::string>());
    if (call["function"]["name"] == "get_weather") {
      EXPECT_TRUE(args.contains("city"));
    }
    // The streamed deltas reassemble to the same call; no call text leaks as content.
    std::string content, name, arguments, finish;
    for (size_t pos = 0; (pos = sse.find("data: {", pos)) != std::string::npos; ++pos) {
      const Json c = Json::parse(sse.substr(pos + 6, sse.find("\n\n", pos) - pos - 6));
      for (const Json& ch : c["choices"]) {
        const Json& d = ch["delta"];
        if (d.contains("content") && d["content"].is_string()) content += d["content"];
        for (const Json& tc : d.value("tool_calls", Json::array())) {
          EXPECT_EQ(tc["index"], 0);
          name += tc["function"]["name"].get<std::string>();
          arguments += tc["function"]["arguments"].get<std::string>();
        }
        if (ch["finish_reason"].is_string()) finish = ch["finish_reason"];
      }
    }
    EXPECT_EQ(content, "");
    EXPECT_EQ(name, call["function"]["name"]);
    EXPECT_EQ(arguments, call["function"]["arguments"]);
    EXPECT_EQ(finish, "tool_calls");
  }
}

TEST_F(StructuredTest, BadFieldsAreNamedAndTheApiKeepsServing) {
  const auto expect_param = [&](const std::string& extra, const std::string& param) {
    try {
      api_->parse_chat(body(1, extra));
      ADD_FAILURE() << "accepted " << extra;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.param(), param) << e.what();
    }
  };
  const std::string tool =
      R"("tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}])";
  expect_param(R"("response_format": {"type": "xml"})", "response_format");
  expect_param(R"("response_format": {"type": "json_schema"})",
               "response_format.json_schema.schema");
  expect_param(R"("response_format": {"type": "json_schema", "json_schema": {"schema":
      {"properties": {"a": {"type": "string", "pattern": "x"}}}}})",
               "response_format.json_schema.schema.properties.a.pattern");
  expect_param(R"("response_format": {"type": "json_object"}, "ignore_eos": true)", "ignore_eos");
  expect_param(R"("tool_choice": "required")", "tool_choice");  // no tools
  expect_param(tool + R"(, "tool_choice": "sometimes")", "tool_choice");
  expect_param(tool + R"(, "tool_choice": "required")", "tool_choice");  // no format (ChatML)
  api_->set_tool_call_format(ToolCallFormat::kHermes);
  expect_param(tool + R"(, "tool_choice": {"type": "function", "function": {"name": "g"}})",
               "tool_choice");
  expect_param(tool + R"(, "tool_choice": "required", "response_format": {"type": "json_object"})",
               "response_format");
  expect_param(R"("tools": [{"type": "function", "function": {"name": "f", "parameters":
      {"type": "object", "anyOf": []}}}], "tool_choice": "required")",
               "tools[0].function.parameters.anyOf");
  expect_param(R"("tools": [{"function": {}}])", "tools[0]");
  expect_param(R"("chat_template_kwargs": [1])", "chat_template_kwargs");
  expect_param(R"("chat_template_kwargs": {"messages": []})", "chat_template_kwargs.messages");
  const auto after = run({body(1, R"("response_format": {"type": "json_object"})")});
  EXPECT_EQ(after[0].first["choices"][0]["message"]["content"].get<std::string>().front(), '{');
}

}  // namespace
}  // namespace lmstack::serve
