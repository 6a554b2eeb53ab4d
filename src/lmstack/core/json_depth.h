// The nesting-depth limit every JSON read in lmstack obeys (config.json, tokenizer.json,
// trainer_state.json, safetensors headers and indexes, API request bodies). nlohmann::json
// parses iteratively, but copying, comparing and dumping a value recurse once per level, and
// so do the loaders that walk nested objects: a body nested 100,000 deep crashed `serve`
// (issue 13). parse_json() (json.h) calls check_json_depth() before it parses.
#pragma once

#include <string>
#include <string_view>

namespace lmstack {

// Twice the limit of serde_json (128), which Hugging Face `tokenizers` parses its files with;
// the deepest real file seen (an OpenAI request with nested tool schemas) is under 30.
constexpr int kMaxJsonDepth = 256;

// Throws FormatError "<source>: JSON nests deeper than <max_depth> levels (at byte N)" when an
// array or object opens more than max_depth levels deep. One pass over the bytes, strings and
// escapes skipped; it does not validate anything else (the parser does).
void check_json_depth(std::string_view text, const std::string& source,
                      int max_depth = kMaxJsonDepth);

}  // namespace lmstack
