// JSON parsing with errors that name their source (see json.h), depth-limited (json_depth.h).
#include "lmstack/core/json.h"

#include "lmstack/core/file.h"
#include "lmstack/core/json_depth.h"

namespace lmstack {

void check_json_depth(std::string_view text, const std::string& source, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character cannot end the string
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        throw_error<FormatError>("{}: JSON nests deeper than {} levels (at byte {})", source,
                                 max_depth, i);
    } else if (c == ']' || c == '}') {
      --depth;  // unbalanced input is the parser's to report
    }
  }
}

Json parse_json(const std::string& text, const std::string& source) {
  check_json_depth(text, source);
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw_error<FormatError>("{}: invalid JSON at byte {}: {}", source, e.byte, e.what());
  } catch (const nlohmann::json::exception& e) {  // e.g. out_of_range 406, a number past double
    throw_error<FormatError>("{}: invalid JSON: {}", source, e.what());
  }
}

Json read_json_file(const std::string& path) { return parse_json(read_file(path), path); }

}  // namespace lmstack
